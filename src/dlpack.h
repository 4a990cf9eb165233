/*
 * dlpack.h -- the DLPack ABI, as far as PyGPU uses it: the declarations are
 * in the public include/pygpu/pygpu_dlpack.h (C extensions exchange tensors
 * through them too); this adds what PyGPU's C files share about checking
 * tensors that other libraries made.
 */
#ifndef PYGPU_DLPACK_H
#define PYGPU_DLPACK_H

#include <stddef.h>
#include <stdint.h>

#include "pygpu/pygpu_dlpack.h"
#include "shape.h"

/* This backend's DLPack device type. */
#if defined(PYGPU_BACKEND_CUDA)
#  define PYGPU_DL_OWN_TYPE kDLCUDA
#elif defined(PYGPU_BACKEND_HIP)
#  define PYGPU_DL_OWN_TYPE kDLROCM
#else
#  define PYGPU_DL_OWN_TYPE kDLCPU
#  define PYGPU_DL_HOST_BACKEND 1
#endif
#ifndef PYGPU_DL_HOST_BACKEND
#  define PYGPU_DL_HOST_BACKEND 0
#endif

/* ---- checking a tensor that another library made (dlpack_check.c) ------ */

/* What a checked tensor is, in GPUArray's terms. */
typedef struct {
    int nd;
    ptrdiff_t shape[PYGPU_MAXDIMS];
    ptrdiff_t strides[PYGPU_MAXDIMS];   /* bytes */
    char kind;                          /* 'b', 'i', 'u', 'f' or 'c' */
    int itemsize;
    char *data;                         /* data + byte_offset: element [0, ..., 0] */
} pygpu_dl_layout;

/* Check the dimensions, dtype, shape, strides and data pointer of `t` (not
 * its device: that is the backend's business) and fill *out.  Pure C, no
 * Python: 0, or -1 with a sentence saying what is wrong in why[0..n). */
int pygpu_dl_check(const DLTensor *t, pygpu_dl_layout *out, char *why, size_t n);

/* ---- what dlpack.c offers the exchange API (dlpack_exchange.c) -------- */

#ifdef PYGPU_INTERNAL_H
/* What this backend's arrays make of memory of device type `t`: bit 1,
 * they view it in place; bit 2, it is host memory (which they can copy);
 * 0, they cannot reach it. */
int pygpu_dl_reach(long t);
/* A versioned managed tensor viewing `a` (flagged read-only if it is),
 * keeping `a` alive until its deleter runs (from any thread, GIL or not);
 * NULL with an exception set. */
DLManagedTensorVersioned *pygpu_dl_export(PyGPUArray *a);
/* Fill *out with a view of `a` that owns nothing: its shape and strides
 * point into `a` (element strides, kept beside its byte strides); 0, or -1
 * with BufferError (a dtype or stride DLPack cannot say). */
int pygpu_dl_view(PyGPUArray *a, DLTensor *out);
/* The GPUArray of a managed tensor taken from another library: steals `m`
 * (its deleter runs when the last array viewing it dies, or now on
 * failure).  copy and target as from_dlpack's (-1: None); the producer has
 * ordered the data before the current stream.  New reference. */
PyObject *pygpu_dl_adopt(pygpu_state *st, DLManagedTensorVersioned *m, int copy, int target);
/* Call m's deleter (if any), keeping the exception being raised. */
void pygpu_dl_release(DLManagedTensorVersioned *m);
#endif

#endif /* PYGPU_DLPACK_H */
