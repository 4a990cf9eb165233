/*
 * interop.h -- the functions interop.c offers the files above it (interop.c:
 * the front door for other libraries' arrays: one import ladder (our own
 * array, NumPy's, the DLPack C exchange table, the CUDA Array Interface, a
 * DLPack capsule, __dlpack__, any host data), tried in that order by both
 * module functions that take arrays: pygpu.asarray(obj, dtype=None) (a
 * GPUArray as it is, another library's device array without a copy, host data
 * by copying it) and pygpu.from_dlpack(x, *, device=None, copy=None) (the
 * Array API standard's, 2023.12: the DLPack rungs alone)).
 */
#ifndef PYGPU_INTEROP_H
#define PYGPU_INTEROP_H

#include "pygpu.h"

/* pygpu.asarray(obj) without a dtype; new reference. */
PyObject *pygpu_asarray(pygpu_state *st, PyObject *obj);

/* Module functions from_dlpack and asarray, and the cached values. */
int pygpu_interop_init(PyObject *m);

#endif /* PYGPU_INTEROP_H */
