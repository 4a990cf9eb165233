/*
 * state.h -- the functions state.c offers the files above it (state.c: the
 * module's definition and how every file finds the module state from an
 * object or a type; NumPy's C-API table, imported here for every file; and
 * the chains of `with Device:` and `with Stream:` kept in the state's context
 * variables).
 */
#ifndef PYGPU_STATE_H
#define PYGPU_STATE_H

#include "pygpu.h"

/* The module's definition (module.c fills it in at PyInit); borrowed. */
PyModuleDef *pygpu_module_def(void);

/* Import NumPy's C API for every file (module init); 0, or -1 with an exception. */
int pygpu_import_numpy(void);

/* The state of the module that defined `tp` (or a base of it); borrowed.
 * Walks to the first base defined by this module (subclasses may be plain
 * Python classes), as PyType_GetModuleByDef does on 3.11+.  NULL with
 * TypeError for a type of no pygpu module. */
pygpu_state *pygpu_state_of_type(PyTypeObject *tp);

/* Push `item` on the context-variable chain `var` (st->stream_var,
 * st->device_var); pop returns the item (new reference) or NULL with
 * RuntimeError if the chain is empty. */
int pygpu_ctxstack_push(PyObject *var, PyObject *item);
PyObject *pygpu_ctxstack_pop(PyObject *var);

#endif /* PYGPU_STATE_H */
