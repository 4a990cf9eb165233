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

/* ---- what dlpack.c and dlpack_export.c offer the exchange API (dlpack_exchange.c) */

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

/* ---- dlpack_shared.c, and what dlpack.c offers interop.c ---------------- */

#if PY_VERSION_HEX >= 0x030D0000
#  define PYGPU_FINALIZING() Py_IsFinalizing()
#else
#  define PYGPU_FINALIZING() _Py_IsFinalizing()
#endif

/* 1 if device type `t` is host memory. */
static inline int pygpu_dl_is_host_type(long t) { return t == kDLCPU || t == kDLCUDAHost || t == kDLROCMHost; }
/* The name of device type `t` ("kDLCUDA", ...), for messages. */
const char *pygpu_dl_device_name(long t);
/* A stream argument naming the stream of `a`'s last work; new reference. */
PyObject *pygpu_dl_last_stream_arg(PyGPUArray *a);
/* Vectorcall arguments into out[0..n) (NULL where not given): at most
 * `maxpos` positionally, names[0..posonly) only positionally; 0, or -1
 * with TypeError. */
int pygpu_dl_parse_args(const char *fname, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                        const char *const *names, int n, int maxpos, int posonly, PyObject **out);
/* copy=: None -> -1, False -> 0, True -> 1; -2 with TypeError. */
int pygpu_dl_copy_arg(PyObject *v, const char *fname);
/* A tuple of two ints (max_version, dl_device); 0, or -1 with TypeError. */
int pygpu_dl_int_pair(PyObject *v, const char *what, long *a, long *b);
/* A dense copy of `a` on its device, queued after its pending work; new
 * reference. */
PyObject *pygpu_dl_device_copy(pygpu_state *st, PyGPUArray *a);
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
/* 1 if this backend's arrays can view memory of device type `t` in place. */
int pygpu_dl_reachable(long t);
#endif

#endif /* PYGPU_DLPACK_H */
