/*
 * dlpack_export.h -- the functions dlpack_export.c offers the files above it
 * (dlpack_export.c: DLPack going out: GPUArray.__dlpack__ and
 * __dlpack_device__ (Array API standard, 2023.12), and the managed tensors
 * that the C exchange API hands out (dlpack_exchange.c)).
 */
#ifndef PYGPU_DLPACK_EXPORT_H
#define PYGPU_DLPACK_EXPORT_H

#include "pygpu.h"
#include "dlpack.h"

/* GPUArray.__dlpack__ (METH_FASTCALL | METH_KEYWORDS) and __dlpack_device__. */
PyObject *pygpu_array_dlpack(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *pygpu_array_dlpack_device(PyObject *self, PyObject *unused);

/* A versioned managed tensor viewing `a` (flagged read-only if it is),
 * keeping `a` alive until its deleter runs (from any thread, GIL or not);
 * NULL with an exception set. */
DLManagedTensorVersioned *pygpu_dl_export(PyGPUArray *a);
/* Fill *out with a view of `a` that owns nothing: its shape and strides
 * point into `a` (element strides, kept beside its byte strides); 0, or -1
 * with BufferError (a dtype or stride DLPack cannot say). */
int pygpu_dl_view(PyGPUArray *a, DLTensor *out);

#endif /* PYGPU_DLPACK_EXPORT_H */
