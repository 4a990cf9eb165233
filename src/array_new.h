/*
 * array_new.h -- the functions array_new.c offers the files above it
 * (array_new.c: GPUArray(...) (PyCUDA's constructor: a shape, or host data,
 * or caller-provided memory) and the module's creation functions written in C
 * (empty, to_gpu, to_gpu_async, with PyCUDA's allocators): Python arguments
 * turned into calls of the one constructor and the construction door).
 */
#ifndef PYGPU_ARRAY_NEW_H
#define PYGPU_ARRAY_NEW_H

#include "pygpu.h"

/* GPUArray(...) (array_new.c), the type's tp_new. */
PyObject *pygpu_array_new(PyTypeObject *tp, PyObject *args, PyObject *kwds);

/* Add the creation functions (empty, to_gpu, to_gpu_async) to module `m`. */
int pygpu_array_new_init(PyObject *m);

#endif /* PYGPU_ARRAY_NEW_H */
