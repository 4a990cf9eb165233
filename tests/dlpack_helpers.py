"""DLPack seen from Python through ctypes, for the interop tests.

The structs mirror the DLPack ABI (as src/dlpack.h declares it), so that a
test can look inside a capsule (its name, version, flags, device, strides),
consume one by hand (and call its deleter with or without the GIL), and
play a producer that hands PyGPU tensors no real library would make.
"""
import ctypes

kDLCPU, kDLCUDA, kDLCUDAHost, kDLOpenCL, kDLVulkan, kDLROCM = 1, 2, 3, 4, 7, 10
kDLInt, kDLUInt, kDLFloat, kDLOpaqueHandle, kDLBfloat, kDLComplex, kDLBool = range(7)
READ_ONLY, IS_COPIED = 1, 2

LEGACY, VERSIONED = b"dltensor", b"dltensor_versioned"
USED_LEGACY, USED_VERSIONED = b"used_dltensor", b"used_dltensor_versioned"


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)        # called without the GIL
DELETER_GIL = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)   # called holding it


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


def _api(name, restype, *argtypes):
    """A CPython API function with its own prototype (pythonapi's shared
    function objects would leak argtypes between callers)."""
    return ctypes.PYFUNCTYPE(restype, *argtypes)((name, ctypes.pythonapi))


_GetName = _api("PyCapsule_GetName", ctypes.c_char_p, ctypes.py_object)
_GetPointer = _api("PyCapsule_GetPointer", ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)
_SetName = _api("PyCapsule_SetName", ctypes.c_int, ctypes.py_object, ctypes.c_char_p)
_IsValidRaw = _api("PyCapsule_IsValid", ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)
_GetPointerRaw = _api("PyCapsule_GetPointer", ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)
DESTRUCTOR = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)
_New = _api("PyCapsule_New", ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, DESTRUCTOR)


def capsule_name(cap):
    return _GetName(cap)


def managed(cap):
    """The managed tensor of an unconsumed capsule, as a ctypes struct (a
    view of the producer's memory)."""
    name = capsule_name(cap)
    ptr = _GetPointer(cap, name)
    kind = DLManagedTensorVersioned if name == VERSIONED else DLManagedTensor
    return kind.from_address(ptr)


def consume(cap):
    """Take the tensor as a consumer does (rename the capsule); returns a
    function that calls its deleter: call_deleter(gil=False) runs it with
    the GIL released, as C++ consumers may."""
    name = capsule_name(cap)
    ptr = _GetPointer(cap, name)
    m = managed(cap)
    assert _SetName(cap, USED_VERSIONED if name == VERSIONED else USED_LEGACY) == 0

    def call_deleter(gil=True):
        (DELETER_GIL if gil else DELETER)(m.deleter)(ptr)
    return m, call_deleter


def shape_strides(m):
    t = m.dl_tensor
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = tuple(t.strides[i] for i in range(t.ndim)) if t.strides else None
    return shape, strides


_KIND_CODE = {"b": kDLBool, "i": kDLInt, "u": kDLUInt, "f": kDLFloat, "c": kDLComplex}

# The structs of every capsule whose deleter has not run yet, by address:
# a producer keeps its managed tensor alive until the consumer is done with
# it, even when the producer object itself is gone.  The deleter is one
# module-level function, so that no callback is freed while it runs.
_LIVE = {}


@DELETER_GIL
def _deleter(ptr):
    entry = _LIVE.pop(ptr, None)
    if entry is not None:
        entry[-1].deleted += 1


_DELETER_ADDRESS = ctypes.cast(_deleter, ctypes.c_void_p).value


class FakeProducer:
    """A DLPack producer over a NumPy array's memory, written with ctypes,
    whose capsules can say anything: tensors a real library would never
    export, to check that PyGPU refuses them cleanly.  `deleted` counts the
    calls of the deleter (each capsule's must come exactly once)."""

    def __init__(self, arr, *, versioned=True, name=None, device=(kDLCPU, 0), code=None, bits=None, lanes=1,
                 ndim=None, shape=None, strides="auto", null_shape=False, data=None, byte_offset=0,
                 flags=0, version=(1, 0)):
        self.arr = arr
        self.versioned = versioned
        self.name = name if name is not None else (VERSIONED if versioned else LEGACY)
        self.device = device
        dt = arr.dtype
        self.code = _KIND_CODE[dt.kind] if code is None else code
        self.bits = dt.itemsize * 8 if bits is None else bits
        self.lanes = lanes
        self.shape = tuple(arr.shape) if shape is None else tuple(shape)
        self.ndim = len(self.shape) if ndim is None else ndim
        if strides == "auto":
            strides = tuple(s // dt.itemsize for s in arr.strides)
        self.strides = strides
        self.null_shape = null_shape
        self.data = arr.ctypes.data if data is None else data
        self.byte_offset = byte_offset
        self.flags = flags
        self.version = version
        self.deleted = 0

    def capsule(self):
        t = DLTensor()
        t.data = self.data
        t.device = DLDevice(*self.device)
        t.ndim = self.ndim
        t.dtype = DLDataType(self.code, self.bits, self.lanes)
        shape = (ctypes.c_int64 * max(len(self.shape), 1))(*self.shape)
        t.shape = None if self.null_shape else shape
        strides = None
        if self.strides is not None:
            strides = (ctypes.c_int64 * max(len(self.strides), 1))(*self.strides)
            t.strides = strides
        t.byte_offset = self.byte_offset
        deleter = _DELETER_ADDRESS
        if self.versioned:
            m = DLManagedTensorVersioned(DLPackVersion(*self.version), None, deleter, self.flags, t)
        else:
            m = DLManagedTensor(t, None, deleter)
        _LIVE[ctypes.addressof(m)] = (shape, strides, m, self)
        return _New(ctypes.addressof(m), self.name, _capsule_destructor)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return self.capsule()

    def __dlpack_device__(self):
        return self.device


@DESTRUCTOR
def _capsule_destructor(cap):
    """A producer's capsule destructor: free the tensor unless consumed."""
    for name, kind in ((LEGACY, DLManagedTensor), (VERSIONED, DLManagedTensorVersioned)):
        if _IsValidRaw(cap, name):
            m = kind.from_address(_GetPointerRaw(cap, name))
            DELETER_GIL(m.deleter)(ctypes.addressof(m))

