/*
 * cai.h -- the functions cai.c offers the files above it (cai.c:
 * __cuda_array_interface__ (version 3) both ways, handing consumers the
 * stream of the array's last work (stream.c keeps that record, for DLPack
 * too)).
 */
#ifndef PYGPU_CAI_H
#define PYGPU_CAI_H

#include "pygpu.h"

/* 0 if a layout received from another library (element strides already in
 * bytes) has a size and a byte span that fit in ptrdiff_t; else -1 with
 * BufferError naming `who`. */
int pygpu_foreign_layout(int nd, const ptrdiff_t *shape, const ptrdiff_t *strides, ptrdiff_t itemsize,
                         const char *who);

/* The __cuda_array_interface__ getter (CUDA builds only). */
PyObject *pygpu_array_cai(PyObject *self, void *closure);

/* A GPUArray viewing the memory `obj` describes with its
 * __cuda_array_interface__ `iface` (a dict); obj is kept alive as the
 * owner.  New reference. */
PyObject *pygpu_cai_import(pygpu_state *st, PyObject *obj, PyObject *iface);

#endif /* PYGPU_CAI_H */
