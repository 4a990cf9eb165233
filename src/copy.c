/*
 * copy.c -- the copy planner: every copy of elements between two layouts of
 * one shape, in any direction (host<->device, device<->device), goes here.
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
#include "pygpu.h"
#include "devcopy.h"
#include "kernels/kernels.h"
#include "transfer/hostcopy.h"
#include "transfer/pinned_pool.h"
#include "transfer/pipeline.h"
#include "transfer/settings.h"
#include "transfer/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DIRECT_CALLS 64     /* runtime calls worth issuing for one copy */
#define WIDE_ROW 512            /* bytes per row for direct 2-D host copies */
#define NARROW_MIN 4            /* narrower rows the device moves slowly (see gather_down) */

typedef struct {
    pygpu_stream_t s;
    const char *call;           /* the runtime call that failed */
    PyThreadState *ts;          /* the caller's, saved while the GIL is released */
    int stopped;                /* a signal (KeyboardInterrupt) stopped the copy */
    int async;                  /* device to page-locked host memory may be left queued */
    pygpu_queued_fn queued;     /* passed on to staged uploads (see scatter_up) */
    void *queued_arg;
    pygpu_status kernels;       /* why PyGPU's kernels could not run where wanted (0: they could) */
} ctx;

/* Between chunks of a staged copy: take the GIL back for a moment to run
 * signal handlers; 1 if one raised (the exception stays set). */
static int interrupted(void *arg)
{
    ctx *c = arg;
    if (!c->ts)
        return 0;
    PyEval_RestoreThread(c->ts);
    int r = PyErr_CheckSignals();
    c->ts = PyEval_SaveThread();
    return r < 0;
}

static pygpu_staging_ctx staging_ctx(ctx *c)
{
    return (pygpu_staging_ctx){c->s, interrupted, c, NULL, 0, c->queued, c->queued_arg};
}

/* Fold a staged copy's outcome into the plan's context. */
static pygpu_status staged_done(ctx *c, const pygpu_staging_ctx *sc, pygpu_status r)
{
    if (sc->call && !c->call)
        c->call = sc->call;
    c->stopped |= sc->stopped;
    return r;
}

/* Run a staged copy; *done says whether the pipeline took it. */
static pygpu_status staged(ctx *c, int to_device, char *dev, pygpu_host_layout h, int *done)
{
    pygpu_staging_ctx sc = staging_ctx(c);
    pygpu_status r = to_device ? pygpu_staged_h2d(&sc, dev, h, done) : pygpu_staged_d2h(&sc, h, dev, done);
    return staged_done(c, &sc, r);
}

static pygpu_status note(ctx *c, pygpu_status r, const char *call)
{
    if (r != 0 && !c->call)
        c->call = call;
    return r;
}

/* ---- runtime copies straight between two layouts ------------------------- */

typedef struct {
    ptrdiff_t width;            /* bytes per row */
    int hax;                    /* axis copied as the rows of a 2-D copy, or -1 */
    int nloop;                  /* axes [0, nloop) are looped over */
    ptrdiff_t calls;            /* runtime calls needed */
} geometry;

/* How runtime_copies would copy simplified pair `p`. */
static geometry geometry_of(const pygpu_pair *p, ptrdiff_t itemsize)
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
static pygpu_status runtime_copies(ctx *c, const pygpu_pair *p, const geometry *g, char *dst, const char *src,
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
    D2D_RUNTIME,                /* the runtime's copies (runtime_copies) */
    D2D_KERNEL,                 /* PyGPU's kernels (devcopy.c) */
    D2D_HOST,                   /* through the host: too many runtime calls, no kernels */
};

/* 1 if PyGPU's kernels can run on the current device; else the reason is
 * kept for the warning pygpu_copy gives. */
static int kernels_usable(ctx *c)
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
    if (kernels_usable(c))
        return D2D_KERNEL;
    return g->calls <= MAX_DIRECT_CALLS ? D2D_RUNTIME : D2D_HOST;
}

/* Copy simplified pair `p` on the current device, from src (layout 1) to
 * dst (layout 0), by the runtime's copies or the kernels: never through
 * the host (the callers that can take that way ask d2d_way first). */
static pygpu_status on_device(ctx *c, const pygpu_pair *p, char *dst, const char *src, ptrdiff_t itemsize)
{
    geometry g = geometry_of(p, itemsize);
    if (d2d_way(c, &g) == D2D_KERNEL)
        return note(c, pygpu_dev_copy(p, dst, src, itemsize, c->s), "LaunchKernel");
    return runtime_copies(c, p, &g, dst, src, PYGPU_COPY_D2D);
}

/* ---- helpers -------------------------------------------------------------- */

static ptrdiff_t pair_size(const pygpu_pair *p)
{
    ptrdiff_t n = 1;
    for (int i = 0; i < p->nd; i++)
        n *= p->shape[i];
    return n;
}

/* Dense (C order) strides for the axes of `p`. */
static void dense_strides(const pygpu_pair *p, ptrdiff_t itemsize, ptrdiff_t *strides)
{
    ptrdiff_t s = itemsize;
    for (int i = p->nd - 1; i >= 0; i--) {
        strides[i] = s;
        s *= p->shape[i];
    }
}

/* Copy between device layout `which` of `p` (at `view`) and a dense device
 * buffer (at `dense`), in the direction `to_dense`. */
static pygpu_status device_pass(ctx *c, const pygpu_pair *p, int which, char *view, char *dense,
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

/* `p` cut to [from, to) along its first axis. */
static pygpu_pair slab_of(const pygpu_pair *p, ptrdiff_t from, ptrdiff_t to)
{
    pygpu_pair q = *p;
    q.shape[0] = to - from;
    return q;
}

/* Piece k of `pieces` of `p`, cut along its first axis from element *start. */
static pygpu_pair piece_of(const pygpu_pair *p, ptrdiff_t k, ptrdiff_t pieces, ptrdiff_t *start)
{
    *start = p->shape[0] * k / pieces;
    return slab_of(p, *start, p->shape[0] * (k + 1) / pieces);
}

typedef struct {                /* temporary buffers of one plan */
    void *host;
    int host_pinned;            /* from the pinned pool */
    void *dev;
    int dev_pooled;
} temps;

static pygpu_status temps_free(ctx *c, temps *t, pygpu_status r)
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
static pygpu_status host_temp(ctx *c, temps *t, size_t n)
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

static pygpu_status dev_temp(ctx *c, temps *t, size_t n)
{
    return note(c, pygpu_rt_malloc_async(&t->dev, n, c->s, &t->dev_pooled), "MallocAsync");
}

/* ---- the host side of a copy, asked once --------------------------------- */

/* The host memory of a copy between host and device: whether it is
 * page-locked is asked of the runtime once, and only when a decision needs
 * it (a small synchronous copy never asks: an 8-byte to_gpu pays nothing
 * for it). */
typedef struct {
    const void *ptr;
    size_t nbytes;              /* the copy's bytes */
    size_t min_bytes;           /* the staging threshold (transfer_config) */
    int kind;                   /* 0 not asked, 1 page-locked, 2 pageable, 3 the runtime could not say */
} host_side;

static host_side host_side_of(const void *ptr, size_t nbytes)
{
    pygpu_transfer_config cfg;
    pygpu_transfer_config_get(&cfg);
    return (host_side){ptr, nbytes, cfg.min_bytes, 0};
}

static int host_kind(host_side *h)
{
    int pinned = 0;
    if (!h->kind)
        h->kind = pygpu_rt_host_is_pinned(h->ptr, &pinned) != 0 ? 3 : pinned ? 1 : 2;
    return h->kind;
}

/* Worth the staging pipeline: pageable, and big enough. */
static int host_stage(host_side *h) { return h->nbytes >= h->min_bytes && host_kind(h) == 2; }

/* A copy down into it may be left queued: the caller's copy is
 * asynchronous (`allowed`) and the memory page-locked (then the stream
 * says when it is done). */
static int host_queue(host_side *h, int allowed) { return allowed && host_kind(h) == 1; }

/* ---- the directions ------------------------------------------------------- */

/* Host layout `which` of `p` at `host` into the dense device buffer `dev`:
 * through the staging pipeline when `stage` (host_stage: the caller has
 * asked), else in one copy (gathering on the host first if need be); the
 * pipeline may decline (engine busy), and then the one copy goes. */
static pygpu_status host_to_dense(ctx *c, const pygpu_pair *p, int which, char *dev, const char *host,
                                  ptrdiff_t itemsize, int stage)
{
    temps t = {0};
    ptrdiff_t ds[PYGPU_MAXDIMS];
    size_t nbytes = (size_t)(pair_size(p) * itemsize);
    pygpu_status r;
    int done = 0;
    if (stage) {
        pygpu_host_layout h = {(char *)host, p->strides[which], p->nd, p->shape, itemsize};
        if ((r = staged(c, 1, dev, h, &done)) != 0 || done)
            return r;
    }
    if (pygpu_pair_is_dense(p, which, itemsize))
        return note(c, pygpu_rt_memcpy_async(dev, host, nbytes, PYGPU_COPY_H2D, c->s), "MemcpyAsync");
    if ((r = host_temp(c, &t, nbytes)) != 0)
        return r;
    dense_strides(p, itemsize, ds);
    pygpu_host_strided_copy(t.host, ds, host, p->strides[which], p->nd, p->shape, itemsize);
    r = note(c, pygpu_rt_memcpy_async(dev, t.host, nbytes, PYGPU_COPY_H2D, c->s), "MemcpyAsync");
    return temps_free(c, &t, r);
}

/* A small dense copy down into pageable memory, through a page-locked block
 * from the pool: the runtime's own way for pageable memory waits for the
 * copy before it returns, and then the stream is waited for again.  *done
 * = 0 if the copy is not for this way. */
static pygpu_status bounce_down(ctx *c, char *host, const char *dev, size_t n, int *done)
{
    void *b;
    *done = 0;
    if (n == 0 || n > PYGPU_BOUNCE_MAX || (b = pygpu_pinned_take(n)) == NULL)
        return 0;
    *done = 1;
    pygpu_status r = note(c, pygpu_rt_memcpy_async(b, dev, n, PYGPU_COPY_D2H, c->s), "MemcpyAsync");
    if (r == 0 && (r = note(c, pygpu_rt_stream_synchronize(c->s), "StreamSynchronize")) == 0)
        memcpy(host, b, n);
    pygpu_pinned_give(b);
    return r;
}

/* The dense device buffer `dev` into host layout `which` of `p` at `host`:
 * staged when `stage` (as host_to_dense); done when this returns, unless
 * `queue` (host_queue) allows leaving it queued. */
static pygpu_status dense_to_host(ctx *c, const pygpu_pair *p, int which, char *host, const char *dev,
                                  ptrdiff_t itemsize, int stage, int queue)
{
    temps t = {0};
    ptrdiff_t ds[PYGPU_MAXDIMS];
    size_t nbytes = (size_t)(pair_size(p) * itemsize);
    pygpu_status r;
    int done = 0;
    if (stage) {
        pygpu_host_layout h = {host, p->strides[which], p->nd, p->shape, itemsize};
        if ((r = staged(c, 0, (char *)dev, h, &done)) != 0 || done)
            return r;
    }
    if (pygpu_pair_is_dense(p, which, itemsize)) {
        if (!queue && ((r = bounce_down(c, host, dev, nbytes, &done)) != 0 || done))
            return r;
        if ((r = note(c, pygpu_rt_memcpy_async(host, dev, nbytes, PYGPU_COPY_D2H, c->s), "MemcpyAsync")) == 0 &&
            !queue)
            r = note(c, pygpu_rt_stream_synchronize(c->s), "StreamSynchronize");
        return r;
    }
    dense_strides(p, itemsize, ds);
    if ((r = host_temp(c, &t, nbytes)) == 0 &&
        (r = note(c, pygpu_rt_memcpy_async(t.host, dev, nbytes, PYGPU_COPY_D2H, c->s), "MemcpyAsync")) == 0 &&
        (r = note(c, pygpu_rt_stream_synchronize(c->s), "StreamSynchronize")) == 0)
        pygpu_host_strided_copy(host, p->strides[which], t.host, ds, p->nd, p->shape, itemsize);
    return temps_free(c, &t, r);
}

/* Narrow rows (4 to 63 bytes) going up from pageable memory go up dense and
 * are scattered on the device slab by slab, on a stream of their own, as
 * the staged upload queues their DMA: the device scatters 4-byte rows at
 * about 34 GB/s, about as fast as the upload, so one after the other took
 * twice as long as either.  Measured on an H100, every other element from
 * pageable memory, interleaved against scattering after the upload: 4-byte
 * elements 16 MiB 18.8 -> 25.8 GB/s, 64 MiB 18.9 -> 28.4; 8-byte 25.1 ->
 * 33.6 and 26.6 -> 34.7.  Wide rows scatter 10-20 times faster than they
 * come up; scattered this way, every other row of 256 B went from 0.68 of
 * the link to 0.62 at 16 MiB, so they wait for the whole upload.  (1- and
 * 2-byte elements are scattered on the device at 1.5 and 3 GB/s, either
 * way.) */
#define SCATTER_MIN ((size_t)1 << 20)   /* bytes per scatter call, but the last */

typedef struct {
    ctx *c, gc;                 /* the caller's; the scatter's (its stream) */
    const pygpu_pair *p;
    char *view, *dense;
    ptrdiff_t itemsize, slab, done; /* bytes per slice of axis 0; slices scattered */
    pygpu_event_t ev;
} scatter;

static pygpu_status scatter_to(scatter *sc, ptrdiff_t to)
{
    ctx *c = sc->c;
    pygpu_status r;
    if (to <= sc->done)
        return 0;
    pygpu_pair q = slab_of(sc->p, sc->done, to);
    if ((r = note(c, pygpu_rt_event_record(sc->ev, c->s), "EventRecord")) == 0 &&
        (r = note(c, pygpu_rt_stream_wait_event(sc->gc.s, sc->ev), "StreamWaitEvent")) == 0)
        r = device_pass(&sc->gc, &q, 0, sc->view + sc->done * sc->p->strides[0][0], sc->dense + sc->done * sc->slab,
                        sc->itemsize, 0);
    if (sc->gc.call && !c->call)
        c->call = sc->gc.call;
    sc->done = to;
    return r;
}

static pygpu_status scatter_queued(void *arg, size_t bytes)
{
    scatter *sc = arg;
    ptrdiff_t to = (ptrdiff_t)bytes / sc->slab;
    if (to < sc->p->shape[0] && (size_t)((to - sc->done) * sc->slab) < SCATTER_MIN)
        return 0;
    return scatter_to(sc, to);
}

static pygpu_status scatter_up(ctx *c, const pygpu_pair *p, char *dst, const char *src, ptrdiff_t itemsize,
                               temps *t)
{
    ptrdiff_t ds[PYGPU_MAXDIMS];
    scatter sc = {c, *c, p, dst, t->dev, itemsize, 0, 0, NULL};
    pygpu_status r;
    dense_strides(p, itemsize, ds);
    sc.slab = ds[0];
    sc.gc.call = NULL;
    sc.gc.s = NULL;
    if ((r = note(c, pygpu_rt_stream_create(&sc.gc.s, PYGPU_STREAM_NON_BLOCKING, 0), "StreamCreateWithFlags")) == 0 &&
        (r = note(c, pygpu_rt_event_create(&sc.ev, PYGPU_EVENT_DISABLE_TIMING), "EventCreateWithFlags")) == 0) {
        c->queued = scatter_queued;
        c->queued_arg = &sc;
        r = host_to_dense(c, p, 1, t->dev, src, itemsize, 1);      /* (its route: staged) */
        c->queued = NULL;
        c->queued_arg = NULL;
        if (r == 0 && !c->stopped)
            r = scatter_to(&sc, p->shape[0]);       /* the rest (all of it if the upload was not staged) */
        /* c->s goes on once the scatter is done (the buffer goes back after it). */
        if (r == 0 && (r = note(c, pygpu_rt_event_record(sc.ev, sc.gc.s), "EventRecord")) == 0)
            r = note(c, pygpu_rt_stream_wait_event(c->s, sc.ev), "StreamWaitEvent");
        if (r != 0)
            (void)pygpu_rt_stream_synchronize(sc.gc.s);
    }
    if (sc.ev)
        (void)pygpu_rt_event_destroy(sc.ev);
    if (sc.gc.s)
        (void)pygpu_rt_stream_destroy(sc.gc.s);
    return temps_free(c, t, r);
}

/* ---- the route: how a copy between host and device goes ------------------ */

/* The ways a copy between host and device can go, in the order they are
 * tried; route_up and route_down choose, each the one place for its
 * direction.  A route that finds no room for its device buffer, or a
 * staging pipeline that declines (another thread's transfer has it), falls
 * to the next that fits. */
enum route {
    ROUTE_NONE,
    ROUTE_STAGED,           /* the device side dense, the host's pageable: the staging pipeline */
    ROUTE_DMA,              /* the device side dense: one DMA (the host gathering or scattering) */
    ROUTE_RUNTIME,          /* a few wide rows straight between the layouts (runtime_copies) */
    ROUTE_STAGED_ROWS,      /* up: rows at a pitch, staged straight into them by 2-D DMA */
    ROUTE_SCATTER_AS_UP,    /* up: dense into a device buffer, scattered slab by slab as it arrives */
    ROUTE_SCATTER,          /* up: dense into a device buffer, then scattered on the device */
    ROUTE_GATHER,           /* down: gathered on the device whole, then down dense */
    ROUTE_GATHER_PIECES,    /* down: gathered on the device in pieces, each going down once gathered */
    ROUTE_STAGED_VIEW,      /* down: the bytes the view covers through the pipeline, the workers gather */
    ROUTE_HOST_GATHER,      /* down: the bytes the view covers in one DMA, the host gathers */
};

static const char *const route_names[] = {
    "none", "staged", "one DMA", "runtime copies", "staged rows", "scattered as it arrives", "scattered",
    "gathered on the device", "gathered on the device in pieces", "staged view", "gathered on the host",
};

/* With PYGPU_STAGING_TRACE=1, each route taken and why, on stderr. */
static void trace_route(int up, enum route r, const char *why, size_t nbytes)
{
    if (pygpu_trace_on)
        fprintf(stderr, "pygpu route: %s %zu B: %s (%s)\n", up ? "up" : "down", nbytes, route_names[r], why);
}

/* The way up for host layout 1 of `p` into device layout 0, after `after`
 * (ROUTE_NONE: the first choice); *why says why. */
static enum route route_up(const pygpu_pair *p, const geometry *g, ptrdiff_t itemsize, host_side *h,
                           enum route after, const char **why)
{
    int stage = host_stage(h);
    if (pygpu_pair_is_dense(p, 0, itemsize)) {
        if (after < ROUTE_STAGED && stage)
            return *why = "dense on the device, pageable on the host", ROUTE_STAGED;
        return *why = "dense on the device", ROUTE_DMA;
    }
    /* A few wide rows straight between the layouts, unless the host side
     * is pageable: then the pipeline is faster. */
    if (after < ROUTE_RUNTIME && g->calls <= MAX_DIRECT_CALLS && g->width >= WIDE_ROW && !stage)
        return *why = "a few rows of 512 B or more, page-locked or small", ROUTE_RUNTIME;
    /* Rows (or single elements) at a pitch: staged straight into them by
     * 2-D copies, no device-side pass. */
    if (after < ROUTE_STAGED_ROWS && stage && g->calls == 1 && g->hax == 0)
        return *why = "rows at one pitch, pageable", ROUTE_STAGED_ROWS;
    if (after < ROUTE_SCATTER_AS_UP && stage && g->width >= NARROW_MIN && g->width < 64)
        return *why = "rows of 4 to 63 B, pageable", ROUTE_SCATTER_AS_UP;
    return *why = "any other layout", ROUTE_SCATTER;
}

/* Host layout 1 of `p` (at src) to device layout 0 (at dst). */
static pygpu_status h2d(ctx *c, const pygpu_pair *p, const geometry *g, char *dst, const char *src,
                        ptrdiff_t itemsize)
{
    temps t = {0};
    size_t nbytes = (size_t)(pair_size(p) * itemsize);
    host_side h = host_side_of(src, nbytes);
    pygpu_status r;
    int done = 0;
    const char *why;
    for (enum route way = route_up(p, g, itemsize, &h, ROUTE_NONE, &why);;
         way = route_up(p, g, itemsize, &h, way, &why)) {
        trace_route(1, way, why, nbytes);
        switch (way) {
        case ROUTE_STAGED:
        case ROUTE_DMA:
            return host_to_dense(c, p, 1, dst, src, itemsize, way == ROUTE_STAGED);
        case ROUTE_RUNTIME:
            return runtime_copies(c, p, g, dst, src, PYGPU_COPY_H2D);
        case ROUTE_STAGED_ROWS: {
            pygpu_host_layout hl = {(char *)src, p->strides[1], p->nd, p->shape, itemsize};
            pygpu_staging_ctx sc = staging_ctx(c);
            r = staged_done(c, &sc, pygpu_staged_h2d_rows(&sc, dst, p->strides[0][0], g->width, hl, &done));
            if (r != 0 || done)
                return r;
            break;                  /* (the pipeline declined) */
        }
        case ROUTE_SCATTER_AS_UP:
        case ROUTE_SCATTER:
            /* Up into a dense device buffer, scattered on the device. */
            if ((r = dev_temp(c, &t, nbytes)) != 0)
                return r;
            if (way == ROUTE_SCATTER_AS_UP)
                return scatter_up(c, p, dst, src, itemsize, &t);
            if ((r = host_to_dense(c, p, 1, t.dev, src, itemsize, host_stage(&h))) == 0)
                r = device_pass(c, p, 0, dst, t.dev, itemsize, 0);
            return temps_free(c, &t, r);
        default:
            return note(c, PYGPU_RT_INVALID_VALUE, "route");
        }
    }
}

/* Narrow rows (4 to 63 bytes) going down into page-locked memory (get()'s
 * new arrays) are gathered on the device by 2-D copies, in pieces on a
 * stream of their own, and each piece goes down on c->s as soon as it is
 * gathered: the two run on different copy engines, and only the view's own
 * bytes cross the link.  Measured on an H100, every other element into
 * get()'s array, against the host-side gather of the bytes the view covers
 * (whose ceiling is 0.5 of the link): 4-byte elements 16 MiB 0.49 (0.32),
 * 64 MiB 0.56 (0.45), 256 MiB 0.61 (0.48); 8-byte elements 16 MiB 0.75
 * (0.33), 64 MiB 0.88 (0.43).  16 MiB gathered whole and then sent down:
 * 0.39.  Into pageable memory, each piece staged, this way lost at 64 MiB
 * (4-byte elements 21.3 GB/s against 24.3, 8-byte 22.1 against 24.9), so
 * there the host gathers.  The device gathers 4-byte rows at 34 GB/s,
 * 8-byte ones at 66, but 1- and 2-byte elements at 1.5 and 3 GB/s (the
 * host-side gather: 9-15 and 15-22), so rows of 1-3 bytes stay with the
 * host. */
#define GATHER_MIN_BYTES ((size_t)1 << 20)
#define GATHER_PIECE ((size_t)4 << 20)
#define GATHER_PIECES 16

static pygpu_status gather_down(ctx *c, const pygpu_pair *p, char *dst, const char *src, ptrdiff_t itemsize,
                                temps *t, host_side *h)
{
    ptrdiff_t ds[PYGPU_MAXDIMS], done = 0;
    size_t nbytes = (size_t)(pair_size(p) * itemsize);
    /* A piece per MiB up to 4, then up to 16 of 4 MiB or more: each piece
     * costs a few microseconds, and the last one's copy down is not
     * overlapped (16 MiB: 4 pieces 0.51, 8 0.50, 16 0.43). */
    ptrdiff_t pieces = (ptrdiff_t)(nbytes >> 20) < 4 ? (ptrdiff_t)(nbytes >> 20) : 4;
    pygpu_event_t ev[GATHER_PIECES + 1] = {0};
    pygpu_stream_t g = NULL;
    ctx gc = *c;
    pygpu_status r;
    if ((ptrdiff_t)(nbytes / GATHER_PIECE) > pieces)
        pieces = (ptrdiff_t)(nbytes / GATHER_PIECE);
    if (pieces > GATHER_PIECES)
        pieces = GATHER_PIECES;
    if (pieces > p->shape[0])
        pieces = p->shape[0];
    if (pieces < 1)
        pieces = 1;
    dense_strides(p, itemsize, ds);
    /* (into t->dev, made on c->s) The gathers wait for the work queued
     * before them there. */
    if ((r = note(c, pygpu_rt_stream_create(&g, PYGPU_STREAM_NON_BLOCKING, 0), "StreamCreateWithFlags")) == 0) {
        for (ptrdiff_t k = 0; r == 0 && k <= pieces; k++)
            r = note(c, pygpu_rt_event_create(&ev[k], PYGPU_EVENT_DISABLE_TIMING), "EventCreateWithFlags");
    }
    if (r == 0 && (r = note(c, pygpu_rt_event_record(ev[pieces], c->s), "EventRecord")) == 0)
        r = note(c, pygpu_rt_stream_wait_event(g, ev[pieces]), "StreamWaitEvent");
    gc.s = g;
    gc.call = NULL;
    for (ptrdiff_t k = 0; r == 0 && k < pieces; k++) {
        ptrdiff_t start;
        pygpu_pair q = piece_of(p, k, pieces, &start);
        if ((r = device_pass(&gc, &q, 1, (char *)src + start * p->strides[1][0], (char *)t->dev + start * ds[0],
                             itemsize, 1)) == 0)
            r = note(&gc, pygpu_rt_event_record(ev[k], g), "EventRecord");
    }
    if (gc.call && !c->call)
        c->call = gc.call;
    /* Each piece down once gathered; all but the last may stay queued when
     * the destination is page-locked (the last one waits for them all). */
    for (ptrdiff_t k = 0; r == 0 && !c->stopped && k < pieces; k++) {
        ptrdiff_t start;
        pygpu_pair q = piece_of(p, k, pieces, &start);
        if ((r = note(c, pygpu_rt_stream_wait_event(c->s, ev[k]), "StreamWaitEvent")) != 0)
            break;
        done++;
        r = dense_to_host(c, &q, 0, dst + start * p->strides[0][0], (char *)t->dev + start * ds[0], itemsize, 0,
                          host_queue(h, k + 1 < pieces ? 1 : c->async));
    }
    /* Cut short (an error, a signal): c->s has not waited for every gather,
     * and they finish before their buffer goes back. */
    if (g && done < pieces) {
        pygpu_status w = pygpu_rt_stream_synchronize(g);
        if (r == 0)
            r = note(c, w, "StreamSynchronize");
    }
    for (ptrdiff_t k = 0; k <= pieces; k++)
        if (ev[k])
            (void)pygpu_rt_event_destroy(ev[k]);
    if (g)
        (void)pygpu_rt_stream_destroy(g);
    return temps_free(c, t, r);
}

/* What route_down learns of a view going down, past the first choices:
 * the gather's geometry, the bytes the view covers, whether PyGPU's kernels
 * run here (asked once, and only then: the first ask loads them). */
typedef struct {
    int known;
    geometry gd;                /* of the gather from the view into a dense buffer */
    ptrdiff_t lo, hi;           /* the bytes the view covers, from its start */
    int kernels;
} view_facts;

static void view_facts_of(ctx *c, const pygpu_pair *p, ptrdiff_t itemsize, view_facts *f)
{
    ptrdiff_t ds[PYGPU_MAXDIMS];
    pygpu_pair q;
    if (f->known)
        return;
    f->known = 1;
    dense_strides(p, itemsize, ds);
    pygpu_pair_init(&q, p->nd, p->shape, ds, p->strides[1]);
    pygpu_pair_simplify(&q, 1);
    f->gd = geometry_of(&q, itemsize);
    pygpu_shape_extent(p->nd, p->shape, p->strides[1], itemsize, &f->lo, &f->hi);
    f->kernels = kernels_usable(c);
}

/* The way down for device layout 1 of `p` into host layout 0, after
 * `after` (ROUTE_NONE: the first choice); *why says why. */
static enum route route_down(ctx *c, const pygpu_pair *p, const geometry *g, ptrdiff_t itemsize, host_side *h,
                             view_facts *f, enum route after, const char **why)
{
    if (pygpu_pair_is_dense(p, 1, itemsize)) {
        if (after < ROUTE_STAGED && host_stage(h))
            return *why = "dense on the device, pageable on the host", ROUTE_STAGED;
        return *why = "dense on the device", ROUTE_DMA;
    }
    if (after < ROUTE_RUNTIME && g->calls <= MAX_DIRECT_CALLS && g->width >= WIDE_ROW && !host_stage(h))
        return *why = "a few rows of 512 B or more, page-locked or small", ROUTE_RUNTIME;
    view_facts_of(c, p, itemsize, f);
    /* Gathered on the device into a dense buffer, then down in one piece:
     * only the view's own bytes cross the link.  PyGPU's kernel gathers any
     * rows at the device's speed; without it, the runtime moves rows of 64
     * B or more well. */
    if (after < ROUTE_GATHER && f->kernels)
        return *why = "PyGPU's kernels gather it", ROUTE_GATHER;
    if (after < ROUTE_GATHER && f->gd.calls <= MAX_DIRECT_CALLS &&
        (f->gd.width >= 64 || (size_t)(f->hi - f->lo) > 4 * h->nbytes))
        return *why = "a few runtime copies gather it (rows of 64 B or more, or a sparse view)", ROUTE_GATHER;
    if (after < ROUTE_GATHER_PIECES && f->gd.calls <= MAX_DIRECT_CALLS && f->gd.width >= NARROW_MIN &&
        h->nbytes >= GATHER_MIN_BYTES && !host_stage(h))
        return *why = "rows of 4 B or more, not staged", ROUTE_GATHER_PIECES;
    /* Narrow rows, not too sparse: the bytes the view covers come down in
     * windows through the pipeline while the workers gather each one. */
    if (after < ROUTE_STAGED_VIEW && h->nbytes >= h->min_bytes)
        return *why = "narrow rows, big enough to stage", ROUTE_STAGED_VIEW;
    return *why = "narrow rows, small", ROUTE_HOST_GATHER;
}

/* No room on the device for a route's buffer: the status is dropped (the
 * next route goes on) and the failed call forgotten. */
static void forget_failure(ctx *c, const char *call)
{
    (void)pygpu_rt_get_last_error();
    c->call = call;
}

/* Device layout 1 of `p` (at src) to host layout 0 (at dst). */
static pygpu_status d2h(ctx *c, const pygpu_pair *p, const geometry *g, char *dst, const char *src,
                        ptrdiff_t itemsize)
{
    temps t = {0};
    size_t nbytes = (size_t)(pair_size(p) * itemsize);
    host_side h = host_side_of(dst, nbytes);
    view_facts f = {0};
    pygpu_status r;
    int done = 0;
    const char *why, *call = c->call;
    for (enum route way = route_down(c, p, g, itemsize, &h, &f, ROUTE_NONE, &why);;
         way = route_down(c, p, g, itemsize, &h, &f, way, &why)) {
        trace_route(0, way, why, nbytes);
        switch (way) {
        case ROUTE_STAGED:
        case ROUTE_DMA:
            return dense_to_host(c, p, 0, dst, src, itemsize, way == ROUTE_STAGED, host_queue(&h, c->async));
        case ROUTE_RUNTIME:
            if ((r = runtime_copies(c, p, g, dst, src, PYGPU_COPY_D2H)) == 0 && !host_queue(&h, c->async))
                r = note(c, pygpu_rt_stream_synchronize(c->s), "StreamSynchronize");
            return r;
        case ROUTE_GATHER:
            if ((r = dev_temp(c, &t, nbytes)) == 0) {
                if ((r = device_pass(c, p, 1, (char *)src, t.dev, itemsize, 1)) == 0)
                    r = dense_to_host(c, p, 0, dst, t.dev, itemsize, host_stage(&h), host_queue(&h, c->async));
                return temps_free(c, &t, r);
            }
            if (!f.kernels)
                return r;
            forget_failure(c, call);        /* (the kernels' way has others after it) */
            break;
        case ROUTE_GATHER_PIECES:
            if (dev_temp(c, &t, nbytes) == 0)
                return gather_down(c, p, dst, src, itemsize, &t, &h);
            forget_failure(c, call);
            break;
        case ROUTE_STAGED_VIEW: {
            pygpu_host_layout hl = {dst, p->strides[0], p->nd, p->shape, itemsize};
            pygpu_staging_ctx sc = staging_ctx(c);
            r = staged_done(c, &sc, pygpu_staged_d2h_view(&sc, hl, src, p->strides[1], &done));
            if (r != 0 || done)
                return r;
            break;                  /* (the pipeline declined) */
        }
        case ROUTE_HOST_GATHER: {
            /* Down goes the covering extent in one copy; the host gathers. */
            pygpu_pair bytes;
            ptrdiff_t one = 1, ext = f.hi - f.lo;
            pygpu_pair_init(&bytes, 1, &ext, &one, &one);
            if ((r = host_temp(c, &t, (size_t)ext)) == 0) {
                host_side ht = host_side_of(t.host, (size_t)ext);
                if ((r = dense_to_host(c, &bytes, 0, t.host, src + f.lo, 1, host_stage(&ht), 0)) == 0)
                    pygpu_parallel_strided_copy(dst, p->strides[0], (char *)t.host - f.lo, p->strides[1], p->nd,
                                                p->shape, itemsize, 0, pair_size(p));
            }
            return temps_free(c, &t, r);
        }
        default:
            return note(c, PYGPU_RT_INVALID_VALUE, "route");
        }
    }
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
    if ((r = host_temp(c, &t, (size_t)(size * itemsize))) != 0)
        return r;
    pygpu_side mid = {t.host, strides, 0, -1};
    if ((r = plan(c, mid, src, nd, shape, itemsize)) == 0 &&
        (r = note(c, pygpu_rt_stream_synchronize(c->s), "StreamSynchronize")) == 0)
        r = plan(c, dst, mid, nd, shape, itemsize);
    return temps_free(c, &t, r);
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
    geometry g = geometry_of(&p, itemsize);
    if (!dst.on_device && !src.on_device) {
        pygpu_host_strided_copy(d, p.strides[0], s, p.strides[1], p.nd, p.shape, itemsize);
        return 0;
    }
    if (dst.on_device && src.on_device) {
        if (d2d_way(c, &g) == D2D_HOST)
            return d2d_via_host(c, dst, src, nd, shape, itemsize);
        return on_device(c, &p, d, s, itemsize);
    }
    return dst.on_device ? h2d(c, &p, &g, d, s, itemsize) : d2h(c, &p, &g, d, s, itemsize);
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
        (r = dev_temp(&sc, &stmp, n)) == 0 && (r = device_pass(&sc, &p, 1, from, stmp.dev, itemsize, 1)) == 0)
        from = stmp.dev;
    if (r == 0 && (r = note(&sc, pygpu_rt_event_create(&ready, PYGPU_EVENT_DISABLE_TIMING),
                            "EventCreateWithFlags")) == 0)
        r = note(&sc, pygpu_rt_event_record(ready, PYGPU_STREAM_NULL), "EventRecord");
    if (sc.call)
        c->call = sc.call;
    if (r == 0 && (r = use(c, ddev)) == 0)
        r = note(c, pygpu_rt_stream_wait_event(c->s, ready), "StreamWaitEvent");
    int dense_to = pygpu_pair_is_dense(&p, 0, itemsize);
    if (r == 0 && !dense_to && (r = dev_temp(c, &dtmp, n)) == 0)
        to = dtmp.dev;
    if (r == 0)
        r = pygpu_peer_usable(ddev, sdev)
                ? note(c, pygpu_rt_memcpy_peer_async(to, ddev, from, sdev, n, c->s), "MemcpyPeerAsync")
                : staged_cross(c, to, ddev, from, sdev, n);
    if (r == 0 && !dense_to)
        r = device_pass(c, &p, 0, dst.ptr + p.offset[0], dtmp.dev, itemsize, 0);
    /* Done (or failed part way): nothing queued may still read the temporaries. */
    pygpu_status w = pygpu_rt_set_device(ddev);
    if (w == 0)
        w = pygpu_rt_stream_synchronize(c->s);
    if (r == 0)
        r = note(c, w, "StreamSynchronize");
    if (ready)
        (void)pygpu_rt_event_destroy(ready);
    r = temps_free(c, &dtmp, r);
    if (stmp.dev) {
        (void)pygpu_rt_set_device(sdev);
        r = temps_free(&sc, &stmp, r);
        if (sc.call && !c->call)
            c->call = sc.call;
        (void)pygpu_rt_set_device(ddev);
    }
    return r;
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
    pygpu_trace_enter();
    if (dev >= 0 && pygpu_device_enter(st, dev, &prev) < 0)
        return -1;
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
    if (kernels_usable(&c)) {
        done = 1;
        /* The kernels read and write whole elements: a side that is not
         * aligned to them goes through a dense buffer of its own type. */
        if (!pygpu_dev_aligned(&p, 1, from, pygpu_dev_unit(stype)) &&
            (r = dev_temp(&c, &ts, (size_t)(n * ssize))) == 0 &&
            (r = device_pass(&c, &whole, 1, from, ts.dev, ssize, 1)) == 0) {
            dense_strides(&p, ssize, p.strides[1]);
            from = ts.dev;
        }
        if (r == 0 && !pygpu_dev_aligned(&p, 0, d, pygpu_dev_unit(dtype)) &&
            (r = dev_temp(&c, &td, (size_t)(n * dsize))) == 0) {
            dense_strides(&p, dsize, p.strides[0]);
            d = td.dev;
        }
        if (r == 0)
            r = note(&c, pygpu_dev_cast(&p, d, dtype, from, stype, s), "LaunchKernel");
        if (r == 0 && td.dev)
            r = device_pass(&c, &whole, 0, dst.ptr + whole.offset[0], td.dev, dsize, 0);
        r = temps_free(&c, &td, r);
        r = temps_free(&c, &ts, r);
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
    if ((r = dev_temp(c, &t, (size_t)(pair_size(p) * itemsize))) == 0 &&
        (r = note(c, pygpu_dev_fill(&q, t.dev, itemsize, value, c->s), "LaunchKernel")) == 0)
        r = device_pass(c, p, 0, dst, t.dev, itemsize, 0);
    return temps_free(c, &t, r);
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
    if ((r = dev_temp(c, &t, (size_t)(n * itemsize))) == 0 && (r = fill_dense(c, t.dev, n, itemsize, value)) == 0) {
        dense_strides(p, itemsize, ds);
        pygpu_side view = {dst, p->strides[0], 1, -1}, dense = {t.dev, ds, 1, -1};
        r = plan(c, view, dense, p->nd, p->shape, itemsize);
    }
    return temps_free(c, &t, r);
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
    else if (kernels_usable(&c))
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
