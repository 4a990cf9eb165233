/*
 * array_type.h -- the functions array_type.c offers the files above it
 * (array_type.c: the GPUArray type itself: its slots (GC, dealloc, repr and
 * str as NumPy shows the values, iteration, and the protocol slots of the
 * files beneath), its spec, and its creation at module init).
 */
#ifndef PYGPU_ARRAY_TYPE_H
#define PYGPU_ARRAY_TYPE_H

#include "pygpu.h"

int pygpu_array_init(PyObject *m, pygpu_state *st);

#endif /* PYGPU_ARRAY_TYPE_H */
