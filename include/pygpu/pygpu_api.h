/*
 * pygpu_api.h -- PyGPU's C API for other extension modules.
 *
 *     #include <numpy/arrayobject.h>      (optional; dtypes are PyObject * here)
 *     #include <pygpu/pygpu_api.h>
 *
 *     if (PyGPU_ImportAPI() < 0)          (in your module's init)
 *         return NULL;
 *     if (PyGPUArray_Check(obj)) {
 *         void *p = PyGPUArray_DATA(obj);
 *         ...
 *     }
 *
 * Kernel glue that takes any library's arrays: PyGPU_API->AsArray(obj)
 * (torch tensors at C speed, through their DLPack exchange table), then
 * PyGPU_API->Exchange->dltensor_from_py_object_no_sync for a DLTensor view
 * and ->current_work_stream for the stream to launch on.  The DLPack
 * declarations come from pygpu_dlpack.h (or from the specification's
 * dlpack/dlpack.h when that is included first).
 *
 * The table is taken from the capsule `pygpu._C_API` (the backend chosen at
 * import).  Compile with `-I$(python -c "import pygpu, os;
 * print(os.path.join(os.path.dirname(pygpu.__file__), '..', 'include'))")`
 * or copy this header.  Functions that can fail return NULL or -1 with a
 * Python exception set; "new reference" results are owned by the caller.
 */
#ifndef PYGPU_API_H
#define PYGPU_API_H

#include <Python.h>

#include "pygpu_dlpack.h"

#define PYGPU_API_VERSION 2
#define PYGPU_API_CAPSULE "pygpu._C_API"

typedef struct {
    int version;                        /* PYGPU_API_VERSION of the provider */
    PyTypeObject *GPUArray_Type;
    /* Accessors; the argument must be a GPUArray (see Check). */
    void *(*Data)(PyObject *a);         /* device address of element [0, ..., 0] */
    int (*NDim)(PyObject *a);
    const Py_ssize_t *(*Shape)(PyObject *a);     /* ndim entries, borrowed */
    const Py_ssize_t *(*Strides)(PyObject *a);   /* bytes, ndim entries, borrowed */
    PyObject *(*DType)(PyObject *a);    /* the numpy.dtype, borrowed */
    int (*Device)(PyObject *a);         /* device ordinal */
    /* A new uninitialised array on the current device (dtype: anything
     * numpy.dtype() takes; fortran: 0 for C order); new reference. */
    PyObject *(*Empty)(int nd, const Py_ssize_t *shape, PyObject *dtype, int fortran);
    /* A GPUArray over existing device memory, kept alive through `owner`
     * (may be NULL); strides NULL means C-contiguous; new reference. */
    PyObject *(*FromPointer)(void *data, int nd, const Py_ssize_t *shape, const Py_ssize_t *strides,
                             PyObject *dtype, PyObject *owner);
    /* The vendor: "cuda", "hip" or "host". */
    const char *(*Backend)(void);
    /* ---- version 2: the DLPack 1.3 C exchange API ---- */
    /* GPUArray's exchange table (the one in type(a).__dlpack_c_exchange_api__):
     * a GPUArray as a DLTensor view (dltensor_from_py_object_no_sync), the
     * current stream of a device (current_work_stream), etc. */
    const DLPackExchangeAPI *Exchange;
    /* `obj` as a GPUArray, the way pygpu.asarray takes it: a GPUArray as it
     * is; an object whose type has a DLPack exchange table (torch.Tensor)
     * through that table, in C, with the current stream ordered after the
     * producer's; else __dlpack__ or __cuda_array_interface__.  New reference. */
    PyObject *(*AsArray)(PyObject *obj);
    /* A stream argument (None: the current stream; a pygpu.Stream, an int
     * handle, or an object with __cuda_stream__) as a handle; 0, or -1. */
    int (*StreamHandle)(PyObject *stream, void **out);
} PyGPU_CAPI;

static PyGPU_CAPI *PyGPU_API = NULL;

/* Import the table; 0, or -1 with ImportError set. */
static inline int PyGPU_ImportAPI(void)
{
    PyGPU_API = (PyGPU_CAPI *)PyCapsule_Import(PYGPU_API_CAPSULE, 0);
    if (!PyGPU_API)
        return -1;
    if (PyGPU_API->version < PYGPU_API_VERSION) {
        PyErr_Format(PyExc_ImportError, "pygpu C API version %d is older than this extension needs (%d)",
                     PyGPU_API->version, PYGPU_API_VERSION);
        PyGPU_API = NULL;
        return -1;
    }
    return 0;
}

#define PyGPUArray_Check(o) PyObject_TypeCheck((o), PyGPU_API->GPUArray_Type)
#define PyGPUArray_DATA(o) (PyGPU_API->Data((PyObject *)(o)))
#define PyGPUArray_NDIM(o) (PyGPU_API->NDim((PyObject *)(o)))
#define PyGPUArray_SHAPE(o) (PyGPU_API->Shape((PyObject *)(o)))
#define PyGPUArray_STRIDES(o) (PyGPU_API->Strides((PyObject *)(o)))
#define PyGPUArray_DTYPE(o) (PyGPU_API->DType((PyObject *)(o)))
#define PyGPUArray_DEVICE(o) (PyGPU_API->Device((PyObject *)(o)))

#endif /* PYGPU_API_H */
