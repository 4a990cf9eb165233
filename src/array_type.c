/*
 * array_type.c -- the GPUArray type itself: its slots (GC, dealloc, repr
 * and str as NumPy shows the values, iteration, and the protocol slots of
 * the files beneath), its spec, and its creation at module init.
 */
#include "pygpu.h"
#include "array_type.h"
#include "array_getset.h"
#include "array_host.h"
#include "array_mapping.h"
#include "array_methods.h"
#include "array_new.h"
#include "array_scalar.h"
#include "memory.h"

#include <structmember.h>


static int array_traverse(PyObject *self, visitproc visit, void *arg)
{
    PyGPUArray *a = (PyGPUArray *)self;
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(a->mem);
    Py_VISIT(a->base);
    Py_VISIT(a->last_stream_ref);
    return 0;
}

static int array_clear(PyObject *self)
{
    PyGPUArray *a = (PyGPUArray *)self;
    pygpu_memory_view(a->mem, -1);
    Py_CLEAR(a->mem);
    Py_CLEAR(a->base);
    Py_CLEAR(a->shape_tuple);
    Py_CLEAR(a->ptr_int);
    Py_CLEAR(a->last_stream_ref);
    return 0;
}

static void array_dealloc(PyObject *self)
{
    PyGPUArray *a = (PyGPUArray *)self;
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (a->weakreflist)
        PyObject_ClearWeakRefs(self);
    array_clear(self);
    Py_CLEAR(a->descr);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyObject *array_repr(PyObject *self);
static PyObject *array_str(PyObject *self);
static PyObject *array_iter(PyObject *self);

static PyMemberDef array_members[] = {
    {"shape", T_OBJECT_EX, offsetof(PyGPUArray, shape_tuple), READONLY, "The length of each axis."},
    {"ptr", T_OBJECT_EX, offsetof(PyGPUArray, ptr_int), READONLY,
     "Device address of element [0, ..., 0], an int."},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(PyGPUArray, weakreflist), READONLY, NULL},
    {0},
};

static PyType_Slot array_slots[] = {
    {Py_tp_doc, "GPUArray(shape, dtype=None, allocator=None, base=None, gpudata=None, strides=None, "
                "order=None, *, stream=None)\n--\n\n"
                "A NumPy-style array in device memory (dtype None: float64; order None: 'C').\n"
                "GPUArray(host_data) copies host data (anything NumPy converts) to the device."},
    {Py_tp_new, pygpu_array_new},
    {Py_tp_dealloc, array_dealloc},
    {Py_tp_traverse, array_traverse},
    {Py_tp_clear, array_clear},
    {Py_tp_repr, array_repr},
    {Py_tp_str, array_str},
    {Py_mp_subscript, pygpu_array_subscript},
    {Py_mp_ass_subscript, pygpu_array_ass_subscript},
    {Py_mp_length, pygpu_array_length},
    {Py_sq_length, pygpu_array_length},
    {Py_sq_item, pygpu_array_item},
    {Py_nb_bool, pygpu_array_bool},
    {Py_nb_float, pygpu_array_float},
    {Py_nb_int, pygpu_array_int},
    {Py_nb_index, pygpu_array_index},
    {Py_tp_iter, array_iter},
    {Py_tp_members, array_members},
    {Py_tp_getset, NULL},                /* (filled in at init: array_getset.c) */
    {Py_tp_methods, NULL},               /* (filled in at init: array_methods.c) */
    {0, NULL},
};

static PyType_Spec array_spec = {
    .name = "pygpu.GPUArray",
    .basicsize = offsetof(PyGPUArray, dims),
    .itemsize = sizeof(ptrdiff_t),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = array_slots,
};

/* repr/str: the values as NumPy shows them. */
static PyObject *host_copy(PyObject *self)
{
    return pygpu_array_get((PyGPUArray *)self, NULL, NULL, 0, 0);
}

/* repr() and str() of an array whose DeviceAllocation was freed: what it
 * was, without its values (which are gone); NULL (no exception) for an
 * array whose memory is there. */
static PyObject *freed_repr(PyObject *self)
{
    PyGPUArray *a = (PyGPUArray *)self;
    if (pygpu_memory_usable(a->mem) == 0)
        return NULL;
    PyErr_Clear();
    return PyUnicode_FromFormat("<GPUArray of freed memory: shape %R, dtype %R, device %d>", a->shape_tuple,
                                (PyObject *)a->descr, a->device);
}

static PyObject *array_repr(PyObject *self)
{
    PyObject *h, *text = NULL, *lines = NULL, *out = NULL, *r = NULL;
    if ((r = freed_repr(self)) != NULL)
        return r;
    if (!(h = host_copy(self)))
        return NULL;
    /* NumPy writes "array(...)", continuation lines indented under the
     * parenthesis: rename it and indent them by the three letters added. */
    if (!(text = PyObject_Repr(h)) || !(lines = PyUnicode_Splitlines(text, 0)) || !(out = PyList_New(0)))
        goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(lines); i++) {
        PyObject *line = PyList_GET_ITEM(lines, i), *fixed;
        if (i == 0) {
            PyObject *rest = PyUnicode_Substring(line, 5, PY_SSIZE_T_MAX);   /* after "array" */
            fixed = rest ? PyUnicode_FromFormat("GPUArray%U", rest) : NULL;
            Py_XDECREF(rest);
        } else if (PyUnicode_GET_LENGTH(line) > 0)
            fixed = PyUnicode_FromFormat("   %U", line);
        else
            fixed = Py_NewRef(line);
        if (!fixed || PyList_Append(out, fixed) < 0) {
            Py_XDECREF(fixed);
            goto done;
        }
        Py_DECREF(fixed);
    }
    PyObject *nl = PyUnicode_FromString("\n");
    if (nl) {
        r = PyUnicode_Join(nl, out);
        Py_DECREF(nl);
    }
done:
    Py_XDECREF(text);
    Py_XDECREF(lines);
    Py_XDECREF(out);
    Py_DECREF(h);
    return r;
}

static PyObject *array_str(PyObject *self)
{
    PyObject *h = freed_repr(self);
    if (h || !(h = host_copy(self)))
        return h;
    PyObject *r = PyObject_Str(h);
    Py_DECREF(h);
    return r;
}

/* iter(a): the views a[0], a[1], ...; a 0-d array is not iterable. */
static PyObject *array_iter(PyObject *self)
{
    if (((PyGPUArray *)self)->nd == 0) {
        PyErr_SetString(PyExc_TypeError, "iteration over a 0-d array");
        return NULL;
    }
    return PySeqIter_New(self);
}

int pygpu_array_init(PyObject *m, pygpu_state *st)
{
    for (PyType_Slot *slot = array_slots; slot->slot; slot++) {
        if (slot->slot == Py_tp_getset)
            slot->pfunc = pygpu_array_getset_defs();
        else if (slot->slot == Py_tp_methods)
            slot->pfunc = pygpu_array_method_defs();
    }
    st->Array = (PyTypeObject *)PyType_FromModuleAndSpec(m, &array_spec, NULL);
    if (!st->Array || PyModule_AddType(m, st->Array) < 0 || pygpu_flags_init(m, st) < 0)
        return -1;
    return pygpu_array_new_init(m);
}
