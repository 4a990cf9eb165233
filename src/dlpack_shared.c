/*
 * dlpack_shared.c -- what DLPack's two directions share (import: dlpack_import.c,
 * export: dlpack_export.c): which device types this backend's arrays
 * reach and their names, the vectorcall argument parser and the copy= and
 * pair arguments of __dlpack__ and from_dlpack, the stream of an array's
 * last work as a stream argument, and the device copy both make when a
 * copy is asked for.
 */
#include "pygpu.h"
#include "dlpack_shared.h"
#include "array.h"
#include "dlpack.h"
#include "stream.h"

/* 1 if this backend's arrays can view memory of device type `t` in place. */
int pygpu_dl_reachable(long t)
{
#if defined(PYGPU_BACKEND_CUDA)
    return t == kDLCUDA || t == kDLCUDAManaged;
#elif defined(PYGPU_BACKEND_HIP)
    return t == kDLROCM;
#else
    return pygpu_dl_is_host_type(t);
#endif
}

int pygpu_dl_reach(long t) { return (pygpu_dl_reachable(t) ? 1 : 0) | (pygpu_dl_is_host_type(t) ? 2 : 0); }

const char *pygpu_dl_device_name(long t)
{
    static const char *const names[] = {
        [kDLCPU] = "kDLCPU", [kDLCUDA] = "kDLCUDA", [kDLCUDAHost] = "kDLCUDAHost",
        [kDLOpenCL] = "kDLOpenCL", [kDLVulkan] = "kDLVulkan", [kDLMetal] = "kDLMetal", [kDLVPI] = "kDLVPI",
        [kDLROCM] = "kDLROCM", [kDLROCMHost] = "kDLROCMHost", [kDLExtDev] = "kDLExtDev",
        [kDLCUDAManaged] = "kDLCUDAManaged", [kDLOneAPI] = "kDLOneAPI", [kDLWebGPU] = "kDLWebGPU",
        [kDLHexagon] = "kDLHexagon", [kDLMAIA] = "kDLMAIA",
    };
    return t >= 0 && t < (long)(sizeof names / sizeof names[0]) && names[t] ? names[t] : "an unknown device type";
}

/* A stream argument naming the stream of `a`'s last work; new reference. */
PyObject *pygpu_dl_last_stream_arg(PyGPUArray *a)
{
    PyGPUArray *r = pygpu_array_root(a);
    return r->last_stream_ref ? Py_NewRef(r->last_stream_ref) : PyLong_FromVoidPtr(r->last_stream);
}

/* Vectorcall arguments into out[0..n) (NULL where not given): at most
 * `maxpos` positionally, names[0..posonly) only positionally. */
int pygpu_dl_parse_args(const char *fname, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                        const char *const *names, int n, int maxpos, int posonly, PyObject **out)
{
    if (nargs > maxpos) {
        if (maxpos == 0)
            PyErr_Format(PyExc_TypeError, "%s() takes no positional arguments (%zd given)", fname, nargs);
        else
            PyErr_Format(PyExc_TypeError, "%s() takes at most %d positional argument%s (%zd given)", fname,
                         maxpos, maxpos == 1 ? "" : "s", nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; i++)
        out[i] = args[i];
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        int j = posonly;
        while (j < n && PyUnicode_CompareWithASCIIString(key, names[j]) != 0)
            j++;
        if (j == n) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument %R", fname, key);
            return -1;
        }
        if (out[j]) {
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", fname, names[j]);
            return -1;
        }
        out[j] = args[nargs + k];
    }
    return 0;
}

/* copy=: None -> -1, False -> 0, True -> 1; -2 with TypeError. */
int pygpu_dl_copy_arg(PyObject *v, const char *fname)
{
    if (!v || v == Py_None)
        return -1;
    if (v == Py_True || v == Py_False)
        return v == Py_True;
    PyErr_Format(PyExc_TypeError, "%s(): copy must be True, False or None, not %.100s", fname, Py_TYPE(v)->tp_name);
    return -2;
}

/* A tuple of two ints (max_version, dl_device); 0, or -1 with TypeError. */
int pygpu_dl_int_pair(PyObject *v, const char *what, long *a, long *b)
{
    if (PyTuple_Check(v) && PyTuple_GET_SIZE(v) == 2 && PyIndex_Check(PyTuple_GET_ITEM(v, 0)) &&
        PyIndex_Check(PyTuple_GET_ITEM(v, 1))) {
        if ((*a = PyLong_AsLong(PyTuple_GET_ITEM(v, 0))) == -1 && PyErr_Occurred())
            goto range;
        if ((*b = PyLong_AsLong(PyTuple_GET_ITEM(v, 1))) == -1 && PyErr_Occurred())
            goto range;
        return 0;
    range:
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_OverflowError, "%s: %R is out of range", what, v);
        }
        return -1;
    }
    PyErr_Format(PyExc_TypeError, "%s must be None or a tuple of two ints, not %R", what, v);
    return -1;
}

/* A dense copy of `a` on its device, queued after its pending work; new
 * reference. */
PyObject *pygpu_dl_device_copy(pygpu_state *st, PyGPUArray *a)
{
    PyObject *stream = pygpu_dl_last_stream_arg(a), *r = NULL;
    pygpu_stream_t s;
    if (stream && pygpu_stream_for(st, stream, a->device, "copy", &s) == 0)
        r = pygpu_array_dense_copy(st, a, PYGPU_ORDER_K, s, stream, a->device);
    Py_XDECREF(stream);
    return r;
}
