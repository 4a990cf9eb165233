/*
 * state.c -- the module's definition and how every file finds the module
 * state from an object or a type; NumPy's C-API table, imported here for
 * every file; and the chains of `with Device:` and `with Stream:` kept in
 * the state's context variables.
 *
 * The definition is filled in by module.c (its functions, slots and
 * state's traverse and clear) before the interpreter sees it, so that the
 * type files can find their state without calling up into module.c.
 */
#define PYGPU_IMPORT_ARRAY   /* this file defines NumPy's C-API table for the others */
#include "pygpu.h"
#include "state.h"

static PyModuleDef module_def = {PyModuleDef_HEAD_INIT, .m_name = NULL};

PyModuleDef *pygpu_module_def(void) { return &module_def; }

int pygpu_import_numpy(void) { return _import_array(); }

pygpu_state *pygpu_state_of_type(PyTypeObject *tp)
{
    for (; tp; tp = tp->tp_base) {
        if (!(tp->tp_flags & Py_TPFLAGS_HEAPTYPE))
            continue;
        PyObject *m = ((PyHeapTypeObject *)tp)->ht_module;
        if (m && PyModule_GetDef(m) == &module_def)
            return (pygpu_state *)PyModule_GetState(m);
    }
    PyErr_SetString(PyExc_TypeError, "object's type is not from this pygpu module");
    return NULL;
}

int pygpu_ctxstack_push(PyObject *var, PyObject *item)
{
    PyObject *outer = NULL, *link, *token;
    if (PyContextVar_Get(var, Py_None, &outer) < 0)
        return -1;
    link = PyTuple_Pack(2, item, outer);
    Py_DECREF(outer);
    if (!link)
        return -1;
    token = PyContextVar_Set(var, link);
    Py_DECREF(link);
    if (!token)
        return -1;
    Py_DECREF(token);
    return 0;
}

PyObject *pygpu_ctxstack_pop(PyObject *var)
{
    PyObject *link = NULL, *item, *token;
    if (PyContextVar_Get(var, Py_None, &link) < 0)
        return NULL;
    if (!PyTuple_Check(link) || PyTuple_GET_SIZE(link) != 2) {
        Py_DECREF(link);
        PyErr_SetString(PyExc_RuntimeError, "__exit__ without a matching __enter__ in this context");
        return NULL;
    }
    item = Py_NewRef(PyTuple_GET_ITEM(link, 0));
    token = PyContextVar_Set(var, PyTuple_GET_ITEM(link, 1));
    Py_DECREF(link);
    if (!token) {
        Py_DECREF(item);
        return NULL;
    }
    Py_DECREF(token);
    return item;
}
