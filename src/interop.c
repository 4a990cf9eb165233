/*
 * interop.c -- the front door for other libraries' arrays: one import
 * ladder (our own array, NumPy's, the DLPack C exchange table, the CUDA
 * Array Interface, a DLPack capsule, __dlpack__, any host data), tried in
 * that order by both module functions that take arrays:
 * pygpu.asarray(obj, dtype=None) (a GPUArray as it is, another library's
 * device array without a copy, host data by copying it) and
 * pygpu.from_dlpack(x, *, device=None, copy=None) (the Array API
 * standard's, 2023.12: the DLPack rungs alone).
 */
#include "pygpu.h"
#include "interop.h"
#include "array_cast.h"
#include "cai.h"
#include "device.h"
#include "dlpack.h"
#include "dlpack_exchange.h"
#include "dlpack_import.h"
#include "dlpack_shared.h"
#include "dtype.h"
#include "state.h"

#define FASTKW(f) (PyCFunction)(void (*)(void))(f), METH_FASTCALL | METH_KEYWORDS
#if defined(PYGPU_BACKEND_CUDA)
#  define PYGPU_CAI_EXPORTED 1     /* (cai.c says why only CUDA arrays speak it) */
#else
#  define PYGPU_CAI_EXPORTED 0
#endif

/* ---- the rungs' helpers ------------------------------------------------------- */

/* 1 if obj has attribute `name`, 0 if not, -1 with an exception. */
static int has_attr(PyObject *obj, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v) {
        Py_DECREF(v);
        return 1;
    }
    if (!PyErr_ExceptionMatches(PyExc_AttributeError))
        return -1;
    PyErr_Clear();
    return 0;
}

/* `obj` through its __cuda_array_interface__: *found is 0 (and NULL comes
 * back with no exception) where it has none. */
static PyObject *via_cai(pygpu_state *st, PyObject *obj, int *found)
{
    PyObject *iface = PyObject_GetAttr(obj, st->names.cai_attr), *r;
    if (!(*found = iface != NULL)) {
        if (PyErr_ExceptionMatches(PyExc_AttributeError))
            PyErr_Clear();
        return NULL;
    }
    r = pygpu_cai_import(st, obj, iface);
    Py_DECREF(iface);
    return r;
}

/* ---- the ladder ----------------------------------------------------------------- */

/* What the caller asks: asarray's rules (a view of device data wherever
 * one can be had, host data copied and converted to `dtype`) or
 * from_dlpack's (the DLPack protocol alone, with its `target` device and
 * `copy`: -1 None, 0 False, 1 True). */
typedef struct {
    int asarray;
    PyObject *dtype;            /* asarray's, borrowed, or NULL */
    int target, copy;           /* from_dlpack's */
} import_rules;

/* The rungs, tried in this order; each takes the object or passes it on. */
enum rung {
    RUNG_OWN,           /* one of our GPUArrays: itself (asarray), or DLPack's view or copy of it */
    RUNG_NUMPY,         /* asarray: a NumPy array is host data */
    RUNG_EXCHANGE,      /* its type's DLPack C exchange table (dlpack_exchange.c) */
    RUNG_CAI,           /* asarray, CUDA: __cuda_array_interface__ (cai.c) */
    RUNG_CAPSULE,       /* a DLPack capsule (dlpack_import.c) */
    RUNG_DLPACK,        /* __dlpack__ and __dlpack_device__ (dlpack_import.c) */
    RUNG_CAI_REFUSED,   /* asarray, HIP and host: the CAI is checked, then refused saying why */
    RUNG_HOST_DATA,     /* asarray: anything NumPy converts, copied to the device */
};

/* `obj` as a GPUArray by the first rung that takes it; new reference. */
static PyObject *import(pygpu_state *st, PyObject *obj, const import_rules *r)
{
    int has, found, fallback = 0;
    long dev[2];
    PyObject *out;
    const void *api;
    for (enum rung rung = RUNG_OWN; rung <= RUNG_HOST_DATA; rung++) {
        switch (rung) {
        case RUNG_OWN:
            if (PyObject_TypeCheck(obj, st->Array))
                return r->asarray ? Py_NewRef(obj) : pygpu_dl_from_own(st, (PyGPUArray *)obj, r->target, r->copy);
            break;
        case RUNG_NUMPY:
            if (r->asarray && PyArray_Check(obj))
                return pygpu_dl_upload(st, obj, -1, r->dtype);
            break;
        case RUNG_EXCHANGE:
            /* (host data is copied here as all host data is, by asarray, on every backend) */
            if ((api = pygpu_exchange_api_of(st, Py_TYPE(obj))) != NULL) {
                out = pygpu_exchange_import(st, obj, api, r->target, r->copy, r->asarray, &fallback);
                if (out || !fallback)
                    return out;
            } else if (PyErr_Occurred()) {
                return NULL;
            }
            break;
        case RUNG_CAI:
        case RUNG_CAI_REFUSED:
            if (r->asarray && (rung == RUNG_CAI) == PYGPU_CAI_EXPORTED &&
                ((out = via_cai(st, obj, &found)) || found || PyErr_Occurred()))
                return out;
            break;
        case RUNG_CAPSULE:
            if (PyCapsule_CheckExact(obj))
                return pygpu_dl_import(st, obj, r->target, r->copy, NULL);
            break;
        case RUNG_DLPACK:
            if (!r->asarray)
                return pygpu_dl_import(st, obj, r->target, r->copy, NULL);
            if ((has = has_attr(obj, st->names.dlpack_attr)) < 0)
                return NULL;
            if (has) {
                /* Host data is copied here as all host data is (on every backend). */
                if (pygpu_dl_query_device(st, obj, dev) < 0)
                    return NULL;
                return pygpu_dl_import(st, obj, -1, pygpu_dl_is_host_type(dev[0]) ? 1 : -1, dev);
            }
            break;
        case RUNG_HOST_DATA:
            return pygpu_dl_upload(st, obj, -1, r->dtype);
        }
    }
    return NULL;    /* (not reached: the last rung takes everything) */
}

PyObject *pygpu_asarray(pygpu_state *st, PyObject *obj)
{
    import_rules r = {1, NULL, -1, -1};
    return import(st, obj, &r);
}

static PyObject *mod_asarray(PyObject *m, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"obj", "dtype"};
    PyObject *v[2] = {NULL, NULL}, *dtype, *r;
    pygpu_state *st = PyModule_GetState(m);
    PyArray_Descr *want = NULL;
    if (pygpu_dl_parse_args("asarray", args, nargs, kwnames, names, 2, 2, 0, v) < 0)
        return NULL;
    if (!v[0])
        return PyErr_Format(PyExc_TypeError, "asarray() missing required argument 'obj' (pos 1)");
    dtype = v[1] && v[1] != Py_None ? v[1] : NULL;
    if (dtype && !(want = pygpu_descr_arg(dtype)))
        return NULL;
    import_rules rules = {1, dtype, -1, -1};
    r = import(st, v[0], &rules);
    if (r && want && !PyArray_EquivTypes(((PyGPUArray *)r)->descr, want))
        Py_SETREF(r, pygpu_array_astype((PyGPUArray *)r, want, PYGPU_ORDER_K, NULL, Py_None));
    Py_XDECREF(want);
    return r;
}

/* ---- from_dlpack ------------------------------------------------------------------- */


/* from_dlpack's device=: None (-1), a Device, an ordinal, or this
 * backend's (device_type, device_id). */
static int target_arg(pygpu_state *st, PyObject *v, int *target)
{
    long t, id;
    *target = -1;
    if (!v || v == Py_None)
        return 0;
    if (PyObject_TypeCheck(v, st->Device)) {
        *target = ((PyGPUDevice *)v)->id;
        return 0;
    }
    if (PyTuple_Check(v)) {
        if (pygpu_dl_int_pair(v, "from_dlpack(): device", &t, &id) < 0)
            return -1;
        if (t != PYGPU_DL_OWN_TYPE || (PYGPU_DL_HOST_BACKEND && id != 0)) {
            PyErr_Format(PyExc_BufferError, "from_dlpack(device=(%ld, %ld)): a %s GPUArray cannot be on %s device "
                         "%ld", t, id, pygpu_rt_vendor(), pygpu_dl_device_name(t), id);
            return -1;
        }
        if (PYGPU_DL_HOST_BACKEND)
            return 0;
    } else if (PyIndex_Check(v) && !PyBool_Check(v)) {
        if ((id = PyLong_AsLong(v)) == -1 && PyErr_Occurred())
            return -1;
    } else {
        PyErr_Format(PyExc_TypeError, "from_dlpack(): device must be a pygpu.Device, a device ordinal, a "
                     "(device_type, device_id) tuple or None, not %.100s", Py_TYPE(v)->tp_name);
        return -1;
    }
    if (pygpu_check_device_id(st, id) < 0)
        return -1;
    *target = (int)id;
    return 0;
}

static PyObject *mod_from_dlpack(PyObject *m, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"x", "device", "copy"};
    PyObject *v[3] = {NULL, NULL, NULL};
    pygpu_state *st = PyModule_GetState(m);
    int copy, target;
    if (pygpu_dl_parse_args("from_dlpack", args, nargs, kwnames, names, 3, 1, 1, v) < 0)
        return NULL;
    if (!v[0])
        return PyErr_Format(PyExc_TypeError, "from_dlpack() missing required argument 'x' (pos 1)");
    if ((copy = pygpu_dl_copy_arg(v[2], "from_dlpack")) == -2 || target_arg(st, v[1], &target) < 0)
        return NULL;
    import_rules r = {0, NULL, target, copy};
    return import(st, v[0], &r);
}


/* ---- init ------------------------------------------------------------------- */

static PyMethodDef interop_methods[] = {
    {"from_dlpack", FASTKW(mod_from_dlpack),
     "from_dlpack(x, /, *, device=None, copy=None)\n--\n\n"
     "A GPUArray sharing the memory of `x`, an object with __dlpack__ and __dlpack_device__\n"
     "(or a DLPack capsule), as the Array API standard says: safe to use on the current\n"
     "stream.  Host data is copied to the device on GPU backends; copy=True always copies,\n"
     "copy=False raises BufferError where a copy would be needed."},
    {"asarray", FASTKW(mod_asarray),
     "asarray(obj, dtype=None)\n--\n\n"
     "`obj` as a GPUArray: GPUArrays as they are, device arrays of other libraries\n"
     "(__cuda_array_interface__, DLPack) without a copy, host data copied to the device."},
    {0},
};
int pygpu_interop_init(PyObject *m)
{
    return PyModule_AddFunctions(m, interop_methods);
}
