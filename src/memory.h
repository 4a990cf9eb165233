/*
 * memory.h -- the functions memory.c offers the files above it (memory.c: raw
 * device memory: the DeviceAllocation owner, mem_alloc, and the byte copies
 * between allocations, addresses and host buffers).
 */
#ifndef PYGPU_MEMORY_H
#define PYGPU_MEMORY_H

#include "pygpu.h"
#include "errors.h"

/* Allocate `nbytes` on the current device, ordered on `stream` (a
 * `stream=` argument: None, a Stream or a handle; borrowed), for `purpose`
 * (an array's shape and dtype, named if it runs out of memory; NULL: raw
 * memory); new reference to a DeviceAllocation. */
PyObject *pygpu_memory_new(pygpu_state *st, size_t nbytes, PyObject *stream, const pygpu_alloc_purpose *purpose);
/* The same on device `dev`, another than the current one, for its current
 * stream there (given back on it): from dev's pool, the allocation ordered
 * on `order`, a stream of the current device, so that work queued there
 * may use it at once.  NULL with no exception set where dev's pool cannot
 * be had that way (no pool, none used on dev yet, or the allocation
 * failed, short of memory say): allocate on dev, which says why. */
PyObject *pygpu_memory_new_across(pygpu_state *st, size_t nbytes, int dev, pygpu_stream_t order,
                                  const pygpu_alloc_purpose *purpose);

/* A device address argument: a DeviceAllocation (its size in *size) or an
 * int (*size set to SIZE_MAX: unknown); 0, or -1 with TypeError. */
int pygpu_address_arg(pygpu_state *st, PyObject *obj, void **ptr, size_t *size);

/* Count a GPUArray that starts (delta 1) or stops (-1) using `mem`, its
 * memory owner (anything: only DeviceAllocations count).  An allocation
 * freed while arrays use it is given back when the last of them goes. */
void pygpu_memory_view(PyObject *mem, int delta);

/* 0 if an array whose owner is `mem` may touch its memory; -1 with
 * ValueError when that is a DeviceAllocation that was freed. */
int pygpu_memory_usable(PyObject *mem);
int pygpu_memory_init(PyObject *m, pygpu_state *st);

/* Give every block of the module's cache back to the pool. */
void pygpu_cache_flush(pygpu_state *st);
/* Free the allocations whose free a graph capture put off (a
 * DeviceAllocation given back while a capture recorded its stream), those
 * whose capture has ended; the next allocation calls it. */
void pygpu_memory_put_off_retry(pygpu_state *st);
/* The same as the module goes; what is still captured is left, and the
 * list with it. */
void pygpu_memory_put_off_clear(pygpu_state *st);
int pygpu_memory_functions_init(PyObject *m);

#endif /* PYGPU_MEMORY_H */
