/*
 * dtype.h -- the functions dtype.c offers the files above it (dtype.c: which
 * NumPy dtypes a GPUArray holds: the numeric types (bool, signed and unsigned
 * integers, float16/32/64, complex64/128) in native byte order).
 */
#ifndef PYGPU_DTYPE_H
#define PYGPU_DTYPE_H

#include "pygpu.h"

/* Convert a dtype argument (None: float64) to a supported descriptor; new
 * reference, or NULL with TypeError naming the unsupported dtype. */
PyArray_Descr *pygpu_descr_arg(PyObject *obj);

/* 1 if `d` is a dtype GPUArray holds (numeric, native byte order). */
int pygpu_descr_supported(PyArray_Descr *d);

/* NumPy's ComplexWarning where complex values go into a real or integer
 * type (dtype.c); 0, or -1 when the warning is an error. */
int pygpu_complex_warning(pygpu_state *st, PyArray_Descr *from, PyArray_Descr *to);

/* The number PyGPU's kernels know `d` by (enum pygpu_ktype in
 * kernels/kernels.h), or -1 for a dtype GPUArray does not hold. */
int pygpu_ktype_of(PyArray_Descr *d);

/* The descriptor for an element of kind 'b', 'i', 'u', 'f' or 'c' and
 * `itemsize` bytes, or NULL (no exception set) when GPUArray has none;
 * new reference. */
PyArray_Descr *pygpu_descr_from_kind(char kind, int itemsize);

#endif /* PYGPU_DTYPE_H */
