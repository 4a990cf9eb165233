/*
 * array_shape.h -- the functions array_shape.c offers the files above it
 * (array_shape.c: GPUArray's shape methods: those that make views (view,
 * reshape, ravel, squeeze, transpose, swapaxes) and flatten, which copies;
 * reshape and ravel copy too where no view has the asked shape, as NumPy's).
 */
#ifndef PYGPU_ARRAY_SHAPE_H
#define PYGPU_ARRAY_SHAPE_H

#include "pygpu.h"

/* The shape methods (array_shape.c), in pygpu_array_methods. */
PyObject *pygpu_array_view_method(PyObject *self, PyObject *args, PyObject *kwds);
PyObject *pygpu_array_reshape(PyObject *self, PyObject *args, PyObject *kwds);
PyObject *pygpu_array_ravel(PyObject *self, PyObject *args, PyObject *kwds);
PyObject *pygpu_array_flatten(PyObject *self, PyObject *args, PyObject *kwds);
PyObject *pygpu_array_squeeze(PyObject *self, PyObject *args, PyObject *kwds);
PyObject *pygpu_array_transpose(PyObject *self, PyObject *args);
PyObject *pygpu_array_swapaxes(PyObject *self, PyObject *args);

/* a.T: the view with the axes reversed; new reference. */
PyObject *pygpu_array_T(PyGPUArray *a);

#endif /* PYGPU_ARRAY_SHAPE_H */
