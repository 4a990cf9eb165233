/*
 * array_getset.h -- the functions array_getset.c offers the files above it
 * (array_getset.c: GPUArray attributes, and the small ArrayFlags type that
 * `flags` returns).
 */
#ifndef PYGPU_ARRAY_GETSET_H
#define PYGPU_ARRAY_GETSET_H

#include "pygpu.h"

PyGetSetDef *pygpu_array_getset_defs(void);

int pygpu_flags_init(PyObject *m, pygpu_state *st);

#endif /* PYGPU_ARRAY_GETSET_H */
