/*
 * ipc.c -- device memory shared between processes, as PyCUDA offers it:
 * mem_get_ipc_handle(allocation) gives the bytes another process passes
 * to IPCMemoryHandle(handle), which maps the same memory there until it is
 * closed (close(), the end of a `with` block, or its death).
 *
 * Only plain device memory has a handle: mem_alloc(nbytes, ipc=True) (or
 * another library's cudaMalloc memory, by address); memory from the
 * stream-ordered pool, which PyGPU's arrays use, has none, and asking says
 * so.  pygpu.mpi moves GPUArrays between ranks of one node through such
 * memory.
 */
#include "pygpu.h"
#include "ipc.h"
#include "device.h"
#include "errors.h"
#include "fork.h"
#include "memory.h"
#include "state.h"

#include <structmember.h>

typedef struct {
    PyObject_HEAD
    void *ptr;                  /* where the memory is mapped here; NULL once closed */
    int device;                 /* the device current when it was opened */
} PyGPUIPCHandle;

/* Unmap; the raw status (no Python error set). */
static pygpu_status ipc_unmap(PyGPUIPCHandle *h)
{
    pygpu_status s = 0;
    int prev = -1;
    if (!h->ptr)
        return 0;
    if (!pygpu_fork_broken()) {     /* (in a forked child the mapping is the parent's) */
        if (pygpu_rt_get_device(&prev) == 0 && prev != h->device)
            pygpu_rt_set_device(h->device);
        else
            prev = -1;
        s = pygpu_rt_ipc_close(h->ptr);
        if (prev >= 0)
            pygpu_rt_set_device(prev);
    }
    h->ptr = NULL;
    return s;
}

static PyObject *ipc_new(PyTypeObject *tp, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"handle", NULL};
    Py_buffer b;
    pygpu_status s;
    pygpu_state *st = pygpu_state_of_type(tp);
    if (!st || !PyArg_ParseTupleAndKeywords(args, kwds, "y*:IPCMemoryHandle", kwlist, &b))
        return NULL;
    if (b.len != PYGPU_IPC_HANDLE_BYTES) {
        PyErr_Format(PyExc_ValueError, "IPCMemoryHandle(): a handle is %d bytes (from mem_get_ipc_handle), "
                     "not %zd", PYGPU_IPC_HANDLE_BYTES, b.len);
        PyBuffer_Release(&b);
        return NULL;
    }
    PyGPUIPCHandle *h = (PyGPUIPCHandle *)tp->tp_alloc(tp, 0);
    if (!h || (h->device = pygpu_current_device(st)) < 0) {
        PyBuffer_Release(&b);
        Py_XDECREF(h);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    s = pygpu_rt_ipc_open(b.buf, &h->ptr);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&b);
    if (s != 0) {
        h->ptr = NULL;
        Py_DECREF(h);
        (void)pygpu_check(st, s, "IpcOpenMemHandle");
        return NULL;
    }
    return (PyObject *)h;
}

static void ipc_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    if (ipc_unmap((PyGPUIPCHandle *)self) != 0)
        (void)pygpu_rt_get_last_error();
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyObject *ipc_ptr(PyObject *self, void *c)
{
    (void)c;
    PyGPUIPCHandle *h = (PyGPUIPCHandle *)self;
    if (!h->ptr)
        return PyErr_Format(PyExc_ValueError, "this IPCMemoryHandle was closed");
    return PyLong_FromVoidPtr(h->ptr);
}

static PyObject *ipc_int(PyObject *self) { return ipc_ptr(self, NULL); }

static PyObject *ipc_close(PyObject *self, PyObject *unused)
{
    (void)unused;
    pygpu_state *st = pygpu_state_of(self);
    if (!st || pygpu_check(st, ipc_unmap((PyGPUIPCHandle *)self), "IpcCloseMemHandle") < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *ipc_enter(PyObject *self, PyObject *unused)
{
    (void)unused;
    if (!((PyGPUIPCHandle *)self)->ptr)
        return PyErr_Format(PyExc_ValueError, "this IPCMemoryHandle was closed");
    return Py_NewRef(self);
}

static PyObject *ipc_exit(PyObject *self, PyObject *args)
{
    (void)args;
    return ipc_close(self, NULL);
}

static PyObject *ipc_repr(PyObject *self)
{
    PyGPUIPCHandle *h = (PyGPUIPCHandle *)self;
    if (!h->ptr)
        return PyUnicode_FromString("<pygpu.IPCMemoryHandle closed>");
    return PyUnicode_FromFormat("<pygpu.IPCMemoryHandle %p, mapped on device %d>", h->ptr, h->device);
}

static PyMemberDef ipc_members[] = {
    {"device", T_INT, offsetof(PyGPUIPCHandle, device), READONLY, "The device current when it was opened."},
    {0},
};

static PyGetSetDef ipc_getset[] = {
    {"ptr", ipc_ptr, NULL, "The address of the mapped memory in this process, as an int.", NULL},
    {0},
};

static PyMethodDef ipc_methods[] = {
    {"close", ipc_close, METH_NOARGS, "close()\n--\n\nUnmap the memory (again: nothing)."},
    {"__enter__", ipc_enter, METH_NOARGS, NULL},
    {"__exit__", ipc_exit, METH_VARARGS, NULL},
    {0},
};

static PyType_Slot ipc_slots[] = {
    {Py_tp_doc, "IPCMemoryHandle(handle)\n--\n\n"
                "Device memory of another process, mapped into this one from the bytes of its\n"
                "mem_get_ipc_handle(); int() or .ptr is its address here.  Unmapped by close(),\n"
                "at the end of a `with` block, or when the object dies.  The exporting process\n"
                "keeps the memory allocated while it is mapped."},
    {Py_tp_new, ipc_new},
    {Py_tp_dealloc, ipc_dealloc},
    {Py_tp_repr, ipc_repr},
    {Py_nb_int, ipc_int},
    {Py_nb_index, ipc_int},
    {Py_tp_members, ipc_members},
    {Py_tp_getset, ipc_getset},
    {Py_tp_methods, ipc_methods},
    {0, NULL},
};

static PyType_Spec ipc_spec = {
    .name = "pygpu.IPCMemoryHandle",
    .basicsize = sizeof(PyGPUIPCHandle),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = ipc_slots,
};

/* mem_get_ipc_handle(allocation): the bytes that open it elsewhere. */
static PyObject *mem_get_ipc_handle(PyObject *mod, PyObject *arg)
{
    unsigned char h[PYGPU_IPC_HANDLE_BYTES];
    void *ptr;
    size_t size;
    pygpu_status s;
    pygpu_state *st = PyModule_GetState(mod);
    if (pygpu_address_arg(st, arg, &ptr, &size) < 0)
        return NULL;
    if (PyObject_TypeCheck(arg, st->Memory) && !((PyGPUMemory *)arg)->ipc)
        return PyErr_Format(PyExc_ValueError, "mem_get_ipc_handle(): this DeviceAllocation %s has no IPC handle; "
                            "allocate memory to share with mem_alloc(nbytes, ipc=True)",
                            ((PyGPUMemory *)arg)->pooled ? "comes from the stream-ordered pool, which" : "");
    Py_BEGIN_ALLOW_THREADS
    s = pygpu_rt_ipc_handle(ptr, h);
    Py_END_ALLOW_THREADS
    if (pygpu_check(st, s, "IpcGetMemHandle") < 0)
        return NULL;
    return PyBytes_FromStringAndSize((const char *)h, sizeof h);
}

static PyMethodDef ipc_functions[] = {
    {"mem_get_ipc_handle", mem_get_ipc_handle, METH_O,
     "mem_get_ipc_handle(allocation, /)\n--\n\n"
     "The IPC handle (bytes) of plain device memory: a DeviceAllocation of\n"
     "mem_alloc(nbytes, ipc=True), or the base address of another library's\n"
     "cudaMalloc memory.  Another process maps it with IPCMemoryHandle(handle)."},
    {0},
};

int pygpu_ipc_init(PyObject *m)
{
    PyTypeObject *tp = (PyTypeObject *)PyType_FromModuleAndSpec(m, &ipc_spec, NULL);
    int r = tp ? PyModule_AddType(m, tp) : -1;
    Py_XDECREF(tp);
    return r < 0 ? -1 : PyModule_AddFunctions(m, ipc_functions);
}
