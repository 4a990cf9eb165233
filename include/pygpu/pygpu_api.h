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
 * The table is taken from the capsule `pygpu._C_API` (the backend chosen at
 * import).  Compile with `-I$(python -c "import pygpu, os;
 * print(os.path.join(os.path.dirname(pygpu.__file__), '..', 'include'))")`
 * or copy this header.  Functions that can fail return NULL or -1 with a
 * Python exception set; "new reference" results are owned by the caller.
 */
#ifndef PYGPU_API_H
#define PYGPU_API_H

#include <Python.h>

#define PYGPU_API_VERSION 1
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
