/*
 * lowlevel.h -- the functions lowlevel.c offers the files above it
 * (lowlevel.c: what the original PyGPU interface (pygpu/lowlevel.py) needs
 * from C: the runtime calls that have no other Python door, returning raw
 * status codes rather than raising, and _HostBuffer, the base of
 * DeviceArray_<dtype>, which exports its host side through the buffer
 * protocol).
 */
#ifndef PYGPU_LOWLEVEL_H
#define PYGPU_LOWLEVEL_H

#include "pygpu.h"

/* _HostBuffer and the status-returning runtime calls of pygpu/lowlevel.py. */
int pygpu_lowlevel_init(PyObject *m, pygpu_state *st);

#endif /* PYGPU_LOWLEVEL_H */
