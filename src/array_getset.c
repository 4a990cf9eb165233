/*
 * array_getset.c -- GPUArray attributes, and the small ArrayFlags type that
 * `flags` returns.
 */
#include "pygpu.h"
#include "array_getset.h"
#include "array_shape.h"
#include "cai.h"
#include "convert.h"
#include "device.h"
#include "state.h"

#define SELF ((PyGPUArray *)self)

typedef struct {                /* ArrayFlags: a snapshot of an array's flags */
    PyObject_HEAD
    int flags;
} PyGPUFlags;

static PyObject *get_strides(PyObject *self, void *c)
{
    (void)c;
    return pygpu_tuple_of(GA_STRIDES(SELF), SELF->nd);
}

static PyObject *get_dtype(PyObject *self, void *c)
{
    (void)c;
    return Py_NewRef((PyObject *)SELF->descr);
}

static PyObject *get_ndim(PyObject *self, void *c)
{
    (void)c;
    return PyLong_FromLong(SELF->nd);
}

static PyObject *get_size(PyObject *self, void *c)
{
    (void)c;
    return PyLong_FromSsize_t(pygpu_array_size(SELF));
}

static PyObject *get_itemsize(PyObject *self, void *c)
{
    (void)c;
    return PyLong_FromSsize_t(GA_ITEMSIZE(SELF));
}

static PyObject *get_nbytes(PyObject *self, void *c)
{
    (void)c;
    return PyLong_FromSsize_t(pygpu_array_size(SELF) * GA_ITEMSIZE(SELF));
}

static PyObject *get_gpudata(PyObject *self, void *c)
{
    (void)c;
    /* PyCUDA style: the allocation itself when the array starts at it. */
    pygpu_state *st = pygpu_state_of(self);
    if (!st)
        return NULL;
    if (PyObject_TypeCheck(SELF->mem, st->Memory) && ((PyGPUMemory *)SELF->mem)->ptr == SELF->data)
        return Py_NewRef(SELF->mem);
    return PyLong_FromVoidPtr(SELF->data);
}

static PyObject *get_base(PyObject *self, void *c)
{
    (void)c;
    return Py_NewRef(SELF->base ? SELF->base : Py_None);
}

static PyObject *get_device(PyObject *self, void *c)
{
    (void)c;
    pygpu_state *st = pygpu_state_of(self);
    return st ? pygpu_device_get(st, SELF->device) : NULL;
}

static PyObject *get_T(PyObject *self, void *c)
{
    (void)c;
    return pygpu_array_T(SELF);
}

static PyObject *get_flags(PyObject *self, void *c)
{
    (void)c;
    pygpu_state *st = pygpu_state_of(self);
    if (!st)
        return NULL;
    PyGPUFlags *f = PyObject_New(PyGPUFlags, st->Flags);
    if (f)
        f->flags = SELF->flags;
    return (PyObject *)f;
}

static PyGetSetDef array_getset[] = {
    {"strides", get_strides, NULL, "Bytes between neighbours along each axis.", NULL},
    {"dtype", get_dtype, NULL, "The element type (a numpy.dtype).", NULL},
    {"ndim", get_ndim, NULL, "Number of axes.", NULL},
    {"size", get_size, NULL, "Number of elements.", NULL},
    {"mem_size", get_size, NULL, "Number of elements (PyCUDA's name).", NULL},
    {"itemsize", get_itemsize, NULL, "Bytes per element.", NULL},
    {"nbytes", get_nbytes, NULL, "Bytes of the elements (size * itemsize).", NULL},
    {"gpudata", get_gpudata, NULL,
     "The DeviceAllocation when the array starts at it, else the address (int-convertible).", NULL},
    {"base", get_base, NULL, "The array (or owner) this array views, or None.", NULL},
    {"device", get_device, NULL, "The Device holding the array.", NULL},
    {"flags", get_flags, NULL, "Layout flags: c_contiguous, f_contiguous, forc, writeable.", NULL},
    {"T", get_T, NULL, "The transpose (a view).", NULL},
#ifdef PYGPU_BACKEND_CUDA
    {"__cuda_array_interface__", pygpu_array_cai, NULL,
     "The CUDA Array Interface (version 3): shape, typestr, data, strides, descr and the stream\n"
     "of the array's pending work.  CUDA arrays only: HIP and host arrays export DLPack.", NULL},
#endif
    {0},
};

/* ---- ArrayFlags ------------------------------------------------------------ */

static int flag_bit(PyObject *self, int bit) { return (((PyGPUFlags *)self)->flags & bit) != 0; }

static PyObject *flags_c(PyObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(flag_bit(self, PYGPU_C_CONTIGUOUS));
}

static PyObject *flags_f(PyObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(flag_bit(self, PYGPU_F_CONTIGUOUS));
}

static PyObject *flags_forc(PyObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(flag_bit(self, PYGPU_C_CONTIGUOUS | PYGPU_F_CONTIGUOUS));
}

static PyObject *flags_w(PyObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(flag_bit(self, PYGPU_WRITEABLE));
}

static PyObject *flags_getitem(PyObject *self, PyObject *key)
{
    static const struct { const char *name; PyObject *(*get)(PyObject *, void *); } names[] = {
        {"C_CONTIGUOUS", flags_c}, {"C", flags_c}, {"CONTIGUOUS", flags_c},
        {"F_CONTIGUOUS", flags_f}, {"F", flags_f}, {"FORTRAN", flags_f},
        {"FORC", flags_forc}, {"WRITEABLE", flags_w}, {"W", flags_w},
    };
    if (PyUnicode_Check(key)) {
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            if (PyUnicode_CompareWithASCIIString(key, names[i].name) == 0)
                return names[i].get(self, NULL);
    }
    PyErr_Format(PyExc_KeyError, "unknown flag %R", key);
    return NULL;
}

static PyObject *flags_repr(PyObject *self)
{
    return PyUnicode_FromFormat("  C_CONTIGUOUS : %s\n  F_CONTIGUOUS : %s\n  WRITEABLE : %s",
                                flag_bit(self, PYGPU_C_CONTIGUOUS) ? "True" : "False",
                                flag_bit(self, PYGPU_F_CONTIGUOUS) ? "True" : "False",
                                flag_bit(self, PYGPU_WRITEABLE) ? "True" : "False");
}

static void flags_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyGetSetDef flags_getset[] = {
    {"c_contiguous", flags_c, NULL, "C-contiguous.", NULL},
    {"f_contiguous", flags_f, NULL, "Fortran-contiguous.", NULL},
    {"forc", flags_forc, NULL, "C- or Fortran-contiguous.", NULL},
    {"writeable", flags_w, NULL, "The array may be written.", NULL},
    {0},
};

static PyType_Slot flags_slots[] = {
    {Py_tp_doc, "The layout flags of a GPUArray."},
    {Py_tp_dealloc, flags_dealloc},
    {Py_tp_repr, flags_repr},
    {Py_mp_subscript, flags_getitem},
    {Py_tp_getset, flags_getset},
    {0, NULL},
};

static PyType_Spec flags_spec = {
    .name = "pygpu.ArrayFlags",
    .basicsize = sizeof(PyGPUFlags),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = flags_slots,
};

int pygpu_flags_init(PyObject *m, pygpu_state *st)
{
    st->Flags = (PyTypeObject *)PyType_FromModuleAndSpec(m, &flags_spec, NULL);
    return st->Flags ? 0 : -1;
}

PyGetSetDef *pygpu_array_getset_defs(void) { return array_getset; }
