/*
 * glue.c -- kernel glue in C that takes any library's arrays through
 * PyGPU's C API and the DLPack C exchange API (see README.md).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pygpu/pygpu_api.h>

/* The float32 vector `obj` as a GPUArray (new reference) and a view of it. */
static PyObject *vector(PyObject *obj, DLTensor *t)
{
    PyObject *a = PyGPU_API->AsArray(obj);
    if (!a)
        return NULL;
    if (PyGPU_API->Exchange->dltensor_from_py_object_no_sync(a, t) != 0) {
        Py_DECREF(a);
        return NULL;
    }
    if (t->ndim != 1 || t->dtype.code != kDLFloat || t->dtype.bits != 32 || t->strides[0] != 1) {
        Py_DECREF(a);
        return PyErr_Format(PyExc_TypeError, "axpy takes contiguous float32 vectors");
    }
    return a;
}

/* axpy(a, x, y): y += a * x; returns (x pointer, y pointer, stream). */
static PyObject *axpy(PyObject *self, PyObject *args)
{
    float alpha;
    PyObject *xo, *yo, *x = NULL, *y = NULL, *r = NULL;
    DLTensor tx, ty;
    void *stream = NULL;
    (void)self;                                     /* (the module: a METH_VARARGS function's first argument) */
    if (!PyArg_ParseTuple(args, "fOO", &alpha, &xo, &yo))
        return NULL;
    if (!(x = vector(xo, &tx)) || !(y = vector(yo, &ty)))
        goto done;
    if (tx.shape[0] != ty.shape[0] || tx.device.device_type != ty.device.device_type) {
        PyErr_SetString(PyExc_ValueError, "axpy: x and y differ in length or device");
        goto done;
    }
    if (PyGPU_API->Exchange->current_work_stream(ty.device.device_type, ty.device.device_id, &stream) != 0)
        goto done;
    if (ty.device.device_type == kDLCPU) {          /* the host backend: the "kernel" runs here */
        const float *xp = (const float *)((char *)tx.data + tx.byte_offset);
        float *yp = (float *)((char *)ty.data + ty.byte_offset);
        for (int64_t i = 0; i < ty.shape[0]; i++)
            yp[i] += alpha * xp[i];
    }
    /* (on a GPU: my_axpy<<<grid, block, 0, (cudaStream_t)stream>>>(alpha, x, y, n)) */
    r = Py_BuildValue("(NNN)", PyLong_FromVoidPtr(tx.data), PyLong_FromVoidPtr(ty.data), PyLong_FromVoidPtr(stream));
done:
    Py_XDECREF(x);
    Py_XDECREF(y);
    return r;
}

static PyMethodDef methods[] = {
    {"axpy", axpy, METH_VARARGS, "axpy(a, x, y): y += a * x (float32 vectors of any array library)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, .m_name = "glue", .m_size = -1, .m_methods = methods};

PyMODINIT_FUNC PyInit_glue(void)
{
    if (PyGPU_ImportAPI() < 0)
        return NULL;
    return PyModule_Create(&def);
}
