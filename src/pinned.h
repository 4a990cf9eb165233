/*
 * pinned.h -- the functions pinned.c offers the files above it (pinned.c:
 * page-locked host memory for Python: the HostAllocation type, which exports
 * its bytes through the buffer protocol (numpy.frombuffer views it), from the
 * pinned pool (transfer/pinned_pool.c) or allocated on its own).
 */
#ifndef PYGPU_PINNED_H
#define PYGPU_PINNED_H

#include "pygpu.h"

int pygpu_pinned_init(PyObject *m, pygpu_state *st);

/* A NumPy array of `shape` (C order) in page-locked memory; new reference.
 * With `pooled`, the memory is a block the pinned pool has cached for
 * transfers with device `dev`, and NULL without an exception set means it
 * has none. */
PyObject *pygpu_pagelocked_empty(pygpu_state *st, PyArray_Descr *descr, int nd, const ptrdiff_t *shape,
                                 int pooled, int dev);

int pygpu_pinned_functions_init(PyObject *m);

#endif /* PYGPU_PINNED_H */
