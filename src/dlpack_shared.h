/*
 * dlpack_shared.h -- the functions dlpack_shared.c offers the files above it: what
 * DLPack's two directions share (device types reached and their names,
 * argument parsing, the stream of an array's last work, the device copy).
 */
#ifndef PYGPU_DLPACK_SHARED_H
#define PYGPU_DLPACK_SHARED_H

#include "pygpu.h"
#include "dlpack.h"

/* What this backend's arrays make of memory of device type `t`: bit 1,
 * they view it in place; bit 2, it is host memory (which they can copy);
 * 0, they cannot reach it. */
int pygpu_dl_reach(long t);
/* The name of device type `t` ("kDLCUDA", ...), for messages. */
const char *pygpu_dl_device_name(long t);
/* A stream argument naming the stream of `a`'s last work; new reference. */
PyObject *pygpu_dl_last_stream_arg(PyGPUArray *a);
/* Vectorcall arguments into out[0..n) (NULL where not given): at most
 * `maxpos` positionally, names[0..posonly) only positionally; 0, or -1
 * with TypeError. */
int pygpu_dl_parse_args(const char *fname, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                        const char *const *names, int n, int maxpos, int posonly, PyObject **out);
/* copy=: None -> -1, False -> 0, True -> 1; -2 with TypeError. */
int pygpu_dl_copy_arg(PyObject *v, const char *fname);
/* A tuple of two ints (max_version, dl_device); 0, or -1 with TypeError. */
int pygpu_dl_int_pair(PyObject *v, const char *what, long *a, long *b);
/* A dense copy of `a` on its device, queued after its pending work; new
 * reference. */
PyObject *pygpu_dl_device_copy(pygpu_state *st, PyGPUArray *a);
/* 1 if this backend's arrays can view memory of device type `t` in place. */
int pygpu_dl_reachable(long t);

#endif /* PYGPU_DLPACK_SHARED_H */
