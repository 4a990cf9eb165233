/*
 * array_host.h -- the functions array_host.c offers the files above it
 * (array_host.c: the three doors between host data and GPUArrays, side by
 * side over one conversion of the host value (as NumPy pairs PyArray_FromAny
 * with PyArray_CopyObject): the construction rule (host data into a new
 * array: to_gpu, asarray and from_dlpack of host data, GPUArray(host_data)),
 * the assignment rule (a[...] = value, set: host data or another array,
 * broadcast and converted), and the download (get)).
 */
#ifndef PYGPU_ARRAY_HOST_H
#define PYGPU_ARRAY_HOST_H

#include "pygpu.h"

/* The one upload door: host data `obj` (anything NumPy converts; cast to
 * `descr` if not NULL, which is stolen) in a new array on the current
 * device, copied on `stream` (a stream argument), done on return unless
 * `async`.  to_gpu, to_gpu_async, asarray and from_dlpack of host data all
 * come here.  New reference. */
PyObject *pygpu_array_from_host(pygpu_state *st, PyObject *obj, PyArray_Descr *descr, PyObject *stream, int async);

/* The same, making an array of type `tp` (GPUArray or a subclass). */
PyObject *pygpu_array_from_host_as(pygpu_state *st, PyTypeObject *tp, PyObject *obj, PyArray_Descr *descr,
                                   PyObject *stream, int async);

/* Copy host data `value` (anything NumPy converts) into `a`, broadcast. */
int pygpu_array_assign(PyGPUArray *a, PyObject *value, PyObject *stream, int async);

/* A new NumPy array with `a`'s elements (C order), or them into `out`; with
 * `async`, a copy into a page-locked `out` is only queued on the stream. */
PyObject *pygpu_array_get(PyGPUArray *a, PyObject *out, PyObject *stream, int pagelocked, int async);

/* The host array an upload copies (array_host.c): `obj` as NumPy converts
 * it (cast to `descr` if given, which is stolen), in a dtype PyGPU holds;
 * new reference. */
PyArrayObject *pygpu_upload_source(PyObject *obj, PyArray_Descr *descr);

/* Host array `h` copied into `a` (a new array of its shape and type) on
 * `stream`, which `a` then records; 0, or -1. */
int pygpu_upload_into(pygpu_state *st, PyGPUArray *a, PyArrayObject *h, PyObject *stream, int async);

/* A host value converted to `descr` for an assignment or a fill (a NumPy
 * array, FORCECAST); new reference. */
PyArrayObject *pygpu_host_value(PyObject *value, PyArray_Descr *descr);

#endif /* PYGPU_ARRAY_HOST_H */
