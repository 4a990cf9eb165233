"""PyGPU's C API (include/pygpu/pygpu_api.h): a small extension compiled here
imports the table, reads a GPUArray through the accessors, and makes arrays."""
import numpy as np
import pytest

import pygpu
from cext import build_extension

SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pygpu/pygpu_api.h>

static PyObject *describe(PyObject *self, PyObject *a)
{
    if (!PyGPUArray_Check(a))
        return PyErr_Format(PyExc_TypeError, "not a GPUArray");
    int nd = PyGPUArray_NDIM(a);
    PyObject *shape = PyTuple_New(nd), *strides = PyTuple_New(nd);
    for (int i = 0; i < nd; i++) {
        PyTuple_SET_ITEM(shape, i, PyLong_FromSsize_t(PyGPUArray_SHAPE(a)[i]));
        PyTuple_SET_ITEM(strides, i, PyLong_FromSsize_t(PyGPUArray_STRIDES(a)[i]));
    }
    return Py_BuildValue("(NNNOis)", PyLong_FromVoidPtr(PyGPUArray_DATA(a)), shape, strides,
                         PyGPUArray_DTYPE(a), PyGPUArray_DEVICE(a), PyGPU_API->Backend());
}

static PyObject *make(PyObject *self, PyObject *args)
{
    PyObject *dtype;
    Py_ssize_t shape[2];
    if (!PyArg_ParseTuple(args, "nnO", &shape[0], &shape[1], &dtype))
        return NULL;
    return PyGPU_API->Empty(2, shape, dtype, 1);
}

static PyObject *wrap(PyObject *self, PyObject *args)
{
    PyObject *owner, *dtype;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OnO", &owner, &n, &dtype))
        return NULL;
    void *p = PyLong_AsVoidPtr(PyObject_GetAttrString(owner, "ptr"));
    Py_ssize_t strides[1] = {-(Py_ssize_t)sizeof(double)};
    return PyGPU_API->FromPointer((char *)p + (n - 1) * sizeof(double), 1, &n, strides, dtype, owner);
}

static PyMethodDef methods[] = {
    {"describe", describe, METH_O, NULL},
    {"make", make, METH_VARARGS, NULL},
    {"wrap", wrap, METH_VARARGS, NULL},
    {NULL},
};

static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "capi_client", NULL, -1, methods};

PyMODINIT_FUNC PyInit_capi_client(void)
{
    if (PyGPU_ImportAPI() < 0)
        return NULL;
    return PyModule_Create(&def);
}
"""


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    return build_extension(tmp_path_factory.mktemp("capi"), SOURCE, "capi_client")


def test_accessors_match_python_attributes(client):
    g = pygpu.to_gpu(np.arange(24, dtype=np.float32).reshape(4, 6))[1:, ::2]
    ptr, shape, strides, dtype, device, backend = client.describe(g)
    assert (ptr, shape, strides, dtype, device) == (g.ptr, g.shape, g.strides, g.dtype, g.device.id)
    assert backend == pygpu.backend
    with pytest.raises(TypeError):
        client.describe(np.zeros(3))


def test_empty_and_from_pointer(client):
    a = client.make(3, 5, "int16")
    assert isinstance(a, pygpu.GPUArray)
    assert a.shape == (3, 5) and a.dtype == np.int16 and a.flags.f_contiguous
    with pytest.raises(TypeError):
        client.make(2, 2, "U3")
    owner = pygpu.to_gpu(np.arange(5.0))
    rev = client.wrap(owner, 5, "float64")
    assert rev.base is owner
    np.testing.assert_array_equal(rev.get(), np.arange(5.0)[::-1])
    rev[0] = -1.0           # writes through to the owner's memory
    assert owner.get()[4] == -1.0


def test_capsule_is_the_backends():
    assert pygpu._C_API is pygpu.backend_module._C_API
    assert "pygpu._C_API" in repr(pygpu._C_API)
