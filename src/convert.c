/*
 * convert.c -- argument conversion and value building for the Python
 * faces of every type: shapes and dims, orders, byte counts, casting
 * rules, and the tuples and reprs of shapes.  Each converter returns 0 (or
 * the value) with its result written, or -1 (-2 for orders) with the
 * TypeError or ValueError NumPy would raise for the same argument.
 */
#include "pygpu.h"
#include "convert.h"
#include "shape.h"
#include "state.h"

/* 1 if `obj` is one integer (a NumPy array of one or more axes is not, nor
 * a GPUArray, though a 0-d one of integers has __index__). */
int pygpu_is_int_arg(pygpu_state *st, PyObject *obj)
{
    return PyIndex_Check(obj) && !(PyArray_Check(obj) && PyArray_NDIM((PyArrayObject *)obj) > 0) &&
           !pygpu_is_gpuarray(st, obj);
}

int pygpu_dims_arg(pygpu_state *st, PyObject *obj, int *nd, ptrdiff_t *out, ptrdiff_t min)
{
    PyObject *seq = pygpu_is_int_arg(st, obj) ? PyTuple_Pack(1, obj)
                                         : PySequence_Fast(obj, "shape must be an int or a sequence of ints");
    if (!seq)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > PYGPU_MAXDIMS) {
        PyErr_Format(PyExc_ValueError, "too many dimensions: %zd (at most %d)", n, PYGPU_MAXDIMS);
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        if (!pygpu_is_int_arg(st, item)) {
            PyErr_Format(PyExc_TypeError, "shape entries must be ints, not %.100s", Py_TYPE(item)->tp_name);
            goto fail;
        }
        out[i] = PyNumber_AsSsize_t(item, PyExc_ValueError);
        if (out[i] == -1 && PyErr_Occurred())
            goto fail;
        if (out[i] < min) {
            PyErr_SetString(PyExc_ValueError, "negative dimensions are not allowed");
            goto fail;
        }
    }
    Py_DECREF(seq);
    *nd = (int)n;
    return 0;
fail:
    Py_DECREF(seq);
    return -1;
}

int pygpu_shape_arg(pygpu_state *st, PyObject *obj, int *nd, ptrdiff_t *shape)
{
    return pygpu_dims_arg(st, obj, nd, shape, 0);
}

/* 'C' -> 0, 'F' -> 1 (None: 0); `allow_any` also takes 'A' and 'K'
 * (PYGPU_ORDER_A, PYGPU_ORDER_K) and None (-> -1). */
int pygpu_order_arg(PyObject *obj, int allow_any)
{
    if (obj == NULL || obj == Py_None)
        return allow_any ? -1 : 0;
    if (PyUnicode_Check(obj) && PyUnicode_GetLength(obj) == 1) {
        Py_UCS4 c = PyUnicode_READ_CHAR(obj, 0);
        if (c == 'C' || c == 'c')
            return PYGPU_ORDER_C;
        if (c == 'F' || c == 'f')
            return PYGPU_ORDER_F;
        if (allow_any && (c == 'A' || c == 'a'))
            return PYGPU_ORDER_A;
        if (allow_any && (c == 'K' || c == 'k'))
            return PYGPU_ORDER_K;
    }
    PyErr_Format(PyExc_ValueError, "order must be %s, not %R", allow_any ? "'C', 'F', 'A' or 'K'" : "'C' or 'F'",
                 obj);
    return -2;
}

int pygpu_size_arg(PyObject *obj, const char *what, size_t *out)
{
    if (!PyIndex_Check(obj) || PyBool_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int, not %.100s", what, Py_TYPE(obj)->tp_name);
        return -1;
    }
    PyObject *v = PyNumber_Index(obj);
    if (!v)
        return -1;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow < 0 || (!overflow && x < 0)) {
        PyErr_Format(PyExc_ValueError, "%s must be >= 0, got %S", what, v);
        Py_DECREF(v);
        return -1;
    }
    Py_DECREF(v);
    if (x == -1 && PyErr_Occurred())
        return -1;
    if (overflow > 0 || (unsigned long long)x > (unsigned long long)PY_SSIZE_T_MAX) {
        PyErr_Format(PyExc_OverflowError, "%s is too large for this platform", what);
        return -1;
    }
    *out = (size_t)x;
    return 0;
}

PyObject *pygpu_tuple_of(const ptrdiff_t *v, int n)
{
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t && i < n; i++) {
        PyObject *x = PyLong_FromSsize_t(v[i]);
        if (!x) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, i, x);
    }
    return t;
}

PyObject *pygpu_shape_repr(const ptrdiff_t *shape, int nd)
{
    PyObject *t = pygpu_tuple_of(shape, nd), *r;
    if (!t)
        return NULL;
    r = PyObject_Repr(t);
    Py_DECREF(t);
    return r;
}

/* NumPy's casting rule named by `obj` (None: no argument, 'unsafe') in
 * *rule; 'same_value' (NumPy 2.4's rule that checks every value) leaves
 * *rule unsafe and sets *by_numpy: NumPy does that one, on the host.  0, or
 * -1 with NumPy's TypeError or ValueError. */
int pygpu_casting_arg(PyObject *obj, NPY_CASTING *rule, int *by_numpy)
{
    static const struct { const char *name; NPY_CASTING rule; } rules[] = {
        {"no", NPY_NO_CASTING}, {"equiv", NPY_EQUIV_CASTING}, {"safe", NPY_SAFE_CASTING},
        {"same_kind", NPY_SAME_KIND_CASTING}, {"unsafe", NPY_UNSAFE_CASTING}, {"same_value", NPY_UNSAFE_CASTING},
    };
    *rule = NPY_UNSAFE_CASTING;
    *by_numpy = 0;
    if (!obj)
        return 0;
    if (!PyUnicode_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "casting must be str, not %.100s", Py_TYPE(obj)->tp_name);
        return -1;
    }
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
        if (PyUnicode_CompareWithASCIIString(obj, rules[i].name) == 0) {
            *rule = rules[i].rule;
            *by_numpy = i == 5;
            return 0;
        }
    }
    PyErr_Format(PyExc_ValueError, "casting must be one of 'no', 'equiv', 'safe', 'same_kind', 'unsafe', "
                 "'same_value' (got %R)", obj);
    return -1;
}


/* Check a shape's size and byte count; 0, or -1 with ValueError. */
int pygpu_checked_nbytes(int nd, const ptrdiff_t *shape, ptrdiff_t itemsize, ptrdiff_t *nbytes)
{
    int r = pygpu_shape_nbytes(nd, shape, itemsize, nbytes);
    if (r == PYGPU_SHAPE_NEGATIVE) {
        PyErr_SetString(PyExc_ValueError, "negative dimensions are not allowed");
        return -1;
    }
    if (r < 0) {
        PyErr_SetString(PyExc_ValueError, "array is too big; `arr.size * arr.dtype.itemsize` is larger than "
                        "the maximum possible size.");      /* (NumPy's words) */
        return -1;
    }
    return 0;
}
