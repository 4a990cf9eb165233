/*
 * bare_loop.c -- the floor of a mid-size staged transfer; see bare_loop.h.
 *
 * Mid-size transfers (64 KiB to 4 MiB) of pageable memory spend as much
 * time around their copies as in them; a loop of the same steps in C
 * (tools/research/down-slots.c) showed how far the steps alone go
 * (docs/performance.md#mid-size-windows).  This one runs in the library,
 * on its workers, so that the bench can print it beside PyGPU's figure in
 * the same run.
 */
#include "bare_loop.h"
#include "hostcopy.h"
#include "trace.h"
#include "workers.h"

#include <stdlib.h>

#define BARE_WARM 5             /* transfers not counted */

static void host_copy(char *dst, const char *src, size_t n, int threads, int stream)
{
    ptrdiff_t shape[1] = {(ptrdiff_t)n};
    pygpu_range_job j = {.dst = {dst, NULL, 0}, .src = {(char *)src, NULL, 0}, .shape = shape, .nd = 1,
                         .itemsize = 1, .start = 0, .count = (ptrdiff_t)n, .stream = stream};
    pygpu_parallel_range(&j, threads);
}

/* One transfer through `pin`. */
static pygpu_status once(int up, char *host, char *dev, char *pin, size_t n, int windows, int threads,
                         pygpu_stream_t s, pygpu_event_t *ev, const char **call)
{
    size_t w = (n + (size_t)windows - 1) / (size_t)windows;
    pygpu_status r = 0;
    for (size_t off = 0, k = 0; r == 0 && off < n; off += w, k++) {
        size_t len = n - off < w ? n - off : w;
        if (up) {
            host_copy(pin + off, host + off, len, threads, pygpu_up_stream((ptrdiff_t)len));
            *call = "MemcpyAsync";
            r = pygpu_rt_memcpy_async(dev + off, pin + off, len, PYGPU_COPY_H2D, s);
        } else if ((*call = "MemcpyAsync", r = pygpu_rt_memcpy_async(pin + off, dev + off, len,
                                                                     PYGPU_COPY_D2H, s)) == 0) {
            *call = "EventRecord";
            r = pygpu_rt_event_record(ev[k], s);
        }
    }
    if (up)
        return r == 0 ? (*call = "StreamSynchronize", pygpu_rt_stream_synchronize(s)) : r;
    for (size_t off = 0, k = 0; r == 0 && off < n; off += w, k++) {
        size_t len = n - off < w ? n - off : w;
        *call = "EventQuery";
        while (pygpu_rt_is_not_ready(r = pygpu_rt_event_query(ev[k])))
            ;                   /* (the pipeline's downloads spin on their windows too) */
        if (r == 0)
            host_copy(host + off, pin + off, len, threads, pygpu_down_stream(n));
    }
    return r;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

pygpu_status pygpu_bare_loop(int up, char *host, char *dev, char *ring, size_t ring_bytes, size_t n, int windows,
                             int threads, int reps, pygpu_stream_t s, pygpu_event_t *ev, double *median_s,
                             const char **call)
{
    size_t slots = n ? ring_bytes / n : 0;
    double *t = reps > 0 ? malloc((size_t)reps * sizeof *t) : NULL;
    pygpu_status r = 0;
    *median_s = 0;
    if (!t || slots == 0 || windows < 1 || windows > PYGPU_BARE_WINDOWS) {
        free(t);
        *call = "bare loop";
        return PYGPU_RT_INVALID_VALUE;
    }
    pygpu_workers_heat(threads - 1);
    for (int i = 0; r == 0 && i < BARE_WARM + reps; i++) {
        long long t0 = pygpu_trace_now_ns();
        r = once(up, host, dev, ring + (size_t)i % slots * n, n, windows, threads, s, ev, call);
        if (i >= BARE_WARM)
            t[i - BARE_WARM] = (double)(pygpu_trace_now_ns() - t0) * 1e-9;
    }
    pygpu_workers_cool();
    if (r == 0) {
        qsort(t, (size_t)reps, sizeof *t, by_value);
        *median_s = t[reps / 2];
    }
    free(t);
    return r;
}
