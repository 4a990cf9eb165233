/*
 * device.c -- devices: ordinals, the current device, and the Device type.
 *
 * Device objects are made once per ordinal and cached in the module state,
 * so Device(i) is Device(i).  Properties are read from the runtime on first
 * use.  The current device is per host thread, as in the runtimes; `with
 * Device(i):` saves the previous one on a context-variable chain.
 */
#include "pygpu.h"
#include "device.h"
#include "errors.h"
#include "peer.h"
#include "state.h"

#include <structmember.h>

int pygpu_device_count(pygpu_state *st)
{
    int n = 0;
    if (pygpu_fork_check(st) < 0 || pygpu_check(st, pygpu_rt_device_count(&n), "GetDeviceCount") < 0)
        return -1;
    return n;
}

int pygpu_current_device(pygpu_state *st)
{
    int dev = 0;
    if (pygpu_fork_check(st) < 0 || pygpu_check(st, pygpu_rt_get_device(&dev), "GetDevice") < 0)
        return -1;
    return dev;
}

int pygpu_check_device_id(pygpu_state *st, long dev)
{
    int n = pygpu_device_count(st);
    if (n < 0)
        return -1;
    if (dev < 0 || dev >= n) {
        PyErr_Format(PyExc_ValueError, "device %ld out of range: the %s backend has %d device%s (0..%d)",
                     dev, pygpu_rt_vendor(), n, n == 1 ? "" : "s", n - 1);
        return -1;
    }
    return 0;
}

int pygpu_device_enter(pygpu_state *st, int dev, int *prev)
{
    if ((*prev = pygpu_current_device(st)) < 0)
        return -1;
    if (dev == *prev)
        return 0;
    if (pygpu_check_device_id(st, dev) < 0)
        return -1;
    return pygpu_check(st, pygpu_rt_set_device(dev), "SetDevice");
}

int pygpu_device_leave(pygpu_state *st, int prev)
{
    int cur = 0;
    if (pygpu_rt_get_device(&cur) == 0 && cur == prev)
        return 0;
    return pygpu_check(st, pygpu_rt_set_device(prev), "SetDevice");
}

/* The tuple of all Device objects, made on first use; borrowed. */
static PyObject *all_devices(pygpu_state *st)
{
    if (st->devices)
        return st->devices;
    int n = pygpu_device_count(st);
    if (n < 0)
        return NULL;
    PyObject *t = PyTuple_New(n);
    if (!t)
        return NULL;
    for (int i = 0; i < n; i++) {
        PyGPUDevice *d = PyObject_New(PyGPUDevice, st->Device);
        if (!d) {
            Py_DECREF(t);
            return NULL;
        }
        d->id = i;
        d->props_loaded = 0;
        PyTuple_SET_ITEM(t, i, (PyObject *)d);
    }
    st->devices = t;
    return t;
}

PyObject *pygpu_device_get(pygpu_state *st, int dev)
{
    if (pygpu_check_device_id(st, dev) < 0)
        return NULL;
    PyObject *all = all_devices(st);
    if (!all)
        return NULL;
    return Py_NewRef(PyTuple_GET_ITEM(all, dev));
}

int pygpu_device_arg(pygpu_state *st, PyObject *obj, const char *what, int *dev)
{
    if (PyObject_TypeCheck(obj, st->Device)) {
        *dev = ((PyGPUDevice *)obj)->id;
        return 0;
    }
    if (!PyIndex_Check(obj) || PyBool_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be a pygpu.Device or an int ordinal, not %.100s", what,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    int overflow = 0;
    PyObject *v = PyNumber_Index(obj);
    long d = v ? PyLong_AsLongAndOverflow(v, &overflow) : -1;
    Py_XDECREF(v);
    if (d == -1 && PyErr_Occurred())
        return -1;
    if (overflow)
        d = overflow < 0 ? LONG_MIN : LONG_MAX;
    if (pygpu_check_device_id(st, d) < 0)
        return -1;
    *dev = (int)d;
    return 0;
}

static PyObject *device_new(PyTypeObject *tp, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"device", NULL};
    PyObject *arg = Py_None;
    pygpu_state *st = pygpu_state_of_type(tp);
    if (!st || !PyArg_ParseTupleAndKeywords(args, kwds, "|O:Device", kwlist, &arg))
        return NULL;
    long dev;
    if (arg == Py_None) {
        dev = pygpu_current_device(st);
    } else if (Py_TYPE(arg) == tp) {
        return Py_NewRef(arg);
    } else {
        if (!PyIndex_Check(arg))
            return PyErr_Format(PyExc_TypeError, "Device() takes a device ordinal (int), not %.100s",
                                Py_TYPE(arg)->tp_name);
        dev = PyLong_AsLong(arg);
        if (dev == -1 && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_OverflowError))
                return NULL;
            PyErr_Clear();
            dev = LONG_MAX;
        }
    }
    if (dev == -1 && PyErr_Occurred())
        return NULL;
    if (pygpu_check_device_id(st, dev) < 0)
        return NULL;
    return pygpu_device_get(st, (int)dev);
}

static void device_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

/* Read the properties once; borrowed pointer, or NULL with an exception. */
static const pygpu_device_props *props(PyGPUDevice *d)
{
    if (!d->props_loaded) {
        pygpu_state *st = pygpu_state_of((PyObject *)d);
        if (!st || pygpu_check(st, pygpu_rt_device_props(d->id, &d->props), "GetDeviceProperties") < 0)
            return NULL;
        d->props_loaded = 1;
    }
    return &d->props;
}

static PyObject *device_repr(PyObject *self)
{
    PyGPUDevice *d = (PyGPUDevice *)self;
    const pygpu_device_props *p = props(d);
    if (!p)
        return NULL;
    return PyUnicode_FromFormat("<pygpu.Device %d: %s>", d->id, p->name);
}

static PyObject *device_int(PyObject *self) { return PyLong_FromLong(((PyGPUDevice *)self)->id); }

static PyObject *get_name(PyObject *self, void *c)
{
    (void)c;
    const pygpu_device_props *p = props((PyGPUDevice *)self);
    return p ? PyUnicode_FromString(p->name) : NULL;
}

static PyObject *get_cc(PyObject *self, void *c)
{
    (void)c;
    const pygpu_device_props *p = props((PyGPUDevice *)self);
    return p ? Py_BuildValue("(ii)", p->cc_major, p->cc_minor) : NULL;
}

static PyObject *get_total_memory(PyObject *self, void *c)
{
    (void)c;
    const pygpu_device_props *p = props((PyGPUDevice *)self);
    return p ? PyLong_FromSize_t(p->total_memory) : NULL;
}

static PyObject *get_mp_count(PyObject *self, void *c)
{
    (void)c;
    const pygpu_device_props *p = props((PyGPUDevice *)self);
    return p ? PyLong_FromLong(p->multiprocessor_count) : NULL;
}

static PyObject *get_pci_bus_id(PyObject *self, void *c)
{
    (void)c;
    const pygpu_device_props *p = props((PyGPUDevice *)self);
    return p ? PyUnicode_FromString(p->pci_bus_id) : NULL;
}

static PyObject *get_numa_node(PyObject *self, void *c)
{
    (void)c;
    int node = -1;
    pygpu_state *st = pygpu_state_of(self);
    if (!st || pygpu_check(st, pygpu_rt_device_numa_node(((PyGPUDevice *)self)->id, &node), "DeviceGetPCIBusId") < 0)
        return NULL;
    return PyLong_FromLong(node);
}

static PyObject *get_uuid(PyObject *self, void *c)
{
    (void)c;
    const pygpu_device_props *p = props((PyGPUDevice *)self);
    if (!p)
        return NULL;
    const unsigned char *u = p->uuid;
    char s[37];
    snprintf(s, sizeof s, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
             u[13], u[14], u[15]);
    return PyUnicode_FromString(s);
}

/* Run `fn` with this device current, then restore the previous one. */
static PyObject *on_device(PyObject *self, PyObject *(*fn)(pygpu_state *))
{
    pygpu_state *st = pygpu_state_of(self);
    int prev;
    if (!st || pygpu_device_enter(st, ((PyGPUDevice *)self)->id, &prev) < 0)
        return NULL;
    PyObject *r = fn(st);
    if (pygpu_device_leave(st, prev) < 0)
        Py_CLEAR(r);
    return r;
}

static PyObject *mem_info_here(pygpu_state *st)
{
    size_t free_b = 0, total_b = 0;
    if (pygpu_check(st, pygpu_rt_mem_get_info(&free_b, &total_b), "MemGetInfo") < 0)
        return NULL;
    return Py_BuildValue("(nn)", (Py_ssize_t)free_b, (Py_ssize_t)total_b);
}

static PyObject *synchronize_here(pygpu_state *st)
{
    pygpu_status s;
    Py_BEGIN_ALLOW_THREADS
    s = pygpu_rt_device_synchronize();
    Py_END_ALLOW_THREADS
    if (pygpu_check(st, s, "DeviceSynchronize") < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *device_mem_info(PyObject *self, PyObject *unused)
{
    (void)unused;
    return on_device(self, mem_info_here);
}

static PyObject *device_synchronize(PyObject *self, PyObject *unused)
{
    (void)unused;
    return on_device(self, synchronize_here);
}

static PyObject *device_make_current(PyObject *self, PyObject *unused)
{
    (void)unused;
    pygpu_state *st = pygpu_state_of(self);
    if (!st || pygpu_check(st, pygpu_rt_set_device(((PyGPUDevice *)self)->id), "SetDevice") < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *device_enter(PyObject *self, PyObject *unused)
{
    (void)unused;
    pygpu_state *st = pygpu_state_of(self);
    int prev;
    if (!st || (prev = pygpu_current_device(st)) < 0)
        return NULL;
    PyObject *saved = PyLong_FromLong(prev);
    if (!saved || pygpu_ctxstack_push(st->device_var, saved) < 0) {
        Py_XDECREF(saved);
        return NULL;
    }
    Py_DECREF(saved);
    if (pygpu_check(st, pygpu_rt_set_device(((PyGPUDevice *)self)->id), "SetDevice") < 0) {
        Py_XDECREF(pygpu_ctxstack_pop(st->device_var));
        return NULL;
    }
    return Py_NewRef(self);
}

static PyObject *device_exit(PyObject *self, PyObject *args)
{
    (void)args;
    pygpu_state *st = pygpu_state_of(self);
    PyObject *saved = st ? pygpu_ctxstack_pop(st->device_var) : NULL;
    if (!saved)
        return NULL;
    long prev = PyLong_AsLong(saved);
    Py_DECREF(saved);
    if (pygpu_check(st, pygpu_rt_set_device((int)prev), "SetDevice") < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* The `peer` argument of the peer methods, checked; -1 with an exception. */
static int peer_arg(PyObject *self, PyObject *arg, pygpu_state **st)
{
    int peer;
    if (!(*st = pygpu_state_of(self)) || pygpu_device_arg(*st, arg, "peer", &peer) < 0)
        return -1;
    return peer;
}

static PyObject *device_can_access_peer(PyObject *self, PyObject *arg)
{
    pygpu_state *st;
    int can = 0, dev = ((PyGPUDevice *)self)->id, peer = peer_arg(self, arg, &st);
    if (peer < 0 || pygpu_check(st, pygpu_rt_can_access_peer(dev, peer, &can), "DeviceCanAccessPeer") < 0)
        return NULL;
    return PyBool_FromLong(can);
}

/* The runtime's performance rank of the link from this device to `peer`. */
static PyObject *device_p2p_rank(PyObject *self, PyObject *arg)
{
    pygpu_state *st;
    char call[80];
    int rank = 0, dev = ((PyGPUDevice *)self)->id, peer = peer_arg(self, arg, &st);
    if (peer < 0)
        return NULL;
    if (peer == dev)
        return PyErr_Format(PyExc_ValueError, "device %d cannot be its own peer", dev);
    snprintf(call, sizeof call, "DeviceGetP2PAttribute (device %d to peer %d)", dev, peer);
    if (pygpu_check(st, pygpu_rt_p2p_rank(dev, peer, &rank), call) < 0)
        return NULL;
    return PyLong_FromLong(rank);
}

/* Enable or disable this device's access to `peer`'s memory. */
static PyObject *peer_access(PyObject *self, PyObject *arg, int enable)
{
    pygpu_state *st;
    char call[96];
    int dev = ((PyGPUDevice *)self)->id, peer = peer_arg(self, arg, &st);
    if (peer < 0)
        return NULL;
    if (peer == dev)
        return PyErr_Format(PyExc_ValueError, "device %d cannot be its own peer", dev);
    snprintf(call, sizeof call, "Device%sPeerAccess (device %d to peer %d)", enable ? "Enable" : "Disable",
             dev, peer);
    pygpu_status r;
    Py_BEGIN_ALLOW_THREADS
    r = enable ? pygpu_peer_enable(dev, peer) : pygpu_peer_disable(dev, peer);
    Py_END_ALLOW_THREADS
    if (pygpu_check(st, r, call) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* How copies from `src` into this device go, and why. */
static PyObject *device_peer_route(PyObject *self, PyObject *arg)
{
    pygpu_state *st;
    const char *why = NULL;
    int usable, dev = ((PyGPUDevice *)self)->id, src = peer_arg(self, arg, &st);
    if (src < 0)
        return NULL;
    if (src == dev)
        return PyErr_Format(PyExc_ValueError, "device %d cannot be its own peer", dev);
    Py_BEGIN_ALLOW_THREADS
    usable = pygpu_peer_route(dev, src, &why);
    Py_END_ALLOW_THREADS
    return Py_BuildValue("(ss)", usable ? "peer" : "staged", why);
}

static PyObject *device_enable_peer_access(PyObject *self, PyObject *arg) { return peer_access(self, arg, 1); }
static PyObject *device_disable_peer_access(PyObject *self, PyObject *arg) { return peer_access(self, arg, 0); }

static PyMemberDef device_members[] = {
    {"id", T_INT, offsetof(PyGPUDevice, id), READONLY, "The device ordinal."},
    {0},
};

static PyGetSetDef device_getset[] = {
    {"name", get_name, NULL, "The device's name, as the runtime reports it.", NULL},
    {"compute_capability", get_cc, NULL, "(major, minor).", NULL},
    {"total_memory", get_total_memory, NULL, "Bytes of device memory.", NULL},
    {"multiprocessor_count", get_mp_count, NULL, "Number of multiprocessors.", NULL},
    {"pci_bus_id", get_pci_bus_id, NULL, "PCI address, 'domain:bus:device.function'.", NULL},
    {"numa_node", get_numa_node, NULL,
     "The host's NUMA node this device hangs off, as sysfs tells it; -1 where it tells none (a host of one "
     "node, or no sysfs).  PyGPU's staging buffers for the device lie there (transfer_config's numa).",
     NULL},
    {"uuid", get_uuid, NULL, "The device's UUID, 'xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx'.", NULL},
    {0},
};

static PyMethodDef device_methods[] = {
    {"mem_info", device_mem_info, METH_NOARGS, "mem_info()\n--\n\n(free, total) bytes of this device."},
    {"synchronize", device_synchronize, METH_NOARGS,
     "synchronize()\n--\n\nWait for all work on this device."},
    {"make_current", device_make_current, METH_NOARGS,
     "make_current()\n--\n\nMake this the current device of this thread."},
    {"can_access_peer", device_can_access_peer, METH_O,
     "can_access_peer(peer, /)\n--\n\nTrue if this device can address `peer`'s memory directly."},
    {"p2p_rank", device_p2p_rank, METH_O,
     "p2p_rank(peer, /)\n--\n\n"
     "The runtime's performance rank of the link from this device to `peer`:\n"
     "lower is faster, 0 the machine's best (compare the pairs of one machine).\n"
     "GPUError naming both devices where the runtime refuses (on the host\n"
     "backend, devices that refuse peer access); ValueError for a device and itself."},
    {"enable_peer_access", device_enable_peer_access, METH_O,
     "enable_peer_access(peer, /)\n--\n\n"
     "Let this device address `peer`'s memory directly (enabling it again is\n"
     "harmless), the memory of `peer`'s stream-ordered pool (PyGPU's arrays)\n"
     "included.  GPUError naming both devices where the hardware refuses.\n"
     "Copies between devices enable it themselves when they can."},
    {"disable_peer_access", device_disable_peer_access, METH_O,
     "disable_peer_access(peer, /)\n--\n\n"
     "Undo enable_peer_access(peer), once the work queued on this device is done."},
    {"peer_route", device_peer_route, METH_O,
     "peer_route(src, /)\n--\n\n"
     "How copies from device `src` into this one go: ('peer', why), straight\n"
     "over the link, or ('staged', why), through pinned host memory.  Asks as\n"
     "the first copy between them would: enables peer access and the access\n"
     "of both devices' memory pools, and checks once that a copy lands."},
    {"__enter__", device_enter, METH_NOARGS, NULL},
    {"__exit__", device_exit, METH_VARARGS, NULL},
    {0},
};

static PyType_Slot device_slots[] = {
    {Py_tp_doc, "Device(device=None)\n--\n\n"
                "A device of the backend (None: the current one).  Use as a context\n"
                "manager to make it current and restore the previous device after."},
    {Py_tp_new, device_new},
    {Py_tp_dealloc, device_dealloc},
    {Py_tp_repr, device_repr},
    {Py_nb_int, device_int},
    {Py_nb_index, device_int},
    {Py_tp_members, device_members},
    {Py_tp_getset, device_getset},
    {Py_tp_methods, device_methods},
    {0, NULL},
};

static PyType_Spec device_spec = {
    .name = "pygpu.Device",
    .basicsize = sizeof(PyGPUDevice),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = device_slots,
};

int pygpu_device_init(PyObject *m, pygpu_state *st)
{
    st->Device = (PyTypeObject *)PyType_FromModuleAndSpec(m, &device_spec, NULL);
    return st->Device ? PyModule_AddType(m, st->Device) : -1;
}

/* ---- module functions --------------------------------------------------- */

static PyObject *mod_device_count(PyObject *m, PyObject *unused)
{
    (void)unused;
    int n = pygpu_device_count(pygpu_module_state(m));
    return n < 0 ? NULL : PyLong_FromLong(n);
}

static PyObject *mod_get_device(PyObject *m, PyObject *unused)
{
    (void)unused;
    int d = pygpu_current_device(pygpu_module_state(m));
    return d < 0 ? NULL : PyLong_FromLong(d);
}

static PyObject *mod_set_device(PyObject *m, PyObject *arg)
{
    pygpu_state *st = pygpu_module_state(m);
    if (!PyIndex_Check(arg))
        return PyErr_Format(PyExc_TypeError, "set_device() takes a device ordinal (int), not %.100s",
                            Py_TYPE(arg)->tp_name);
    long dev = PyLong_AsLong(arg);
    if (dev == -1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError))
            return NULL;
        PyErr_Clear();
        dev = LONG_MAX;
    }
    if (pygpu_check_device_id(st, dev) < 0 || pygpu_check(st, pygpu_rt_set_device((int)dev), "SetDevice") < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *mod_synchronize(PyObject *m, PyObject *unused)
{
    (void)unused;
    pygpu_status s;
    if (pygpu_fork_check(pygpu_module_state(m)) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    s = pygpu_rt_device_synchronize();
    Py_END_ALLOW_THREADS
    if (pygpu_check(pygpu_module_state(m), s, "DeviceSynchronize") < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *mod_mem_get_info(PyObject *m, PyObject *unused)
{
    (void)unused;
    size_t free_b = 0, total_b = 0;
    if (pygpu_fork_check(pygpu_module_state(m)) < 0 ||
        pygpu_check(pygpu_module_state(m), pygpu_rt_mem_get_info(&free_b, &total_b), "MemGetInfo") < 0)
        return NULL;
    return Py_BuildValue("(nn)", (Py_ssize_t)free_b, (Py_ssize_t)total_b);
}

static PyMethodDef device_functions[] = {
    {"device_count", mod_device_count, METH_NOARGS,
     "device_count()\n--\n\nThe number of devices; GPUError if the runtime has none."},
    {"get_device", mod_get_device, METH_NOARGS, "get_device()\n--\n\nThe current device of this thread."},
    {"set_device", mod_set_device, METH_O, "set_device(device, /)\n--\n\nMake `device` current in this thread."},
    {"synchronize", mod_synchronize, METH_NOARGS,
     "synchronize()\n--\n\nWait for all work on the current device."},
    {"mem_get_info", mod_mem_get_info, METH_NOARGS,
     "mem_get_info()\n--\n\n(free, total) bytes of the current device."},
    {0},
};

int pygpu_device_functions_init(PyObject *m) { return PyModule_AddFunctions(m, device_functions); }
