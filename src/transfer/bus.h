/*
 * bus.h -- one dense copy across the bus between page-locked host memory
 * and the device (bus.c): the copy engine's DMA, or PyGPU's copy kernel
 * reading (writing) the host memory over the bus while another thread's
 * bulk copy in the same direction holds the engine.  Pure C, callable
 * with the GIL released.
 */
#ifndef PYGPU_TRANSFER_BUS_H
#define PYGPU_TRANSFER_BUS_H

#include "../backend/rt.h"

#include <stddef.h>

/* A synchronous bulk copy (of PYGPU_DMA_PIECES_FROM bytes or more) between
 * host and the current device in direction `k` begins or ends in this
 * thread: while one is in flight, smaller copies of the threads with none
 * of their own in that direction go by kernel.  bulk_begin returns the token (the device
 * and direction) that bulk_end takes. */
int pygpu_bus_bulk_begin(enum pygpu_copy_kind k);
void pygpu_bus_bulk_end(int token);

/* Copy `n` bytes between host and device memory (`k`: PYGPU_COPY_H2D or
 * D2H) on stream `s` of the current device: by kernel where `n` is under
 * PYGPU_DMA_PIECES_FROM, another thread's bulk copy in that direction is in
 * flight on the device and this thread has none there, the host side is page-locked and mapped for it,
 * and PyGPU's kernels run there; else by the copy engine.  *call names the
 * runtime call that failed. */
pygpu_status pygpu_bus_copy(void *dst, const void *src, size_t n, enum pygpu_copy_kind k, pygpu_stream_t s,
                            const char **call);

/* For tests: add `delta` to the bulk copies in flight on `device` in
 * direction `k` (as another thread's), returning the new count (-1: no
 * such device slot, or it would go below 0, and nothing changed); and the
 * copies the kernel has carried so far. */
int pygpu_bus_hold(int device, enum pygpu_copy_kind k, int delta);
long pygpu_bus_kernel_copies(void);

#endif /* PYGPU_TRANSFER_BUS_H */
