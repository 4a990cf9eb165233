/*
 * copy.c -- the copy planner's doors, the only functions the rest of
 * PyGPU calls (copy.h): pygpu_copy (every copy of elements between two
 * layouts of one shape, in any direction: host<->device, on one device,
 * between two devices), pygpu_cast and pygpu_fill (on the device, by
 * PyGPU's kernels where they run), pygpu_copy_reap and
 * pygpu_kernels_usable.  Each holds the Python-facing part: the device
 * made current and put back, the GIL released around the plan below, the
 * runtime's status turned into an exception, the one-time warning when
 * the kernels cannot run.
 */
#include "copy.h"
#include "cross_routes.h"
#include "devcopy.h"
#include "device_routes.h"
#include "plan.h"
#include "toolbox.h"
#include "../device.h"
#include "../errors.h"
#include "../kernels/kernels.h"
#include "../marks.h"
#include "../peer.h"
#include "../registered.h"
#include "../shape.h"
#include "../stream.h"
#include "../transfer/background.h"
#include "../transfer/bus.h"
#include "../transfer/pinned_pool.h"
#include "../transfer/settings.h"
#include "../transfer/trace.h"
#include "../tuning.h"

/* ---- copies ----------------------------------------------------------------- */

/* A background transfer's owner, given back by the reaper (the GIL held). */
static void release_owner(void *owner)
{
    Py_DECREF((PyObject *)owner);
}

/* 0, or -1 with a GPUError if side `d`'s memory died with a reset of its
 * device since it was allocated (fork.h): a copy or a kernel there would
 * meet memory the runtime no longer has. */
static int side_live(pygpu_state *st, pygpu_side d)
{
    if (!d.mem || !PyObject_TypeCheck(d.mem, st->Memory))
        return 0;
    const PyGPUMemory *m = (const PyGPUMemory *)d.mem;
    return pygpu_reset_check(st, m->device, m->resets, "array's memory");
}

void pygpu_copy_reap(void)
{
    pygpu_bg_reap(release_owner);
}

void pygpu_copy_reap_all(void)
{
    pygpu_bg_reap_all(release_owner);
    pygpu_bg_forget_counters();
}

/* The first time in this process that PyGPU's kernels could not run
 * where a copy wanted them (`why`, their loading's status): a
 * BackendWarning saying so, and what such copies do instead.  0, or -1
 * when the warning was turned into an error.  With the GIL. */
static int kernels_warning(pygpu_state *st, pygpu_status why)
{
    static int warned;
    if (!why || warned)
        return 0;
    warned = 1;
    return PyErr_WarnFormat(st->BackendWarning, 1, "PyGPU's copy kernels cannot run on this device (%s: %s; "
                            "kernels: %s): layout copies, casts and fills of device memory take slower ways (many "
                            "runtime copies, or through the host)", pygpu_rt_error_name(why),
                            pygpu_rt_error_string(why), pygpu_rt_kernels_origin());
}

/* A BackendWarning for each pair of devices whose first peer copy was
 * found lost (peer.c): their copies are staged since.  0, or -1 when the
 * warning was turned into an error.  With the GIL. */
static int peer_warning(pygpu_state *st)
{
    int dst, src;
    while (pygpu_peer_lossy_pair(&dst, &src))
        if (PyErr_WarnFormat(st->BackendWarning, 1, "a peer copy from device %d to device %d wrote nothing "
                             "(a driver fault): copies between them go through page-locked host memory, "
                             "at the host links' speed; a newer driver may fix it", src, dst) < 0)
            return -1;
    return 0;
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
    if ((prev >= 0 && pygpu_device_leave(st, prev) < 0) || kernels_warning(st, k) < 0)
        return -1;
    return k == 0;
}

/* 1 if the host side `host` of a copy whose device side is `dev` is laid
 * out as the device side's elements in their order, with no axis reversed
 * (page-locked, the copy is then the runtime's copies and PyGPU's kernels
 * on the stream, and nothing on the host after them). */
static int host_side_follows(pygpu_side host, pygpu_side dev, int nd, const ptrdiff_t *shape, ptrdiff_t itemsize)
{
    pygpu_pair p;
    for (int i = 0; i < nd; i++)
        if (shape[i] > 1 && host.strides[i] < 0)
            return 0;
    pygpu_pair_init(&p, nd, shape, dev.strides, host.strides);
    pygpu_pair_simplify(&p, 0);
    return p.nd < 0 || pygpu_pair_is_dense(&p, 1, itemsize);
}

/* Whether a copy on stream s, which a graph capture records (`how`), can
 * join the capture: copies on one device can, and asynchronous ones
 * between the device and page-locked host memory laid out as the device
 * side (host_side_follows); 0 if so, else -1 with the GPUError that says
 * why (before anything was queued). */
static int capture_join(pygpu_state *st, pygpu_stream_t s, int how, pygpu_side dst, pygpu_side src, int nd,
                        const ptrdiff_t *shape, ptrdiff_t itemsize, int async, int cross)
{
    int down = src.on_device && !dst.on_device, pinned = 0;
    pygpu_side host = down ? dst : src, dev = down ? src : dst;
    if (how == PYGPU_CAPTURE_ACTIVE && !cross && dst.on_device && src.on_device)
        return 0;
    if (cross)
        return pygpu_capture_refused(st, s, how, "A copy between two devices",
                                     "Copy between the devices before or after the capture.");
    if (dst.on_device && src.on_device)
        return pygpu_capture_refused(st, s, how, "A copy on the device", NULL);
    ptrdiff_t lo, hi;
    pygpu_shape_extent(nd, shape, host.strides, itemsize, &lo, &hi);
    if (pygpu_rt_host_is_pinned(host.ptr + lo, (size_t)(hi - lo), &pinned) != 0)
        (void)pygpu_rt_get_last_error();
    int follows = host_side_follows(host, dev, nd, shape, itemsize);
    if (how == PYGPU_CAPTURE_ACTIVE && async && pinned && follows)
        return 0;
    if (!pinned)
        return pygpu_capture_refused(st, s, how, down ? "A copy into pageable host memory"
                                                      : "A copy from pageable host memory",
                                     "Use page-locked memory (pygpu.pagelocked_empty) and the asynchronous forms "
                                     "(set_async, get_async): they join the capture and run when the graph does.");
    if (!async)
        return pygpu_capture_refused(st, s, how, down ? "A synchronous copy down" : "A synchronous copy up",
                                     "Use the asynchronous forms (set_async, get_async) with this page-locked "
                                     "memory: they join the capture and run when the graph does.");
    return pygpu_capture_refused(st, s, how, "A copy between the device and page-locked memory laid out otherwise",
                                 "Copy into (from) a page-locked array of the device array's layout.");
}

/* 1 if the host side of a copy between host and device, its bytes from
 * `lo` to `hi`, runs past the pages registration `reg` keeps page-locked
 * (the whole pages inside its owner's buffer): the runtime refuses a copy
 * that begins in page-locked memory and runs past it, and one that begins
 * before it and runs into it is pageable memory to it no more. */
static int straddles(int reg, const char *lo, const char *hi)
{
    const char *start;
    size_t len;
    pygpu_registered_range(reg, &start, &len);
    return start && (lo < start || hi > start + len);
}

/* A dense copy of `n` bytes between the device and host memory whose
 * bytes [a, b) are page-locked in place, with ends (under a page each:
 * their sum at most 2 * PYGPU_BOUNCE_MAX) that are not: the pages' DMA and
 * the two ends through one page-locked block from the pool, all queued on
 * c->s and waited for once (each end a plan of its own waited for apart
 * cost a round trip each: 4 MiB went at 0.83-0.86 of a pinned copy).
 * *done = 0 where the ends are bigger or no block is to be had. */
static pygpu_status ends_through_block(ctx *c, pygpu_side dst, pygpu_side src, ptrdiff_t a, ptrdiff_t b,
                                       ptrdiff_t n, int *done)
{
    int up = dst.on_device;
    size_t head = (size_t)a, tail = (size_t)(n - b);
    char *host = up ? src.ptr : dst.ptr, *blk;
    enum pygpu_copy_kind kind = up ? PYGPU_COPY_H2D : PYGPU_COPY_D2H;
    *done = 0;
    if (head + tail == 0 || head + tail > 2 * PYGPU_BOUNCE_MAX ||
        (blk = pygpu_pinned_take(head + tail, c->dev)) == NULL)
        return 0;
    *done = 1;
    cp_trace_route(up ? "up" : "down", (size_t)n, "page-locked in place",
                   "the pages by DMA, the ends under a page through a page-locked block, waited for once");
    if (up) {
        memcpy(blk, host, head);
        memcpy(blk + head, host + b, tail);
    }
    /* (the pages first: the ends' small copies run behind them) */
    pygpu_status r = cp_dma(c, dst.ptr + a, src.ptr + a, (size_t)(b - a), kind);
    if (r == 0 && head)
        r = cp_bus(c, up ? dst.ptr : blk, up ? blk : src.ptr, head, kind);
    if (r == 0 && tail)
        r = cp_bus(c, up ? dst.ptr + b : blk + head, up ? blk + head : src.ptr + b, tail, kind);
    /* (waited for even after a failure: the block goes back to the pool) */
    pygpu_status w = pygpu_rt_stream_synchronize(c->s);
    if (r == 0 && (r = blame(c, w, "StreamSynchronize")) == 0 && !up) {
        memcpy(host, blk, head);
        memcpy(host + b, blk + head, tail);
    }
    pygpu_pinned_give(blk);
    return r;
}

/* A copy between the device and host memory that straddles registration
 * `reg` (straddles): where both sides are one dense run of bytes in the
 * same order, the locked pages by DMA and the rest (under a page at either
 * end of the owner's buffer, or memory beyond) through a page-locked block
 * (ends_through_block), or where the rest is bigger, in plans of their
 * own; any other layout staged (its host side is pageable to the plan),
 * or under the staging threshold through a dense host buffer of PyGPU's.
 * Synchronous. */
static pygpu_status cp_registered(ctx *c, pygpu_side dst, pygpu_side src, int nd, const ptrdiff_t *shape,
                                  ptrdiff_t itemsize, int reg)
{
    static const ptrdiff_t one[1] = {1};
    const char *lo;
    size_t len;
    pygpu_pair p;
    pygpu_registered_range(reg, &lo, &len);
    pygpu_pair_init(&p, nd, shape, dst.strides, src.strides);
    pygpu_pair_simplify(&p, 0);
    if (p.nd < 0)
        return 0;
    ptrdiff_t size, n, host = (ptrdiff_t)(uintptr_t)(dst.on_device ? src.ptr : dst.ptr);
    pygpu_transfer_config cfg;
    pygpu_transfer_config_get(&cfg);
    pygpu_shape_size(nd, shape, &size);
    n = size * itemsize;
    if (p.offset[0] || p.offset[1] || !pygpu_pair_is_dense(&p, 0, itemsize) || !pygpu_pair_is_dense(&p, 1, itemsize))
        /* (staged from the threshold on: the host side reads as pageable
         * and only the pipeline's buffers meet the runtime) */
        return (size_t)n >= cfg.min_bytes ? cp_plan(c, dst, src, nd, shape, itemsize)
                                          : cp_via_host(c, dst, src, nd, shape, itemsize);
    ptrdiff_t a = (ptrdiff_t)(uintptr_t)lo - host, b = a + (ptrdiff_t)len;
    a = a < 0 ? 0 : a > n ? n : a;
    b = b < a ? a : b > n ? n : b;
    ptrdiff_t cut[4] = {0, a, b, n};
    int done = 0;
    pygpu_status r = b > a ? ends_through_block(c, dst, src, a, b, n, &done) : 0;
    if (r != 0 || done)
        return r;
    for (int k = 0; k < 3 && r == 0; k++) {
        ptrdiff_t piece = cut[k + 1] - cut[k];
        pygpu_side d = dst, s = src;
        d.ptr += cut[k];
        s.ptr += cut[k];
        d.strides = s.strides = one;
        if (piece > 0)
            r = cp_plan(c, d, s, 1, &piece, 1);
    }
    return r;
}

/* -1 for a call refused before it queued anything (its exception set),
 * the device it entered left for `prev` again (>= 0). */
static int refused_back_to(int prev)
{
    if (prev >= 0 && pygpu_rt_set_device(prev) != 0)
        (void)pygpu_rt_get_last_error();
    return -1;
}

int pygpu_copy(pygpu_state *st, pygpu_side dst, pygpu_side src, int nd, const ptrdiff_t *shape,
               ptrdiff_t itemsize, pygpu_stream_t s, int async)
{
    pygpu_status r;
    int dev = dst.on_device ? dst.device : src.on_device ? src.device : -1, prev = -1;
    ctx c = {.s = s, .dev = dev, .async = async};
    int cross = dst.on_device && src.on_device && dst.device >= 0 && src.device >= 0 && dst.device != src.device;
    pygpu_mark(2);
    if (side_live(st, dst) < 0 || side_live(st, src) < 0)
        return -1;
    pygpu_copy_reap();
    if (dev >= 0 && pygpu_device_enter(st, dev, &prev) < 0)
        return -1;
    /* Under a graph capture the copy joins it (queued, not waited for:
     * it runs when the graph does), or is refused before touching s. */
    int captured = pygpu_stream_capturing(s);
    if (captured && capture_join(st, s, captured, dst, src, nd, shape, itemsize, async, cross) < 0) {
        return refused_back_to(prev);
    }
    /* A synchronous copy between the device and a user's host buffer that
     * transfers meet again: page-locked in place (registered.c), the
     * planner's DMA reads (writes) it directly.  Any copy whose host side
     * touches a registration holds it till the end, and one that runs past
     * its pages goes apart (cp_registered), synchronously; but an
     * asynchronous one from the staging threshold on goes as its host side
     * reads, pageable (in the background, or staged), with only PyGPU's
     * page-locked buffers meeting the runtime (c.host_apart): made
     * synchronous, a to_gpu_async of a buffer that blocking transfers had
     * met took all of the transfer's time (docs/performance.md#registered-in-place). */
    int reg = 0, straddling = 0;
    ptrdiff_t count = 0;
    pygpu_mark(3);
    size_t nbytes = pygpu_shape_size(nd, shape, &count) == 0 ? (size_t)count * (size_t)itemsize : 0;
    if (!cross && dst.on_device != src.on_device) {
        pygpu_side host = dst.on_device ? src : dst;
        ptrdiff_t lo, hi;
        pygpu_shape_extent(nd, shape, host.strides, itemsize, &lo, &hi);
        if (!async && host.owner)
            reg = pygpu_registered_prepare(host.owner, host.ptr + lo, (size_t)(hi - lo));
        if (!reg)
            reg = pygpu_registered_hold(host.ptr + lo, (size_t)(hi - lo));
        if (reg && (straddling = straddles(reg, host.ptr + lo, host.ptr + hi)) != 0) {
            pygpu_transfer_config cfg;
            pygpu_transfer_config_get(&cfg);
            if (async && nbytes >= cfg.min_bytes)
                straddling = 0, c.host_apart = 1;
            else
                async = c.async = 0;
        }
    }
    pygpu_trace_enter();
    if (async && dst.on_device && !src.on_device && src.owner)
        c.owner = Py_NewRef(src.owner);
    else if (async && !dst.on_device && src.on_device && dst.owner)
        c.owner = Py_NewRef(dst.owner);
    /* A bulk copy waited for: while it holds the copy engine of its
     * direction, the other threads' smaller copies go by kernel (bus.c). */
    int bulk = -1;
    if (!async && !cross && !captured && dst.on_device != src.on_device && nbytes >= PYGPU_DMA_PIECES_FROM)
        bulk = pygpu_bus_bulk_begin(dst.on_device ? PYGPU_COPY_H2D : PYGPU_COPY_D2H);
    c.then_wait = !async && !captured && !cross;
    c.may_launch = c.then_wait && dst.on_device && !src.on_device && dst.device >= 0;
    pygpu_mark(4);
    c.ts = PyEval_SaveThread();
    if (cross)      /* done when it returns: the source may be freed at once */
        r = cp_cross_device(&c, dst, src, nd, shape, itemsize);
    else if (straddling)
        r = cp_registered(&c, dst, src, nd, shape, itemsize, reg);
    else
        r = cp_plan(&c, dst, src, nd, shape, itemsize);
    /* (Copies down have waited already, where they had to; a few bytes
     * that went up with a launch have nothing to wait for.) */
    if (r == 0 && c.then_wait && !c.stopped && !c.waited && !c.launched && !(src.on_device && !dst.on_device))
        r = blame(&c, pygpu_rt_stream_synchronize(s), "StreamSynchronize");
    pygpu_trace_done();
    pygpu_bus_bulk_end(bulk);
    PyEval_RestoreThread(c.ts);
    pygpu_mark(11);
    /* (Its pages are let go only once the stream is past it; a captured
     * copy runs when its graph does, the owner's to keep alive till then;
     * one whose host side goes apart has no DMA of those pages at all.) */
    if (async && reg && !captured && !c.host_apart) {
        int d = dev;
        if (d < 0 && pygpu_rt_get_device(&d) != 0)
            (void)pygpu_rt_get_last_error();
        pygpu_registered_queued(reg, d < 0 ? 0 : d, s);
    }
    pygpu_registered_done(reg);
    if (!c.owner_taken)
        Py_XDECREF(c.owner);
    int back = prev >= 0 && !c.stopped && r == 0 ? pygpu_device_leave(st, prev) : 0;
    if (prev >= 0 && (c.stopped || r != 0) && pygpu_rt_set_device(prev) != 0)
        (void)pygpu_rt_get_last_error();
    if (c.stopped)
        return -1;      /* the signal handler's exception (KeyboardInterrupt) is set */
    if (pygpu_check(st, r, c.call ? c.call : "MemcpyAsync") < 0 || kernels_warning(st, c.kernels) < 0 ||
        (cross && peer_warning(st) < 0))
        return -1;
    pygpu_mark(12);
    return back;
}

int pygpu_copy_across(pygpu_state *st, pygpu_side dst, pygpu_side src, int nd, const ptrdiff_t *shape,
                      ptrdiff_t itemsize)
{
    ctx c = {.s = PYGPU_STREAM_NULL, .dev = dst.device};
    if (side_live(st, dst) < 0 || side_live(st, src) < 0)
        return -1;
    pygpu_copy_reap();
    pygpu_trace_enter();
    c.ts = PyEval_SaveThread();
    pygpu_status r = cp_cross_fresh(&c, dst, src, nd, shape, itemsize);
    pygpu_trace_done();
    PyEval_RestoreThread(c.ts);
    return pygpu_check(st, r, c.call ? c.call : "MemcpyPeerAsync") < 0 || kernels_warning(st, c.kernels) < 0 ? -1 : 0;
}

/* ---- casts ------------------------------------------------------------------ */

int pygpu_cast(pygpu_state *st, pygpu_side dst, int dtype, pygpu_side src, int stype, int nd, const ptrdiff_t *shape,
               pygpu_stream_t s)
{
    ctx c = {.s = s, .dev = dst.on_device ? dst.device : src.on_device ? src.device : -1};
    temps ts = {0}, td = {0};
    pygpu_pair p;
    pygpu_status r = 0;
    int prev = -1, done = 0;
    if (side_live(st, dst) < 0 || side_live(st, src) < 0)
        return -1;
    pygpu_pair_init(&p, nd, shape, dst.strides, src.strides);
    pygpu_pair_simplify(&p, 0);
    if (p.nd < 0)
        return 0;
    pygpu_pair whole = p;
    char *d = dst.ptr + p.offset[0], *from = src.ptr + p.offset[1];
    ptrdiff_t n = pair_size(&p), dsize = pk_itemsize(dtype), ssize = pk_itemsize(stype);
    if (dst.device >= 0 && pygpu_device_enter(st, dst.device, &prev) < 0)
        return -1;
    if (pygpu_capture_refuse(st, s, 1, "A cast", NULL) < 0) {
        return refused_back_to(prev);
    }
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
            r = blame(&c, pygpu_dev_cast(&p, d, dtype, from, stype, s), "LaunchKernel");
        if (r == 0 && td.dev)
            r = cp_device_pass(&c, &whole, 0, dst.ptr + whole.offset[0], td.dev, dsize, 0);
        r = cp_temps_free(&c, &td, r);
        r = cp_temps_free(&c, &ts, r);
    }
    Py_END_ALLOW_THREADS
    if (prev >= 0 && pygpu_rt_set_device(prev) != 0 && r == 0)
        r = blame(&c, pygpu_rt_get_last_error(), "SetDevice");
    if (pygpu_check(st, r, c.call ? c.call : "LaunchKernel") < 0 || kernels_warning(st, c.kernels) < 0)
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
        return blame(c, pygpu_rt_memset_async(dst, value[0], (size_t)(n * itemsize), c->s), "MemsetAsync");
    pygpu_status r = blame(c, pygpu_rt_memcpy_async(dst, value, (size_t)itemsize, PYGPU_COPY_H2D, c->s),
                          "MemcpyAsync");
    for (ptrdiff_t k = 1; r == 0 && k < n; k *= 2) {
        ptrdiff_t m = k < n - k ? k : n - k;
        r = blame(c, pygpu_rt_memcpy_async(dst + k * itemsize, dst, (size_t)(m * itemsize),
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
        return blame(c, pygpu_dev_fill(p, dst, itemsize, value, c->s), "LaunchKernel");
    pygpu_pair q = *p;
    dense_strides(p, itemsize, q.strides[0]);
    if ((r = cp_dev_temp(c, &t, (size_t)(pair_size(p) * itemsize))) == 0 &&
        (r = blame(c, pygpu_dev_fill(&q, t.dev, itemsize, value, c->s), "LaunchKernel")) == 0)
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
        pygpu_side view = {dst, p->strides[0], 1, -1, NULL, NULL}, dense = {t.dev, ds, 1, -1, NULL, NULL};
        r = cp_plan(c, view, dense, p->nd, p->shape, itemsize);
    }
    return cp_temps_free(c, &t, r);
}

int pygpu_fill(pygpu_state *st, pygpu_side dst, int nd, const ptrdiff_t *shape, ptrdiff_t itemsize,
               const void *value, pygpu_stream_t s)
{
    ctx c = {.s = s, .dev = dst.device};
    pygpu_pair p;
    pygpu_status r = 0;
    int uniform = is_uniform(value, itemsize);
    if (side_live(st, dst) < 0)
        return -1;
    pygpu_pair_init(&p, nd, shape, dst.strides, dst.strides);
    pygpu_pair_simplify(&p, 0);
    if (p.nd < 0)
        return 0;
    char *d = dst.ptr + p.offset[0];
    int prev = -1, captured, refused = 0;
    if (dst.device >= 0 && pygpu_device_enter(st, dst.device, &prev) < 0)
        return -1;
    if ((captured = pygpu_capture_refuse(st, s, 1, "A fill", NULL)) < 0) {
        return refused_back_to(prev);
    }
    Py_BEGIN_ALLOW_THREADS
    if (uniform && pygpu_pair_is_dense(&p, 0, itemsize))
        r = blame(&c, pygpu_rt_memset_async(d, ((const unsigned char *)value)[0], (size_t)(pair_size(&p) * itemsize),
                                          s), "MemsetAsync");
    else if (cp_kernels_usable(&c))
        r = fill_by_kernel(&c, &p, d, itemsize, value);     /* (the value goes with the launch) */
    else if (captured && !uniform)
        refused = 1;        /* (its value would be copied up from this call's memory, and waited for) */
    else if ((r = fill_by_copies(&c, &p, d, itemsize, value)) == 0 && !uniform) {
        /* A value that is not one repeated byte was copied up from the
         * caller's memory: wait for that copy. */
        r = blame(&c, pygpu_rt_stream_synchronize(s), "StreamSynchronize");
    }
    Py_END_ALLOW_THREADS
    if (prev >= 0 && pygpu_rt_set_device(prev) != 0 && r == 0)
        r = blame(&c, pygpu_rt_get_last_error(), "SetDevice");
    if (pygpu_check(st, r, c.call ? c.call : "MemsetAsync") < 0 || kernels_warning(st, c.kernels) < 0 ||
        (refused && pygpu_capture_refused(st, s, captured, "A fill with a value of several different bytes where "
                                          "PyGPU's kernels cannot run", NULL) < 0))
        return -1;
    return 0;
}
