/*
 * names.c -- the module's interned names and constant values (the CUDA
 * Array Interface's keys, the protocols' attribute names, __dlpack__'s
 * keyword names, the typestr of each dtype...), made once per module into
 * the named fields of pygpu_state.names, so that the hot paths of the
 * interop files and of stream arguments build no string.
 */
#include "pygpu.h"
#include "names.h"
#include "dlpack.h"
#include "dtype.h"
#include "state.h"

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

/* The typestrs and descr items of every type number; 0, or -1 with an exception. */
static int make_type_tables(pygpu_names *n)
{
    PyObject *empty = PyUnicode_FromString("");
    n->typestrs = PyTuple_New(NPY_HALF + 1);
    n->descr_items = PyTuple_New(NPY_HALF + 1);
    int r = empty && n->typestrs && n->descr_items ? 0 : -1;
    for (int i = 0; r == 0 && i <= NPY_HALF; i++) {
        PyObject *s = typestr_of(i), *item;
        if (!s)
            r = -1;
        else
            PyTuple_SET_ITEM(n->typestrs, i, s);
        if (r == 0 && !(item = s == Py_None ? Py_NewRef(Py_None) : PyTuple_Pack(2, empty, s)))
            r = -1;
        else if (r == 0)
            PyTuple_SET_ITEM(n->descr_items, i, item);
    }
    Py_XDECREF(empty);
    return r;
}

int pygpu_names_init(pygpu_state *st)
{
    static const char *const kw[] = {"stream", "max_version", "dl_device", "copy"};
    static const char *const kw_svc[] = {"stream", "max_version", "copy"};
    pygpu_names *n = &st->names;
    PyObject **cai_keys[] = {&n->shape, &n->typestr, &n->data, &n->version, &n->strides, &n->descr, &n->stream};
    static const char *const cai_names[] = {"shape", "typestr", "data", "version", "strides", "descr", "stream"};
    for (size_t i = 0; i < sizeof cai_keys / sizeof *cai_keys; i++)
        *cai_keys[i] = PyUnicode_InternFromString(cai_names[i]);
    n->mask = PyUnicode_InternFromString("mask");
    n->zero = PyLong_FromLong(0);
    n->three = PyLong_FromLong(3);
    if (make_type_tables(n) < 0)
        return -1;
    n->cai_attr = PyUnicode_InternFromString("__cuda_array_interface__");
    n->dlpack_attr = PyUnicode_InternFromString("__dlpack__");
    n->dlpack_device_attr = PyUnicode_InternFromString("__dlpack_device__");
    n->exchange_attr = PyUnicode_InternFromString(PYGPU_DLPACK_EXCHANGE_ATTR);
    n->cuda_stream_attr = PyUnicode_InternFromString("__cuda_stream__");
    n->kw_s = names_tuple(1, kw);
    n->kw_sv = names_tuple(2, kw);
    n->kw_svc = names_tuple(3, kw_svc);
    n->kw_svdc = names_tuple(4, kw);
    n->max_version = Py_BuildValue("(ii)", PYGPU_DLPACK_MAJOR, PYGPU_DLPACK_MINOR);
    n->cpu_device = Py_BuildValue("(ii)", (int)kDLCPU, 0);
    n->old_producers = PySet_New(NULL);
    n->cai_template = PyDict_New();     /* sized for the CAI keys once; copies need no resizing */
    for (size_t i = 0; n->cai_template && i < sizeof cai_keys / sizeof *cai_keys; i++)
        if (!*cai_keys[i] || PyDict_SetItem(n->cai_template, *cai_keys[i], Py_None) < 0)
            Py_CLEAR(n->cai_template);
    PyObject **all = (PyObject **)n;
    for (size_t i = 0; i < sizeof *n / sizeof(PyObject *); i++)
        if (!all[i]) {
            if (!PyErr_Occurred())
                PyErr_NoMemory();
            return -1;
        }
    return 0;
}

int pygpu_names_visit(pygpu_state *st, visitproc visit, void *arg)
{
    PyObject **all = (PyObject **)&st->names;
    for (size_t i = 0; i < sizeof st->names / sizeof(PyObject *); i++)
        Py_VISIT(all[i]);
    return 0;
}

void pygpu_names_clear(pygpu_state *st)
{
    PyObject **all = (PyObject **)&st->names;
    for (size_t i = 0; i < sizeof st->names / sizeof(PyObject *); i++)
        Py_CLEAR(all[i]);
}
