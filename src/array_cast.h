/*
 * array_cast.h -- the functions array_cast.c offers the files above it
 * (array_cast.c: astype: an array's elements converted to another dtype in a
 * new array on its device, by PyGPU's cast kernel, or by NumPy on the host
 * where the kernel cannot run or NumPy's rule checks each value).
 */
#ifndef PYGPU_ARRAY_CAST_H
#define PYGPU_ARRAY_CAST_H

#include "pygpu.h"

/* `a` converted to `descr` (borrowed) in a new array laid out in `order`
 * (enum pygpu_order) on a's device, queued on `stream` (a stream
 * argument): by PyGPU's cast kernel, or where it cannot run (or for
 * `numpy_casting`, a rule NumPy checks value by value: "same_value"),
 * through NumPy on the host.  Same dtype: a copy.  New reference. */
PyObject *pygpu_array_astype(PyGPUArray *a, PyArray_Descr *descr, int order, const char *numpy_casting,
                             PyObject *stream);

/* 1 if `a` already is laid out as `order` asks (enum pygpu_order). */
int pygpu_array_in_order(PyGPUArray *a, int order);

#endif /* PYGPU_ARRAY_CAST_H */
