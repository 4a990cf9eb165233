/*
 * host_shared.h -- what rt_host.c (the runtime interface on host memory) offers
 * the host backend's other files (ipc_host.c, peer_host.c, events_host.c): its statuses, which use the
 * CUDA runtime's numbers, the thread's last error, and the accounting of
 * "device memory" against PYGPU_HOST_MEMORY.
 */
#ifndef PYGPU_BACKEND_HOST_SHARED_H
#define PYGPU_BACKEND_HOST_SHARED_H

#include "rt.h"

enum {
    H_SUCCESS = 0,
    H_INVALID_VALUE = 1,
    H_MEMORY_ALLOCATION = 2,
    H_INVALID_DEVICE = 101,
    H_PEER_UNSUPPORTED = 217,
    H_INVALID_HANDLE = 400,
    H_NOT_READY = 600,
    H_HOST_NOT_REGISTERED = 713,
    H_NOT_SUPPORTED = 801,
    H_CAPTURE_UNSUPPORTED = 900,
    H_CAPTURE_INVALIDATED = 901,
    H_CAPTURE_IMPLICIT = 906,
    H_UNKNOWN = 999,
};

/* H_CAPTURE_IMPLICIT (noted as the thread's last error) if `s` is the
 * legacy stream and a blocking stream of the current device is being
 * captured, whose capture it then breaks, as the runtime does; else 0. */
pygpu_status pygpu_host_legacy_refused(pygpu_stream_t s);

/* The device of stream `s` (the current one for the default streams). */
int pygpu_host_stream_device(pygpu_stream_t s);

/* Note `s` as this thread's last error (pygpu_rt_get_last_error); returns it. */
pygpu_status pygpu_host_fail(pygpu_status s);

/* Count `n` more bytes of device memory: 1 if they fit within the limit
 * (then *left, if given, is what still fits), else 0 and nothing counted.
 * pygpu_host_release gives counted bytes back. */
int pygpu_host_reserve(size_t n, size_t *left);
void pygpu_host_release(size_t n);

#endif /* PYGPU_BACKEND_HOST_SHARED_H */
