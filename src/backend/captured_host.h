/*
 * captured_host.h -- the host backend's table of the streams being
 * captured into a graph (captured_host.c): what rt_host.c reports of a
 * stream's capture (stream_begin_capture and stream_end_capture fill it),
 * so that PyGPU's rules under a capture hold on host memory as on a GPU.
 * Streams are known by their handles, never read (a stream may be another
 * library's).  Thread-safe.
 */
#ifndef PYGPU_BACKEND_CAPTURED_HOST_H
#define PYGPU_BACKEND_CAPTURED_HOST_H

#include "rt.h"

/* Note stream `s` (not NULL) as captured; `blocking_dev`: the device of a
 * blocking stream (one the legacy stream waits for), else -1.  0, or -1 if
 * it is already or the table is full. */
int pygpu_captured_add(pygpu_stream_t s, int blocking_dev);
/* Its capture ended; 0, -1 if it had none, -2 if it was broken. */
int pygpu_captured_remove(pygpu_stream_t s);
/* Break every capture in progress (a call the runtime refuses under any
 * capture: a device-wide synchronization); how many there were. */
int pygpu_captured_break_all(void);
/* 1 if stream `s` is being captured. */
int pygpu_captured_has(pygpu_stream_t s);
/* How many blocking streams of device `dev` are being captured; with
 * `invalidate`, their captures are broken (the legacy stream was used). */
int pygpu_captured_blocking(int dev, int invalidate);

#endif /* PYGPU_BACKEND_CAPTURED_HOST_H */
