/*
 * cross.c -- the pipeline between two devices that cannot reach each
 * other: dense bytes through page-locked buffers from the pinned pool, the
 * legs down from one device and up to the other overlapping; see cross.h.
 */
#include "cross.h"
#include "events.h"
#include "pinned_pool.h"
#include "settings.h"
#include "../tuning.h"

/* The failing call is named once, by the first failure. */
static pygpu_status blame(pygpu_staging_ctx *c, pygpu_status r, const char *call)
{
    if (r != 0 && !c->call)
        c->call = call;
    return r;
}

/* Make `dev` current (the pipeline's two sides take turns). */
static pygpu_status use(pygpu_staging_ctx *c, int dev)
{
    return blame(c, pygpu_rt_set_device(dev), "SetDevice");
}

pygpu_status pygpu_staged_cross(pygpu_staging_ctx *c, char *dst, int ddev, const char *src, int sdev, size_t n,
                                int *staged)
{
    pygpu_transfer_config cfg;
    pygpu_transfer_config_get(&cfg);
    /* Chunks of a PYGPU_CROSS_PARTS-th of the copy (PYGPU_CROSS_CHUNK_MIN
     * at least) keep both legs busy from the start, up to the pipeline's
     * chunk size (docs/performance.md#between-devices). */
    size_t chunk = n / PYGPU_CROSS_PARTS < PYGPU_CROSS_CHUNK_MIN ? PYGPU_CROSS_CHUNK_MIN : n / PYGPU_CROSS_PARTS;
    if (chunk > cfg.chunk)
        chunk = cfg.chunk;
    if (chunk > n)
        chunk = n;
    int nbuf = 0, want = (int)((n + chunk - 1) / chunk);
    void *buf[PYGPU_MAX_DEPTH];
    pygpu_event_t down[PYGPU_MAX_DEPTH] = {0}, up[PYGPU_MAX_DEPTH] = {0};
    pygpu_status r = 0;
    if (want > cfg.depth)
        want = cfg.depth;
    if (want > PYGPU_MAX_DEPTH)
        want = PYGPU_MAX_DEPTH;
    *staged = 0;
    /* (on the destination's NUMA node: its DMA reads them, and a read
     * waits for the distance where a write is posted) */
    while (nbuf < want && (buf[nbuf] = pygpu_pinned_take(chunk, ddev)) != NULL)
        nbuf++;
    if (nbuf == 0)      /* the pool is at its limit: the caller goes another way */
        return 0;
    *staged = 1;
    for (int k = 0; r == 0 && k < nbuf; k++) {
        if ((r = use(c, sdev)) == 0)
            r = blame(c, pygpu_event_take(sdev, &down[k]), "EventCreateWithFlags");
        if (r == 0 && (r = use(c, ddev)) == 0)
            r = blame(c, pygpu_event_take(ddev, &up[k]), "EventCreateWithFlags");
    }
    for (size_t off = 0, i = 0; r == 0 && off < n; off += chunk, i++) {
        int k = (int)(i % (size_t)nbuf);
        size_t len = n - off < chunk ? n - off : chunk;
        if ((r = use(c, sdev)) != 0 ||
            (i >= (size_t)nbuf && (r = blame(c, pygpu_rt_stream_wait_event(PYGPU_STREAM_NULL, up[k]),
                                            "StreamWaitEvent")) != 0) ||
            (r = blame(c, pygpu_rt_memcpy_async(buf[k], src + off, len, PYGPU_COPY_D2H, PYGPU_STREAM_NULL),
                      "MemcpyAsync")) != 0 ||
            (r = blame(c, pygpu_rt_event_record(down[k], PYGPU_STREAM_NULL), "EventRecord")) != 0 ||
            (r = use(c, ddev)) != 0 ||
            (r = blame(c, pygpu_rt_stream_wait_event(c->stream, down[k]), "StreamWaitEvent")) != 0 ||
            (r = blame(c, pygpu_rt_memcpy_async(dst + off, buf[k], len, PYGPU_COPY_H2D, c->stream),
                      "MemcpyAsync")) != 0)
            break;
        r = blame(c, pygpu_rt_event_record(up[k], c->stream), "EventRecord");
    }
    /* The buffers go back once both sides are past them. */
    pygpu_status w = pygpu_rt_set_device(sdev);
    if (w == 0)
        w = pygpu_rt_stream_synchronize(PYGPU_STREAM_NULL);
    if (w == 0 && (w = pygpu_rt_set_device(ddev)) == 0)
        w = pygpu_rt_stream_synchronize(c->stream);
    if (r == 0)
        r = blame(c, w, "StreamSynchronize");
    for (int k = 0; k < nbuf; k++) {
        pygpu_pinned_give(buf[k]);
        pygpu_event_give(sdev, down[k]);    /* (both streams were waited for above) */
        pygpu_event_give(ddev, up[k]);
    }
    return r;
}
