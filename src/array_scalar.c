/*
 * array_scalar.c -- NumPy's scalar protocol on GPUArray: float(), int(),
 * complex(), bool(), operator.index(), item() and tolist().
 *
 * NumPy answers every one of them: each reads what it needs to the host
 * (the one element of a size-1 array, the element item() names, or the
 * whole array for tolist()) and asks NumPy, so results, warnings and errors
 * are NumPy's own.  An array that is not of size 1 reads nothing: NumPy is
 * asked about a stand-in of its shape and dtype whose elements all share
 * one zeroed element, and raises what it raises for such an array.
 */
#include "pygpu.h"
#include "array_scalar.h"
#include "array_host.h"
#include "state.h"

/* A NumPy array of `a`'s shape and dtype, its elements one zeroed element
 * (strides 0), read-only.  New reference. */
static PyObject *shape_stand_in(PyGPUArray *a)
{
    ptrdiff_t strides[PYGPU_MAXDIMS] = {0};
    Py_INCREF(a->descr);
    PyObject *one = PyArray_Zeros(0, NULL, a->descr, 0);
    if (!one)
        return NULL;
    Py_INCREF(a->descr);
    PyObject *view = PyArray_NewFromDescr(&PyArray_Type, a->descr, a->nd, GA_SHAPE(a), strides,
                                          PyArray_BYTES((PyArrayObject *)one), 0, NULL);
    if (!view || PyArray_SetBaseObject((PyArrayObject *)view, one) < 0) {   /* (steals one) */
        if (!view)
            Py_DECREF(one);
        Py_XDECREF(view);
        return NULL;
    }
    return view;
}

/* What NumPy is asked about for `a` as a scalar: a host copy of a size-1
 * array (one element read), else the stand-in.  New reference. */
static PyObject *scalar_of(PyObject *self)
{
    PyGPUArray *a = (PyGPUArray *)self;
    if (pygpu_array_size(a) == 1)
        return pygpu_array_get(a, NULL, NULL, 0, 0);
    return shape_stand_in(a);
}

/* Apply `convert` to NumPy's answer for `self`.  New reference. */
static PyObject *convert_scalar(PyObject *self, PyObject *(*convert)(PyObject *))
{
    PyObject *h = scalar_of(self);
    if (!h)
        return NULL;
    PyObject *r = convert(h);
    Py_DECREF(h);
    return r;
}

PyObject *pygpu_array_float(PyObject *self) { return convert_scalar(self, PyNumber_Float); }
PyObject *pygpu_array_int(PyObject *self) { return convert_scalar(self, PyNumber_Long); }
PyObject *pygpu_array_index(PyObject *self) { return convert_scalar(self, PyNumber_Index); }

static PyObject *to_complex(PyObject *h) { return PyObject_CallOneArg((PyObject *)&PyComplex_Type, h); }

PyObject *pygpu_array_complex(PyObject *self, PyObject *unused)
{
    (void)unused;
    return convert_scalar(self, to_complex);
}

int pygpu_array_bool(PyObject *self)
{
    PyObject *h = scalar_of(self);
    if (!h)
        return -1;
    int r = PyObject_IsTrue(h);
    Py_DECREF(h);
    return r;
}

/* ---- item() and tolist() ---------------------------------------------- */

/* The index tuple of the element that item(*args) names in `a`, the
 * arguments already accepted by NumPy (as a flat index, a tuple, or one
 * int per axis).  New reference. */
static PyObject *item_key(PyGPUArray *a, PyObject *args)
{
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    PyObject *one = n == 1 ? PyTuple_GET_ITEM(args, 0) : NULL;
    if (one && PyTuple_Check(one)) {
        Py_INCREF(one);
        return one;                             /* item((i, j)) */
    }
    if (n == a->nd && n > 0) {
        Py_INCREF(args);
        return args;                            /* item(i, j) */
    }
    /* item() of a size-1 array, or item(flat) in C order. */
    ptrdiff_t flat = 0, size = pygpu_array_size(a);
    if (one && (flat = PyNumber_AsSsize_t(one, PyExc_IndexError)) == -1 && PyErr_Occurred())
        return NULL;
    if (flat < 0)
        flat += size;
    PyObject *key = PyTuple_New(a->nd);
    for (int i = a->nd - 1; key && i >= 0; i--) {
        ptrdiff_t dim = GA_SHAPE(a)[i];
        PyObject *v = PyLong_FromSsize_t(dim ? flat % dim : 0);
        if (!v) {
            Py_CLEAR(key);
            break;
        }
        PyTuple_SET_ITEM(key, i, v);
        flat = dim ? flat / dim : 0;
    }
    return key;
}

PyObject *pygpu_array_item_method(PyObject *self, PyObject *args)
{
    PyGPUArray *a = (PyGPUArray *)self;
    PyObject *stand_in = NULL, *meth = NULL, *checked = NULL, *key = NULL, *elem = NULL, *host = NULL, *r = NULL;
    /* NumPy judges the arguments on the stand-in (nothing read yet). */
    if (!(stand_in = shape_stand_in(a)) || !(meth = PyObject_GetAttrString(stand_in, "item")) ||
        !(checked = PyObject_Call(meth, args, NULL)))
        goto done;
    if (!(key = item_key(a, args)) || !(elem = PyObject_GetItem(self, key)))
        goto done;
    if ((host = pygpu_array_get((PyGPUArray *)elem, NULL, NULL, 0, 0)))
        r = PyObject_CallMethod(host, "item", NULL);
done:
    Py_XDECREF(stand_in);
    Py_XDECREF(meth);
    Py_XDECREF(checked);
    Py_XDECREF(key);
    Py_XDECREF(elem);
    Py_XDECREF(host);
    return r;
}

PyObject *pygpu_array_tolist(PyObject *self, PyObject *unused)
{
    (void)unused;
    PyObject *host = pygpu_array_get((PyGPUArray *)self, NULL, NULL, 0, 0);
    if (!host)
        return NULL;
    PyObject *r = PyObject_CallMethod(host, "tolist", NULL);
    Py_DECREF(host);
    return r;
}
