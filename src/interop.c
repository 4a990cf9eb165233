/*
 * interop.c -- the front door for other libraries' arrays:
 * pygpu.asarray(obj, dtype=None) takes a GPUArray as it is, another
 * library's device array without a copy (the C exchange API, the CUDA Array
 * Interface, DLPack), and host data by copying it; and the names and
 * constants the interop files share, made once per module (pygpu_interop_get).
 */
#include "pygpu.h"
#include "dlpack.h"

#define CACHED(st, ix) PYGPU_CACHED(st, ix)

PyObject *pygpu_interop_get(pygpu_state *st, int index) { return PyTuple_GET_ITEM(st->interop, index); }

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
    PyObject *iface = PyObject_GetAttr(obj, CACHED(st, CAI_ATTR)), *r;
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
    if ((has = has_attr(obj, CACHED(st, DLPACK_ATTR))) < 0)
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
/* The typestr of type number `n` ('<f4'), or None where GPUArray has no such dtype. */
static PyObject *typestr_of(int n)
{
    PyArray_Descr *d = PyArray_DescrFromType(n);
    PyObject *r;
    if (!d) {
        PyErr_Clear();
        return Py_NewRef(Py_None);
    }
    int size = (int)PyDataType_ELSIZE(d);
    char order = size == 1 ? '|' : PY_LITTLE_ENDIAN ? '<' : '>';
    r = pygpu_descr_supported(d) ? PyUnicode_FromFormat("%c%c%d", order, d->kind, size) : Py_NewRef(Py_None);
    Py_DECREF(d);
    return r;
}

static PyObject *names_tuple(int n, const char *const *names)
{
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t && i < n; i++) {
        PyObject *s = PyUnicode_InternFromString(names[i]);
        if (!s)
            Py_CLEAR(t);
        else
            PyTuple_SET_ITEM(t, i, s);
    }
    return t;
}

static PyObject *make_cache(void)
{
    static const char *const keys[] = {"shape", "typestr", "data", "version", "strides", "descr", "stream", "mask"};
    static const char *const kw[] = {"stream", "max_version", "dl_device", "copy"};
    static const char *const kw_svc[] = {"stream", "max_version", "copy"};
    PyObject *t = PyTuple_New(PYGPU_IX_COUNT), *types = PyTuple_New(NPY_HALF + 1), *items = PyTuple_New(NPY_HALF + 1);
    PyObject *empty = PyUnicode_FromString("");
    if (!t || !types || !items || !empty)
        goto fail;
    for (int n = 0; n <= NPY_HALF; n++) {
        PyObject *s = typestr_of(n);
        if (!s)
            goto fail;
        PyTuple_SET_ITEM(types, n, s);
        PyObject *item = s == Py_None ? Py_NewRef(Py_None) : PyTuple_Pack(2, empty, s);
        if (!item)
            goto fail;
        PyTuple_SET_ITEM(items, n, item);
    }
    for (int i = 0; i < 8; i++)
        PyTuple_SET_ITEM(t, PYGPU_IX_SHAPE + i, PyUnicode_InternFromString(keys[i]));
    PyTuple_SET_ITEM(t, PYGPU_IX_ZERO, PyLong_FromLong(0));
    PyTuple_SET_ITEM(t, PYGPU_IX_THREE, PyLong_FromLong(3));
    PyTuple_SET_ITEM(t, PYGPU_IX_TYPESTRS, types);
    PyTuple_SET_ITEM(t, PYGPU_IX_DESCR_ITEMS, items);
    types = items = NULL;
    PyTuple_SET_ITEM(t, PYGPU_IX_CAI_ATTR, PyUnicode_InternFromString("__cuda_array_interface__"));
    PyTuple_SET_ITEM(t, PYGPU_IX_DLPACK_ATTR, PyUnicode_InternFromString("__dlpack__"));
    PyTuple_SET_ITEM(t, PYGPU_IX_DLPACK_DEVICE_ATTR, PyUnicode_InternFromString("__dlpack_device__"));
    PyTuple_SET_ITEM(t, PYGPU_IX_COPY_ATTR, PyUnicode_InternFromString("copy"));
    PyTuple_SET_ITEM(t, PYGPU_IX_KW_S, names_tuple(1, kw));
    PyTuple_SET_ITEM(t, PYGPU_IX_KW_SV, names_tuple(2, kw));
    PyTuple_SET_ITEM(t, PYGPU_IX_KW_SVC, names_tuple(3, kw_svc));
    PyTuple_SET_ITEM(t, PYGPU_IX_KW_SVDC, names_tuple(4, kw));
    PyTuple_SET_ITEM(t, PYGPU_IX_MAX_VERSION, Py_BuildValue("(ii)", PYGPU_DLPACK_MAJOR, PYGPU_DLPACK_MINOR));
    PyTuple_SET_ITEM(t, PYGPU_IX_CPU_DEVICE, Py_BuildValue("(ii)", (int)kDLCPU, 0));
    PyTuple_SET_ITEM(t, PYGPU_IX_OLD_PRODUCERS, PySet_New(NULL));
    PyObject *tmpl = PyDict_New();      /* sized for the CAI keys once; copies need no resizing */
    for (int i = 0; tmpl && i < PYGPU_IX_MASK - PYGPU_IX_SHAPE; i++) {
        PyObject *k = PyTuple_GET_ITEM(t, PYGPU_IX_SHAPE + i);
        if (!k || PyDict_SetItem(tmpl, k, Py_None) < 0)
            Py_CLEAR(tmpl);
    }
    PyTuple_SET_ITEM(t, PYGPU_IX_CAI_TEMPLATE, tmpl);
    PyTuple_SET_ITEM(t, PYGPU_IX_EXCHANGE_ATTR, PyUnicode_InternFromString(PYGPU_DLPACK_EXCHANGE_ATTR));
    PyTuple_SET_ITEM(t, PYGPU_IX_CUDA_STREAM_ATTR, PyUnicode_InternFromString("__cuda_stream__"));
    for (int i = 0; i < PYGPU_IX_COUNT; i++)
        if (!PyTuple_GET_ITEM(t, i))
            goto fail;
    Py_DECREF(empty);
    return t;
fail:
    if (!PyErr_Occurred())
        PyErr_NoMemory();
    Py_XDECREF(t);
    Py_XDECREF(types);
    Py_XDECREF(items);
    Py_XDECREF(empty);
    return NULL;
}

int pygpu_interop_init(PyObject *m, pygpu_state *st)
{
    if (!(st->interop = make_cache()))
        return -1;
    if (PyModule_AddFunctions(m, pygpu_dlpack_methods) < 0)
        return -1;
    return PyModule_AddFunctions(m, interop_methods);
}
