/*
 * interop.c -- the front door for other libraries' arrays:
 * pygpu.asarray(obj, dtype=None) takes a GPUArray as it is, another
 * library's device array without a copy (the C exchange API, the CUDA Array
 * Interface, DLPack), and host data by copying it.
 */
#include "pygpu.h"
#include "dlpack.h"

/* ---- asarray ---------------------------------------------------------------- */

/* 1 if obj has attribute `name`, 0 if not, -1 with an exception. */
static int has_attr(PyObject *obj, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v) {
        Py_DECREF(v);
        return 1;
    }
    if (!PyErr_ExceptionMatches(PyExc_AttributeError))
        return -1;
    PyErr_Clear();
    return 0;
}

/* `obj` through its __cuda_array_interface__: *found is 0 (and NULL comes
 * back with no exception) where it has none. */
static PyObject *via_cai(pygpu_state *st, PyObject *obj, int *found)
{
    PyObject *iface = PyObject_GetAttr(obj, st->names.cai_attr), *r;
    if (!(*found = iface != NULL)) {
        if (PyErr_ExceptionMatches(PyExc_AttributeError))
            PyErr_Clear();
        return NULL;
    }
    r = pygpu_cai_import(st, obj, iface);
    Py_DECREF(iface);
    return r;
}

/* `obj` as a GPUArray without a copy where one can be avoided; host data
 * is copied (converted to `dtype` if given). */
static PyObject *as_array(pygpu_state *st, PyObject *obj, PyObject *dtype)
{
    int has, found;
    long dev[2];
    PyObject *r;
    if (PyObject_TypeCheck(obj, st->Array))
        return Py_NewRef(obj);
    if (PyArray_Check(obj))
        return pygpu_dl_upload(st, obj, -1, dtype);
    const void *api = pygpu_exchange_api_of(st, Py_TYPE(obj));
    if (api) {      /* host data is copied here as all host data is (on every backend) */
        int fallback = 0;
        r = pygpu_exchange_import(st, obj, api, -1, -1, 1, &fallback);
        if (r || !fallback)
            return r;
    } else if (PyErr_Occurred()) {
        return NULL;
    }
#if defined(PYGPU_BACKEND_CUDA)
    if ((r = via_cai(st, obj, &found)) || found || PyErr_Occurred())
        return r;
#endif
    if (PyCapsule_CheckExact(obj))
        return pygpu_dl_from_dlpack(st, obj, -1, -1, NULL);
    if ((has = has_attr(obj, st->names.dlpack_attr)) < 0)
        return NULL;
    if (has) {
        /* Host data is copied here as all host data is (on every backend). */
        if (pygpu_dl_query_device(st, obj, dev) < 0)
            return NULL;
        return pygpu_dl_from_dlpack(st, obj, -1, pygpu_dl_is_host_type(dev[0]) ? 1 : -1, dev);
    }
#if !defined(PYGPU_BACKEND_CUDA)
    /* (elsewhere the interface is checked, then refused saying why) */
    if ((r = via_cai(st, obj, &found)) || found || PyErr_Occurred())
        return r;
#endif
    return pygpu_dl_upload(st, obj, -1, dtype);
}

PyObject *pygpu_asarray(pygpu_state *st, PyObject *obj) { return as_array(st, obj, NULL); }

static PyObject *mod_asarray(PyObject *m, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"obj", "dtype"};
    PyObject *v[2] = {NULL, NULL}, *dtype, *r;
    pygpu_state *st = PyModule_GetState(m);
    PyArray_Descr *want = NULL;
    if (pygpu_dl_parse_args("asarray", args, nargs, kwnames, names, 2, 2, 0, v) < 0)
        return NULL;
    if (!v[0])
        return PyErr_Format(PyExc_TypeError, "asarray() missing required argument 'obj' (pos 1)");
    dtype = v[1] && v[1] != Py_None ? v[1] : NULL;
    if (dtype && !(want = pygpu_descr_arg(dtype)))
        return NULL;
    r = as_array(st, v[0], dtype);
    if (r && want && !PyArray_EquivTypes(((PyGPUArray *)r)->descr, want))
        Py_SETREF(r, pygpu_array_astype((PyGPUArray *)r, want, PYGPU_ORDER_K, NULL, Py_None));
    Py_XDECREF(want);
    return r;
}

/* ---- init ------------------------------------------------------------------- */

#define FASTKW(f) (PyCFunction)(void (*)(void))(f), METH_FASTCALL | METH_KEYWORDS
static PyMethodDef interop_methods[] = {
    {"asarray", FASTKW(mod_asarray),
     "asarray(obj, dtype=None)\n--\n\n"
     "`obj` as a GPUArray: GPUArrays as they are, device arrays of other libraries\n"
     "(__cuda_array_interface__, DLPack) without a copy, host data copied to the device."},
    {0},
};
int pygpu_interop_init(PyObject *m)
{
    if (pygpu_dlpack_functions_init(m) < 0)
        return -1;
    return PyModule_AddFunctions(m, interop_methods);
}
