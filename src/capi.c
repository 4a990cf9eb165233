/*
 * capi.c -- the table of include/pygpu/pygpu_api.h, exported as the capsule
 * `_C_API` (re-exported by the package as pygpu._C_API).
 */
#include "pygpu.h"
#include "capi.h"
#include "array.h"
#include "device.h"
#include "dlpack_exchange.h"
#include "dtype.h"
#include "interop.h"
#include "pygpu/pygpu_api.h"
#include "stream.h"

/* The state of the module that made the table: the capsule is process-wide
 * by nature (one per loaded backend library), and so is this. */
static pygpu_state *capi_state;

static void *capi_data(PyObject *a) { return ((PyGPUArray *)a)->data; }
static int capi_ndim(PyObject *a) { return ((PyGPUArray *)a)->nd; }
static const Py_ssize_t *capi_shape(PyObject *a) { return GA_SHAPE((PyGPUArray *)a); }
static const Py_ssize_t *capi_strides(PyObject *a) { return GA_STRIDES((PyGPUArray *)a); }
static PyObject *capi_dtype(PyObject *a) { return (PyObject *)((PyGPUArray *)a)->descr; }
static int capi_device(PyObject *a) { return ((PyGPUArray *)a)->device; }
static const char *capi_backend(void) { return pygpu_rt_vendor(); }

static PyObject *capi_empty(int nd, const Py_ssize_t *shape, PyObject *dtype, int fortran)
{
    if (nd < 0 || nd > PYGPU_MAXDIMS)
        return PyErr_Format(PyExc_ValueError, "ndim %d out of range 0..%d", nd, PYGPU_MAXDIMS);
    PyArray_Descr *d = pygpu_descr_arg(dtype);
    if (!d)
        return NULL;
    return pygpu_array_empty(capi_state, capi_state->Array, d, nd, shape, fortran, NULL);
}

static PyObject *capi_from_pointer(void *data, int nd, const Py_ssize_t *shape, const Py_ssize_t *strides,
                                   PyObject *dtype, PyObject *owner)
{
    if (nd < 0 || nd > PYGPU_MAXDIMS)
        return PyErr_Format(PyExc_ValueError, "ndim %d out of range 0..%d", nd, PYGPU_MAXDIMS);
    for (int i = 0; i < nd; i++)
        if (shape[i] < 0)
            return PyErr_Format(PyExc_ValueError, "negative dimensions are not allowed");
    int dev = pygpu_current_device(capi_state);
    PyArray_Descr *d = dev < 0 ? NULL : pygpu_descr_arg(dtype);
    if (!d)
        return NULL;
    return pygpu_array_wrap(capi_state, capi_state->Array, d, nd, shape, strides, data, owner, owner, dev, 1);
}

static PyObject *capi_as_array(PyObject *obj) { return pygpu_asarray(capi_state, obj); }

static int capi_stream_handle(PyObject *stream, void **out)
{
    pygpu_stream_t h;
    if (pygpu_stream_arg(capi_state, stream, &h) < 0)
        return -1;
    *out = (void *)h;
    return 0;
}

static PyGPU_CAPI capi_table = {
    .version = PYGPU_API_VERSION,
    .Data = capi_data,
    .NDim = capi_ndim,
    .Shape = capi_shape,
    .Strides = capi_strides,
    .DType = capi_dtype,
    .Device = capi_device,
    .Empty = capi_empty,
    .FromPointer = capi_from_pointer,
    .Backend = capi_backend,
    .AsArray = capi_as_array,
    .StreamHandle = capi_stream_handle,
};

int pygpu_capi_init(PyObject *m, pygpu_state *st)
{
    capi_state = st;
    capi_table.GPUArray_Type = st->Array;
    capi_table.Exchange = pygpu_exchange_table();
    PyObject *capsule = PyCapsule_New(&capi_table, PYGPU_API_CAPSULE, NULL);
    if (!capsule)
        return -1;
    int r = PyModule_AddObjectRef(m, "_C_API", capsule);
    Py_DECREF(capsule);
    return r;
}
