/*
 * array_scalar.h -- the functions array_scalar.c offers the files above it
 * (array_scalar.c: numPy's scalar protocol on GPUArray: float(), int(),
 * complex(), bool(), operator.index(), item() and tolist()).
 */
#ifndef PYGPU_ARRAY_SCALAR_H
#define PYGPU_ARRAY_SCALAR_H

#include "pygpu.h"

/* NumPy's scalar protocol (array_scalar.c): float(), int(), index(),
 * complex() and bool() of a size-1 array, item(*args), tolist(); each a
 * read to the host, NumPy's results and errors. */
PyObject *pygpu_array_float(PyObject *self);
PyObject *pygpu_array_int(PyObject *self);
PyObject *pygpu_array_index(PyObject *self);
PyObject *pygpu_array_complex(PyObject *self, PyObject *unused);
int pygpu_array_bool(PyObject *self);

PyObject *pygpu_array_item_method(PyObject *self, PyObject *args);

PyObject *pygpu_array_tolist(PyObject *self, PyObject *unused);

#endif /* PYGPU_ARRAY_SCALAR_H */
