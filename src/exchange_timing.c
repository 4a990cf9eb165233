/*
 * exchange_timing.c -- pygpu._exchange_timing: the cost of one exchange
 * through a type's DLPack C exchange table, timed in C (no Python call in
 * the loop), for the tests and the hand-off benchmarks.  An instrument,
 * apart from the exchange itself (dlpack_exchange.c).
 */
#include "pygpu.h"
#include "exchange_timing.h"
#include "dlpack.h"
#include "dlpack_exchange.h"

#include <string.h>
#include <time.h>

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* One exchange of `what` through `api`; 0, or -1 with an exception set. */
static int exchange_once(const DLPackExchangeAPI *api, PyObject *x, char what)
{
    DLManagedTensorVersioned *m = NULL;
    DLTensor t;
    void *p = NULL;
    switch (what) {
    case 'm':       /* managed tensor out, deleter called */
        if (api->managed_tensor_from_py_object_no_sync(x, &m) != 0)
            return -1;
        if (m && m->deleter)
            m->deleter(m);
        return 0;
    case 'v':       /* a view */
        return api->dltensor_from_py_object_no_sync(x, &t);
    case 'r':       /* managed tensor out, and back to an array */
        if (api->managed_tensor_from_py_object_no_sync(x, &m) != 0 || api->managed_tensor_to_py_object_no_sync(m, &p))
            return -1;
        Py_DECREF((PyObject *)p);
        return 0;
    default:        /* the current stream of the tensor's device */
        if (api->dltensor_from_py_object_no_sync(x, &t) != 0)
            return -1;
        return api->current_work_stream(t.device.device_type, t.device.device_id, &p);
    }
}

static PyObject *mod_exchange_timing(PyObject *m, PyObject *args)
{
    static const char *const names[] = {"managed", "view", "roundtrip", "stream"};
    PyObject *x;
    Py_ssize_t n;
    const char *what = "managed";
    pygpu_state *st = PyModule_GetState(m);
    if (!PyArg_ParseTuple(args, "On|s:_exchange_timing", &x, &n, &what))
        return NULL;
    int k = 0;
    while (k < 4 && strcmp(what, names[k]))
        k++;
    if (k == 4 || n < 1)
        return PyErr_Format(PyExc_ValueError, "_exchange_timing(x, n >= 1, what): what is one of managed, view, "
                            "roundtrip, stream; not %s", what);
    const DLPackExchangeAPI *api = pygpu_exchange_api_of(st, Py_TYPE(x));
    if (!api)
        return PyErr_Occurred() ? NULL : PyErr_Format(PyExc_TypeError, "%.100s has no DLPack exchange API that "
                                                      "PyGPU can use", Py_TYPE(x)->tp_name);
    if ((k == 1 || k == 3) && !api->dltensor_from_py_object_no_sync)
        return PyErr_Format(PyExc_TypeError, "%.100s's exchange API has no dltensor_from_py_object_no_sync",
                            Py_TYPE(x)->tp_name);
    char c = "mvrs"[k];
    if (exchange_once(api, x, c) < 0)   /* (warm, and a failure is reported before the loop) */
        return NULL;
    double t0 = now_ns();
    for (Py_ssize_t i = 0; i < n; i++)
        if (exchange_once(api, x, c) < 0)
            return NULL;
    return PyFloat_FromDouble((now_ns() - t0) / (double)n);
}

static PyMethodDef exchange_methods[] = {
    {"_exchange_timing", mod_exchange_timing, METH_VARARGS,
     "_exchange_timing(x, n, what='managed', /)\n--\n\n"
     "Nanoseconds per exchange of `x` through its type's DLPack C exchange API, timed in C over\n"
     "n calls: 'managed' (a managed tensor out and its deleter), 'view' (a DLTensor view),\n"
     "'roundtrip' (a managed tensor out and back to an array), 'stream' (view + current_work_stream)."},
    {0},
};


int pygpu_exchange_timing_init(PyObject *m) { return PyModule_AddFunctions(m, exchange_methods); }
