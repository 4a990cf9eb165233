/*
 * module.c -- the extension module: multi-phase init, per-module state
 * (its traverse and clear), and the module functions that describe the
 * build (versions, the copy kernels).
 *
 * The same sources build pygpu._cuda, pygpu._hip and pygpu._host; setup.py
 * defines PYGPU_BACKEND_{CUDA,HIP,HOST} and PYGPU_MODULE_NAME.
 */
#include "pygpu.h"
#include "array_type.h"
#include "capi.h"
#include "device.h"
#include "dlpack_exchange.h"
#include "env.h"
#include "errors.h"
#include "event.h"
#include "exchange_timing.h"
#include "fork.h"
#include "interop.h"
#include "lowlevel.h"
#include "ipc.h"
#include "memory.h"
#include "names.h"
#include "peer.h"
#include "pinned.h"
#include "state.h"
#include "stream.h"
#include "transfer/settings_py.h"

#include <stdlib.h>

#ifndef PYGPU_MODULE_NAME
#  error "PYGPU_MODULE_NAME must name the module (_cuda, _hip or _host)"
#endif
#define PYGPU_CAT(a, b) a##b
#define PYGPU_INIT_FUNC(name) PYGPU_CAT(PyInit_, name)
#define PYGPU_STR2(x) #x
#define PYGPU_STR(x) PYGPU_STR2(x)

/* ---- module functions -------------------------------------------------- */

static PyObject *mod_runtime_version(PyObject *m, PyObject *unused)
{
    (void)unused;
    int v = 0;
    if (pygpu_check(pygpu_module_state(m), pygpu_rt_runtime_version(&v), "RuntimeGetVersion") < 0)
        return NULL;
    return PyLong_FromLong(v);
}

static PyObject *mod_driver_version(PyObject *m, PyObject *unused)
{
    (void)unused;
    int v = 0;
    if (pygpu_check(pygpu_module_state(m), pygpu_rt_driver_version(&v), "DriverGetVersion") < 0)
        return NULL;
    return PyLong_FromLong(v);
}

static PyObject *mod_copy_kernels(PyObject *m, PyObject *unused)
{
    (void)unused;
    pygpu_status k;
    if (pygpu_fork_check(pygpu_module_state(m)) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    k = pygpu_rt_kernels_ready();
    Py_END_ALLOW_THREADS
    (void)pygpu_rt_get_last_error();
    if (k == 0)
        return Py_BuildValue("{s:s,s:O,s:O}", "origin", pygpu_rt_kernels_origin(), "ready", Py_True, "why", Py_None);
    return Py_BuildValue("{s:s,s:O,s:s}", "origin", pygpu_rt_kernels_origin(), "ready", Py_False, "why",
                         pygpu_rt_error_name(k));
}

static PyMethodDef module_methods[] = {
    {"copy_kernels", mod_copy_kernels, METH_NOARGS,
     "copy_kernels()\n--\n\nPyGPU's own copy kernels (layout copies, casts, fills of device memory) on the\n"
     "current device, as a dict: 'origin' (what this build holds), 'ready' (whether they run\n"
     "here, loading them the first time) and 'why' (the runtime's status when they do not).\n"
     "Where they do not run, such copies take slower ways (many runtime copies, or the host)."},
    {"runtime_version", mod_runtime_version, METH_NOARGS,
     "runtime_version()\n--\n\nThe runtime's version as the vendor encodes it (0 on host)."},
    {"driver_version", mod_driver_version, METH_NOARGS,
     "driver_version()\n--\n\nThe driver's version as the vendor encodes it (0 on host)."},
    {0},
};

/* ---- init ------------------------------------------------------------ */

static int module_exec(PyObject *m)
{
    pygpu_state *st = pygpu_module_state(m);
    pygpu_fork_init();
    pygpu_transfer_init();
    pygpu_peer_init();
    st->use_pool = 1;
    st->use_cache = !pygpu_rt_alloc_is_cheap();
    if (pygpu_env_get()->block_cache >= 0)                  /* 0/1: override, for tests */
        st->use_cache = pygpu_env_get()->block_cache;
    if (pygpu_import_numpy() < 0)
        return -1;
    if (pygpu_names_init(st) < 0)
        return -1;
    st->stream_var = PyContextVar_New("pygpu.current_stream", NULL);
    st->device_var = PyContextVar_New("pygpu.device_stack", NULL);
    if (!st->stream_var || !st->device_var)
        return -1;
    if (PyModule_AddStringConstant(m, "backend", pygpu_rt_vendor()) < 0 ||
        PyModule_AddIntConstant(m, "_built_runtime_version", pygpu_rt_built_version()) < 0 ||
        pygpu_errors_init(m, st) < 0 || pygpu_device_init(m, st) < 0 ||
        pygpu_stream_init(m, st) < 0 || pygpu_event_init(m, st) < 0 ||
        pygpu_memory_init(m, st) < 0 || pygpu_pinned_init(m, st) < 0 ||
        pygpu_device_functions_init(m) < 0 || pygpu_stream_functions_init(m) < 0 ||
        pygpu_memory_functions_init(m) < 0 || pygpu_pinned_functions_init(m) < 0 || pygpu_ipc_init(m) < 0 ||
        pygpu_transfer_functions_init(m) < 0 ||
        pygpu_array_init(m, st) < 0 || pygpu_capi_init(m, st) < 0 || pygpu_interop_init(m) < 0 ||
        pygpu_exchange_init(st) < 0 || pygpu_exchange_timing_init(m) < 0 ||
        pygpu_lowlevel_init(m, st) < 0)
        return -1;
    return 0;
}

static int module_traverse(PyObject *m, visitproc visit, void *arg)
{
    pygpu_state *st = pygpu_module_state(m);
    Py_VISIT(st->Device);
    Py_VISIT(st->Stream);
    Py_VISIT(st->Event);
    Py_VISIT(st->Memory);
    Py_VISIT(st->HostMemory);
    Py_VISIT(st->ErrorObj);
    Py_VISIT(st->Array);
    Py_VISIT(st->Flags);
    Py_VISIT(st->GPUError);
    Py_VISIT(st->GPUMemoryError);
    Py_VISIT(st->BackendWarning);
    Py_VISIT(st->ComplexWarning);
    Py_VISIT(st->AxisError);
    Py_VISIT(st->stream_var);
    Py_VISIT(st->device_var);
    Py_VISIT(st->devices);
    Py_VISIT(st->null_stream);
    Py_VISIT(st->per_thread_stream);
    for (int i = 0; i < st->put_off.n; i++)
        Py_VISIT(st->put_off.item[i].stream_ref);
    return pygpu_names_visit(st, visit, arg);
}

static int module_clear(PyObject *m)
{
    pygpu_state *st = pygpu_module_state(m);
    pygpu_cache_flush(st);
    pygpu_memory_put_off_clear(st);
    Py_CLEAR(st->devices);
    Py_CLEAR(st->null_stream);
    Py_CLEAR(st->per_thread_stream);
    pygpu_names_clear(st);
    Py_CLEAR(st->stream_var);
    Py_CLEAR(st->device_var);
    Py_CLEAR(st->GPUError);
    Py_CLEAR(st->GPUMemoryError);
    Py_CLEAR(st->BackendWarning);
    Py_CLEAR(st->ComplexWarning);
    Py_CLEAR(st->AxisError);
    Py_CLEAR(st->Device);
    Py_CLEAR(st->Stream);
    Py_CLEAR(st->Event);
    Py_CLEAR(st->Memory);
    Py_CLEAR(st->HostMemory);
    Py_CLEAR(st->ErrorObj);
    Py_CLEAR(st->Array);
    Py_CLEAR(st->Flags);
    return 0;
}

static void module_free(void *m) { module_clear((PyObject *)m); }

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, module_exec},
    {0, NULL},
};

PyMODINIT_FUNC PYGPU_INIT_FUNC(PYGPU_MODULE_NAME)(void)
{
    PyModuleDef *def = pygpu_module_def();     /* (state.c keeps it: the type files compare with it) */
    def->m_name = "pygpu." PYGPU_STR(PYGPU_MODULE_NAME);
    def->m_doc = "PyGPU's C extension for one backend; use it through the pygpu package.";
    def->m_size = sizeof(pygpu_state);
    def->m_methods = module_methods;
    def->m_slots = module_slots;
    def->m_traverse = module_traverse;
    def->m_clear = module_clear;
    def->m_free = module_free;
    return PyModuleDef_Init(def);
}
