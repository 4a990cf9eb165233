/*
 * capi.h -- the functions capi.c offers the files above it (capi.c: the table
 * of include/pygpu/pygpu_api.h, exported as the capsule `_C_API` (re-exported
 * by the package as pygpu._C_API)).
 */
#ifndef PYGPU_CAPI_H
#define PYGPU_CAPI_H

#include "pygpu.h"

int pygpu_capi_init(PyObject *m, pygpu_state *st);

#endif /* PYGPU_CAPI_H */
