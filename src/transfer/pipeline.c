/*
 * pipeline.c -- the staging pipelines; see pipeline.h.
 *
 * The runtimes copy pageable memory through small driver buffers, at a
 * fraction of the link's speed; page-locked memory moves at the link's
 * speed (docs/performance.md#the-runtimes-batched-copy).  A transfer is cut
 * into chunks that pass through a few page-locked staging buffers (from
 * the pinned pool): the host copy of one chunk, split across the workers,
 * overlaps the DMA of the others.  Strided host layouts are gathered (or
 * scattered) chunk by chunk, never through a full temporary copy.  Each
 * transfer in flight has a lane of staging buffers of its own, on its
 * device; the workers serve every transfer's chunks in turn.
 */
#include "pipeline.h"
#include "background.h"
#include "bus.h"
#include "hostcopy.h"
#include "lanes.h"
#include "pinned_pool.h"
#include "settings.h"
#include "trace.h"
#include "../marks.h"
#include "workers.h"
#include "../fork.h"
#include "../shape.h"
#include "../tuning.h"

#include <stdint.h>
#include <string.h>

/* ---- the lane a transfer has ---------------------------------------------- */

typedef pygpu_lane lane;

/* Wait until buffer b is free (its last DMA done). */
static pygpu_status buffer_free(pygpu_staging_ctx *c, int b)
{
    if (!c->lane->recorded[b])
        return 0;
    c->lane->recorded[b] = 0;
    pygpu_status r = pygpu_rt_event_synchronize(c->lane->ev[b]);
    if (r != 0)
        c->call = "EventSynchronize";
    return r;
}

static pygpu_status queue_copy(pygpu_staging_ctx *c, int b, void *dst, const void *src, size_t n,
                               enum pygpu_copy_kind k)
{
    pygpu_status r = pygpu_bus_copy(dst, src, n, k, c->stream, &c->call);
    if (r != 0)
        return r;
    r = pygpu_rt_event_record(c->lane->ev[b], c->stream);
    if (r != 0)
        c->call = "EventRecord";
    else
        c->lane->recorded[b] = 1;
    return r;
}

static ptrdiff_t layout_size(const pygpu_host_layout *h)
{
    ptrdiff_t n = 1;
    for (int i = 0; i < h->nd; i++)
        n *= h->shape[i];
    return n;
}

/* Bytes per chunk for a transfer of `total` bytes: small transfers use
 * smaller chunks so that several overlap (PYGPU_WINDOWS_PER_BUFFER * depth
 * of them), though none smaller than a PYGPU_MID_WINDOW_SHARE-th of the
 * transfer (a quarter), up to PYGPU_MID_WINDOW, nor than
 * PYGPU_MIN_WINDOW: each DMA call costs the link a few microseconds,
 * which at 2-3 MiB outweighs the overlap of eight windows, and each window
 * a download's copy-out some microseconds of waiting and handing out
 * (docs/performance.md#mid-size-windows). */
static size_t chunk_bytes(const pygpu_transfer_config *cfg, size_t total)
{
    size_t want = total / (size_t)(PYGPU_WINDOWS_PER_BUFFER * cfg->depth), floor = PYGPU_MIN_WINDOW;
    size_t share = total / PYGPU_MID_WINDOW_SHARE;
    size_t quarter = share < PYGPU_MID_WINDOW ? share : PYGPU_MID_WINDOW;
    if (want < quarter)
        want = quarter;
    if (want < floor)
        want = floor;
    return want < cfg->chunk ? want : cfg->chunk;
}

static int stop_now(pygpu_staging_ctx *c)
{
    if (c->interrupted && c->interrupted(c->interrupt_arg)) {
        c->stopped = 1;
        return 1;
    }
    return 0;
}

/* Between waits for a lane: 1 if an interrupt stops the transfer. */
static int stop_waiting(void *arg) { return stop_now(arg); }

/* Take a lane on the current device for a transfer of host layout h (into
 * c->lane); 0 if none is to be had (the pinned pool's limit refuses its
 * buffers, or an interrupt came while it waited for one). */
static int staging_take(pygpu_staging_ctx *c, pygpu_transfer_config *cfg, const pygpu_host_layout *h, int up)
{
    int dev = -1;
    pygpu_transfer_config_get(cfg);
    if (cfg->chunk < (size_t)h->itemsize || pygpu_rt_get_device(&dev) != 0 ||
        !(c->lane = pygpu_lane_take(cfg, dev, up, stop_waiting, c)))
        return 0;
    if (cfg->chunk < (size_t)h->itemsize) {     /* (a crowded lane's buffers: too small for an element) */
        pygpu_lane_give(c->lane);
        c->lane = NULL;
        return 0;
    }
    /* The threads for its size (alone: the lane just taken is the only one
     * at work).  The workers that its biggest chunk can use spin while it
     * runs; the others sleep (a 128 KiB copy wakes one, not all). */
    size_t bytes = (size_t)(layout_size(h) * h->itemsize);
    cfg->threads = pygpu_transfer_threads(cfg, bytes, pygpu_lanes_alone());
    int want = pygpu_range_parts((ptrdiff_t)(bytes < cfg->chunk ? bytes : cfg->chunk), cfg->threads) - 1;
    pygpu_workers_heat(want < cfg->threads - 1 ? want : cfg->threads - 1);
    return 1;
}

/* The threads for an upload's next host copy: fewer while another
 * transfer is at work on its device (settings.c: crowd_threads). */
static int up_threads(const pygpu_staging_ctx *c, const pygpu_transfer_config *cfg)
{
    return pygpu_upload_threads(cfg, pygpu_lane_crowded(c->lane));
}

/* Give the lane back at the end of a transfer. */
static void staging_give(pygpu_staging_ctx *c)
{
    pygpu_workers_cool();
    pygpu_lane_give(c->lane);
    c->lane = NULL;
}

/* The chunks of a transfer of n elements: they start small
 * (PYGPU_FIRST_CHUNK, at `unit` bytes moved per element) and double up to `per` elements, and
 * shrink again at the end, so that the first host copy (nothing to overlap
 * it yet) and the last DMA (nothing left to overlap) are short.  A
 * mid-size transfer, whose windows are PYGPU_MID_WINDOW at most, starts at
 * the window floor (PYGPU_MIN_WINDOW) instead: there one DMA call less
 * gains more than a shorter first copy (docs/performance.md#first-chunk). */
typedef struct {
    ptrdiff_t n, next, cur, per, small;
    const lane *crowd;          /* (uploads) chunks of at most crowd_per while another transfer is at work */
    ptrdiff_t crowd_per;
} schedule;

/* An upload's chunks while another transfer is at work on its device are
 * of at most cfg->crowd_up bytes (the size of a crowded lane's buffers),
 * also for an upload that began alone: a DMA queued is a DMA that the
 * other's waits behind (docs/performance.md#crowded-lanes). */
static ptrdiff_t crowd_elements(const pygpu_transfer_config *cfg, ptrdiff_t itemsize)
{
    if (!cfg->crowd_up)
        return PTRDIFF_MAX;
    return (ptrdiff_t)cfg->crowd_up / itemsize > 0 ? (ptrdiff_t)cfg->crowd_up / itemsize : 1;
}

static schedule schedule_of(ptrdiff_t n, ptrdiff_t per, ptrdiff_t unit)
{
    ptrdiff_t first = per <= (ptrdiff_t)PYGPU_MID_WINDOW / unit ? (ptrdiff_t)PYGPU_MIN_WINDOW : PYGPU_FIRST_CHUNK;
    ptrdiff_t small = first / unit;
    if (small < 1)
        small = 1;
    if (small > per)
        small = per;
    return (schedule){n, 0, small, per, small, NULL, 0};
}

/* The schedule of an upload of n elements through lane l. */
static schedule upload_schedule(const lane *l, const pygpu_transfer_config *cfg, ptrdiff_t n, ptrdiff_t per,
                                ptrdiff_t itemsize)
{
    schedule s = schedule_of(n, per, itemsize);
    s.crowd = l;
    s.crowd_per = crowd_elements(cfg, itemsize);
    return s;
}

/* The next chunk [*e, *e + *cnt); 0 when there is none. */
static int schedule_next(schedule *s, ptrdiff_t *e, ptrdiff_t *cnt)
{
    ptrdiff_t left = s->n - s->next;
    if (left <= 0)
        return 0;
    ptrdiff_t c = s->cur;
    if (left <= 2 * c && left > 2 * s->small)
        c = left / 2;                       /* wind down */
    if (c > left)
        c = left;
    if (s->crowd && c > s->crowd_per && pygpu_lane_crowded(s->crowd))
        c = s->crowd_per;
    *e = s->next;
    *cnt = c;
    s->next += c;
    if (s->cur < s->per)
        s->cur = 2 * s->cur < s->per ? 2 * s->cur : s->per;
    return 1;
}

typedef struct {
    ptrdiff_t e, cnt;           /* elements [e, e + cnt) */
    char *at;                   /* their place in the staging buffers */
    int buf;                    /* which buffer */
} part_window;

/* Where in its lane's buffers (in elements from the first) a whole-buffer
 * download of n elements lands: each one a slot of n (rounded up to
 * PYGPU_DOWN_SLOT) further on than the last, round the buffers.  A DMA
 * into memory whose lines the cores have just read, as the copy-out of the
 * last download did, waits while they are snooped out of the cores' caches
 * (docs/performance.md#download-slots); by the time a download comes round to the same slot, its lines
 * have left the cores' own caches. */
static ptrdiff_t download_start(const lane *l, ptrdiff_t n, ptrdiff_t itemsize, ptrdiff_t per_buf)
{
    ptrdiff_t unit = PYGPU_DOWN_SLOT / itemsize > 0 ? PYGPU_DOWN_SLOT / itemsize : 1;
    ptrdiff_t slot = (n + unit - 1) / unit * unit, slots = per_buf * l->depth / slot;
    return slots > 1 ? (ptrdiff_t)(l->turn % (unsigned)slots) * slot : 0;
}

/* The chunks of a transfer of n elements laid out across the staging
 * buffers without reuse (the schedule's chunks, cut where a buffer ends;
 * a download's from download_start on, an upload's from the first byte);
 * their number, or 0 if the transfer does not fit (or needs too many). */
static int whole_windows(const lane *l, ptrdiff_t n, ptrdiff_t itemsize, const pygpu_transfer_config *cfg, int up,
                         part_window *win)
{
    ptrdiff_t e, cnt, per_buf = (ptrdiff_t)l->chunk / itemsize;
    int nwin = 0;
    if (per_buf < 1 || n > per_buf * l->depth)
        return 0;
    ptrdiff_t per = (ptrdiff_t)chunk_bytes(cfg, (size_t)(n * itemsize)) / itemsize;
    schedule sch = up ? upload_schedule(l, cfg, n, per, itemsize) : schedule_of(n, per, itemsize);
    ptrdiff_t from = up ? 0 : download_start(l, n, itemsize, per_buf);
    while (schedule_next(&sch, &e, &cnt)) {
        while (cnt > 0) {
            ptrdiff_t at = from + e, b = at / per_buf, room = (b + 1) * per_buf - at, m = cnt < room ? cnt : room;
            if (nwin == PYGPU_WHOLE_CHUNKS)
                return 0;
            win[nwin++] = (part_window){e, m, (char *)l->buf[b] + (at - b * per_buf) * itemsize, (int)b};
            e += m;
            cnt -= m;
        }
    }
    return nwin;
}

/* Wait until no DMA of an earlier transfer uses the buffers. */
static pygpu_status buffers_free(pygpu_staging_ctx *c)
{
    pygpu_status r = 0;
    for (int b = 0; b < c->lane->depth && r == 0; b++)
        r = buffer_free(c, b);
    return r;
}

/* Queue one DMA of a whole-buffer transfer as call k, and its event
 * (unless `last` of an upload waited for: nothing asks for that one). */
static pygpu_status queue_whole(pygpu_staging_ctx *c, int k, void *dst, const void *src, size_t bytes,
                                enum pygpu_copy_kind kind, int last)
{
    pygpu_status r;
    if (!c->lane->whole[k] && (r = pygpu_rt_event_create(&c->lane->whole[k], PYGPU_EVENT_DISABLE_TIMING)) != 0)
        c->call = "EventCreateWithFlags";
    else if ((r = pygpu_bus_copy(dst, src, bytes, kind, c->stream, &c->call)) == 0 && !(last && c->wait_after) &&
             (r = pygpu_rt_event_record(c->lane->whole[k], c->stream)) != 0)
        c->call = "EventRecord";
    PYGPU_TRACE_DMA_END(c->stream, k);
    PYGPU_TRACE('q', k, bytes);
    return r;
}

/* Queue the DMA of the windows of a whole-buffer download from *queued up
 * to `to` (at most nwin). */
static pygpu_status queue_windows(pygpu_staging_ctx *c, const part_window *win, int nwin, int to, int *queued,
                                  const char *dev, ptrdiff_t itemsize)
{
    for (; *queued < (to < nwin ? to : nwin); ++*queued) {
        const part_window *w = &win[*queued];
        pygpu_status r = queue_whole(c, *queued, w->at, dev + w->e * itemsize, (size_t)(w->cnt * itemsize),
                                     PYGPU_COPY_D2H, 0);
        if (r != 0)
            return r;
    }
    return 0;
}

/* Queue the DMA of windows [from, to) of a whole-buffer upload of nwin: one call
 * for each run of them in one staging buffer (never across two: each is
 * its own page-locked allocation, and a copy from page-locked memory must
 * lie in one, even where two happen to be adjacent in the address space). */
static pygpu_status queue_up(pygpu_staging_ctx *c, const pygpu_transfer_config *cfg, char *dev,
                             const part_window *win, int from, int to, int nwin, ptrdiff_t itemsize, int *calls)
{
    pygpu_status r = 0;
    /* (while another transfer is at work, no call of more than crowd_up
     * bytes made of several windows) */
    ptrdiff_t most = pygpu_lane_crowded(c->lane) ? crowd_elements(cfg, itemsize) : PTRDIFF_MAX;
    for (int i = from, j; r == 0 && i < to; i = j) {
        ptrdiff_t cnt = win[i].cnt;
        for (j = i + 1; j < to && win[j].buf == win[i].buf && cnt + win[j].cnt <= most; j++)
            cnt += win[j].cnt;
        if ((r = queue_whole(c, *calls, dev + win[i].e * itemsize, win[i].at, (size_t)(cnt * itemsize),
                             PYGPU_COPY_H2D, j == nwin)) == 0)
            ++*calls;
    }
    return r;
}

/* Tell the caller that the DMA of the first `elements` is queued. */
static pygpu_status tell_queued(pygpu_staging_ctx *c, ptrdiff_t elements, ptrdiff_t itemsize)
{
    return c->queued ? c->queued(c->queued_arg, (size_t)(elements * itemsize)) : 0;
}

/* h with its dimensions merged where the host memory runs on from one to
 * the next (and those of one element dropped), into shape and strides: for
 * a copy between h and dense staging, which runs in h's C order, so that a
 * C-contiguous host side of several dimensions (a dense buffer on the way
 * to or from a strided device view) is copied in long runs, not row by
 * row. */
static pygpu_host_layout collapsed(pygpu_host_layout h, ptrdiff_t *shape, ptrdiff_t *strides)
{
    int nd = 0;
    if (layout_size(&h) == 0)
        return h;
    for (int i = 0; i < h.nd; i++) {
        if (h.shape[i] == 1)
            continue;
        if (nd > 0 && strides[nd - 1] == h.shape[i] * h.strides[i]) {
            shape[nd - 1] *= h.shape[i];
            strides[nd - 1] = h.strides[i];
        } else {
            shape[nd] = h.shape[i];
            strides[nd++] = h.strides[i];
        }
    }
    if (nd == 0) {
        shape[0] = 1;
        strides[0] = h.itemsize;
        nd = 1;
    }
    h.nd = nd;
    h.shape = shape;
    h.strides = strides;
    return h;
}

/* An upload alone on its device that fills the staging buffers goes
 * through them as a ring, its chunks of more than PYGPU_PLAIN_MIN written
 * with plain stores: the DMA then reads them out of the cache, which a
 * chunk just written by many cores holds dirty only in part, and leaves
 * the memory to the host copy.  Uploads to two devices at once each go so:
 * each is alone on its own (docs/performance.md#plain-stores-alone). */

/* The host copy of elements [e, e + cnt) of h into the staging memory at
 * `to` (`plain`: an upload alone on its device through the ring, above). */
static pygpu_range_job up_job(const pygpu_host_layout *h, char *to, ptrdiff_t e, ptrdiff_t cnt, int plain)
{
    ptrdiff_t bytes = cnt * h->itemsize;
    return (pygpu_range_job){{to, NULL, 0}, {h->ptr, h->strides, 0}, h->shape, h->nd, h->itemsize, e, cnt,
                       !(plain && bytes > PYGPU_PLAIN_MIN) && pygpu_up_stream(bytes), 0};
}

/* Open window k's host copy to the workers (job[k & 1] holds it). */
static pygpu_job start_window(const pygpu_staging_ctx *c, const pygpu_transfer_config *cfg,
                              const pygpu_host_layout *h, const part_window *win, int k, pygpu_range_job *job)
{
    PYGPU_TRACE('w', k, 0);
    job[k & 1] = up_job(h, win[k].at, win[k].e, win[k].cnt, 0);
    return pygpu_range_start(&job[k & 1], up_threads(c, cfg));
}

/* Host to device when the whole transfer fits in the staging buffers: the
 * chunks are copied end to end into them, so that the DMA of several can go
 * as one call (each call costs the link a few microseconds), and the workers
 * copy faster than the link: the chunks copied while two calls are still in
 * flight wait, and go with the next ones (docs/performance.md: merged
 * uploads, and where a 16 MiB upload's time goes).  Window k + 1's copy is
 * open to the workers before window k's is joined, so that they go on to it
 * without a pause, and the caller queues window k's DMA while they copy it
 * (docs/performance.md: the next window's copy open).  *done = 0 when the
 * transfer is not for this path. */
static pygpu_status h2d_whole(pygpu_staging_ctx *c, char *dev, pygpu_host_layout h,
                              const pygpu_transfer_config *cfg, int *done)
{
    ptrdiff_t n = layout_size(&h);
    part_window win[PYGPU_WHOLE_CHUNKS];
    pygpu_range_job job[2];
    pygpu_job p[2] = {{0}, {0}};
    int nwin = whole_windows(c->lane, n, h.itemsize, cfg, 1, win), from = 0, calls = 0, started = 0, halt, k;
    pygpu_status r;
    if (!(*done = nwin > 0))
        return 0;
    r = buffers_free(c);
    pygpu_mark(7);
    PYGPU_TRACE('b', 0, (size_t)(n * h.itemsize));
    PYGPU_TRACE_DMA_START(c->stream);
    if (!(halt = r != 0 || stop_now(c)))
        p[started++] = start_window(c, cfg, &h, win, 0, job);
    /* (every window started is joined, whatever happens) */
    for (k = 0; k < started; k++) {
        if (k + 1 < nwin && r == 0 && !(halt = halt || stop_now(c)))
            p[started++ & 1] = start_window(c, cfg, &h, win, k + 1, job);
        pygpu_job_join(&p[k & 1]);
        pygpu_mark(8);
        PYGPU_TRACE('c', k, (size_t)(win[k].cnt * h.itemsize));
        /* Windows [from, k] are in the buffers: they go now if the link
         * would otherwise run dry. */
        if (r == 0 && !halt && (k + 1 == nwin || calls < 2 || pygpu_rt_event_query(c->lane->whole[calls - 2]) == 0)) {
            if ((r = queue_up(c, cfg, dev, win, from, k + 1, nwin, h.itemsize, &calls)) == 0)
                r = tell_queued(c, win[k].e + win[k].cnt, h.itemsize);
            pygpu_mark(9);
            from = k + 1;
        }
    }
    PYGPU_TRACE('e', 0, 0);
    PYGPU_TRACE_NAME("h2d (whole)");
    /* The caller would wait for the stream now: waited for here, the
     * buffers go back free, and the next transfer waits on no event of
     * them (two events recorded and one waited on: about 1.5 us of a 64
     * KiB upload's 19; docs/performance.md#small-calls). */
    if (r == 0 && calls > 0 && c->wait_after) {
        if ((r = pygpu_rt_stream_synchronize(c->stream)) != 0)
            c->call = "StreamSynchronize";
        pygpu_mark(10);
        c->waited = r == 0;
    }
    /* Else the next transfer waits for these calls before it reuses the buffers. */
    for (int b = 0; calls > 0 && !c->waited && b <= (n - 1) / ((ptrdiff_t)c->lane->chunk / h.itemsize); b++) {
        pygpu_status w = pygpu_rt_event_record(c->lane->ev[b], c->stream);
        c->lane->recorded[b] = w == 0;
        if (w != 0 && r == 0) {
            r = w;
            c->call = "EventRecord";
        }
    }
    return r;
}

pygpu_status pygpu_staged_h2d(pygpu_staging_ctx *c, char *dev, pygpu_host_layout h, int *staged)
{
    pygpu_transfer_config cfg;
    pygpu_status r = 0;
    ptrdiff_t shape[PYGPU_MAXDIMS], strides[PYGPU_MAXDIMS];
    h = collapsed(h, shape, strides);
    pygpu_range_job job[2];           /* the last two chunks' host copies */
    ptrdiff_t e, cnt;
    int k = 0;                  /* chunks copied into the buffers */
    *staged = 0;
    if (!staging_take(c, &cfg, &h, 1))
        return 0;
    pygpu_mark(6);
    *staged = 1;
    ptrdiff_t n = layout_size(&h);
    int whole = 0, plain = !pygpu_lane_crowded(c->lane) && (size_t)(n * h.itemsize) >= (size_t)cfg.depth * cfg.chunk;
    if (!plain)
        r = h2d_whole(c, dev, h, &cfg, &whole);
    if (whole) {
        staging_give(c);
        return r;
    }
    ptrdiff_t per = (ptrdiff_t)chunk_bytes(&cfg, (size_t)(n * h.itemsize)) / h.itemsize;
    schedule sch = upload_schedule(c->lane, &cfg, n, per, h.itemsize);
    PYGPU_TRACE('b', 0, (size_t)(n * h.itemsize));
    if (schedule_next(&sch, &e, &cnt) && (r = buffer_free(c, 0)) == 0 && !stop_now(c)) {
        PYGPU_TRACE('w', 0, 0);
        job[0] = up_job(&h, c->lane->buf[0], e, cnt, plain);
        pygpu_parallel_range(&job[0], up_threads(c, &cfg));
        PYGPU_TRACE('c', 0, (size_t)(cnt * h.itemsize));
        k = 1;
    }
    /* Then the workers copy chunk k into its buffer while this thread
     * queues chunk k - 1's DMA (a call costs a small part of a chunk's
     * time, when the workers would otherwise wait:
     * docs/performance.md#solo-copies). */
    while (r == 0 && k > 0) {
        int b = k % c->lane->depth, prev = (k - 1) % c->lane->depth, more = schedule_next(&sch, &e, &cnt);
        const pygpu_range_job *done = &job[(k - 1) & 1];
        pygpu_job p = {0};
        if (more) {
            if ((r = buffer_free(c, b)) != 0 || stop_now(c))
                break;
            PYGPU_TRACE('w', k, 0);
            job[k & 1] = up_job(&h, c->lane->buf[b], e, cnt, plain);
            p = pygpu_range_start(&job[k & 1], up_threads(c, &cfg));
        }
        r = queue_copy(c, prev, dev + done->start * h.itemsize, c->lane->buf[prev], (size_t)(done->count * h.itemsize),
                       PYGPU_COPY_H2D);
        if (r == 0)
            r = tell_queued(c, done->start + done->count, h.itemsize);
        PYGPU_TRACE('q', k - 1, 0);
        if (!more)
            break;
        pygpu_job_join(&p);           /* (also after a failed queue: the workers are done with it) */
        PYGPU_TRACE('c', k, (size_t)(cnt * h.itemsize));
        k++;
    }
    PYGPU_TRACE('e', 0, 0);
    PYGPU_TRACE_NAME(plain ? "h2d (alone on the device, plain stores)" : "h2d");
    staging_give(c);
    return r;
}

typedef struct {
    ptrdiff_t e, cnt, off;      /* elements [e, e + cnt), device bytes from off */
} window;

/* Device to host when the whole transfer fits in the staging buffers
 * (depth x chunk bytes): each chunk's DMA goes into its own part of the
 * buffers, queued a few ahead of the copy-out (all at once into fresh
 * memory, see below), and the workers copy each chunk out as soon as it has
 * landed.  No buffer is reused, so the DMA never waits for the host; bigger
 * transfers keep the ring of buffers, which is faster for them
 * (docs/performance.md: whole-buffer downloads); copied out with
 * streaming stores where `out_stream` (pygpu_down_stream).  *done = 0
 * when the transfer is not for this path. */
static pygpu_status d2h_whole(pygpu_staging_ctx *c, pygpu_host_layout h, const char *dev,
                              const pygpu_transfer_config *cfg, int fresh, int out_stream, int *done)
{
    ptrdiff_t n = layout_size(&h);
    size_t total = (size_t)(n * h.itemsize);
    pygpu_status r;
    part_window win[PYGPU_WHOLE_CHUNKS];
    int nwin = whole_windows(c->lane, n, h.itemsize, cfg, 0, win), queued = 0, k;
    if (!(*done = nwin > 0))
        return 0;
    c->lane->turn++;
    r = buffers_free(c);
    pygpu_mark(7);
    PYGPU_TRACE('b', 0, total);
    PYGPU_TRACE_DMA_START(c->stream);
    /* Into fresh memory: every window is queued, and the workers fault the
     * destination in while the DMA runs. */
    if (fresh && r == 0)
        r = queue_windows(c, win, nwin, nwin, &queued, dev, h.itemsize);
    if (fresh && r == 0)
        pygpu_parallel_prefault(h.ptr, total, cfg->threads);
    /* Else queued PYGPU_WHOLE_AHEAD_FIRST windows ahead at first, then
     * PYGPU_WHOLE_AHEAD while the workers copy each window out (queuing them all before the first copy-out
     * held it back: docs/performance.md#whole-buffers). */
    for (k = 0; r == 0 && k < nwin; k++) {
        if ((r = queue_windows(c, win, nwin, k + PYGPU_WHOLE_AHEAD_FIRST, &queued, dev, h.itemsize)) != 0)
            break;
        pygpu_mark(8);
        if ((r = pygpu_rt_event_synchronize(c->lane->whole[k])) != 0) {
            c->call = "EventSynchronize";
            break;
        }
        pygpu_mark(9);
        if (stop_now(c))
            break;
        PYGPU_TRACE('w', k, 0);
        pygpu_range_job j = {{h.ptr, h.strides, 0}, {win[k].at, NULL, 0}, h.shape, h.nd, h.itemsize, win[k].e, win[k].cnt,
                       out_stream, 0};
        pygpu_job p = pygpu_range_start(&j, cfg->threads);
        r = queue_windows(c, win, nwin, k + PYGPU_WHOLE_AHEAD, &queued, dev, h.itemsize);
        pygpu_job_join(&p);
        pygpu_mark(10);
        PYGPU_TRACE('c', k, (size_t)(win[k].cnt * h.itemsize));
    }
    PYGPU_TRACE('e', 0, 0);
    PYGPU_TRACE_NAME(out_stream ? "d2h (whole, streaming stores)" : "d2h (whole)");
    if (queued > 0 && k < nwin) {   /* nothing left in flight into the buffers (after the last window: waited for) */
        pygpu_status w = pygpu_rt_event_synchronize(c->lane->whole[queued - 1]);
        if (w != 0 && r == 0) {
            r = w;
            c->call = "EventSynchronize";
        }
    }
    return r;
}

pygpu_status pygpu_staged_d2h(pygpu_staging_ctx *c, pygpu_host_layout h, const char *dev, int *staged)
{
    pygpu_transfer_config cfg;
    pygpu_status r = 0;
    ptrdiff_t shape[PYGPU_MAXDIMS], strides[PYGPU_MAXDIMS];
    h = collapsed(h, shape, strides);
    window win[PYGPU_MAX_DEPTH];
    *staged = 0;
    if (!staging_take(c, &cfg, &h, 0))
        return 0;
    pygpu_mark(6);
    *staged = 1;
    /* Into memory never touched (a new NumPy array of 32 MiB or more, or
     * the array get() makes past the pinned pool's limit, is fresh from the
     * kernel): its pages are faulted in by all the workers while the first
     * DMAs run, not one at a time by whichever worker meets them in the
     * middle of its part (docs/performance.md: fresh destinations). */
    size_t total = (size_t)(layout_size(&h) * h.itemsize);
    int fresh = total >= PYGPU_FRESH_MIN && h.nd == 1 && h.strides[0] == h.itemsize &&
                pygpu_looks_fresh(h.ptr, total);
    int whole = 0, out_stream = pygpu_down_stream(total);
    r = d2h_whole(c, h, dev, &cfg, fresh, out_stream, &whole);
    if (whole) {
        staging_give(c);
        return r;
    }
    ptrdiff_t n = layout_size(&h), per = (ptrdiff_t)chunk_bytes(&cfg, (size_t)(n * h.itemsize)) / h.itemsize;
    schedule sch = schedule_of(n, per, h.itemsize);
    int issued = 0, retired = 0, more = 1;
    PYGPU_TRACE('b', 0, (size_t)(n * h.itemsize));
    /* Keep `depth` chunks in flight: DMA of the next ones overlaps the host
     * copy of this one. */
    while (r == 0) {
        for (; more && issued - retired < c->lane->depth && r == 0; issued++) {
            int b = issued % c->lane->depth;
            if (!(more = schedule_next(&sch, &win[b].e, &win[b].cnt)))
                break;
            if ((r = buffer_free(c, b)) == 0)
                r = queue_copy(c, b, c->lane->buf[b], dev + win[b].e * h.itemsize, (size_t)(win[b].cnt * h.itemsize),
                               PYGPU_COPY_D2H);
            PYGPU_TRACE('q', issued, 0);
        }
        if (fresh && r == 0)            /* (the first `depth` chunks are on their way) */
            pygpu_parallel_prefault(h.ptr, total, cfg.threads);
        fresh = 0;
        if (retired == issued)
            break;
        int b = retired % c->lane->depth;
        if (r != 0 || (r = buffer_free(c, b)) != 0 || stop_now(c))
            break;
        PYGPU_TRACE('w', retired, 0);
        pygpu_range_job j = {{h.ptr, h.strides, 0}, {c->lane->buf[b], NULL, 0}, h.shape, h.nd, h.itemsize, win[b].e,
                       win[b].cnt, out_stream, 0};
        pygpu_parallel_range(&j, cfg.threads);
        PYGPU_TRACE('c', retired, (size_t)(win[b].cnt * h.itemsize));
        retired++;
    }
    PYGPU_TRACE('e', 0, 0);
    PYGPU_TRACE_NAME(out_stream ? "d2h (streaming stores)" : "d2h");
    for (int b = 0; b < c->lane->depth; b++) {   /* nothing left in flight into the buffers */
        pygpu_status f = buffer_free(c, b);
        if (f != 0 && r == 0)
            r = f;
    }
    staging_give(c);
    return r;
}

/* ---- strided device views --------------------------------------------------- */

/* Byte offset of element `e` (C order over shape) in a layout. */
static ptrdiff_t offset_of(ptrdiff_t e, int nd, const ptrdiff_t *shape, const ptrdiff_t *strides)
{
    ptrdiff_t off = 0;
    for (int i = nd - 1; i >= 0; i--) {
        off += (e % shape[i]) * strides[i];
        e /= shape[i];
    }
    return off;
}

/* The next window from element e: as many elements as fit `limit` bytes of
 * the device layout (at least one). */
static window next_window(ptrdiff_t e, ptrdiff_t n, ptrdiff_t guess, size_t limit, int nd,
                          const ptrdiff_t *shape, const ptrdiff_t *strides, ptrdiff_t itemsize)
{
    window w = {e, n - e < guess ? n - e : guess, offset_of(e, nd, shape, strides)};
    while (w.cnt > 1 && (size_t)(offset_of(e + w.cnt - 1, nd, shape, strides) - w.off + itemsize) > limit)
        w.cnt /= 2;
    return w;
}

pygpu_status pygpu_staged_d2h_view(pygpu_staging_ctx *c, pygpu_host_layout h, const char *dev,
                                   const ptrdiff_t *dev_strides, int *staged)
{
    pygpu_transfer_config cfg;
    pygpu_status r = 0;
    window win[PYGPU_MAX_DEPTH];
    ptrdiff_t lo, hi;
    *staged = 0;
    if (!staging_take(c, &cfg, &h, 0))
        return 0;
    *staged = 1;
    ptrdiff_t n = layout_size(&h);
    int out_stream = pygpu_down_stream((size_t)(n * h.itemsize));
    pygpu_shape_extent(h.nd, h.shape, dev_strides, h.itemsize, &lo, &hi);
    size_t limit = chunk_bytes(&cfg, (size_t)(hi - lo));
    double cover = (double)(hi - lo) / (double)n;       /* covering bytes per element */
    ptrdiff_t guess = (ptrdiff_t)((double)limit / cover), e, cnt;
    if (guess < 1)
        guess = 1;
    /* Windows start small and grow, as the chunks of a dense copy do. */
    schedule sch = schedule_of(n, guess, cover < 1 ? 1 : (ptrdiff_t)cover);     /* (bytes moved per element) */
    ptrdiff_t done = 0;
    int issued = 0, retired = 0;
    PYGPU_TRACE('b', 0, (size_t)(hi - lo));
    /* Windows of the covering bytes come down `depth` at a time; the
     * workers gather each one's elements while the next ones move. */
    while (done < n && r == 0) {
        for (; issued - retired < c->lane->depth && r == 0 && schedule_next(&sch, &e, &cnt); issued++) {
            int b = issued % c->lane->depth;
            win[b] = next_window(e, n, cnt, limit, h.nd, h.shape, dev_strides, h.itemsize);
            sch.next = e + win[b].cnt;      /* (fewer where the layout is sparser) */
            size_t bytes = (size_t)(offset_of(win[b].e + win[b].cnt - 1, h.nd, h.shape, dev_strides) - win[b].off +
                                    h.itemsize);
            if ((r = buffer_free(c, b)) == 0)
                r = queue_copy(c, b, c->lane->buf[b], dev + win[b].off, bytes, PYGPU_COPY_D2H);
            PYGPU_TRACE('q', issued, bytes);
        }
        int b = retired % c->lane->depth;
        if (r != 0 || (r = buffer_free(c, b)) != 0 || stop_now(c))
            break;
        PYGPU_TRACE('w', retired, 0);
        pygpu_range_job j = {{h.ptr, h.strides, 0}, {c->lane->buf[b], dev_strides, win[b].off}, h.shape, h.nd,
                             h.itemsize, win[b].e, win[b].cnt, out_stream, 0};
        pygpu_parallel_range(&j, cfg.threads);
        PYGPU_TRACE('c', retired, (size_t)(win[b].cnt * h.itemsize));
        done += win[b].cnt;
        retired++;
    }
    PYGPU_TRACE('e', 0, 0);
    PYGPU_TRACE_NAME(out_stream ? "d2h (view, streaming stores)" : "d2h (view)");
    for (int b = 0; b < c->lane->depth; b++) {
        pygpu_status f = buffer_free(c, b);
        if (f != 0 && r == 0)
            r = f;
    }
    staging_give(c);
    return r;
}

pygpu_status pygpu_staged_h2d_rows(pygpu_staging_ctx *c, char *dev, ptrdiff_t pitch, ptrdiff_t width,
                                   pygpu_host_layout h, int *staged)
{
    pygpu_transfer_config cfg;
    pygpu_status r = 0;
    *staged = 0;
    ptrdiff_t n = layout_size(&h), per_row = width / h.itemsize, rows = n / per_row;
    if (!staging_take(c, &cfg, &h, 1))
        return 0;
    size_t limit = chunk_bytes(&cfg, (size_t)(n * h.itemsize));
    ptrdiff_t k = (ptrdiff_t)limit / width;
    if (k < 1 || limit < cfg.chunk) {
        staging_give(c);
        return 0;               /* rows wider than a buffer, or chunks not full: another way */
    }
    *staged = 1;
    PYGPU_TRACE('b', 0, (size_t)(n * h.itemsize));
    for (ptrdiff_t row = 0, i = 0; row < rows && r == 0; row += k, i++) {
        int b = (int)(i % c->lane->depth);
        ptrdiff_t cnt = rows - row < k ? rows - row : k;
        if ((r = buffer_free(c, b)) != 0 || stop_now(c))
            break;
        PYGPU_TRACE('w', (int)i, 0);
        pygpu_range_job j = {{c->lane->buf[b], NULL, 0}, {h.ptr, h.strides, 0}, h.shape, h.nd, h.itemsize,
                             row * per_row, cnt * per_row, pygpu_up_stream(cnt * width), 0};
        pygpu_parallel_range(&j, up_threads(c, &cfg));
        PYGPU_TRACE('c', (int)i, (size_t)(cnt * width));
        r = pygpu_rt_memcpy2d_async(dev + row * pitch, (size_t)pitch, c->lane->buf[b], (size_t)width, (size_t)width,
                                    (size_t)cnt, PYGPU_COPY_H2D, c->stream);
        if (r != 0) {
            c->call = "Memcpy2DAsync";
            break;
        }
        if ((r = pygpu_rt_event_record(c->lane->ev[b], c->stream)) != 0)
            c->call = "EventRecord";
        else
            c->lane->recorded[b] = 1;
        PYGPU_TRACE('q', (int)i, 0);
    }
    PYGPU_TRACE('e', 0, 0);
    PYGPU_TRACE_NAME("h2d (rows)");
    staging_give(c);
    return r;
}

void pygpu_pipeline_init(void)
{
    pygpu_lanes_init();
    pygpu_bg_init();
}
