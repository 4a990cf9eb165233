/*
 * host_routes.c -- the copy planner's copies between host and device: for
 * each, route_up or route_down names the route (one DMA, the staging
 * pipeline, runtime copies of wide rows, a gather or scatter on the device,
 * a gather on the host) and why, in one place; cp_h2d and cp_d2h take it,
 * and the next when one declines (the pipeline busy, no room on the
 * device).  PYGPU_STAGING_TRACE=1 prints each route taken.  Called by the
 * plan (plan.c) with the GIL released.
 */
#include "host_routes.h"
#include "device_routes.h"
#include "devcopy.h"
#include "toolbox.h"
#include "../shape.h"
#include "../transfer/background.h"
#include "../transfer/background_down.h"
#include "../transfer/background_up.h"
#include "../transfer/bus.h"
#include "../transfer/hostcopy.h"
#include "../transfer/pinned_pool.h"
#include "../transfer/pipeline.h"
#include "../transfer/settings.h"
#include "../transfer/trace.h"
#include "../marks.h"
#include "../tuning.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the staging pipeline, from a copy's context --------------------------- */

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
    return (pygpu_staging_ctx){.stream = c->s, .interrupted = interrupted, .interrupt_arg = c, .queued = c->queued,
                               .queued_arg = c->queued_arg};
}

/* Fold a staged copy's outcome into the plan's context. */
static pygpu_status staged_done(ctx *c, const pygpu_staging_ctx *sc, pygpu_status r)
{
    if (sc->call && !c->call)
        c->call = sc->call;
    c->stopped |= sc->stopped;
    return r;
}

/* Run a staged copy between the dense device buffer `dev` and host layout
 * `which` of `p` at `host`; *done says whether the pipeline took it.  An
 * upload that is the plan's `last` step, of a copy waited for, waits for
 * the stream itself (pygpu_staging_ctx.wait_after) and says so (c->waited). */
static pygpu_status staged(ctx *c, int to_device, char *dev, char *host, const pygpu_pair *p, int which,
                           ptrdiff_t itemsize, int last, int *done)
{
    pygpu_host_layout h = {host, p->strides[which], p->nd, p->shape, itemsize};
    pygpu_staging_ctx sc = staging_ctx(c);
    sc.wait_after = to_device && last && c->then_wait;
    pygpu_status r = to_device ? pygpu_staged_h2d(&sc, dev, h, done) : pygpu_staged_d2h(&sc, h, dev, done);
    c->waited = sc.waited;
    if (!*done && pygpu_trace_is_on())
        fprintf(stderr, "pygpu route: %s: the staging pipeline declined (no lane: the pinned pool's limit, or an "
                "interrupt); one copy instead\n", to_device ? "up" : "down");
    return staged_done(c, &sc, r);
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

/* ---- the host side of a copy, asked once --------------------------------- */

/* The host memory of a copy between host and device: whether it is
 * page-locked is asked of the runtime once, and only when a decision needs
 * it (a small synchronous copy never asks: an 8-byte to_gpu pays nothing
 * for it). */
typedef struct {
    const void *ptr;            /* the lowest byte the copy touches, */
    size_t extent;              /* and from there to the highest */
    size_t nbytes;              /* the copy's bytes */
    size_t min_bytes;           /* the staging threshold (transfer_config) */
    int kind;                   /* 0 not asked, 1 page-locked, 2 pageable, 3 the runtime could not say */
} host_side;

/* The host side of `p` in layout `which`, its element [0, ...] at ptr. */
static host_side host_side_of(const char *ptr, const pygpu_pair *p, int which, ptrdiff_t itemsize)
{
    pygpu_transfer_config cfg;
    ptrdiff_t lo, hi;
    pygpu_transfer_config_get(&cfg);
    pygpu_shape_extent(p->nd, p->shape, p->strides[which], itemsize, &lo, &hi);
    return (host_side){ptr + lo, (size_t)(hi - lo), (size_t)(pair_size(p) * itemsize), cfg.min_bytes, 0};
}

static int host_kind(host_side *h)
{
    int pinned = 0;
    if (!h->kind)
        h->kind = pygpu_rt_host_is_pinned(h->ptr, h->extent, &pinned) != 0 ? 3 : pinned ? 1 : 2;
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
 * pipeline may decline (its buffers busy), and then the one copy goes. */
static pygpu_status host_to_dense(ctx *c, const pygpu_pair *p, int which, char *dev, const char *host,
                                  ptrdiff_t itemsize, int stage)
{
    temps t = {0};
    ptrdiff_t ds[PYGPU_MAXDIMS];
    size_t nbytes = (size_t)(pair_size(p) * itemsize);
    pygpu_status r;
    int done = 0;
    if (stage && ((r = staged(c, 1, dev, (char *)host, p, which, itemsize, 0, &done)) != 0 || done))
        return r;
    if (pygpu_pair_is_dense(p, which, itemsize) && !c->host_apart)
        return cp_dma(c, dev, host, nbytes, PYGPU_COPY_H2D);
    if ((r = cp_host_temp(c, &t, nbytes)) != 0)
        return r;
    dense_strides(p, itemsize, ds);
    pygpu_host_strided_copy(t.host, ds, host, p->strides[which], p->nd, p->shape, itemsize);
    r = cp_bus(c, dev, t.host, nbytes, PYGPU_COPY_H2D);
    return cp_temps_free(c, &t, r);
}

/* A small dense copy down into pageable memory, through a page-locked block
 * from the pool: the runtime's own way for pageable memory waits for the
 * copy before it returns, and then the stream is waited for again.  *done
 * = 0 if the copy is not for this way. */
static pygpu_status bounce_down(ctx *c, char *host, const char *dev, size_t n, int *done)
{
    void *b;
    *done = 0;
    if (n == 0 || n > PYGPU_BOUNCE_MAX || (b = pygpu_pinned_take(n, c->dev)) == NULL)
        return 0;
    *done = 1;
    pygpu_status r = cp_bus(c, b, dev, n, PYGPU_COPY_D2H);
    if (r == 0 && (r = blame(c, pygpu_rt_stream_synchronize(c->s), "StreamSynchronize")) == 0)
        memcpy(host, b, n);
    pygpu_pinned_give(b);
    return r;
}

/* The dense device buffer `dev` into host layout `which` of `p` at `host`
 * in one copy (through a host buffer if that layout is not dense): done
 * when this returns, unless `queue` (host_queue) allows leaving it queued. */
static pygpu_status one_copy_down(ctx *c, const pygpu_pair *p, int which, char *host, const char *dev,
                                  ptrdiff_t itemsize, int queue)
{
    temps t = {0};
    ptrdiff_t ds[PYGPU_MAXDIMS];
    size_t nbytes = (size_t)(pair_size(p) * itemsize);
    pygpu_status r;
    if (pygpu_pair_is_dense(p, which, itemsize) && !c->host_apart) {
        if ((r = cp_dma(c, host, dev, nbytes, PYGPU_COPY_D2H)) == 0 && !queue)
            r = blame(c, pygpu_rt_stream_synchronize(c->s), "StreamSynchronize");
        return r;
    }
    dense_strides(p, itemsize, ds);
    if ((r = cp_host_temp(c, &t, nbytes)) == 0 &&
        (r = cp_bus(c, t.host, dev, nbytes, PYGPU_COPY_D2H)) == 0 &&
        (r = blame(c, pygpu_rt_stream_synchronize(c->s), "StreamSynchronize")) == 0)
        pygpu_host_strided_copy(host, p->strides[which], t.host, ds, p->nd, p->shape, itemsize);
    return cp_temps_free(c, &t, r);
}

/* The dense device buffer `dev` into host layout `which` of `p` at `host`,
 * as a step of a route (a gather's result going down): staged when `stage`
 * (as host_to_dense), else through a page-locked block when small, dense
 * and waited for (bounce_down), else in one copy; done when this returns,
 * unless `queue` (host_queue) allows leaving it queued. */
static pygpu_status dense_to_host(ctx *c, const pygpu_pair *p, int which, char *host, const char *dev,
                                  ptrdiff_t itemsize, int stage, int queue)
{
    size_t nbytes = (size_t)(pair_size(p) * itemsize);
    pygpu_status r;
    int done = 0;
    if (stage && ((r = staged(c, 0, (char *)dev, host, p, which, itemsize, 0, &done)) != 0 || done))
        return r;
    if (pygpu_pair_is_dense(p, which, itemsize) && !queue &&
        ((r = bounce_down(c, host, dev, nbytes, &done)) != 0 || done))
        return r;
    return one_copy_down(c, p, which, host, dev, itemsize, queue);
}

/* Narrow rows (PYGPU_NARROW_MIN to PYGPU_NARROW_LIMIT bytes, not
 * included) going up from pageable memory go up dense and are scattered
 * on the device slab by slab (PYGPU_SCATTER_MIN bytes a call, but the
 * last), on a stream of their own, as the staged upload queues their DMA:
 * the device scatters them about as fast as they come up, so one after
 * the other took twice as long as either.  Wide rows scatter many times
 * faster than they come up, and wait for the whole upload
 * (docs/performance.md#scatter-up). */
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
    if ((r = blame(c, pygpu_rt_event_record(sc->ev, c->s), "EventRecord")) == 0 &&
        (r = blame(c, pygpu_rt_stream_wait_event(sc->gc.s, sc->ev), "StreamWaitEvent")) == 0)
        r = cp_device_pass(&sc->gc, &q, 0, sc->view + sc->done * sc->p->strides[0][0], sc->dense + sc->done * sc->slab,
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
    if (to < sc->p->shape[0] && (size_t)((to - sc->done) * sc->slab) < PYGPU_SCATTER_MIN)
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
    if ((r = blame(c, pygpu_rt_stream_create(&sc.gc.s, PYGPU_STREAM_NON_BLOCKING, 0), "StreamCreateWithFlags")) == 0 &&
        (r = blame(c, pygpu_rt_event_create(&sc.ev, PYGPU_EVENT_DISABLE_TIMING), "EventCreateWithFlags")) == 0) {
        c->queued = scatter_queued;
        c->queued_arg = &sc;
        r = host_to_dense(c, p, 1, t->dev, src, itemsize, 1);      /* (its route: staged) */
        c->queued = NULL;
        c->queued_arg = NULL;
        if (r == 0 && !c->stopped)
            r = scatter_to(&sc, p->shape[0]);       /* the rest (all of it if the upload was not staged) */
        /* c->s goes on once the scatter is done (the buffer goes back after it). */
        if (r == 0 && (r = blame(c, pygpu_rt_event_record(sc.ev, sc.gc.s), "EventRecord")) == 0)
            r = blame(c, pygpu_rt_stream_wait_event(c->s, sc.ev), "StreamWaitEvent");
        if (r != 0)
            (void)pygpu_rt_stream_synchronize(sc.gc.s);
    }
    if (sc.ev)
        (void)pygpu_rt_event_destroy(sc.ev);
    if (sc.gc.s)
        (void)pygpu_rt_stream_destroy(sc.gc.s);
    return cp_temps_free(c, t, r);
}

/* ---- the route: how a copy between host and device goes ------------------ */

/* The ways a copy between host and device can go, in the order they are
 * tried; route_up and route_down choose, each the one place for its
 * direction.  A route that finds no room for its device buffer, or a
 * staging pipeline that declines (another thread's transfer has it), falls
 * to the next that fits. */
enum route {
    ROUTE_NONE,
    ROUTE_LAUNCH,           /* up: a few bytes of pageable memory, waited for: in a kernel's arguments */
    ROUTE_BACKGROUND,       /* asynchronous: the device side dense, the host's pageable: in the background */
    ROUTE_STAGED,           /* the device side dense, the host's pageable: the staging pipeline */
    ROUTE_BOUNCE,           /* down: both sides dense, small, waited for: through a page-locked block */
    ROUTE_DMA,              /* the device side dense: one DMA (the host gathering or scattering) */
    ROUTE_RUNTIME,          /* a few wide rows straight between the layouts (cp_runtime_copies) */
    ROUTE_STAGED_ROWS,      /* up: rows at a pitch, staged straight into them by 2-D DMA */
    ROUTE_SCATTER_AS_UP,    /* up: dense into a device buffer, scattered slab by slab as it arrives */
    ROUTE_SCATTER,          /* up: dense into a device buffer, then scattered on the device */
    ROUTE_GATHER,           /* down: gathered on the device whole, then down dense */
    ROUTE_GATHER_PIECES,    /* down: gathered on the device in pieces, each going down once gathered */
    ROUTE_STAGED_VIEW,      /* down: the bytes the view covers through the pipeline, the workers gather */
    ROUTE_HOST_GATHER,      /* down: the bytes the view covers in one DMA, the host gathers */
};

static const char *const route_names[] = {
    "none", "with a launch", "in the background", "staged", "through a page-locked block", "one DMA", "runtime copies",
    "staged rows", "scattered as it arrives", "scattered", "gathered on the device", "gathered on the device in pieces",
    "staged view", "gathered on the host",
};

/* With PYGPU_STAGING_TRACE=1, each route taken and why, on stderr. */
static void trace_route(int up, enum route r, const char *why, size_t nbytes)
{
    cp_trace_route(up ? "up" : "down", nbytes, route_names[r], why);
}

/* Whether the background took a copy (`done`), and with it the owner's
 * reference; if not, the trace says so (no cached page-locked block of
 * its size, one is being made for the next) and the next way goes. */
static int background_took(ctx *c, int up, int done)
{
    if (done)
        c->owner_taken = 1;
    else if (pygpu_trace_is_on())
        fprintf(stderr, "pygpu route: %s: not in the background (no cached page-locked block of its size: one is "
                "being made for the next); the next way instead\n", up ? "up" : "down");
    return done;
}

/* Bytes that fit the fill kernel's element: 1, 2, 4, 8 or 16. */
static int launch_size(size_t n) { return n > 0 && n <= PYGPU_LAUNCH_MAX && !(n & (n - 1)); }

/* A few bytes of pageable memory up, waited for, in a kernel's arguments:
 * the fill kernel writes them as one element.  The launch has read the
 * host's bytes when it returns, so there is no DMA to wait for; the stream
 * has them, as after a fill, or after the runtime's own copy of pageable
 * memory, which returns once it has staged the bytes, before its DMA
 * (docs/performance.md#small-uploads-by-launch).  Page-locked memory keeps
 * its DMA, waited for, as the runtime's copy of it is.  Only synchronous
 * copies into memory of a known device come here (c->may_launch): under a
 * capture the graph would keep the bytes of the capture's time, and a bare
 * address may be another device's.  *done = 0 if the bytes are not for
 * this way: the device side not aligned to their size (1, 2, 4, 8 or 16:
 * launch_size), or no kernels here. */
static pygpu_status launch_up(ctx *c, char *dev, const char *host, size_t n, int *done)
{
    static const ptrdiff_t one = 1;
    const ptrdiff_t stride = (ptrdiff_t)n;
    pygpu_pair p;
    *done = 0;
    if (((uintptr_t)dev & (n - 1)) != 0 || pygpu_rt_kernels_ready() != 0)
        return 0;
    pygpu_pair_init(&p, 1, &one, &stride, &stride);
    *done = c->launched = 1;
    return blame(c, pygpu_dev_fill(&p, dev, (ptrdiff_t)n, host, c->s), "LaunchKernel");
}

/* The way up for host layout 1 of `p` into device layout 0, after `after`
 * (ROUTE_NONE: the first choice); *why says why. */
static enum route route_up(ctx *c, const pygpu_pair *p, const geometry *g, ptrdiff_t itemsize, host_side *h,
                           enum route after, const char **why)
{
    int stage = host_stage(h);
    if (pygpu_pair_is_dense(p, 0, itemsize)) {
        if (after < ROUTE_LAUNCH && c->may_launch && launch_size(h->nbytes) && pygpu_pair_is_dense(p, 1, itemsize) &&
            host_kind(h) == 2)
            return *why = "a few bytes of pageable memory, dense on both sides, waited for", ROUTE_LAUNCH;
        if (after < ROUTE_BACKGROUND && stage && c->owner && h->nbytes >= PYGPU_BG_MIN)   /* (owner: async up) */
            return *why = "asynchronous, dense on the device, pageable on the host", ROUTE_BACKGROUND;
        if (after < ROUTE_STAGED && stage)
            return *why = "dense on the device, pageable on the host", ROUTE_STAGED;
        return *why = "dense on the device", ROUTE_DMA;
    }
    /* A few wide rows straight between the layouts, unless the host side
     * is pageable: then the pipeline is faster. */
    if (after < ROUTE_RUNTIME && g->calls <= PYGPU_DIRECT_CALLS_MAX && g->width >= PYGPU_DIRECT_ROW_MIN && !stage)
        return *why = "a few rows of 512 B or more, page-locked or small", ROUTE_RUNTIME;
    /* Rows (or single elements) at a pitch: staged straight into them by
     * 2-D copies, no device-side pass. */
    if (after < ROUTE_STAGED_ROWS && stage && g->calls == 1 && g->hax == 0)
        return *why = "rows at one pitch, pageable", ROUTE_STAGED_ROWS;
    if (after < ROUTE_SCATTER_AS_UP && stage && g->width >= PYGPU_NARROW_MIN && g->width < PYGPU_NARROW_LIMIT)
        return *why = "rows of 4 to 63 B, pageable", ROUTE_SCATTER_AS_UP;
    return *why = "any other layout", ROUTE_SCATTER;
}

/* Host layout 1 of `p` (at src) to device layout 0 (at dst). */
pygpu_status cp_h2d(ctx *c, const pygpu_pair *p, const geometry *g, char *dst, const char *src,
                        ptrdiff_t itemsize)
{
    temps t = {0};
    size_t nbytes = (size_t)(pair_size(p) * itemsize);
    host_side h = host_side_of(src, p, 1, itemsize);
    pygpu_status r;
    int done = 0;
    const char *why;
    for (enum route way = route_up(c, p, g, itemsize, &h, ROUTE_NONE, &why);;
         way = route_up(c, p, g, itemsize, &h, way, &why)) {
        trace_route(1, way, why, nbytes);
        switch (way) {
        case ROUTE_LAUNCH:
            if ((r = launch_up(c, dst, src, nbytes, &done)) != 0 || done)
                return r;
            break;                  /* (not aligned to their size, or no kernels) */
        case ROUTE_BACKGROUND:
            r = pygpu_bg_upload(dst, src, p->strides[1], p->nd, p->shape, itemsize, c->s, c->owner, &done);
            if (background_took(c, 1, done))
                return blame(c, r, "LaunchHostFunc");
            break;
        case ROUTE_STAGED:
            pygpu_mark(5);
            if ((r = staged(c, 1, dst, (char *)src, p, 1, itemsize, 1, &done)) != 0 || done)
                return r;
            break;                  /* (the pipeline declined) */
        case ROUTE_DMA:
            return host_to_dense(c, p, 1, dst, src, itemsize, 0);
        case ROUTE_RUNTIME:
            return cp_runtime_copies(c, p, g, dst, src, PYGPU_COPY_H2D);
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
            if ((r = cp_dev_temp(c, &t, nbytes)) != 0)
                return r;
            if (way == ROUTE_SCATTER_AS_UP)
                return scatter_up(c, p, dst, src, itemsize, &t);
            if ((r = host_to_dense(c, p, 1, t.dev, src, itemsize, host_stage(&h))) == 0)
                r = cp_device_pass(c, p, 0, dst, t.dev, itemsize, 0);
            return cp_temps_free(c, &t, r);
        default:
            return blame(c, PYGPU_RT_INVALID_VALUE, "route");
        }
    }
}

/* Narrow rows going down into page-locked memory (get()'s new arrays) are
 * gathered on the device by 2-D copies, in pieces on a stream of their
 * own, and each piece goes down on c->s as soon as it is gathered: the two
 * run on different copy engines, and only the view's own bytes cross the
 * link.  Into pageable memory, each piece staged, this way lost, so there
 * the host gathers; and rows narrower than PYGPU_NARROW_MIN stay with the
 * host, which gathers them faster than the device
 * (docs/performance.md#gather-down, docs/performance.md#narrow-rows). */
static pygpu_status gather_down(ctx *c, const pygpu_pair *p, char *dst, const char *src, ptrdiff_t itemsize,
                                temps *t, host_side *h)
{
    ptrdiff_t ds[PYGPU_MAXDIMS], done = 0;
    size_t nbytes = (size_t)(pair_size(p) * itemsize);
    /* A piece per PYGPU_GATHER_PIECE_MIN up to PYGPU_GATHER_FEW, then up to
     * PYGPU_GATHER_PIECES of PYGPU_GATHER_PIECE or more: each piece costs a
     * few microseconds, and the last one's copy down is not overlapped
     * (docs/performance.md#gather-down). */
    ptrdiff_t few = (ptrdiff_t)(nbytes / PYGPU_GATHER_PIECE_MIN);
    ptrdiff_t pieces = few < PYGPU_GATHER_FEW ? few : PYGPU_GATHER_FEW;
    pygpu_event_t ev[PYGPU_GATHER_PIECES + 1] = {0};
    pygpu_stream_t g = NULL;
    ctx gc = *c;
    pygpu_status r;
    if ((ptrdiff_t)(nbytes / PYGPU_GATHER_PIECE) > pieces)
        pieces = (ptrdiff_t)(nbytes / PYGPU_GATHER_PIECE);
    if (pieces > PYGPU_GATHER_PIECES)
        pieces = PYGPU_GATHER_PIECES;
    if (pieces > p->shape[0])
        pieces = p->shape[0];
    if (pieces < 1)
        pieces = 1;
    dense_strides(p, itemsize, ds);
    /* (into t->dev, made on c->s) The gathers wait for the work queued
     * before them there. */
    if ((r = blame(c, pygpu_rt_stream_create(&g, PYGPU_STREAM_NON_BLOCKING, 0), "StreamCreateWithFlags")) == 0) {
        for (ptrdiff_t k = 0; r == 0 && k <= pieces; k++)
            r = blame(c, pygpu_rt_event_create(&ev[k], PYGPU_EVENT_DISABLE_TIMING), "EventCreateWithFlags");
    }
    if (r == 0 && (r = blame(c, pygpu_rt_event_record(ev[pieces], c->s), "EventRecord")) == 0)
        r = blame(c, pygpu_rt_stream_wait_event(g, ev[pieces]), "StreamWaitEvent");
    gc.s = g;
    gc.call = NULL;
    for (ptrdiff_t k = 0; r == 0 && k < pieces; k++) {
        ptrdiff_t start;
        pygpu_pair q = piece_of(p, k, pieces, &start);
        if ((r = cp_device_pass(&gc, &q, 1, (char *)src + start * p->strides[1][0], (char *)t->dev + start * ds[0],
                             itemsize, 1)) == 0)
            r = blame(&gc, pygpu_rt_event_record(ev[k], g), "EventRecord");
    }
    if (gc.call && !c->call)
        c->call = gc.call;
    /* Each piece down once gathered; all but the last may stay queued when
     * the destination is page-locked (the last one waits for them all). */
    for (ptrdiff_t k = 0; r == 0 && !c->stopped && k < pieces; k++) {
        ptrdiff_t start;
        pygpu_pair q = piece_of(p, k, pieces, &start);
        if ((r = blame(c, pygpu_rt_stream_wait_event(c->s, ev[k]), "StreamWaitEvent")) != 0)
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
            r = blame(c, w, "StreamSynchronize");
    }
    for (ptrdiff_t k = 0; k <= pieces; k++)
        if (ev[k])
            (void)pygpu_rt_event_destroy(ev[k]);
    if (g)
        (void)pygpu_rt_stream_destroy(g);
    return cp_temps_free(c, t, r);
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
    f->gd = cp_geometry_of(&q, itemsize);
    pygpu_shape_extent(p->nd, p->shape, p->strides[1], itemsize, &f->lo, &f->hi);
    f->kernels = cp_kernels_usable(c);
}

/* The way down for device layout 1 of `p` into host layout 0, after
 * `after` (ROUTE_NONE: the first choice); *why says why. */
static enum route route_down(ctx *c, const pygpu_pair *p, const geometry *g, ptrdiff_t itemsize, host_side *h,
                             view_facts *f, enum route after, const char **why)
{
    if (pygpu_pair_is_dense(p, 1, itemsize)) {
        if (after < ROUTE_BACKGROUND && host_stage(h) && c->owner && h->nbytes >= PYGPU_BG_MIN)  /* (async down) */
            return *why = "asynchronous, dense on the device, pageable on the host", ROUTE_BACKGROUND;
        if (after < ROUTE_STAGED && host_stage(h))
            return *why = "dense on the device, pageable on the host", ROUTE_STAGED;
        /* Small, dense on both sides and waited for: through a page-locked
         * block from the pool (bounce_down). */
        if (after < ROUTE_BOUNCE && pygpu_pair_is_dense(p, 0, itemsize) && !host_queue(h, c->async) &&
            h->nbytes <= PYGPU_BOUNCE_MAX)
            return *why = "dense on both sides, small, waited for", ROUTE_BOUNCE;
        return *why = "dense on the device", ROUTE_DMA;
    }
    if (after < ROUTE_RUNTIME && g->calls <= PYGPU_DIRECT_CALLS_MAX && g->width >= PYGPU_DIRECT_ROW_MIN &&
        !host_stage(h))
        return *why = "a few rows of 512 B or more, page-locked or small", ROUTE_RUNTIME;
    view_facts_of(c, p, itemsize, f);
    /* Gathered on the device into a dense buffer, then down in one piece:
     * only the view's own bytes cross the link.  PyGPU's kernel gathers any
     * rows at the device's speed; without it, the runtime moves rows of
     * PYGPU_NARROW_LIMIT bytes or more well. */
    if (after < ROUTE_GATHER && f->kernels)
        return *why = "PyGPU's kernels gather it", ROUTE_GATHER;
    if (after < ROUTE_GATHER && f->gd.calls <= PYGPU_DIRECT_CALLS_MAX &&
        (f->gd.width >= PYGPU_NARROW_LIMIT || (size_t)(f->hi - f->lo) > PYGPU_SPARSE_RATIO * h->nbytes))
        return *why = "a few runtime copies gather it (rows of 64 B or more, or a sparse view)", ROUTE_GATHER;
    if (after < ROUTE_GATHER_PIECES && f->gd.calls <= PYGPU_DIRECT_CALLS_MAX && f->gd.width >= PYGPU_NARROW_MIN &&
        h->nbytes >= PYGPU_GATHER_MIN && !host_stage(h))
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
pygpu_status cp_d2h(ctx *c, const pygpu_pair *p, const geometry *g, char *dst, const char *src,
                        ptrdiff_t itemsize)
{
    temps t = {0};
    size_t nbytes = (size_t)(pair_size(p) * itemsize);
    host_side h = host_side_of(dst, p, 0, itemsize);
    view_facts f = {0};
    pygpu_status r;
    int done = 0;
    const char *why, *call = c->call;
    for (enum route way = route_down(c, p, g, itemsize, &h, &f, ROUTE_NONE, &why);;
         way = route_down(c, p, g, itemsize, &h, &f, way, &why)) {
        trace_route(0, way, why, nbytes);
        switch (way) {
        case ROUTE_BACKGROUND:
            r = pygpu_bg_download(dst, p->strides[0], p->nd, p->shape, itemsize, src, c->s, c->owner, &done);
            if (background_took(c, 0, done))
                return blame(c, r, "LaunchHostFunc");
            break;
        case ROUTE_STAGED:
            pygpu_mark(5);
            if ((r = staged(c, 0, (char *)src, dst, p, 0, itemsize, 0, &done)) != 0 || done)
                return r;
            break;                  /* (the pipeline declined) */
        case ROUTE_BOUNCE:
            if ((r = bounce_down(c, dst, src, nbytes, &done)) != 0 || done)
                return r;
            break;                  /* (no page-locked block to be had) */
        case ROUTE_DMA:
            return one_copy_down(c, p, 0, dst, src, itemsize, host_queue(&h, c->async));
        case ROUTE_RUNTIME:
            if ((r = cp_runtime_copies(c, p, g, dst, src, PYGPU_COPY_D2H)) == 0 && !host_queue(&h, c->async))
                r = blame(c, pygpu_rt_stream_synchronize(c->s), "StreamSynchronize");
            return r;
        case ROUTE_GATHER:
            if ((r = cp_dev_temp(c, &t, nbytes)) == 0) {
                if ((r = cp_device_pass(c, p, 1, (char *)src, t.dev, itemsize, 1)) == 0)
                    r = dense_to_host(c, p, 0, dst, t.dev, itemsize, host_stage(&h), host_queue(&h, c->async));
                return cp_temps_free(c, &t, r);
            }
            if (!f.kernels)
                return r;
            forget_failure(c, call);        /* (the kernels' way has others after it) */
            break;
        case ROUTE_GATHER_PIECES:
            if (cp_dev_temp(c, &t, nbytes) == 0)
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
            if ((r = cp_host_temp(c, &t, (size_t)ext)) == 0) {
                host_side ht = host_side_of(t.host, &bytes, 0, 1);
                if ((r = dense_to_host(c, &bytes, 0, t.host, src + f.lo, 1, host_stage(&ht), 0)) == 0)
                    pygpu_parallel_strided_copy(dst, p->strides[0], (char *)t.host - f.lo, p->strides[1], p->nd,
                                                p->shape, itemsize, 0, pair_size(p));
            }
            return cp_temps_free(c, &t, r);
        }
        default:
            return blame(c, PYGPU_RT_INVALID_VALUE, "route");
        }
    }
}
