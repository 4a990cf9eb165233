/*
 * dlpack_import.h -- the functions dlpack_import.c offers the files above it:
 * DLPack coming in (capsules and __dlpack__ to GPUArrays, managed tensors
 * adopted from the exchange API, host data uploaded).
 */
#ifndef PYGPU_DLPACK_IMPORT_H
#define PYGPU_DLPACK_IMPORT_H

#include "pygpu.h"
#include "dlpack.h"

/* The GPUArray of a managed tensor taken from another library: steals `m`
 * (its deleter runs when the last array viewing it dies, or now on
 * failure).  copy and target as from_dlpack's (-1: None); the producer has
 * ordered the data before the current stream.  New reference. */
PyObject *pygpu_dl_adopt(pygpu_state *st, DLManagedTensorVersioned *m, int copy, int target);
/* Call m's deleter (if any), keeping the exception being raised. */
void pygpu_dl_release(DLManagedTensorVersioned *m);
/* Host data copied to device `target` (-1: the current one), converted to
 * `dtype` if given; new reference. */
PyObject *pygpu_dl_upload(pygpu_state *st, PyObject *host, int target, PyObject *dtype);
/* x.__dlpack_device__() as (type, id); 0, or -1 with an exception. */
int pygpu_dl_query_device(pygpu_state *st, PyObject *x, long *dev);
/* The GPUArray of capsule `x`, or of the capsule x.__dlpack__() gives
 * (copy: -1 None, 0 False, 1 True; target: a device ordinal or -1; dev:
 * x's __dlpack_device__ if known, else NULL: asked); new reference. */
PyObject *pygpu_dl_import(pygpu_state *st, PyObject *x, int target, int copy, const long *dev);
/* from_dlpack of one of our own GPUArrays: a view, or a copy (on `target`
 * where it is another device); new reference. */
PyObject *pygpu_dl_from_own(pygpu_state *st, PyGPUArray *a, int target, int copy);

#endif /* PYGPU_DLPACK_IMPORT_H */
