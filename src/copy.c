/*
 * copy.c -- the copy planner: every copy of elements between two layouts of
 * one shape, in any direction (host<->device, device<->device), goes here;
 * copies between host and device take their route in copy_host.c.
 *
 * The plan: simplify the pair of layouts (drop length-1 axes, order by the
 * device side's strides, reverse axes the device side runs backwards, merge
 * axes contiguous in both), then
 *   1. one contiguous copy, or one 2-D copy, when the pair allows it;
 *   2. a few 2-D copies of wide rows straight between the two layouts;
 *   3. otherwise the device side moves as one block: for host->device the
 *      host gathers into a dense buffer, which goes up in one copy and is
 *      scattered on the device by 2-D copies; for device->host with narrow
 *      rows into page-locked memory, a gather on the device in pieces, each
 *      piece going down as soon as it is gathered (into pageable memory, and
 *      rows of 1-3 bytes: the bytes the view covers come down and the host
 *      gathers);
 *   4. device->device: one runtime copy where the pair is dense (or one 2-D
 *      copy of wide rows), else PyGPU's own kernels (devcopy.c); without
 *      them, a few 2-D copies, or for layouts that would need many runtime
 *      calls, the host (d2d_way is the rule).
 * Between two devices, each side is made dense on its own device (a gather
 * or scatter there), and the dense bytes cross peer to peer when the
 * hardware allows it, else through pinned host buffers in a pipeline.
 * Everything here runs with the GIL released and returns runtime statuses;
 * pygpu_copy, pygpu_cast and pygpu_fill are the doors from Python.
 */
#include "copy_plan.h"
#include "devcopy.h"
#include "kernels/kernels.h"
#include "transfer/background.h"
#include "transfer/hostcopy.h"
#include "transfer/pinned_pool.h"
#include "transfer/settings.h"
#include "transfer/trace.h"

#include <stdlib.h>
#include <string.h>

/* ---- runtime copies straight between two layouts ------------------------- */

/* How cp_runtime_copies would copy simplified pair `p`. */
geometry cp_geometry_of(const pygpu_pair *p, ptrdiff_t itemsize)
{
    geometry g = {itemsize, -1, 0, 1};
    int inner = p->nd - 1, rows;
    if (p->nd == 0)
        return g;
    if (p->strides[0][inner] == itemsize && p->strides[1][inner] == itemsize) {
        g.width = p->shape[inner] * itemsize;
        rows = inner - 1;
    } else {
        rows = inner;
    }
    if (rows >= 0 && p->strides[0][rows] >= g.width && p->strides[1][rows] >= g.width)
        g.hax = rows;
    g.nloop = g.hax >= 0 ? g.hax : rows + 1;
    for (int i = 0; i < g.nloop; i++)
        g.calls *= p->shape[i];
    return g;
}

/* Issue the copies of `p` from src (layout 1) to dst (layout 0). */
pygpu_status cp_runtime_copies(ctx *c, const pygpu_pair *p, const geometry *g, char *dst, const char *src,
                           enum pygpu_copy_kind kind)
{
    ptrdiff_t idx[PYGPU_MAXDIMS] = {0};
    size_t height = g->hax >= 0 ? (size_t)p->shape[g->hax] : 1;
    for (;;) {
        pygpu_status r;
        if (height > 1)
            r = note(c, pygpu_rt_memcpy2d_async(dst, (size_t)p->strides[0][g->hax], src,
                                                (size_t)p->strides[1][g->hax], (size_t)g->width,
                                                height, kind, c->s), "Memcpy2DAsync");
        else
            r = note(c, pygpu_rt_memcpy_async(dst, src, (size_t)g->width, kind, c->s), "MemcpyAsync");
        if (r != 0)
            return r;
        int k = g->nloop - 1;
        for (; k >= 0; k--) {
            dst += p->strides[0][k];
            src += p->strides[1][k];
            if (++idx[k] < p->shape[k])
                break;
            dst -= p->shape[k] * p->strides[0][k];
            src -= p->shape[k] * p->strides[1][k];
            idx[k] = 0;
        }
        if (k < 0)
            return 0;
    }
}

/* ---- copies on one device: the rule ----------------------------------------- */

enum d2d_way {
    D2D_RUNTIME,                /* the runtime's copies (cp_runtime_copies) */
    D2D_KERNEL,                 /* PyGPU's kernels (devcopy.c) */
    D2D_HOST,                   /* through the host: too many runtime calls, no kernels */
};

/* 1 if PyGPU's kernels can run on the current device; else the reason is
 * kept for the warning pygpu_copy gives. */
int cp_kernels_usable(ctx *c)
{
    pygpu_status k = pygpu_rt_kernels_ready();
    if (k != 0 && !c->kernels)
        c->kernels = k;
    return k == 0;
}

/* How a simplified pair of geometry `g` moves between two layouts on one
 * device: the one place that decides.  One runtime copy where both sides
 * are dense; else the kernels (even where one 2-D runtime copy would do:
 * on an H100, every other row of a 4096 x 2048 float64 array, rows of 16
 * KiB, took 0.044 ms by cudaMemcpy2DAsync and 0.026 ms by CuPy's kernel);
 * without them, the runtime's copies where a few do it, else the host. */
static enum d2d_way d2d_way(ctx *c, const geometry *g)
{
    if (g->calls == 1 && g->hax < 0)
        return D2D_RUNTIME;
    if (cp_kernels_usable(c))
        return D2D_KERNEL;
    return g->calls <= MAX_DIRECT_CALLS ? D2D_RUNTIME : D2D_HOST;
}

/* Copy simplified pair `p` on the current device, from src (layout 1) to
 * dst (layout 0), by the runtime's copies or the kernels: never through
 * the host (the callers that can take that way ask d2d_way first). */
static pygpu_status on_device(ctx *c, const pygpu_pair *p, char *dst, const char *src, ptrdiff_t itemsize)
{
    geometry g = cp_geometry_of(p, itemsize);
    if (d2d_way(c, &g) == D2D_KERNEL)
        return note(c, pygpu_dev_copy(p, dst, src, itemsize, c->s), "LaunchKernel");
    return cp_runtime_copies(c, p, &g, dst, src, PYGPU_COPY_D2D);
}

/* ---- helpers -------------------------------------------------------------- */

/* Copy between device layout `which` of `p` (at `view`) and a dense device
 * buffer (at `dense`), in the direction `to_dense`. */
pygpu_status cp_device_pass(ctx *c, const pygpu_pair *p, int which, char *view, char *dense,
                                ptrdiff_t itemsize, int to_dense)
{
    ptrdiff_t ds[PYGPU_MAXDIMS];
    pygpu_pair q;
    dense_strides(p, itemsize, ds);
    if (to_dense)
        pygpu_pair_init(&q, p->nd, p->shape, ds, p->strides[which]);
    else
        pygpu_pair_init(&q, p->nd, p->shape, p->strides[which], ds);
    pygpu_pair_simplify(&q, 0);
    if (q.nd < 0)
        return 0;
    return on_device(c, &q, (to_dense ? dense : view) + q.offset[0], (to_dense ? view : dense) + q.offset[1],
                     itemsize);
}


pygpu_status cp_temps_free(ctx *c, temps *t, pygpu_status r)
{
    if (t->host_pinned) {
        /* DMA from page-locked memory is truly asynchronous: the buffer goes
         * back to the pool only once the stream is past it. */
        pygpu_status w = pygpu_rt_stream_synchronize(c->s);
        if (r == 0)
            r = note(c, w, "StreamSynchronize");
        pygpu_pinned_give(t->host);
    } else
        free(t->host);
    t->host = NULL;
    if (t->dev) {
        pygpu_status f = t->dev_pooled ? pygpu_rt_free_async(t->dev, c->s) : pygpu_rt_free(t->dev);
        if (r == 0)
            r = note(c, f, "FreeAsync");
        t->dev = NULL;
    }
    return r;
}

/* A host buffer: page-locked from the pool when big enough to matter (DMA
 * at the link's speed, no page faults), else ordinary memory. */
pygpu_status cp_host_temp(ctx *c, temps *t, size_t n)
{
    pygpu_transfer_config cfg;
    pygpu_transfer_config_get(&cfg);
    t->host_pinned = 0;
    if (n >= cfg.min_bytes && (t->host = pygpu_pinned_take(n)) != NULL) {
        t->host_pinned = 1;
        return 0;
    }
    t->host = malloc(n ? n : 1);
    return t->host ? 0 : note(c, PYGPU_RT_OUT_OF_MEMORY, "malloc");
}

pygpu_status cp_dev_temp(ctx *c, temps *t, size_t n)
{
    return note(c, pygpu_rt_malloc_async(&t->dev, n, c->s, &t->dev_pooled), "MallocAsync");
}

static pygpu_status plan(ctx *c, pygpu_side dst, pygpu_side src, int nd, const ptrdiff_t *shape,
                         ptrdiff_t itemsize);

/* Device to device through a dense host buffer: for layouts that would take
 * too many runtime calls on the device (reversed or element-strided rows). */
static pygpu_status d2d_via_host(ctx *c, pygpu_side dst, pygpu_side src, int nd, const ptrdiff_t *shape,
                                 ptrdiff_t itemsize)
{
    temps t = {0};
    ptrdiff_t strides[PYGPU_MAXDIMS], size;
    pygpu_status r;
    pygpu_shape_size(nd, shape, &size);
    pygpu_shape_strides(nd, shape, itemsize, 0, strides);
    if ((r = cp_host_temp(c, &t, (size_t)(size * itemsize))) != 0)
        return r;
    pygpu_side mid = {t.host, strides, 0, -1, NULL};
    if ((r = plan(c, mid, src, nd, shape, itemsize)) == 0 &&
        (r = note(c, pygpu_rt_stream_synchronize(c->s), "StreamSynchronize")) == 0)
        r = plan(c, dst, mid, nd, shape, itemsize);
    return cp_temps_free(c, &t, r);
}

static pygpu_status plan(ctx *c, pygpu_side dst, pygpu_side src, int nd, const ptrdiff_t *shape,
                         ptrdiff_t itemsize)
{
    pygpu_pair p;
    pygpu_pair_init(&p, nd, shape, dst.strides, src.strides);
    pygpu_pair_simplify(&p, !dst.on_device && src.on_device ? 1 : 0);
    if (p.nd < 0)
        return 0;
    char *d = dst.ptr + p.offset[0], *s = src.ptr + p.offset[1];
    geometry g = cp_geometry_of(&p, itemsize);
    if (!dst.on_device && !src.on_device) {
        pygpu_host_strided_copy(d, p.strides[0], s, p.strides[1], p.nd, p.shape, itemsize);
        return 0;
    }
    if (dst.on_device && src.on_device) {
        if (d2d_way(c, &g) == D2D_HOST)
            return d2d_via_host(c, dst, src, nd, shape, itemsize);
        return on_device(c, &p, d, s, itemsize);
    }
    return dst.on_device ? cp_h2d(c, &p, &g, d, s, itemsize) : cp_d2h(c, &p, &g, d, s, itemsize);
}

/* ---- between devices -------------------------------------------------------- */

/* Make `dev` current (the pipeline's two sides take turns). */
static pygpu_status use(ctx *c, int dev)
{
    return note(c, pygpu_rt_set_device(dev), "SetDevice");
}

/* `n` dense bytes from `src` on `sdev` to `dst` on `ddev` through pinned host
 * buffers: device to host on `sdev`'s legacy stream, host to device on c->s,
 * `depth` buffers in flight, ordered by events (no host waits).  `ddev` is
 * current on return. */
static pygpu_status staged_cross(ctx *c, char *dst, int ddev, const char *src, int sdev, size_t n)
{
    pygpu_transfer_config cfg;
    pygpu_transfer_config_get(&cfg);
    /* Chunks of a sixteenth of the copy (1 MiB at least) keep both legs
     * busy from the start, up to the pipeline's chunk size (two H200s, 16
     * MiB: eighths 0.74 of the slower host link, sixteenths 0.78, 32nds 0.69). */
    size_t chunk = n / 16 < ((size_t)1 << 20) ? ((size_t)1 << 20) : n / 16;
    if (chunk > cfg.chunk)
        chunk = cfg.chunk;
    if (chunk > n)
        chunk = n;
    int nbuf = 0, want = (int)((n + chunk - 1) / chunk);
    void *buf[16];
    pygpu_event_t down[16] = {0}, up[16] = {0};
    pygpu_status r = 0;
    if (want > cfg.depth)
        want = cfg.depth;
    if (want > 16)
        want = 16;
    while (nbuf < want && (buf[nbuf] = pygpu_pinned_take(chunk)) != NULL)
        nbuf++;
    if (nbuf == 0)      /* the pool is at its limit: the runtime stages it */
        return note(c, pygpu_rt_memcpy_peer_async(dst, ddev, src, sdev, n, c->s), "MemcpyPeerAsync");
    for (int k = 0; r == 0 && k < nbuf; k++) {
        if ((r = use(c, sdev)) == 0)
            r = note(c, pygpu_rt_event_create(&down[k], PYGPU_EVENT_DISABLE_TIMING), "EventCreateWithFlags");
        if (r == 0 && (r = use(c, ddev)) == 0)
            r = note(c, pygpu_rt_event_create(&up[k], PYGPU_EVENT_DISABLE_TIMING), "EventCreateWithFlags");
    }
    for (size_t off = 0, i = 0; r == 0 && off < n; off += chunk, i++) {
        int k = (int)(i % (size_t)nbuf);
        size_t len = n - off < chunk ? n - off : chunk;
        if ((r = use(c, sdev)) != 0 ||
            (i >= (size_t)nbuf && (r = note(c, pygpu_rt_stream_wait_event(PYGPU_STREAM_NULL, up[k]),
                                            "StreamWaitEvent")) != 0) ||
            (r = note(c, pygpu_rt_memcpy_async(buf[k], src + off, len, PYGPU_COPY_D2H, PYGPU_STREAM_NULL),
                      "MemcpyAsync")) != 0 ||
            (r = note(c, pygpu_rt_event_record(down[k], PYGPU_STREAM_NULL), "EventRecord")) != 0 ||
            (r = use(c, ddev)) != 0 ||
            (r = note(c, pygpu_rt_stream_wait_event(c->s, down[k]), "StreamWaitEvent")) != 0 ||
            (r = note(c, pygpu_rt_memcpy_async(dst + off, buf[k], len, PYGPU_COPY_H2D, c->s), "MemcpyAsync")) != 0)
            break;
        r = note(c, pygpu_rt_event_record(up[k], c->s), "EventRecord");
    }
    /* The buffers go back once both sides are past them. */
    pygpu_status w = pygpu_rt_set_device(sdev);
    if (w == 0)
        w = pygpu_rt_stream_synchronize(PYGPU_STREAM_NULL);
    if (w == 0 && (w = pygpu_rt_set_device(ddev)) == 0)
        w = pygpu_rt_stream_synchronize(c->s);
    if (r == 0)
        r = note(c, w, "StreamSynchronize");
    for (int k = 0; k < nbuf; k++) {
        pygpu_pinned_give(buf[k]);
        if (down[k])
            (void)pygpu_rt_event_destroy(down[k]);
        if (up[k])
            (void)pygpu_rt_event_destroy(up[k]);
    }
    return r;
}

/* Copy `p` (dst layout 0 on `ddev`, current, stream c->s; src layout 1 on
 * `sdev`).  Done when it returns, with `ddev` current. */
static pygpu_status cross_device(ctx *c, pygpu_side dst, pygpu_side src, int nd, const ptrdiff_t *shape,
                                 ptrdiff_t itemsize)
{
    pygpu_pair p;
    pygpu_pair_init(&p, nd, shape, dst.strides, src.strides);
    pygpu_pair_simplify(&p, 0);
    if (p.nd < 0)
        return 0;
    int ddev = dst.device, sdev = src.device;
    size_t n = (size_t)(pair_size(&p) * itemsize);
    char *to = dst.ptr + p.offset[0], *from = src.ptr + p.offset[1];
    ctx sc = {.s = PYGPU_STREAM_NULL};     /* the source side's work: its legacy stream */
    temps stmp = {0}, dtmp = {0};
    pygpu_event_t ready = NULL;
    pygpu_status r;
    /* On the source device, after the work queued there: a dense copy of the
     * source if it is not dense, and an event the copy waits for. */
    if ((r = use(c, sdev)) == 0 && !pygpu_pair_is_dense(&p, 1, itemsize) &&
        (r = cp_dev_temp(&sc, &stmp, n)) == 0 && (r = cp_device_pass(&sc, &p, 1, from, stmp.dev, itemsize, 1)) == 0)
        from = stmp.dev;
    if (r == 0 && (r = note(&sc, pygpu_rt_event_create(&ready, PYGPU_EVENT_DISABLE_TIMING),
                            "EventCreateWithFlags")) == 0)
        r = note(&sc, pygpu_rt_event_record(ready, PYGPU_STREAM_NULL), "EventRecord");
    if (sc.call)
        c->call = sc.call;
    if (r == 0 && (r = use(c, ddev)) == 0)
        r = note(c, pygpu_rt_stream_wait_event(c->s, ready), "StreamWaitEvent");
    int dense_to = pygpu_pair_is_dense(&p, 0, itemsize);
    if (r == 0 && !dense_to && (r = cp_dev_temp(c, &dtmp, n)) == 0)
        to = dtmp.dev;
    if (r == 0)
        r = pygpu_peer_usable(ddev, sdev)
                ? note(c, pygpu_rt_memcpy_peer_async(to, ddev, from, sdev, n, c->s), "MemcpyPeerAsync")
                : staged_cross(c, to, ddev, from, sdev, n);
    if (r == 0 && !dense_to)
        r = cp_device_pass(c, &p, 0, dst.ptr + p.offset[0], dtmp.dev, itemsize, 0);
    /* Done (or failed part way): nothing queued may still read the temporaries. */
    pygpu_status w = pygpu_rt_set_device(ddev);
    if (w == 0)
        w = pygpu_rt_stream_synchronize(c->s);
    if (r == 0)
        r = note(c, w, "StreamSynchronize");
    if (ready)
        (void)pygpu_rt_event_destroy(ready);
    r = cp_temps_free(c, &dtmp, r);
    if (stmp.dev) {
        (void)pygpu_rt_set_device(sdev);
        r = cp_temps_free(&sc, &stmp, r);
        if (sc.call && !c->call)
            c->call = sc.call;
        (void)pygpu_rt_set_device(ddev);
    }
    return r;
}

/* A background transfer's owner, given back by the reaper (the GIL held). */
static void release_owner(void *owner)
{
    Py_DECREF((PyObject *)owner);
}

void pygpu_copy_reap(void)
{
    pygpu_bg_reap(release_owner);
}

/* The first time in this process that PyGPU's kernels could not run
 * where a copy wanted them (`why`, their loading's status): a
 * BackendWarning saying so, and what such copies do instead.  0, or -1
 * when the warning was turned into an error.  With the GIL. */
static int kernels_warning(pygpu_status why)
{
    static int warned;
    if (!why || warned)
        return 0;
    warned = 1;
    PyObject *mod = PyImport_ImportModule("pygpu._errors");
    PyObject *cls = mod ? PyObject_GetAttrString(mod, "BackendWarning") : NULL;
    int r = cls ? PyErr_WarnFormat(cls, 1, "PyGPU's copy kernels cannot run on this device (%s: %s; kernels: %s): "
                                   "layout copies, casts and fills of device memory take slower ways (many "
                                   "runtime copies, or through the host)", pygpu_rt_error_name(why),
                                   pygpu_rt_error_string(why), pygpu_rt_kernels_origin())
                : -1;
    Py_XDECREF(cls);
    Py_XDECREF(mod);
    return r;
}

int pygpu_kernels_usable(pygpu_state *st, int dev)
{
    int prev = -1;
    pygpu_status k;
    if (dev >= 0 && pygpu_device_enter(st, dev, &prev) < 0)
        return -1;
    Py_BEGIN_ALLOW_THREADS      /* (the first time: loading them, maybe compiling PTX) */
    k = pygpu_rt_kernels_ready();
    Py_END_ALLOW_THREADS
    if ((prev >= 0 && pygpu_device_leave(st, prev) < 0) || kernels_warning(k) < 0)
        return -1;
    return k == 0;
}

int pygpu_copy(pygpu_state *st, pygpu_side dst, pygpu_side src, int nd, const ptrdiff_t *shape,
               ptrdiff_t itemsize, pygpu_stream_t s, int async)
{
    ctx c = {.s = s, .async = async};
    pygpu_status r;
    int dev = dst.on_device ? dst.device : src.on_device ? src.device : -1, prev = -1;
    int cross = dst.on_device && src.on_device && dst.device >= 0 && src.device >= 0 && dst.device != src.device;
    pygpu_copy_reap();
    pygpu_trace_enter();
    if (dev >= 0 && pygpu_device_enter(st, dev, &prev) < 0)
        return -1;
    if (async && dst.on_device && !src.on_device && src.owner)
        c.owner = Py_NewRef(src.owner);
    else if (async && !dst.on_device && src.on_device && dst.owner)
        c.owner = Py_NewRef(dst.owner);
    c.ts = PyEval_SaveThread();
    if (cross)      /* done when it returns: the source may be freed at once */
        r = cross_device(&c, dst, src, nd, shape, itemsize);
    else
        r = plan(&c, dst, src, nd, shape, itemsize);
    /* (Copies down have waited already, where they had to.) */
    if (r == 0 && !async && !cross && !c.stopped && !(src.on_device && !dst.on_device))
        r = note(&c, pygpu_rt_stream_synchronize(s), "StreamSynchronize");
    pygpu_trace_done();
    PyEval_RestoreThread(c.ts);
    if (!c.owner_taken)
        Py_XDECREF(c.owner);
    int back = prev >= 0 && !c.stopped && r == 0 ? pygpu_device_leave(st, prev) : 0;
    if (prev >= 0 && (c.stopped || r != 0) && pygpu_rt_set_device(prev) != 0)
        (void)pygpu_rt_get_last_error();
    if (c.stopped)
        return -1;      /* the signal handler's exception (KeyboardInterrupt) is set */
    if (pygpu_check(st, r, c.call ? c.call : "MemcpyAsync") < 0 || kernels_warning(c.kernels) < 0)
        return -1;
    return back;
}

/* ---- casts ------------------------------------------------------------------ */

int pygpu_cast(pygpu_state *st, pygpu_side dst, int dtype, pygpu_side src, int stype, int nd, const ptrdiff_t *shape,
               pygpu_stream_t s)
{
    ctx c = {.s = s};
    temps ts = {0}, td = {0};
    pygpu_pair p;
    pygpu_status r = 0;
    int prev = -1, done = 0;
    pygpu_pair_init(&p, nd, shape, dst.strides, src.strides);
    pygpu_pair_simplify(&p, 0);
    if (p.nd < 0)
        return 0;
    pygpu_pair whole = p;
    char *d = dst.ptr + p.offset[0], *from = src.ptr + p.offset[1];
    ptrdiff_t n = pair_size(&p), dsize = pk_itemsize(dtype), ssize = pk_itemsize(stype);
    if (dst.device >= 0 && pygpu_device_enter(st, dst.device, &prev) < 0)
        return -1;
    Py_BEGIN_ALLOW_THREADS
    if (cp_kernels_usable(&c)) {
        done = 1;
        /* The kernels read and write whole elements: a side that is not
         * aligned to them goes through a dense buffer of its own type. */
        if (!pygpu_dev_aligned(&p, 1, from, pygpu_dev_unit(stype)) &&
            (r = cp_dev_temp(&c, &ts, (size_t)(n * ssize))) == 0 &&
            (r = cp_device_pass(&c, &whole, 1, from, ts.dev, ssize, 1)) == 0) {
            dense_strides(&p, ssize, p.strides[1]);
            from = ts.dev;
        }
        if (r == 0 && !pygpu_dev_aligned(&p, 0, d, pygpu_dev_unit(dtype)) &&
            (r = cp_dev_temp(&c, &td, (size_t)(n * dsize))) == 0) {
            dense_strides(&p, dsize, p.strides[0]);
            d = td.dev;
        }
        if (r == 0)
            r = note(&c, pygpu_dev_cast(&p, d, dtype, from, stype, s), "LaunchKernel");
        if (r == 0 && td.dev)
            r = cp_device_pass(&c, &whole, 0, dst.ptr + whole.offset[0], td.dev, dsize, 0);
        r = cp_temps_free(&c, &td, r);
        r = cp_temps_free(&c, &ts, r);
    }
    Py_END_ALLOW_THREADS
    if (prev >= 0 && pygpu_rt_set_device(prev) != 0 && r == 0)
        r = note(&c, pygpu_rt_get_last_error(), "SetDevice");
    if (pygpu_check(st, r, c.call ? c.call : "LaunchKernel") < 0 || kernels_warning(c.kernels) < 0)
        return -1;
    return done ? 0 : 1;
}

/* ---- fill ------------------------------------------------------------------ */

/* 1 if every byte of the element `value` is the same (a memset fills it). */
static int is_uniform(const unsigned char *value, ptrdiff_t itemsize)
{
    for (ptrdiff_t i = 1; i < itemsize; i++)
        if (value[i] != value[0])
            return 0;
    return 1;
}

/* Fill `n` dense elements at `dst` with `value`: memset when every byte of
 * the value is the same, else one element up and copies doubling the
 * filled prefix (no kernels). */
static pygpu_status fill_dense(ctx *c, char *dst, ptrdiff_t n, ptrdiff_t itemsize, const unsigned char *value)
{
    if (is_uniform(value, itemsize))
        return note(c, pygpu_rt_memset_async(dst, value[0], (size_t)(n * itemsize), c->s), "MemsetAsync");
    pygpu_status r = note(c, pygpu_rt_memcpy_async(dst, value, (size_t)itemsize, PYGPU_COPY_H2D, c->s),
                          "MemcpyAsync");
    for (ptrdiff_t k = 1; r == 0 && k < n; k *= 2) {
        ptrdiff_t m = k < n - k ? k : n - k;
        r = note(c, pygpu_rt_memcpy_async(dst + k * itemsize, dst, (size_t)(m * itemsize),
                                          PYGPU_COPY_D2D, c->s), "MemcpyAsync");
    }
    return r;
}

/* Fill layout 0 of `p` (at dst) by PyGPU's fill kernel: in place where
 * the layout is aligned to whole elements, else in a dense buffer that is
 * then copied into place. */
static pygpu_status fill_by_kernel(ctx *c, const pygpu_pair *p, char *dst, ptrdiff_t itemsize, const void *value)
{
    temps t = {0};
    pygpu_status r;
    if (pygpu_dev_aligned(p, 0, dst, itemsize))
        return note(c, pygpu_dev_fill(p, dst, itemsize, value, c->s), "LaunchKernel");
    pygpu_pair q = *p;
    dense_strides(p, itemsize, q.strides[0]);
    if ((r = cp_dev_temp(c, &t, (size_t)(pair_size(p) * itemsize))) == 0 &&
        (r = note(c, pygpu_dev_fill(&q, t.dev, itemsize, value, c->s), "LaunchKernel")) == 0)
        r = cp_device_pass(c, p, 0, dst, t.dev, itemsize, 0);
    return cp_temps_free(c, &t, r);
}

/* Fill it without kernels: a memset or doubling copies into it if it is
 * dense, else into a dense buffer copied into place. */
static pygpu_status fill_by_copies(ctx *c, const pygpu_pair *p, char *dst, ptrdiff_t itemsize,
                                   const unsigned char *value)
{
    temps t = {0};
    pygpu_status r;
    ptrdiff_t ds[PYGPU_MAXDIMS], n = pair_size(p);
    if (pygpu_pair_is_dense(p, 0, itemsize))
        return fill_dense(c, dst, n, itemsize, value);
    if ((r = cp_dev_temp(c, &t, (size_t)(n * itemsize))) == 0 && (r = fill_dense(c, t.dev, n, itemsize, value)) == 0) {
        dense_strides(p, itemsize, ds);
        pygpu_side view = {dst, p->strides[0], 1, -1, NULL}, dense = {t.dev, ds, 1, -1, NULL};
        r = plan(c, view, dense, p->nd, p->shape, itemsize);
    }
    return cp_temps_free(c, &t, r);
}

int pygpu_fill(pygpu_state *st, pygpu_side dst, int nd, const ptrdiff_t *shape, ptrdiff_t itemsize,
               const void *value, pygpu_stream_t s)
{
    ctx c = {.s = s};
    pygpu_pair p;
    pygpu_status r = 0;
    int uniform = is_uniform(value, itemsize);
    pygpu_pair_init(&p, nd, shape, dst.strides, dst.strides);
    pygpu_pair_simplify(&p, 0);
    if (p.nd < 0)
        return 0;
    char *d = dst.ptr + p.offset[0];
    int prev = -1;
    if (dst.device >= 0 && pygpu_device_enter(st, dst.device, &prev) < 0)
        return -1;
    Py_BEGIN_ALLOW_THREADS
    if (uniform && pygpu_pair_is_dense(&p, 0, itemsize))
        r = note(&c, pygpu_rt_memset_async(d, ((const unsigned char *)value)[0], (size_t)(pair_size(&p) * itemsize),
                                          s), "MemsetAsync");
    else if (cp_kernels_usable(&c))
        r = fill_by_kernel(&c, &p, d, itemsize, value);     /* (the value goes with the launch) */
    else if ((r = fill_by_copies(&c, &p, d, itemsize, value)) == 0 && !uniform) {
        /* A value that is not one repeated byte was copied up from the
         * caller's memory: wait for that copy. */
        r = note(&c, pygpu_rt_stream_synchronize(s), "StreamSynchronize");
    }
    Py_END_ALLOW_THREADS
    if (prev >= 0 && pygpu_rt_set_device(prev) != 0 && r == 0)
        r = note(&c, pygpu_rt_get_last_error(), "SetDevice");
    if (pygpu_check(st, r, c.call ? c.call : "MemsetAsync") < 0 || kernels_warning(c.kernels) < 0)
        return -1;
    return 0;
}
