/*
 * array_methods.h -- the functions array_methods.c offers the files above it
 * (array_methods.c: GPUArray methods: transfers (get, set and their async
 * forms), copy, to_device, fill, astype, and the method table (the shape
 * methods, view to swapaxes, are array_shape.c's; item and tolist
 * array_scalar.c's; __dlpack__ dlpack_export.c's)).
 */
#ifndef PYGPU_ARRAY_METHODS_H
#define PYGPU_ARRAY_METHODS_H

#include "pygpu.h"

/* The method and attribute tables of GPUArray (array_methods.c, array_getset.c). */
PyMethodDef *pygpu_array_method_defs(void);

#endif /* PYGPU_ARRAY_METHODS_H */
