/*
 * errors.c -- runtime statuses to Python: the one helper that turns a status
 * into a GPUError, and cudaError_t, the original PyGPU's error object.
 */
#include "pygpu.h"
#include "errors.h"
#include "convert.h"
#include "fork.h"

#include <structmember.h>

/* The prefix of the runtime's function names: "cuda", "hip" ("host" on
 * the host backend, whose calls mirror CUDA's). */
static const char *call_prefix(void)
{
    return pygpu_rt_vendor();
}

/* Set GPUError (or GPUMemoryError) for `status`, naming `call` (the runtime
 * function without its prefix, such as "MallocAsync"); `head` (or NULL)
 * goes before the runtime's words, as "head: cudaMalloc: ...". */
static void raise_status(pygpu_state *st, pygpu_status status, const char *call, PyObject *head)
{
    const char *name = pygpu_rt_error_name(status);
    const char *text = pygpu_rt_error_string(status);
    PyObject *cls = pygpu_rt_is_out_of_memory(status) ? st->GPUMemoryError : st->GPUError;
    PyObject *line = NULL, *args = NULL, *kwargs = NULL, *exc = NULL;

    char fn[96], why[640];
    snprintf(fn, sizeof fn, "%s%s", call_prefix(), call);
    if (pygpu_rt_diagnose(status, why, sizeof why))     /* no driver, too old, or no device: say which */
        line = PyUnicode_FromFormat("%s: %s (%d): %s [the runtime's words: %s]", fn, name, (int)status, why, text);
    else
        line = PyUnicode_FromFormat("%s: %s (%d): %s%s", fn, name, (int)status, text,
                                    pygpu_rt_is_sticky(status)
                                    ? " (the device context is now unusable: every later "
                                      "call on it fails too; restart the process)" : "");
    if (!line)
        goto done;
    args = head ? Py_BuildValue("(N)", PyUnicode_FromFormat("%U: %U", head, line)) : Py_BuildValue("(O)", line);
    if (!args)
        goto done;
    kwargs = Py_BuildValue("{s:i,s:s,s:s,s:s}", "code", (int)status, "name", name, "message", text,
                           "call", fn);
    if (!kwargs)
        goto done;
    exc = PyObject_Call(cls, args, kwargs);
    if (exc)
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
done:
    Py_XDECREF(line);
    Py_XDECREF(args);
    Py_XDECREF(kwargs);
    Py_XDECREF(exc);
}

/* GPUError for a runtime call (or any, when `call` is NULL) in a child
 * forked after the parent used the device. */
static void raise_forked(pygpu_state *st, const char *call)
{
    char fn[96];
    snprintf(fn, sizeof fn, "%s%s", call_prefix(), call ? call : "");
    PyObject *text = PyUnicode_FromFormat(
        "this process was forked after it had used the %s device, and a forked child cannot use it (the "
        "runtime does not survive fork): create worker processes with multiprocessing's 'spawn' or "
        "'forkserver' start method, or use the device only after the fork", pygpu_rt_vendor());
    PyObject *args = text ? Py_BuildValue("(N)", PyUnicode_FromFormat("%s%s%U", call ? fn : "",
                                                                     call ? ": " : "", text)) : NULL;
    PyObject *kwargs = args ? Py_BuildValue("{s:s,s:O,s:z}", "name", "pygpuErrorForkedChild", "message",
                                            text, "call", call ? fn : NULL) : NULL;
    PyObject *exc = kwargs ? PyObject_Call(st->GPUError, args, kwargs) : NULL;
    if (exc)
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    Py_XDECREF(text);
    Py_XDECREF(args);
    Py_XDECREF(kwargs);
    Py_XDECREF(exc);
}

int pygpu_fork_check(pygpu_state *st)
{
    if (!pygpu_fork_broken()) {
        pygpu_fork_note_use();
        return 0;
    }
    raise_forked(st, NULL);
    return -1;
}

int pygpu_reset_check(pygpu_state *st, int dev, unsigned made, const char *what)
{
    if (!pygpu_reset_since(dev, made))
        return 0;
    PyErr_Format(st->GPUError, "this %s was made on device %d before the device was reset, and died with the "
                 "reset: make a new one", what, dev);
    return -1;
}

int pygpu_check(pygpu_state *st, pygpu_status status, const char *call)
{
    if (status == 0) {
        pygpu_fork_note_use();
        return 0;
    }
    /* Clear the runtime's last error so later checks do not see it again. */
    (void)pygpu_rt_get_last_error();
    if (pygpu_fork_broken())
        raise_forked(st, call);         /* (the vendor's status would not say why) */
    else
        raise_status(st, status, call, NULL);
    return -1;
}

PyObject *pygpu_query_result(pygpu_state *st, pygpu_status status, const char *call)
{
    if (pygpu_rt_is_not_ready(status)) {
        (void)pygpu_rt_get_last_error();
        Py_RETURN_FALSE;
    }
    if (pygpu_check(st, status, call) < 0)
        return NULL;
    Py_RETURN_TRUE;
}

/* ---- out of memory: what was asked for ---------------------------------- */

/* `nbytes` in words, by NumPy's rules (_ArrayMemoryError._size_to_string):
 * "100 bytes", "1.00 PiB", "12.0 GiB", "512. MiB", "1000. KiB" -- three
 * significant digits in the unit that keeps the number under 1024 once
 * rounded, all the digits where those are more. */
static void size_text(size_t nbytes, char *buf, size_t n)
{
    static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int bits = 0;
    for (size_t v = nbytes; v; v >>= 1)
        bits++;
    int unit = (bits - 1 > 1 ? bits - 1 : 1) / 10;
    double value = (double)nbytes / (double)((size_t)1 << (10 * unit));
    if (value >= 1023.5 && unit < 6) {      /* (Python's round() to 1024: the next unit) */
        unit++;
        value /= 1024;
    }
    if (unit == 0)
        snprintf(buf, n, "%zu bytes", nbytes);
    else if (value < 999.5)                 /* (round() below 1000, ties to even) */
        snprintf(buf, n, "%#.3g %s", value, units[unit]);
    else
        snprintf(buf, n, "%#.0f %s", value, units[unit]);
}

/* What a failed allocation asked for, in NumPy's words, then where:
 * "Unable to allocate 1.00 PiB for an array with shape (2, 3) and data type
 * uint8 on device 0 (11.5 GiB free of 15.6 GiB)"; new reference. */
static PyObject *alloc_text(size_t nbytes, int device, const pygpu_alloc_purpose *purpose)
{
    char size[48], where[160] = "", free_s[48], total_s[48];
    size_t free_b, total_b;
    PyObject *what = NULL, *r = NULL;
    size_text(nbytes, size, sizeof size);
    if (device >= 0 && pygpu_rt_mem_get_info(&free_b, &total_b) == 0) {
        size_text(free_b, free_s, sizeof free_s);
        size_text(total_b, total_s, sizeof total_s);
        snprintf(where, sizeof where, " on device %d (%s free of %s)", device, free_s, total_s);
    } else if (device >= 0) {               /* (the runtime cannot tell: the device alone) */
        (void)pygpu_rt_get_last_error();
        snprintf(where, sizeof where, " on device %d", device);
    }
    if (purpose) {
        PyObject *shape = pygpu_shape_repr(purpose->shape, purpose->nd);
        what = shape ? PyUnicode_FromFormat(" for an array with shape %U and data type %S", shape,
                                            (PyObject *)purpose->descr) : NULL;
        Py_XDECREF(shape);
    } else {
        what = PyUnicode_FromString("");
    }
    if (what)
        r = PyUnicode_FromFormat("Unable to allocate %s%s%U%s", size,
                                 device < 0 ? " of page-locked host memory" : "", what, where);
    Py_XDECREF(what);
    return r;
}

int pygpu_check_alloc(pygpu_state *st, pygpu_status status, const char *call, size_t nbytes, int device,
                      const pygpu_alloc_purpose *purpose)
{
    if (status == 0 || !pygpu_rt_is_out_of_memory(status) || pygpu_fork_broken())
        return pygpu_check(st, status, call);
    (void)pygpu_rt_get_last_error();
    PyObject *head = alloc_text(nbytes, device, purpose);
    if (head)
        raise_status(st, status, call, head);
    Py_XDECREF(head);
    return -1;
}

/* ---- cudaError_t ------------------------------------------------------- */

PyObject *pygpu_error_object(pygpu_state *st, int code)
{
    PyGPUErrorObj *e = PyObject_New(PyGPUErrorObj, st->ErrorObj);
    if (e)
        e->code = code;
    return (PyObject *)e;
}

static PyObject *errobj_new(PyTypeObject *tp, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"code", NULL};
    PyObject *arg = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O:cudaError_t", kwlist, &arg))
        return NULL;
    int code = 0;
    if (arg && Py_TYPE(arg) == tp) {
        code = ((PyGPUErrorObj *)arg)->code;
    } else if (arg) {
        if (!PyIndex_Check(arg))
            return PyErr_Format(PyExc_TypeError,
                                "a cudaError_t is made from an int or an error object, not %.100s",
                                Py_TYPE(arg)->tp_name);
        long v = PyLong_AsLong(arg);
        if (v == -1 && PyErr_Occurred())
            return NULL;
        if (v < INT_MIN || v > INT_MAX)
            return PyErr_Format(PyExc_OverflowError, "error code %ld out of range", v);
        code = (int)v;
    }
    PyGPUErrorObj *e = (PyGPUErrorObj *)tp->tp_alloc(tp, 0);
    if (e)
        e->code = code;
    return (PyObject *)e;
}

static void errobj_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyObject *errobj_repr(PyObject *self)
{
    return PyUnicode_FromFormat("<cudaError: code=%d>", ((PyGPUErrorObj *)self)->code);
}

static PyObject *errobj_int(PyObject *self) { return PyLong_FromLong(((PyGPUErrorObj *)self)->code); }

static int errobj_bool(PyObject *self) { return ((PyGPUErrorObj *)self)->code != 0; }

static Py_hash_t errobj_hash(PyObject *self)
{
    Py_hash_t h = ((PyGPUErrorObj *)self)->code;
    return h == -1 ? -2 : h;        /* as hash(int) */
}

/* The code of an int or error object; 1 if found, 0 if `o` is neither. */
static int code_of(PyObject *o, PyTypeObject *tp, long *code)
{
    if (Py_TYPE(o) == tp) {
        *code = ((PyGPUErrorObj *)o)->code;
        return 1;
    }
    if (PyLong_Check(o)) {
        int overflow;
        *code = PyLong_AsLongAndOverflow(o, &overflow);
        if (overflow)
            *code = LONG_MIN;       /* equal to no error code */
        return 1;
    }
    return 0;
}

static PyObject *errobj_richcompare(PyObject *a, PyObject *b, int op)
{
    long x, y;
    if ((op != Py_EQ && op != Py_NE) || !code_of(a, Py_TYPE(a), &x) || !code_of(b, Py_TYPE(a), &y))
        Py_RETURN_NOTIMPLEMENTED;
    return PyBool_FromLong((x == y) == (op == Py_EQ));
}

static PyObject *errobj_name(PyObject *self, void *c)
{
    (void)c;
    return PyUnicode_FromString(pygpu_rt_error_name(((PyGPUErrorObj *)self)->code));
}

static PyObject *errobj_string(PyObject *self, void *c)
{
    (void)c;
    return PyUnicode_FromString(pygpu_rt_error_string(((PyGPUErrorObj *)self)->code));
}

static PyObject *errobj_as_int(PyObject *self, PyObject *unused)
{
    (void)unused;
    return errobj_int(self);
}

static PyMemberDef errobj_members[] = {
    {"code", T_INT, offsetof(PyGPUErrorObj, code), READONLY, "The runtime's status number."},
    {0},
};

static PyGetSetDef errobj_getset[] = {
    {"name", errobj_name, NULL, "The status's name, such as 'cudaErrorInvalidValue'.", NULL},
    {"string", errobj_string, NULL, "The runtime's message for the status.", NULL},
    {0},
};

static PyMethodDef errobj_methods[] = {
    {"as_int", errobj_as_int, METH_NOARGS, "as_int()\n--\n\nThe status number."},
    {0},
};

static PyType_Slot errobj_slots[] = {
    {Py_tp_doc, "cudaError_t(code=0)\n--\n\n"
                "A runtime status, as the original PyGPU returns them: truthy only\n"
                "when it is an error; compares equal to its code."},
    {Py_tp_new, errobj_new},
    {Py_tp_dealloc, errobj_dealloc},
    {Py_tp_repr, errobj_repr},
    {Py_tp_hash, errobj_hash},
    {Py_tp_richcompare, errobj_richcompare},
    {Py_nb_int, errobj_int},
    {Py_nb_index, errobj_int},
    {Py_nb_bool, errobj_bool},
    {Py_tp_members, errobj_members},
    {Py_tp_getset, errobj_getset},
    {Py_tp_methods, errobj_methods},
    {0, NULL},
};

static PyType_Spec errobj_spec = {
    .name = "pygpu.cudaError_t",
    .basicsize = sizeof(PyGPUErrorObj),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = errobj_slots,
};

int pygpu_errors_init(PyObject *m, pygpu_state *st)
{
    PyObject *errors = PyImport_ImportModule("pygpu._errors");
    if (!errors)
        return -1;
    st->GPUError = PyObject_GetAttrString(errors, "GPUError");
    st->GPUMemoryError = st->GPUError ? PyObject_GetAttrString(errors, "GPUMemoryError") : NULL;
    st->BackendWarning = st->GPUMemoryError ? PyObject_GetAttrString(errors, "BackendWarning") : NULL;
    Py_DECREF(errors);
    if (!st->BackendWarning)
        return -1;
    PyObject *numpy_errors = PyImport_ImportModule("numpy.exceptions");
    st->ComplexWarning = numpy_errors ? PyObject_GetAttrString(numpy_errors, "ComplexWarning") : NULL;
    st->AxisError = st->ComplexWarning ? PyObject_GetAttrString(numpy_errors, "AxisError") : NULL;
    Py_XDECREF(numpy_errors);
    if (!st->AxisError)
        return -1;
    if (PyModule_AddObjectRef(m, "GPUError", st->GPUError) < 0 ||
        PyModule_AddObjectRef(m, "GPUMemoryError", st->GPUMemoryError) < 0)
        return -1;
    st->ErrorObj = (PyTypeObject *)PyType_FromModuleAndSpec(m, &errobj_spec, NULL);
    if (!st->ErrorObj)
        return -1;
    return PyModule_AddType(m, st->ErrorObj);
}
