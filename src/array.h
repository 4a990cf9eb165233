/*
 * array.h -- the functions array.c offers the files above it (array.c: the
 * one internal constructor every GPUArray comes from (pygpu_array_wrap), and
 * the ways it is called with fresh memory: empty arrays in any layout, views,
 * and dense copies of another array).
 */
#ifndef PYGPU_ARRAY_H
#define PYGPU_ARRAY_H

#include "pygpu.h"

/* The one internal constructor: a GPUArray of type `tp` viewing `data` on
 * `device`.  Steals `descr`; takes new references to `mem` and `base` (base
 * may be NULL).  strides NULL means C-contiguous.  New reference. */
PyObject *pygpu_array_wrap(pygpu_state *st, PyTypeObject *tp, PyArray_Descr *descr, int nd,
                           const ptrdiff_t *shape, const ptrdiff_t *strides, char *data,
                           PyObject *mem, PyObject *base, int device, int writeable);

/* A new array with fresh device memory on the current device, C or F
 * order, allocated on `stream` (a stream argument).  Steals `descr`. */
PyObject *pygpu_array_empty(pygpu_state *st, PyTypeObject *tp, PyArray_Descr *descr, int nd,
                            const ptrdiff_t *shape, int fortran, PyObject *stream);

/* A new array of `a`'s shape and type, with `descr` (stolen), laid out in
 * `order` (enum pygpu_order) relative to `a`, on the current device,
 * allocated on `stream` (a stream argument); new reference. */
PyObject *pygpu_array_empty_like(pygpu_state *st, PyGPUArray *a, PyArray_Descr *descr, int order, PyObject *stream);

/* A view of `a` with another shape/strides/offset; new reference. */
PyObject *pygpu_array_view(PyGPUArray *a, int nd, const ptrdiff_t *shape, const ptrdiff_t *strides,
                           char *data, PyArray_Descr *descr);

/* A dense copy of `a` on device `dev` (stream `s` of it), laid out in
 * `order` (enum pygpu_order); new reference.  A copy to another device is
 * done when this returns. */
PyObject *pygpu_array_dense_copy(pygpu_state *st, PyGPUArray *a, int order, pygpu_stream_t s, PyObject *stream,
                                 int dev);

#endif /* PYGPU_ARRAY_H */
