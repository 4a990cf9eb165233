/*
 * events_host.c -- events on the host backend's streams (the event part of
 * rt.h on host memory).  The host's streams are done when a call returns,
 * so an event is complete once recorded, and it carries the host clock's
 * time of its recording for elapsed times.  It reaches the rest of the host
 * runtime through rt.h (the current device) and host_shared.h (its
 * statuses, a stream's device, the legacy stream's rule under a capture).
 */
#define _POSIX_C_SOURCE 200809L
#include "rt.h"
#include "host_shared.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct { double t; int recorded; unsigned flags; int device; } host_event;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

pygpu_status pygpu_rt_event_create(pygpu_event_t *e, unsigned flags)
{
    host_event *h = calloc(1, sizeof *h);
    *e = h;
    if (!h)
        return pygpu_host_fail(H_MEMORY_ALLOCATION);
    if ((flags & PYGPU_EVENT_INTERPROCESS) && !(flags & PYGPU_EVENT_DISABLE_TIMING)) {
        free(h);                    /* as CUDA: interprocess events cannot time */
        *e = NULL;
        return pygpu_host_fail(H_INVALID_VALUE);
    }
    h->flags = flags;
    (void)pygpu_rt_get_device(&h->device);
    return H_SUCCESS;
}

pygpu_status pygpu_rt_event_destroy(pygpu_event_t e)
{
    if (!e)
        return pygpu_host_fail(H_INVALID_HANDLE);
    free(e);
    return H_SUCCESS;
}

pygpu_status pygpu_rt_event_record(pygpu_event_t e, pygpu_stream_t s)
{
    host_event *h = e;
    if (!h)
        return pygpu_host_fail(H_INVALID_HANDLE);
    /* (as CUDA: an event is recorded on a stream of its own device only) */
    if (h->device != pygpu_host_stream_device(s))
        return pygpu_host_fail(H_INVALID_HANDLE);
    if (pygpu_host_legacy_refused(s))
        return H_CAPTURE_IMPLICIT;
    h->t = now_ms();
    h->recorded = 1;
    return H_SUCCESS;
}

/* An interprocess event's handle: the host's streams are done when a call
 * returns, so an event another process opens has nothing to wait for;
 * the handle says only that it is one, and whose. */
typedef struct {
    char magic[8];              /* "PYGPUEVT" */
    long long pid;
    char unused[PYGPU_IPC_EVENT_HANDLE_BYTES - 8 - 8];
} host_ipc_event_handle;
_Static_assert(sizeof(host_ipc_event_handle) == PYGPU_IPC_EVENT_HANDLE_BYTES, "an event handle is 64 bytes");

pygpu_status pygpu_rt_ipc_event_handle(pygpu_event_t e, unsigned char h[PYGPU_IPC_EVENT_HANDLE_BYTES])
{
    const host_event *ev = e;
    if (!ev)
        return pygpu_host_fail(H_INVALID_HANDLE);
    if (!(ev->flags & PYGPU_EVENT_INTERPROCESS))        /* (as CUDA) */
        return pygpu_host_fail(H_INVALID_HANDLE);
    host_ipc_event_handle handle = {.magic = "PYGPUEVT", .pid = (long long)getpid()};
    memcpy(h, &handle, sizeof handle);
    return H_SUCCESS;
}

pygpu_status pygpu_rt_ipc_event_open(const unsigned char h[PYGPU_IPC_EVENT_HANDLE_BYTES], pygpu_event_t *e)
{
    host_ipc_event_handle handle;
    memcpy(&handle, h, sizeof handle);
    *e = NULL;
    if (memcmp(handle.magic, "PYGPUEVT", 8) != 0 || handle.pid == (long long)getpid())
        return pygpu_host_fail(H_INVALID_VALUE);
    return pygpu_rt_event_create(e, PYGPU_EVENT_INTERPROCESS | PYGPU_EVENT_DISABLE_TIMING);
}

pygpu_status pygpu_rt_event_synchronize(pygpu_event_t e) { return e ? H_SUCCESS : pygpu_host_fail(H_INVALID_HANDLE); }
pygpu_status pygpu_rt_event_query(pygpu_event_t e) { return e ? H_SUCCESS : pygpu_host_fail(H_INVALID_HANDLE); }

pygpu_status pygpu_rt_event_elapsed_ms(float *ms, pygpu_event_t start, pygpu_event_t end)
{
    host_event *a = start, *b = end;
    if (!a || !b || !a->recorded || !b->recorded ||
        (a->flags & PYGPU_EVENT_DISABLE_TIMING) || (b->flags & PYGPU_EVENT_DISABLE_TIMING))
        return pygpu_host_fail(H_INVALID_HANDLE);
    *ms = (float)(b->t - a->t);
    return H_SUCCESS;
}
