/*
 * toolbox.c -- the copy planner's tools (see toolbox.h): runtime copies
 * straight between two layouts, whether PyGPU's kernels run here, and the
 * temporary buffers of a plan.  Every floor of the wing above uses them;
 * they call nothing in the wing.
 */
#include "toolbox.h"
#include "../transfer/bus.h"
#include "../transfer/pinned_pool.h"
#include "../transfer/settings.h"
#include "../tuning.h"

#include <stdlib.h>

/* ---- one dense copy between host and device ------------------------------- */

pygpu_status cp_dma(ctx *c, void *dst, const void *src, size_t n, enum pygpu_copy_kind kind)
{
    int pinned = 0;
    /* Pieces only of page-locked memory, all of it: a piece of pageable
     * memory could begin in pages another copy's buffer has page-locked in
     * place and run past them, which the runtime refuses (the whole copy,
     * begun before them, is pageable memory to it). */
    if (!c->async && n >= PYGPU_DMA_PIECES_FROM &&
        pygpu_rt_host_is_pinned(kind == PYGPU_COPY_H2D ? src : dst, n, &pinned) != 0)
        (void)pygpu_rt_get_last_error();
    if (!pinned)
        return cp_bus(c, dst, src, n, kind);
    /* One DMA of 1 GiB from memory page-locked in place held a 1 MiB
     * to_gpu beside it for 19.5 ms, 370 times its time alone
     * (docs/performance.md#dma-pieces).  The pieces go on a non-blocking
     * stream of their own, after what c->s holds, and are waited for here:
     * on c->s itself a blocking stream's pieces held every copy another
     * thread queued on the legacy stream meanwhile, and the next piece
     * waited for that copy (the runtime orders those two kinds of stream
     * so).  No thread can tell the difference: the copy is synchronous,
     * and work queued elsewhere while it runs is not ordered with it. */
    pygpu_event_t ev[PYGPU_DMA_QUEUED] = {0}, after = NULL;
    pygpu_stream_t own = NULL;
    pygpu_status r = blame(c, pygpu_rt_stream_create(&own, PYGPU_STREAM_NON_BLOCKING, 0), "StreamCreateWithFlags");
    if (r == 0)
        r = blame(c, pygpu_rt_event_create(&after, PYGPU_EVENT_DISABLE_TIMING), "EventCreateWithFlags");
    if (r == 0 && (r = blame(c, pygpu_rt_event_record(after, c->s), "EventRecord")) == 0)
        r = blame(c, pygpu_rt_stream_wait_event(own, after), "StreamWaitEvent");
    size_t i = 0;
    for (size_t off = 0; r == 0 && off < n; off += PYGPU_DMA_PIECE, i++) {
        int k = (int)(i % PYGPU_DMA_QUEUED);
        size_t len = n - off < PYGPU_DMA_PIECE ? n - off : PYGPU_DMA_PIECE;
        r = ev[k] ? blame(c, pygpu_rt_event_synchronize(ev[k]), "EventSynchronize")
                  : blame(c, pygpu_rt_event_create(&ev[k], PYGPU_EVENT_DISABLE_TIMING), "EventCreateWithFlags");
        if (r == 0)
            r = blame(c, pygpu_rt_memcpy_async((char *)dst + off, (const char *)src + off, len, kind, own),
                      "MemcpyAsync");
        if (r == 0)
            r = blame(c, pygpu_rt_event_record(ev[k], own), "EventRecord");
    }
    /* Waited for, failed or not: the pieces queued may still be reading
     * (writing) the host memory, which the caller may let go once this
     * returns, and the stream goes. */
    if (own) {
        pygpu_status w = pygpu_rt_stream_synchronize(own);
        if (r == 0)
            r = blame(c, w, "StreamSynchronize");
        else if (w != 0)
            (void)pygpu_rt_get_last_error();
        (void)pygpu_rt_stream_destroy(own);
    }
    for (int k = 0; k < PYGPU_DMA_QUEUED; k++)
        if (ev[k])
            (void)pygpu_rt_event_destroy(ev[k]);
    if (after)
        (void)pygpu_rt_event_destroy(after);
    return r;
}

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
            r = blame(c, pygpu_rt_memcpy2d_async(dst, (size_t)p->strides[0][g->hax], src,
                                                (size_t)p->strides[1][g->hax], (size_t)g->width,
                                                height, kind, c->s), "Memcpy2DAsync");
        else
            r = blame(c, pygpu_rt_memcpy_async(dst, src, (size_t)g->width, kind, c->s), "MemcpyAsync");
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

/* ---- PyGPU's kernels ------------------------------------------------------ */

/* 1 if PyGPU's kernels can run on the current device; else the reason is
 * kept for the warning pygpu_copy gives. */
int cp_kernels_usable(ctx *c)
{
    pygpu_status k = pygpu_rt_kernels_ready();
    if (k != 0 && !c->kernels)
        c->kernels = k;
    return k == 0;
}

/* ---- temporary buffers ---------------------------------------------------- */

pygpu_status cp_temps_free(ctx *c, temps *t, pygpu_status r)
{
    if (t->host_pinned) {
        /* DMA from page-locked memory is truly asynchronous: the buffer goes
         * back to the pool only once the stream is past it. */
        pygpu_status w = pygpu_rt_stream_synchronize(c->s);
        if (r == 0)
            r = blame(c, w, "StreamSynchronize");
        pygpu_pinned_give(t->host);
    } else
        free(t->host);
    t->host = NULL;
    if (t->dev) {
        pygpu_status f = t->dev_pooled ? pygpu_rt_free_async(t->dev, c->s) : pygpu_rt_free(t->dev);
        if (r == 0)
            r = blame(c, f, "FreeAsync");
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
    if (n >= cfg.min_bytes && (t->host = pygpu_pinned_take(n, c->dev)) != NULL) {
        t->host_pinned = 1;
        return 0;
    }
    t->host = malloc(n ? n : 1);
    return t->host ? 0 : blame(c, PYGPU_RT_OUT_OF_MEMORY, "malloc");
}

pygpu_status cp_dev_temp(ctx *c, temps *t, size_t n)
{
    return blame(c, pygpu_rt_malloc_async(&t->dev, n, c->s, &t->dev_pooled), "MallocAsync");
}
