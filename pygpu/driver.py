"""PyCUDA's driver idioms on PyGPU: ``import pygpu.driver as cuda``.

Code written for ``pycuda.driver`` ports by changing its import line
(``import PyGPU.driver as cuda`` is the same module).  What moves or holds
data is here: devices, streams, events, device and page-locked memory, the
byte copies, and the exception names.  Nothing here compiles or launches
kernels.

There are no context objects.  PyGPU uses each device's primary context, as
the CUDA runtime (and the original PyGPU) does: the current device is the
context.  ``Device(i).make_context()``, ``Context.push()`` and
``Context.pop()`` raise ``LogicError`` saying so; ``Context.synchronize()``
and ``Context.get_device()`` work on the current device.
"""
import enum
import math
import operator

import numpy as np

import pygpu as _pg
from pygpu import DeviceAllocation, GPUError, HostAllocation, mem_alloc, mem_get_info

__all__ = [
    "Error", "MemoryError", "LogicError", "LaunchError", "RuntimeError", "CompileError",
    "init", "get_version", "get_driver_version",
    "Device", "device_attribute", "Context", "ctx_flags",
    "Stream", "Event", "event_flags",
    "DeviceAllocation", "HostAllocation", "mem_alloc", "mem_get_info",
    "memcpy_htod", "memcpy_dtoh", "memcpy_dtod",
    "memcpy_htod_async", "memcpy_dtoh_async", "memcpy_dtod_async", "memset_d8", "memset_d8_async",
    "to_device", "from_device", "from_device_like",
    "pagelocked_empty", "pagelocked_zeros", "pagelocked_empty_like", "pagelocked_zeros_like",
    "aligned_empty", "aligned_zeros", "aligned_empty_like",
    "register_host_memory", "RegisteredHostMemory", "host_alloc_flags", "mem_host_register_flags",
]

# ---- errors ---------------------------------------------------------------

Error = GPUError                # every failing runtime call raises one
MemoryError = _pg.GPUMemoryError  # noqa: A001  (PyCUDA's name; also a builtins.MemoryError)


class LogicError(GPUError):
    """A call that cannot be right whatever the device does (here: the
    context calls, which PyGPU does not have)."""


class LaunchError(GPUError):
    """PyCUDA's name for a failed kernel launch; PyGPU launches nothing, so
    it never raises this one (your kernels' errors surface as GPUError)."""


class RuntimeError(GPUError):  # noqa: A001  (PyCUDA's name)
    """PyCUDA's name for an unforeseen runtime failure; PyGPU raises its
    base class, Error (GPUError)."""


class CompileError(GPUError):
    """PyCUDA's name for a failed compilation; PyGPU compiles nothing."""


def _raise_status(code, call):
    """Raise GPUError (GPUMemoryError when out of memory) for a status code."""
    e = _pg.cudaError_t(code)
    fn = _pg.backend + call
    cls = _pg.GPUMemoryError if code == 2 else GPUError     # 2: out of memory, on every backend
    raise cls(f"{fn}: {e.name} ({code}): {e.string}", code=code, name=e.name, message=e.string, call=fn)


_NO_CONTEXTS = ("PyGPU has no context objects: it uses each device's primary context, as the "
                "CUDA runtime does.  Choose the device with pygpu.set_device(i) or "
                "`with pygpu.Device(i):`; Context.synchronize() and Context.get_device() work")


# ---- versions and init ----------------------------------------------------

def init(flags=0):
    """PyCUDA's init(): checks that the runtime has a device (GPUError if not)."""
    if operator.index(flags) != 0:
        raise ValueError("init() takes flags=0 only")
    _pg.device_count()


def get_version():
    """The runtime's version as a tuple (major, minor, patch); (0, 0, 0) on host."""
    v = _pg.runtime_version()
    if _pg.backend == "cuda":
        return (v // 1000, v % 1000 // 10, 0)
    if _pg.backend == "hip":
        return (v // 10_000_000, v // 100_000 % 100, v % 100_000)
    return (0, 0, 0)


def get_driver_version():
    """The driver's version, as the vendor encodes it (0 on host)."""
    return _pg.driver_version()


# ---- devices ----------------------------------------------------------------

class device_attribute(enum.IntEnum):
    """The device attributes get_attribute() knows (the driver's numbers)."""
    MULTIPROCESSOR_COUNT = 16
    PCI_BUS_ID = 33
    PCI_DEVICE_ID = 34
    PCI_DOMAIN_ID = 50
    COMPUTE_CAPABILITY_MAJOR = 75
    COMPUTE_CAPABILITY_MINOR = 76


class ctx_flags:
    """PyCUDA's context flags (accepted nowhere: there are no contexts)."""
    SCHED_AUTO, SCHED_SPIN, SCHED_YIELD, SCHED_BLOCKING_SYNC, MAP_HOST = 0, 1, 2, 4, 8


def _pci_fields(bus_id):
    """(domain, bus, device) of a PCI address 'dddd:bb:dd.f'."""
    try:
        domain, bus, rest = bus_id.split(":")
        return int(domain, 16), int(bus, 16), int(rest.split(".")[0], 16)
    except ValueError:
        raise ValueError(f"{bus_id!r} is not a PCI bus id ('dddd:bb:dd.f')") from None


class Device:
    """PyCUDA's Device(number): a device, with its properties as methods.

    `number` may also be a PCI bus id string ('0000:1e:00.0') or a
    pygpu.Device.  int(d) is the ordinal; pygpu.Device(d) the PyGPU object.
    """
    __slots__ = ("_dev",)

    def __init__(self, number):
        if isinstance(number, Device):
            number = number._dev
        if isinstance(number, str):
            wanted = _pci_fields(number)
            found = [i for i in range(_pg.device_count())
                     if _pci_fields(_pg.Device(i).pci_bus_id) == wanted]
            if not found:
                raise ValueError(f"no device at PCI address {number!r}")
            number = found[0]
        elif not isinstance(number, _pg.Device):
            number = operator.index(number)
        self._dev = _pg.Device(number)

    @staticmethod
    def count():
        """The number of devices (GPUError when the runtime has none)."""
        return _pg.device_count()

    def name(self):
        """The device's name."""
        return self._dev.name

    def total_memory(self):
        """The device's memory in bytes."""
        return self._dev.total_memory

    def compute_capability(self):
        """(major, minor)."""
        return self._dev.compute_capability

    def pci_bus_id(self):
        """The PCI address, 'dddd:bb:dd.f'."""
        return self._dev.pci_bus_id

    def get_attribute(self, attr):
        """One of device_attribute's values (ValueError for the others)."""
        return self.get_attributes()[device_attribute(attr)]

    def get_attributes(self):
        """{device_attribute: value} for every attribute of device_attribute."""
        d = self._dev
        domain, bus, dev = _pci_fields(d.pci_bus_id)
        A = device_attribute
        return {A.MULTIPROCESSOR_COUNT: d.multiprocessor_count, A.PCI_BUS_ID: bus, A.PCI_DEVICE_ID: dev,
                A.PCI_DOMAIN_ID: domain, A.COMPUTE_CAPABILITY_MAJOR: d.compute_capability[0],
                A.COMPUTE_CAPABILITY_MINOR: d.compute_capability[1]}

    def make_context(self, flags=0):
        """Raises LogicError: PyGPU uses the primary context (set_device or with pygpu.Device(i))."""
        raise LogicError(_NO_CONTEXTS)

    def retain_primary_context(self):
        """Raises LogicError: PyGPU uses the primary context (set_device or with pygpu.Device(i))."""
        raise LogicError(_NO_CONTEXTS)

    def __int__(self):
        return self._dev.id

    __index__ = __int__

    def __eq__(self, other):
        return isinstance(other, Device) and other._dev is self._dev

    def __hash__(self):
        return hash(self._dev.id)

    def __repr__(self):
        return f"<pygpu.driver.Device {self._dev.id}: {self._dev.name}>"


class Context:
    """PyCUDA's Context: only the static calls on the current device exist."""

    def __init__(self, *args, **kwargs):
        raise LogicError(_NO_CONTEXTS)

    @staticmethod
    def synchronize():
        """Wait for all work on the current device."""
        _pg.synchronize()

    @staticmethod
    def get_device():
        """The current device."""
        return Device(_pg.get_device())

    @staticmethod
    def push():
        """Raises LogicError: there are no context objects."""
        raise LogicError(_NO_CONTEXTS)

    @staticmethod
    def pop():
        """Raises LogicError: there are no context objects."""
        raise LogicError(_NO_CONTEXTS)


# ---- streams and events ---------------------------------------------------

class event_flags:
    """PyCUDA's Event flags: DEFAULT 0, BLOCKING_SYNC 1, DISABLE_TIMING 2, INTERPROCESS 4."""
    DEFAULT, BLOCKING_SYNC, DISABLE_TIMING, INTERPROCESS = 0, 1, 2, 4


def _flags(flags, known, what):
    flags = operator.index(flags)
    if flags & ~known or flags < 0:
        raise ValueError(f"unknown {what} flags: {flags:#x}")
    return flags


class Stream(_pg.Stream):
    """PyCUDA's Stream(flags=0) (1: non-blocking): a pygpu.Stream, so every
    `stream=` argument of PyGPU takes it."""

    def __new__(cls, flags=0, priority=0):
        flags = _flags(flags, 1, "stream")
        return super().__new__(cls, non_blocking=bool(flags & 1), priority=priority)

    def is_done(self):
        """True if all work queued on the stream is done."""
        return self.query()

    def wait_for_event(self, event):
        """Make later work on this stream wait for `event`."""
        self.wait_event(event)


class Event(_pg.Event):
    """PyCUDA's Event(flags=0), flags from event_flags: a pygpu.Event
    (record(stream=None) and synchronize() return it; query(),
    time_since(start), time_till(end) in milliseconds)."""

    def __new__(cls, flags=0):
        flags = _flags(flags, 7, "event")
        return super().__new__(cls, timing=not flags & event_flags.DISABLE_TIMING,
                               blocking=bool(flags & event_flags.BLOCKING_SYNC),
                               interprocess=bool(flags & event_flags.INTERPROCESS))


# ---- memory and copies ----------------------------------------------------

def _address(obj):
    """A device address argument: a DeviceAllocation or an int stay; anything
    else that int() converts (PyCUDA's pooled allocations, NumPy ints) is
    converted."""
    if isinstance(obj, bool) or isinstance(obj, float) or not hasattr(type(obj), "__int__"):
        raise TypeError(f"a device address must be a DeviceAllocation or an int, not {type(obj).__name__}")
    if isinstance(obj, (DeviceAllocation, int)):
        return obj
    return int(obj)


def memcpy_htod(dest, src):
    """Copy all bytes of host buffer `src` to device address `dest`."""
    _pg.memcpy_htod(_address(dest), src)


def memcpy_dtoh(dest, src):
    """Fill host buffer `dest` from device address `src`."""
    _pg.memcpy_dtoh(dest, _address(src))


def memcpy_dtod(dest, src, size):
    """Copy `size` bytes between device addresses."""
    _pg.memcpy_dtod(_address(dest), _address(src), size)


def memcpy_htod_async(dest, src, stream=None):
    """Queue a copy of all bytes of host buffer `src` to device address `dest` on `stream`
    (page-locked `src`: keep it alive and unchanged until the stream passes it)."""
    _pg.memcpy_htod_async(_address(dest), src, stream)


def memcpy_dtoh_async(dest, src, stream=None):
    """Fill host buffer `dest` from device address `src`, ordered on `stream` (ready once the stream passes it)."""
    _pg.memcpy_dtoh_async(dest, _address(src), stream)


def memcpy_dtod_async(dest, src, size, stream=None):
    """Queue a copy of `size` bytes between device addresses on `stream`."""
    _pg.memcpy_dtod_async(_address(dest), _address(src), size, stream)


def memset_d8(dest, data, count):
    """Set `count` bytes at device address `dest` to `data`."""
    _pg.memset_d8(_address(dest), data, count)


def memset_d8_async(dest, data, count, stream=None):
    """Queue setting `count` bytes at device address `dest` to `data` on `stream`."""
    _pg.memset_d8_async(_address(dest), data, count, stream)


def to_device(bf_obj):
    """A new DeviceAllocation holding the bytes of host buffer `bf_obj`."""
    nbytes = memoryview(bf_obj).nbytes
    mem = mem_alloc(nbytes)
    _pg.memcpy_htod(mem, bf_obj)
    return mem


def from_device(devptr, shape, dtype, order="C"):
    """A new NumPy array of `shape`, `dtype` read from device address `devptr`."""
    out = np.empty(shape, dtype, order)
    _pg.memcpy_dtoh(out, _address(devptr))
    return out


def from_device_like(devptr, other_ary):
    """A new NumPy array like `other_ary`, read from device address `devptr`."""
    out = np.empty_like(other_ary)
    _pg.memcpy_dtoh(out, _address(devptr))
    return out


class host_alloc_flags:
    """pagelocked_* mem_flags: PORTABLE 1, DEVICEMAP 2, WRITECOMBINED 4 (accepted; memory is always portable)."""
    PORTABLE, DEVICEMAP, WRITECOMBINED = 1, 2, 4


class mem_host_register_flags:
    """register_host_memory flags: PORTABLE 1, DEVICEMAP 2."""
    PORTABLE, DEVICEMAP = 1, 2


def _plain_dtype(dtype):
    dtype = np.dtype(dtype)
    if dtype.hasobject:
        raise TypeError(f"page-locked and aligned arrays hold plain data, not {dtype}")
    return dtype


def _shape(shape):
    """A shape argument (an int or a sequence of ints) as a tuple."""
    try:
        shape = (operator.index(shape),)
    except TypeError:
        shape = tuple(operator.index(n) for n in shape)
    if any(n < 0 for n in shape):
        raise ValueError("negative dimensions are not allowed")
    return shape


def _order_like(ary):
    flags = ary.flags
    return "F" if flags.f_contiguous and not flags.c_contiguous else "C"


def pagelocked_empty(shape, dtype, order="C", mem_flags=0):
    """A NumPy array in page-locked host memory (copies to and from the
    device move at the link's speed).  `mem_flags` (host_alloc_flags) are
    accepted; PyGPU's page-locked memory is always portable and mapped
    where the platform maps it."""
    dtype = _plain_dtype(dtype)
    _flags(mem_flags, 7, "host allocation")
    shape = _shape(shape)
    mem = _pg.backend_module._mem_alloc_host_for(shape, dtype)  # (its errors name the shape and dtype)
    return np.frombuffer(mem, dtype, math.prod(shape)).reshape(shape, order=order)


def pagelocked_zeros(shape, dtype, order="C", mem_flags=0):
    """As pagelocked_empty, filled with zeros."""
    a = pagelocked_empty(shape, dtype, order, mem_flags)
    a.fill(0)
    return a


def pagelocked_empty_like(array, mem_flags=0):
    """pagelocked_empty of `array`'s shape, dtype and order (C or F)."""
    return pagelocked_empty(array.shape, array.dtype, _order_like(array), mem_flags)


def pagelocked_zeros_like(array, mem_flags=0):
    """pagelocked_zeros of `array`'s shape, dtype and order (C or F)."""
    return pagelocked_zeros(array.shape, array.dtype, _order_like(array), mem_flags)


def aligned_empty(shape, dtype, order="C", alignment=4096):
    """A NumPy array whose data starts on a multiple of `alignment` bytes."""
    dtype = _plain_dtype(dtype)
    alignment = operator.index(alignment)
    if alignment <= 0 or alignment & (alignment - 1):
        raise ValueError(f"alignment must be a power of two, not {alignment}")
    shape = _shape(shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + alignment, np.uint8)
    start = -raw.ctypes.data % alignment
    return raw[start:start + nbytes].view(dtype).reshape(shape, order=order)


def aligned_zeros(shape, dtype, order="C", alignment=4096):
    """As aligned_empty, filled with zeros."""
    a = aligned_empty(shape, dtype, order, alignment)
    a.fill(0)
    return a


def aligned_empty_like(ary, alignment=4096):
    """aligned_empty of `ary`'s shape, dtype and order (C or F)."""
    return aligned_empty(ary.shape, ary.dtype, _order_like(ary), alignment)


class RegisteredHostMemory:
    """Host memory of an existing array, page-locked by register_host_memory.

    `base` is the array; unregister() (or the death of every array viewing
    it) ends the page-locking.  On the host backend registering is a no-op
    that checks its arguments."""

    def __init__(self, ary):
        self.base = ary
        self.ptr = ary.ctypes.data
        self.size = ary.nbytes
        self.__array_interface__ = dict(ary.__array_interface__)
        self._registered = False
        if self.size:
            status = _pg.backend_module._host_register(self.ptr, self.size)
            if status:
                _raise_status(status, "HostRegister")
            self._registered = True

    def get_device_pointer(self):
        """The address kernels use for this memory (the host address: the
        runtimes map registered memory at the same address)."""
        return self.ptr

    def unregister(self):
        """End the page-locking (the array stays valid, as pageable memory)."""
        if self._registered:
            self._registered = False
            status = _pg.backend_module._host_unregister(self.ptr)
            if status:
                _raise_status(status, "HostUnregister")

    def __del__(self):
        try:
            self.unregister()
        except Exception:       # at exit, or already unregistered by the runtime
            pass


def register_host_memory(ary, flags=0):
    """Page-lock the memory of NumPy array `ary` (contiguous) in place; the
    result views the same memory and keeps it page-locked while it lives
    (its .base is the RegisteredHostMemory)."""
    if not isinstance(ary, np.ndarray):
        raise TypeError(f"register_host_memory() takes a NumPy array, not {type(ary).__name__}")
    _flags(flags, 3, "host register")
    if not (ary.flags.c_contiguous or ary.flags.f_contiguous):
        raise ValueError("register_host_memory() needs a contiguous array")
    return np.asarray(RegisteredHostMemory(ary))
