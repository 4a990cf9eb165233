"""The original PyGPU (PybindGPU) low-level interface, on every backend.

Every name here is also a name of the package (``pygpu.cudaGetDevice()``,
``pygpu.DeviceArray_int64``), loaded on first use.  The ``cuda*`` names are
kept on the HIP and host backends.

The contract of the original: a call never raises for a device error.  A
call with no result returns the status as a ``cudaError_t`` object (falsy on
success); a call with a result returns ``(result, cudaError_t)``, the result
being None when the call failed (``cudaGetDeviceCount`` gives 0, as the
runtime does).  Objects that wrap a runtime resource (``cudaEvent_t``,
``cudaStream_t``, ``cudaDeviceProp``, ``DeviceArray_<dtype>``) keep the
status of their last call in ``last_status()``.  Arguments of the wrong type
raise ``TypeError``, as the original's bindings did.

The original's known bugs are fixed: ``cudaDeviceProp``'s ``pciDeviceID()``
and ``pciDomainID()`` return their own values and ``uuid()`` the whole UUID;
a ``DeviceArray`` made over caller addresses never frees them; one made from
a strided buffer copies the right elements; one made from a buffer of
another dtype is a ``TypeError``; its methods on unallocated memory give a
non-zero ``last_status()`` instead of touching a null pointer; ``set(i, v)``
writes the device through a copy instead of dereferencing a device pointer
on the host.
"""
import operator

import numpy as np

import pygpu as _pg
from pygpu import Event, GPUArray, GPUError, Stream, cudaError_t

__all__ = list(_pg._LOWLEVEL_NAMES)

# Status codes the wrappers produce themselves: the same numbers in CUDA, in
# HIP (hipErrorInvalidValue, ...) and on the host backend, which uses CUDA's.
_INVALID_VALUE = 1
_INVALID_DEVICE = 101
_INVALID_HANDLE = 400
_NOT_READY = 600
_SUCCESS = cudaError_t(0)

use_hip = _pg.backend == "hip"


def _int_arg(obj, what):
    if isinstance(obj, bool) or not hasattr(type(obj), "__index__"):
        raise TypeError(f"{what} must be an int, not {type(obj).__name__}")
    return operator.index(obj)


def _status(call, *args):
    """Run a PyGPU call; (its result, cudaError_t), the result None on a
    device error.  A GPUError with no runtime status (a call PyGPU refused
    before making it: the legacy stream under a capture, a forked child)
    is raised as it is: there is no cudaError_t to give for it."""
    try:
        return call(*args), _SUCCESS
    except GPUError as e:
        if e.code is None:
            raise
        return None, cudaError_t(e.code)


# ---- errors -----------------------------------------------------------------

def cudaGetErrorName(error):
    """The status's name, such as 'cudaErrorInvalidValue' (an error object or an int)."""
    return cudaError_t(error).name


def cudaGetErrorString(error):
    """The runtime's message for a status (an error object or an int)."""
    return cudaError_t(error).string


def cudaGetLastError():
    """The runtime's last error, cleared (PyGPU's own calls clear the ones
    they report as exceptions)."""
    return cudaError_t(_pg.backend_module._get_last_error())


def cudaPeekAtLastError():
    """The runtime's last error, left in place."""
    return cudaError_t(_pg.backend_module._get_last_error(peek=True))


# ---- devices ----------------------------------------------------------------

def cudaGetDeviceCount():
    """(number of devices, error); (0, error) when the runtime has none."""
    n, err = _status(_pg.device_count)
    return (0 if n is None else n), err


def cudaGetDevice():
    """(current device, error)."""
    return _status(_pg.get_device)


def cudaSetDevice(device):
    """Make `device` current; an out-of-range ordinal gives cudaErrorInvalidDevice."""
    device = _int_arg(device, "device")
    try:
        _pg.set_device(device)
    except ValueError:              # out of range, checked before the runtime is asked
        return cudaError_t(_INVALID_DEVICE)
    except GPUError as e:
        return cudaError_t(e.code)
    return _SUCCESS


def cudaDeviceSynchronize():
    """Wait for all work on the current device."""
    return _status(_pg.synchronize)[1]


def cudaDeviceReset():
    """Reset the current device.  As in CUDA, every allocation on it dies,
    PyGPU's too: drop every array, allocation, page-locked array, stream and
    event made before (PyGPU's own caches are emptied first)."""
    return cudaError_t(_pg.backend_module._device_reset())


def cudaMemGetInfo():
    """((free, total) bytes of the current device, error)."""
    return _status(_pg.mem_get_info)


def _pci_fields(bus_id):
    domain, bus, rest = bus_id.split(":")
    return int(domain, 16), int(bus, 16), int(rest.split(".")[0], 16)


class cudaDeviceProp:
    """The properties of device `device`, read once; each accessor returns
    None when last_status() is an error (an out-of-range device gives
    cudaErrorInvalidDevice)."""

    def __init__(self, device=0):
        device = _int_arg(device, "device")
        self._props = None
        try:
            d = _pg.Device(device)
            self._props = dict(name=d.name, uuid=d.uuid, pci=_pci_fields(d.pci_bus_id),
                               total=d.total_memory, mp=d.multiprocessor_count, cc=d.compute_capability)
            self._status = _SUCCESS
        except ValueError:
            self._status = cudaError_t(_INVALID_DEVICE)
        except GPUError as e:
            self._status = cudaError_t(e.code)

    def _get(self, key, index=None):
        if self._props is None:
            return None
        v = self._props[key]
        return v if index is None else v[index]

    def name(self):
        """The device's name (None if the device was out of range)."""
        return self._get("name")

    def uuid(self):
        """'xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx' (nvidia-smi shows GPU-<uuid>)."""
        return self._get("uuid")

    def pciDomainID(self):
        """The PCI domain of the device's address."""
        return self._get("pci", 0)

    def pciBusID(self):
        """The PCI bus of the device's address."""
        return self._get("pci", 1)

    def pciDeviceID(self):
        """The PCI device of the device's address."""
        return self._get("pci", 2)

    def totalGlobalMem(self):
        """The device's memory in bytes."""
        return self._get("total")

    def multiProcessorCount(self):
        """The number of multiprocessors."""
        return self._get("mp")

    def major(self):
        """The compute capability's major number."""
        return self._get("cc", 0)

    def minor(self):
        """The compute capability's minor number."""
        return self._get("cc", 1)

    def last_status(self):
        """The status of reading the properties (a cudaError_t)."""
        return self._status

    def __repr__(self):
        return f"<cudaDeviceProp {self.name()!r}, last_status={self._status!r}>"


# ---- events and streams -----------------------------------------------------

class _Handle:
    """A runtime object made at construction; failures go to last_status()."""

    def _make(self, make):
        self._obj = None
        try:
            self._obj = make()
            self._status = _SUCCESS
        except ValueError:          # flags the runtime would refuse
            self._status = cudaError_t(_INVALID_VALUE)
        except GPUError as e:
            self._status = cudaError_t(e.code)

    def get(self):
        """The handle as an int (0 when it could not be made)."""
        return 0 if self._obj is None else self._obj.ptr

    __int__ = get

    def last_status(self):
        """The status of creating the handle (a cudaError_t)."""
        return self._status

    def __repr__(self):
        return f"<{type(self).__name__} {self.get():#x}, last_status={self._status!r}>"


class cudaEvent_t(_Handle):
    """An event: flags as cudaEventCreateWithFlags (1 blocking sync, 2
    disable timing, 4 interprocess).  `.event` is the pygpu.Event (None when
    it could not be made)."""

    def __init__(self, flags=0):
        flags = _int_arg(flags, "flags")

        def make():
            if flags & ~7 or flags < 0:
                raise ValueError(flags)
            return Event(timing=not flags & 2, blocking=bool(flags & 1), interprocess=bool(flags & 4))
        self._make(make)

    @property
    def event(self):
        return self._obj


class cudaStream_t(_Handle):
    """A stream: flags 1 for non-blocking; priority as
    cudaStreamCreateWithPriority.  `.stream` is the pygpu.Stream."""

    def __init__(self, flags=0, priority=0):
        flags, priority = _int_arg(flags, "flags"), _int_arg(priority, "priority")

        def make():
            if flags & ~1 or flags < 0:
                raise ValueError(flags)
            return Stream(non_blocking=bool(flags & 1), priority=priority)
        self._make(make)

    @property
    def stream(self):
        return self._obj


def _event_arg(event):
    if isinstance(event, cudaEvent_t):
        return event._obj
    if isinstance(event, Event):
        return event
    raise TypeError(f"expected a cudaEvent_t, not {type(event).__name__}")


def _stream_arg(stream):
    """None (the legacy default stream, as in the original), a cudaStream_t
    or a pygpu.Stream; the pygpu.Stream, or None if it was never made."""
    if stream is None:
        return Stream.null
    if isinstance(stream, cudaStream_t):
        return stream._obj
    if isinstance(stream, Stream):
        return stream
    raise TypeError(f"expected a cudaStream_t or None, not {type(stream).__name__}")


def _on_handles(call, *handles):
    """cudaError_t of call(*handles); a handle that was never made gives
    cudaErrorInvalidResourceHandle."""
    if any(h is None for h in handles):
        return cudaError_t(_INVALID_HANDLE)
    return _status(call, *handles)[1]


def _query(obj):
    if obj is None:
        return cudaError_t(_INVALID_HANDLE)
    done, err = _status(obj.query)
    return err if err else (_SUCCESS if done else cudaError_t(_NOT_READY))


def cudaEventRecord(event, stream=None):
    """Record `event` on `stream` (None: the legacy default stream);
    cudaErrorInvalidResourceHandle for a stream of another device than the
    event's, as the runtime answers (Event.record raises ValueError)."""
    e, s = _event_arg(event), _stream_arg(stream)
    if e is not None and s is not None and s is not Stream.null and s.device != e.device:
        return cudaError_t(_INVALID_HANDLE)
    return _on_handles(Event.record, e, s)


def cudaEventSynchronize(event):
    """Wait for the work recorded in `event`; the status."""
    return _on_handles(Event.synchronize, _event_arg(event))


def cudaEventQuery(event):
    """Success when the recorded work is done, else cudaErrorNotReady."""
    return _query(_event_arg(event))


def cudaEventElapsedTime(start, end):
    """(milliseconds from `start` to `end`, error); waits for both.  Events
    never recorded, or made without timing, give cudaErrorInvalidResourceHandle."""
    a, b = _event_arg(start), _event_arg(end)
    if a is None or b is None:
        return None, cudaError_t(_INVALID_HANDLE)
    try:
        return a.elapsed_time(b), _SUCCESS
    except ValueError:
        return None, cudaError_t(_INVALID_HANDLE)
    except GPUError as e:
        return None, cudaError_t(e.code)


def cudaStreamSynchronize(stream=None):
    """Wait for all work on `stream` (None: the legacy default stream)."""
    return _on_handles(Stream.synchronize, _stream_arg(stream))


def cudaStreamQuery(stream=None):
    """Success when all work on `stream` is done, else cudaErrorNotReady."""
    return _query(_stream_arg(stream))


def cudaStreamWaitEvent(stream, event, flags=0):
    """Make later work on `stream` wait for `event` (flags must be 0)."""
    s, e = _stream_arg(stream), _event_arg(event)
    if _int_arg(flags, "flags") != 0:
        return cudaError_t(_INVALID_VALUE)
    return _on_handles(Stream.wait_event, s, e)


# ---- pointers ---------------------------------------------------------------

class _PointerWrapper:
    """A typed address, as the original's pointer_wrapper_<dtype>.

    Made empty by pointer_wrapper_<dtype>(address=0), by create(n), or by a
    DeviceArray's host_data() and device_data().  It is safe when it points
    to host memory this process owns (create(), host_data()): get() then
    returns that memory as a NumPy array (a view: writes reach it).  get()
    on a device pointer raises ValueError, as it does on an address of
    unknown provenance; unsafe_get() returns the address whatever it is.
    int(p) is the address, and ctypes functions take p as a pointer."""
    __slots__ = ("_ptr", "_array", "_device")
    dtype = None

    def __init__(self, address=0):
        self._ptr = _int_arg(address, "address")
        if self._ptr < 0:
            raise ValueError("an address cannot be negative")
        self._array = None
        self._device = False

    @classmethod
    def _make(cls, ptr, array=None, device=False):
        p = cls.__new__(cls)
        p._ptr, p._array, p._device = ptr, array, device
        return p

    def create(self, n):
        """Point to `n` new zeroed elements of host memory, owned by this object."""
        n = _int_arg(n, "n")
        if n < 0:
            raise ValueError("n cannot be negative")
        self._array = np.zeros(n, self.dtype)
        self._ptr, self._device = self._array.ctypes.data, False

    def destroy(self):
        """Forget the memory (freed with its last user; never memory this
        object does not own) and point nowhere."""
        self._ptr, self._array, self._device = 0, None, False

    def is_safe(self):
        """True when the pointer is host memory this process owns (get() works)."""
        return self._array is not None

    def get(self):
        """The host memory as a NumPy array (safe pointers only)."""
        if self._array is not None:
            return self._array
        if self._device:
            raise ValueError(f"{type(self).__name__} {self._ptr:#x} points to device memory: "
                             "the host cannot read it (copy it with to_host(), or use unsafe_get() "
                             "for the address)")
        raise ValueError(f"{type(self).__name__} {self._ptr:#x} is not known to be host memory owned by "
                         "this process (use unsafe_get() for the address)")

    def unsafe_get(self):
        """The address, safe or not."""
        return self._ptr

    def __int__(self):
        return self._ptr

    @property
    def _as_parameter_(self):      # ctypes: fn(p) passes the address
        return self._ptr

    def print_address(self):
        """Print the address in hex."""
        print(hex(self._ptr))

    def __repr__(self):
        where = "device" if self._device else "host"
        return f"<{type(self).__name__} {self._ptr:#x} ({where}), is_safe={self.is_safe()}>"


# ---- DeviceArray ----------------------------------------------------------------

class _RawHost:
    """Exposes host memory at an address to NumPy (__array_interface__)."""

    def __init__(self, addr, shape, dtype, order, keep=None):
        strides = None
        if order == "F" and len(shape) > 1:
            strides, step = [], dtype.itemsize
            for n in shape:
                strides.append(step)
                step *= n
            strides = tuple(strides)
        self.__array_interface__ = {"shape": shape, "typestr": dtype.str, "data": (addr, False),
                                    "strides": strides, "version": 3}
        self.keep = keep


def _raw_host(addr, shape, dtype, order, keep=None):
    return np.asarray(_RawHost(addr, shape, dtype, order, keep))


def _order_arg(order):
    """'C'/'F', or the original's c_contiguous flag (true: C, false: F)."""
    if isinstance(order, str) and order.upper() in ("C", "F"):
        return order.upper()
    if isinstance(order, (bool, int)) and order in (0, 1):
        return "C" if order else "F"
    raise TypeError(f"order must be 'C', 'F' or a C-contiguous flag, not {order!r}")


def _shape_arg(shape):
    if isinstance(shape, (list, tuple)):
        shape = tuple(_int_arg(n, "a dimension") for n in shape)
    else:
        shape = (_int_arg(shape, "size"),)
    if any(n < 0 for n in shape):
        raise ValueError(f"negative dimensions are not allowed: {shape}")
    return shape


def _is_shape(obj):
    return isinstance(obj, (list, tuple, np.integer)) or (isinstance(obj, int) and not isinstance(obj, bool))


class _DeviceArray(_pg.backend_module._HostBuffer):
    """Host data and a device copy of it, as the original's DeviceArray_<dtype>.

    DeviceArray_<dtype>(...) takes one of:
      size (int), or shape (list or tuple) [, order]   new zeroed host data
      buffer (a NumPy array or any buffer of this dtype) the host side is the
                                                       buffer itself (any strides)
      pointer_wrapper, shape [, order]                 host data at the pointer
      host_address, device_address, shape [, order]    both sides at caller
                                                       addresses (never freed here)
    `order` is 'C' or 'F', or the original's flag (true: C, false: F).  The
    device side, made by allocate(), is contiguous in that order (for a
    buffer: F if the buffer is F-contiguous, else C).  The host side is this
    object's buffer: numpy.asarray(da) and memoryview(da) view it.
    """
    dtype = None
    _pointer = None

    def __init__(self, *args):
        self._status, self._dev, self._keep = _SUCCESS, None, None
        n = len(args)
        if n in (3, 4) and not isinstance(args[0], _PointerWrapper) and _is_shape(args[2]):
            self._from_addresses(*args)
        elif n in (2, 3) and isinstance(args[0], _PointerWrapper):
            self._from_pointer(*args)
        elif n in (1, 2) and _is_shape(args[0]):
            self._shape = _shape_arg(args[0])
            self._order = _order_arg(args[1]) if n == 2 else "C"
            self._host = np.zeros(self._shape, self.dtype, self._order)
        elif n == 1:
            self._from_buffer(args[0])
        else:
            raise TypeError(f"{type(self).__name__}() takes a size, a shape [, order], a buffer, "
                            "(pointer_wrapper, shape [, order]) or (host_address, device_address, "
                            "shape [, order])")

    def _from_buffer(self, obj):
        try:
            host = obj if isinstance(obj, np.ndarray) else np.asarray(memoryview(obj))
        except TypeError:
            raise TypeError(f"{type(self).__name__}() takes a size, a shape or a buffer, "
                            f"not {type(obj).__name__}") from None
        if host.dtype != self.dtype:
            raise TypeError(f"{type(self).__name__} holds {self.dtype} data, not {host.dtype}: "
                            f"use DeviceArray_{host.dtype.name}"
                            if host.dtype.isnative and host.dtype.name in _pg._LOWLEVEL_DTYPES
                            else f"{type(self).__name__} holds {self.dtype} data, not {host.dtype}")
        f = host.flags
        self._shape, self._order, self._host = host.shape, "F" if f.f_contiguous and not f.c_contiguous else "C", host

    def _from_pointer(self, ptr, shape, order="C"):
        if not isinstance(ptr, self._pointer):
            raise TypeError(f"{type(self).__name__} takes a {self._pointer.__name__}, not {type(ptr).__name__}")
        if ptr._device:
            raise ValueError("a device pointer cannot be the host side of a DeviceArray")
        self._shape, self._order = _shape_arg(shape), _order_arg(order)
        if ptr._array is not None and self._nbytes() > ptr._array.nbytes:
            raise ValueError(f"shape {self._shape} needs {self._nbytes()} bytes; the pointer has "
                             f"{ptr._array.nbytes}")
        self._host = _raw_host(ptr._ptr, self._shape, self.dtype, self._order, keep=ptr._array)

    def _from_addresses(self, host_addr, device_addr, shape, order="C"):
        host_addr, device_addr = _int_arg(host_addr, "host_address"), _int_arg(device_addr, "device_address")
        self._shape, self._order = _shape_arg(shape), _order_arg(order)
        self._host = _raw_host(host_addr, self._shape, self.dtype, self._order) if host_addr else None
        if device_addr:
            try:
                self._dev = GPUArray(self._shape, self.dtype, gpudata=device_addr, order=self._order)
            except GPUError as e:
                self._status = cudaError_t(e.code)

    def _nbytes(self):
        return int(np.prod(self._shape, dtype=np.int64)) * self.dtype.itemsize

    def _set_status(self, code):
        self._status = code if isinstance(code, cudaError_t) else cudaError_t(code)
        return self._status

    def _device_call(self, call, *args):
        """Run call(*args); the status of it, also kept as last_status()."""
        try:
            call(*args)
        except GPUError as e:
            return self._set_status(e.code)
        return self._set_status(_SUCCESS)

    # -- the original's methods --

    def allocate(self):
        """Allocate the device side (nothing if it is there); the status."""
        if self._dev is not None:
            return self._set_status(_SUCCESS)
        try:
            self._dev = GPUArray(self._shape, self.dtype, order=self._order)
        except GPUError as e:
            return self._set_status(e.code)
        return self._set_status(_SUCCESS)

    def allocated(self):
        """True once allocate() has succeeded."""
        return self._dev is not None

    def to_device(self):
        """Copy the host side to the device; the status (invalid value when
        nothing is allocated or there is no host side)."""
        if self._dev is None or self._host is None:
            return self._set_status(_INVALID_VALUE)
        return self._device_call(self._dev.set, self._host)

    def to_host(self):
        """Copy the device side into the host side; the status."""
        if self._dev is None or self._host is None or not self._host.flags.writeable:
            return self._set_status(_INVALID_VALUE)
        return self._device_call(self._dev.get, self._host)

    def set(self, *args):
        """set(source): copy to the device side from a host address (int),
        a pointer_wrapper, or host data (a buffer or NumPy array of this
        size).  set(index, value): set one element, `index` counted in the
        device side's order.  The status (invalid value when nothing is
        allocated or the index is out of range)."""
        if len(args) == 2:
            return self._set_item(*args)
        if len(args) != 1:
            raise TypeError("set() takes a source, or an index and a value")
        if self._dev is None:
            return self._set_status(_INVALID_VALUE)
        src = args[0]
        if isinstance(src, _PointerWrapper):
            if src._device:
                return self._device_call(_pg.memcpy_dtod, self._dev.ptr, src._ptr, self._nbytes())
            src = src._array if src._array is not None else src._ptr
        if isinstance(src, int) and not isinstance(src, bool):
            src = _raw_host(src, self._shape, self.dtype, self._order)
        src = np.asarray(src)
        if src.shape != self._shape and src.size == self._dev.size:
            src = src.reshape(self._shape, order=self._order)
        return self._device_call(self._dev.set, src)

    def _set_item(self, index, value):
        """set_val(index, value): as set(index, value), one element; the status."""
        index = _int_arg(index, "index")
        if self._dev is None or not 0 <= index < self._dev.size:
            return self._set_status(_INVALID_VALUE)
        flat = self._dev.reshape(-1, order=self._order)
        return self._device_call(flat.__setitem__, index, value)

    set_val = _set_item

    def host_data(self):
        """A safe pointer_wrapper to the host side (get() gives it as an array)."""
        if self._host is None:
            return self._pointer._make(0)
        return self._pointer._make(self._host.ctypes.data, self._host)

    def device_data(self):
        """A pointer_wrapper to the device side (null, and last_status()
        invalid value, when nothing is allocated)."""
        if self._dev is None:
            self._set_status(_INVALID_VALUE)
            return self._pointer._make(0, device=True)
        return self._pointer._make(self._dev.ptr, device=True)

    def last_status(self):
        """The status of the last call (a cudaError_t)."""
        return self._status

    def size(self):
        """The number of elements."""
        return int(np.prod(self._shape, dtype=np.int64))

    def nbytes(self):
        """The size in bytes."""
        return self._nbytes()

    def shape(self):
        """The shape, as a list."""
        return list(self._shape)

    def strides(self):
        """The host side's strides in bytes (the device side is contiguous)."""
        if self._host is not None:
            return list(self._host.strides)
        return _contiguous_strides(self._shape, self.dtype.itemsize, self._order)

    def __repr__(self):
        return (f"<{type(self).__name__} shape={self._shape}, allocated={self.allocated()}, "
                f"last_status={self._status!r}>")


def _contiguous_strides(shape, itemsize, order):
    strides, step = [0] * len(shape), itemsize
    for i in (range(len(shape) - 1, -1, -1) if order == "C" else range(len(shape))):
        strides[i] = step
        step *= shape[i]
    return strides


def _make_classes():
    ns = globals()
    for name in _pg._LOWLEVEL_DTYPES:
        dt = np.dtype(name)
        pointer = type(f"pointer_wrapper_{name}", (_PointerWrapper,),
                       {"__slots__": (), "dtype": dt, "__module__": __name__,
                        "__doc__": f"An address of {name} data (also ptr_wrapper_{name})."})
        array = type(f"DeviceArray_{name}", (_DeviceArray,),
                     {"dtype": dt, "_pointer": pointer, "__module__": __name__,
                      "__doc__": f"{name} host data and its device copy.\n\n" + _DeviceArray.__doc__})
        ns[pointer.__name__] = ns[f"ptr_wrapper_{name}"] = pointer
        ns[array.__name__] = array


_make_classes()
