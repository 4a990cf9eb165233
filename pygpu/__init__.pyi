"""Type stubs for PyGPU (the C extension pygpu._cuda / _hip / _host, re-exported
by pygpu/__init__.py, plus the lazily loaded names of pygpu.lowlevel).

Runtime behaviour is documented in docs/api.md; these declarations follow
the runtime's signatures (``inspect.signature``, the C argument lists)."""

from types import ModuleType
from typing import (
    Any,
    ClassVar,
    Generic,
    Literal,
    Protocol,
    Self,
    Sequence,
    SupportsIndex,
    SupportsInt,
    TypeAlias,
    TypedDict,
    TypeVar,
    overload,
    type_check_only,
)

import numpy as np
import numpy.typing as npt

from . import driver as driver
from . import lowlevel as lowlevel

__all__ = [
    "BackendWarning",
    "Device",
    "DeviceAllocation",
    "DeviceArray_bool",
    "DeviceArray_complex128",
    "DeviceArray_complex64",
    "DeviceArray_float16",
    "DeviceArray_float32",
    "DeviceArray_float64",
    "DeviceArray_int16",
    "DeviceArray_int32",
    "DeviceArray_int64",
    "DeviceArray_int8",
    "DeviceArray_uint16",
    "DeviceArray_uint32",
    "DeviceArray_uint64",
    "DeviceArray_uint8",
    "Event",
    "GPUArray",
    "GPUError",
    "GPUMemoryError",
    "HostAllocation",
    "IPCMemoryHandle",
    "Stream",
    "__version__",
    "arange",
    "asarray",
    "backend",
    "backend_module",
    "backends",
    "can_access_peer",
    "concatenate",
    "copy_kernels",
    "cudaDeviceProp",
    "cudaDeviceReset",
    "cudaDeviceSynchronize",
    "cudaError_t",
    "cudaEventElapsedTime",
    "cudaEventQuery",
    "cudaEventRecord",
    "cudaEventSynchronize",
    "cudaEvent_t",
    "cudaGetDevice",
    "cudaGetDeviceCount",
    "cudaGetErrorName",
    "cudaGetErrorString",
    "cudaGetLastError",
    "cudaMemGetInfo",
    "cudaPeekAtLastError",
    "cudaSetDevice",
    "cudaStreamQuery",
    "cudaStreamSynchronize",
    "cudaStreamWaitEvent",
    "cudaStream_t",
    "current_stream",
    "device_count",
    "driver_version",
    "empty",
    "empty_like",
    "enable_peer_access",
    "from_dlpack",
    "full",
    "full_like",
    "get_device",
    "get_include",
    "is_pinned",
    "mem_alloc",
    "mem_get_ipc_handle",
    "mem_alloc_host",
    "pagelocked_empty",
    "pagelocked_empty_like",
    "pagelocked_zeros",
    "pagelocked_zeros_like",
    "register_host_memory",
    "registered_stats",
    "mem_get_info",
    "memcpy_dtod",
    "memcpy_dtod_async",
    "memcpy_dtoh",
    "memcpy_dtoh_async",
    "memcpy_htod",
    "memcpy_htod_async",
    "memcpy_peer",
    "memcpy_peer_async",
    "memset_d8",
    "memset_d8_async",
    "ones",
    "ones_like",
    "pinned_pool_stats",
    "pointer_wrapper_bool",
    "pointer_wrapper_complex128",
    "pointer_wrapper_complex64",
    "pointer_wrapper_float16",
    "pointer_wrapper_float32",
    "pointer_wrapper_float64",
    "pointer_wrapper_int16",
    "pointer_wrapper_int32",
    "pointer_wrapper_int64",
    "pointer_wrapper_int8",
    "pointer_wrapper_uint16",
    "pointer_wrapper_uint32",
    "pointer_wrapper_uint64",
    "pointer_wrapper_uint8",
    "ptr_wrapper_bool",
    "ptr_wrapper_complex128",
    "ptr_wrapper_complex64",
    "ptr_wrapper_float16",
    "ptr_wrapper_float32",
    "ptr_wrapper_float64",
    "ptr_wrapper_int16",
    "ptr_wrapper_int32",
    "ptr_wrapper_int64",
    "ptr_wrapper_int8",
    "ptr_wrapper_uint16",
    "ptr_wrapper_uint32",
    "ptr_wrapper_uint64",
    "ptr_wrapper_uint8",
    "runtime_version",
    "set_device",
    "set_memory_pool",
    "set_pinned_pool_limit",
    "stack",
    "stream_priority_range",
    "synchronize",
    "to_gpu",
    "to_gpu_async",
    "transfer_config",
    "trim_memory_pool",
    "trim_pinned_pool",
    "use_hip",
    "zeros",
    "zeros_like",
]

__version__: str
backend: Literal["cuda", "hip", "host"]
backend_module: ModuleType
use_hip: bool

# ---- helper aliases (stub only) ------------------------------------------------

_ShapeLike: TypeAlias = SupportsIndex | Sequence[SupportsIndex]
_Order: TypeAlias = Literal["C", "F"]
_OrderKACF: TypeAlias = Literal["K", "A", "C", "F"] | None
_StreamLike: TypeAlias = Stream | SupportsInt | None
"""None (the current stream), a Stream (or subclass), or an int handle."""
_DevicePtr: TypeAlias = DeviceAllocation | SupportsInt
"""A device address: a DeviceAllocation, an int, or anything int() converts."""
_DeviceLike: TypeAlias = Device | SupportsIndex
_HostBufferLike: TypeAlias = npt.ArrayLike
"""Host data: a NumPy array, a buffer (bytes, memoryview, HostAllocation, ...)."""
_WritableBuffer: TypeAlias = Any
"""A writable host buffer (NumPy array, bytearray, memoryview, HostAllocation)."""
_ArrayT = TypeVar("_ArrayT", bound=np.ndarray[Any, Any])
_EventT = TypeVar("_EventT", bound=Event)
_ScalarT = TypeVar("_ScalarT", bound=np.generic)

@type_check_only
class _Allocator(Protocol):
    """PyCUDA-style allocator: allocator(nbytes) returns an int-convertible allocation."""
    def __call__(self, nbytes: int, /) -> SupportsInt: ...

@type_check_only
class _TransferConfig(TypedDict):
    chunk: int
    depth: int
    threads: int
    threads_alone: int
    min_bytes: int | None
    peer: bool
    crowd_up: int
    crowd_down: int
    crowd_threads: int
    register_limit: int
    numa: bool

@type_check_only
class _RegisteredStats(TypedDict):
    buffers: int
    bytes: int
    limit: int
    registered: int
    released: int
    refused: int

@type_check_only
class _PinnedPoolStats(TypedDict):
    limit: int
    in_use: int
    cached: int
    hits: int
    misses: int
    placed: int
    unplaced: int
    background: int

@type_check_only
class _CudaArrayInterface(TypedDict):
    shape: tuple[int, ...]
    typestr: str
    data: tuple[int, bool]
    version: int
    strides: tuple[int, ...] | None
    descr: list[tuple[str, str]]
    stream: int | None

# ---- errors ----------------------------------------------------------------------

class GPUError(RuntimeError):
    """A device runtime call failed."""
    code: int | None
    name: str | None
    message: str | None
    call: str | None
    def __init__(
        self,
        *args: object,
        code: int | None = None,
        name: str | None = None,
        message: str | None = None,
        call: str | None = None,
    ) -> None: ...

class GPUMemoryError(GPUError, MemoryError):
    """Out of device (or page-locked host) memory."""

class BackendWarning(RuntimeWarning):
    """PyGPU fell back to another backend than the one wanted."""

class cudaError_t:
    """A runtime status, as the original PyGPU returns them: truthy only when it is an error."""
    def __init__(self, code: SupportsIndex | cudaError_t = 0) -> None: ...
    @property
    def code(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def string(self) -> str: ...
    def as_int(self) -> int: ...
    def __int__(self) -> int: ...
    def __index__(self) -> int: ...
    def __bool__(self) -> bool: ...
    def __eq__(self, value: object, /) -> bool: ...
    def __ne__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...

# ---- devices ---------------------------------------------------------------------

class Device:
    """A device of the backend (None: the current one).  ``with Device(i):`` makes it
    current and restores the previous device on exit."""
    def __new__(cls, device: SupportsIndex | None = None) -> Self: ...
    @property
    def id(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def compute_capability(self) -> tuple[int, int]: ...
    @property
    def total_memory(self) -> int: ...
    @property
    def multiprocessor_count(self) -> int: ...
    @property
    def pci_bus_id(self) -> str: ...
    @property
    def numa_node(self) -> int: ...
    @property
    def uuid(self) -> str: ...
    def mem_info(self) -> tuple[int, int]: ...
    def synchronize(self) -> None: ...
    def make_current(self) -> None: ...
    def can_access_peer(self, peer: _DeviceLike, /) -> bool: ...
    def p2p_rank(self, peer: _DeviceLike, /) -> int: ...
    def enable_peer_access(self, peer: _DeviceLike, /) -> None: ...
    def disable_peer_access(self, peer: _DeviceLike, /) -> None: ...
    def peer_route(self, src: _DeviceLike, /) -> tuple[str, str]: ...
    def __int__(self) -> int: ...
    def __index__(self) -> int: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, *args: object) -> None: ...

def device_count() -> int: ...
def get_device() -> int: ...
def set_device(device: _DeviceLike, /) -> None: ...
def can_access_peer(device: _DeviceLike, peer: _DeviceLike) -> bool: ...
def enable_peer_access(device: _DeviceLike, peer: _DeviceLike) -> None: ...
def synchronize() -> None: ...
def mem_get_info() -> tuple[int, int]: ...
def runtime_version() -> int: ...
def driver_version() -> int: ...
def copy_kernels() -> dict[str, Any]: ...
def backends() -> tuple[str, ...]: ...
def get_include() -> str: ...

# ---- streams and events ---------------------------------------------------------

class Stream:
    """A stream of the current device.  ``with stream:`` makes it the current stream."""
    null: ClassVar[Stream]
    """The legacy default stream (handle 0)."""
    per_thread: ClassVar[Stream]
    """The per-thread default stream (handle 2)."""
    def __init__(self, non_blocking: bool = False, priority: int = 0) -> None: ...
    def __cuda_stream__(self) -> tuple[int, int]:
        """(0, handle): the CUDA stream protocol."""
    @property
    def ptr(self) -> int: ...
    @property
    def handle(self) -> int: ...
    @property
    def device(self) -> int: ...
    @property
    def priority(self) -> int: ...
    @property
    def non_blocking(self) -> bool: ...
    def synchronize(self) -> None: ...
    def query(self) -> bool: ...
    def wait_event(self, event: Event, /) -> None: ...
    @overload
    def record(self, event: None = None, /) -> Event: ...
    @overload
    def record(self, event: _EventT, /) -> _EventT: ...
    def __int__(self) -> int: ...
    def __eq__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, *args: object) -> None: ...

def current_stream() -> Stream: ...
def stream_priority_range() -> tuple[int, int]: ...

class Event:
    """A marker in a stream, for ordering work across streams and for timing."""
    def __init__(self, timing: bool = True, blocking: bool = False, interprocess: bool = False) -> None: ...
    @property
    def ptr(self) -> int: ...
    @property
    def handle(self) -> int: ...
    @property
    def device(self) -> int: ...
    @property
    def recorded(self) -> bool: ...
    @property
    def timing(self) -> bool: ...
    def record(self, stream: _StreamLike = None) -> Self: ...
    def synchronize(self) -> Self: ...
    def query(self) -> bool: ...
    def elapsed_time(self, end: Event, /) -> float: ...
    def time_since(self, start: Event, /) -> float: ...
    def time_till(self, end: Event, /) -> float: ...
    def ipc_handle(self) -> bytes: ...
    @classmethod
    def from_ipc_handle(cls, handle: bytes, /) -> Event: ...
    def __int__(self) -> int: ...

# ---- raw memory ------------------------------------------------------------------

class DeviceAllocation:
    """One device allocation, made by mem_alloc(), freed when collected or by free()."""
    @property
    def ptr(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def device(self) -> int: ...
    @property
    def pooled(self) -> bool: ...
    @property
    def ipc(self) -> bool: ...
    def free(self) -> None: ...
    def __int__(self) -> int: ...
    def __index__(self) -> int: ...

class HostAllocation:
    """Page-locked host memory from mem_alloc_host(), with the buffer protocol."""
    @property
    def ptr(self) -> int: ...
    @property
    def size(self) -> int: ...
    def free(self) -> None: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...

def mem_alloc(nbytes: SupportsIndex, stream: _StreamLike = None, *, ipc: bool = False) -> DeviceAllocation: ...
def mem_get_ipc_handle(allocation: _DevicePtr, /) -> bytes: ...

class IPCMemoryHandle:
    """Device memory of another process, mapped here from its mem_get_ipc_handle() bytes."""
    def __init__(self, handle: bytes) -> None: ...
    @property
    def ptr(self) -> int: ...
    @property
    def device(self) -> int: ...
    def close(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, *exc: object) -> None: ...
    def __int__(self) -> int: ...
    def __index__(self) -> int: ...
def mem_alloc_host(nbytes: SupportsIndex, /) -> HostAllocation: ...
def set_memory_pool(enabled: bool, /) -> None: ...
def trim_memory_pool(keep_bytes: SupportsIndex = 0, device: _DeviceLike | None = None) -> None: ...
def memcpy_htod(dest: _DevicePtr, src: _HostBufferLike, stream: _StreamLike = None) -> None: ...
def memcpy_htod_async(dest: _DevicePtr, src: _HostBufferLike, stream: _StreamLike = None) -> None: ...
def memcpy_dtoh(dest: _WritableBuffer, src: _DevicePtr, stream: _StreamLike = None) -> None: ...
def memcpy_dtoh_async(dest: _WritableBuffer, src: _DevicePtr, stream: _StreamLike = None) -> None: ...
def memcpy_dtod(dest: _DevicePtr, src: _DevicePtr, nbytes: SupportsIndex, stream: _StreamLike = None) -> None: ...
def memcpy_dtod_async(
    dest: _DevicePtr, src: _DevicePtr, nbytes: SupportsIndex, stream: _StreamLike = None
) -> None: ...
def memcpy_peer(
    dest: _DevicePtr, src: _DevicePtr, nbytes: SupportsIndex, dest_device: _DeviceLike,
    src_device: _DeviceLike, stream: _StreamLike = None,
) -> None: ...
def memcpy_peer_async(
    dest: _DevicePtr, src: _DevicePtr, nbytes: SupportsIndex, dest_device: _DeviceLike,
    src_device: _DeviceLike, stream: _StreamLike = None,
) -> None: ...
def memset_d8(dest: _DevicePtr, value: SupportsIndex, nbytes: SupportsIndex, stream: _StreamLike = None) -> None: ...
def memset_d8_async(
    dest: _DevicePtr, value: SupportsIndex, nbytes: SupportsIndex, stream: _StreamLike = None
) -> None: ...

# ---- transfers -------------------------------------------------------------------

def transfer_config(
    *,
    chunk: SupportsIndex | None = None,
    depth: SupportsIndex | None = None,
    threads: SupportsIndex | None = None,
    threads_alone: SupportsIndex | None = None,
    min_bytes: SupportsIndex | None = None,
    peer: bool | None = None,
    crowd_up: SupportsIndex | None = None,
    crowd_down: SupportsIndex | None = None,
    crowd_threads: SupportsIndex | None = None,
    register_limit: SupportsIndex | None = None,
    numa: bool | None = None,
) -> _TransferConfig: ...
def registered_stats() -> _RegisteredStats: ...
def pinned_pool_stats() -> _PinnedPoolStats: ...
def is_pinned(ary: _HostBufferLike, /) -> bool: ...
def set_pinned_pool_limit(nbytes: SupportsIndex, /) -> None: ...
def trim_pinned_pool() -> None: ...
def pagelocked_empty(
    shape: _ShapeLike, dtype: npt.DTypeLike, order: Literal["C", "F"] = "C", mem_flags: int = 0
) -> npt.NDArray[Any]: ...
def pagelocked_zeros(
    shape: _ShapeLike, dtype: npt.DTypeLike, order: Literal["C", "F"] = "C", mem_flags: int = 0
) -> npt.NDArray[Any]: ...
def pagelocked_empty_like(array: npt.NDArray[Any], mem_flags: int = 0) -> npt.NDArray[Any]: ...
def pagelocked_zeros_like(array: npt.NDArray[Any], mem_flags: int = 0) -> npt.NDArray[Any]: ...
def register_host_memory(ary: npt.NDArray[Any], flags: int = 0) -> npt.NDArray[Any]: ...

# ---- GPUArray --------------------------------------------------------------------

@type_check_only
class _ArrayFlags:
    """pygpu.ArrayFlags (not a module attribute): a snapshot of a GPUArray's layout flags."""
    @property
    def c_contiguous(self) -> bool: ...
    @property
    def f_contiguous(self) -> bool: ...
    @property
    def forc(self) -> bool: ...
    @property
    def writeable(self) -> bool: ...
    def __getitem__(self, key: str, /) -> bool: ...

class GPUArray:
    """A NumPy-style array in device memory.  GPUArray(host_data) copies host data
    (anything NumPy converts) to the device."""
    def __new__(
        cls,
        shape: _ShapeLike | npt.ArrayLike,
        dtype: npt.DTypeLike = None,
        allocator: _Allocator | None = None,
        base: object = None,
        gpudata: _DevicePtr | None = None,
        strides: Sequence[SupportsIndex] | None = None,
        order: _Order | None = None,
        *,
        stream: _StreamLike = None,
    ) -> Self: ...
    # attributes
    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def strides(self) -> tuple[int, ...]: ...
    @property
    def dtype(self) -> np.dtype[Any]: ...
    @property
    def ndim(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def itemsize(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def mem_size(self) -> int: ...
    @property
    def ptr(self) -> int: ...
    @property
    def gpudata(self) -> DeviceAllocation | int: ...
    @property
    def base(self) -> object | None: ...
    @property
    def flags(self) -> _ArrayFlags: ...
    @property
    def device(self) -> Device: ...
    @property
    def T(self) -> GPUArray: ...
    @property
    def __cuda_array_interface__(self) -> _CudaArrayInterface:
        """CUDA backend only (absent on the HIP and host backends)."""
    # copies to and from the host
    @overload
    def get(
        self, ary: None = None, pagelocked: bool = False, async_: bool = False, stream: _StreamLike = None
    ) -> npt.NDArray[Any]: ...
    @overload
    def get(self, ary: _ArrayT, pagelocked: bool = False, async_: bool = False, stream: _StreamLike = None) -> _ArrayT: ...
    @overload
    def get_async(self, stream: _StreamLike = None, ary: None = None) -> npt.NDArray[Any]: ...
    @overload
    def get_async(self, stream: _StreamLike, ary: _ArrayT) -> _ArrayT: ...
    @overload
    def get_async(self, stream: _StreamLike = None, *, ary: _ArrayT) -> _ArrayT: ...
    def set(self, ary: npt.ArrayLike, stream: _StreamLike | bool = None, async_: bool | _StreamLike = False) -> None: ...
    def set_async(self, ary: npt.ArrayLike, stream: _StreamLike = None) -> None: ...
    # views and copies on the device
    def copy(self, order: _OrderKACF = "K", *, stream: _StreamLike = None,
             device: _DeviceLike | None = None) -> GPUArray: ...
    def astype(self, dtype: npt.DTypeLike, order: _OrderKACF | Stream = "K",
               casting: Literal["no", "equiv", "safe", "same_kind", "unsafe", "same_value"] = "unsafe",
               subok: bool = True, copy: bool = True, *, stream: _StreamLike = None) -> GPUArray: ...
    def to_device(self, device: _DeviceLike, *, stream: _StreamLike = None) -> GPUArray: ...
    def fill(self, value: Any, stream: _StreamLike = None) -> Self: ...
    def view(self, dtype: npt.DTypeLike = None) -> GPUArray: ...
    @overload
    def reshape(self, shape: _ShapeLike, /, *, order: _OrderKACF = "C") -> GPUArray: ...
    @overload
    def reshape(self, *shape: SupportsIndex, order: _OrderKACF = "C") -> GPUArray: ...
    def ravel(self, order: _OrderKACF = "C") -> GPUArray: ...
    def flatten(self, order: _OrderKACF = "C") -> GPUArray: ...
    def squeeze(self, axis: SupportsIndex | tuple[SupportsIndex, ...] | None = None) -> GPUArray: ...
    @overload
    def transpose(self, axes: Sequence[SupportsIndex] | None, /) -> GPUArray: ...
    @overload
    def transpose(self, *axes: SupportsIndex) -> GPUArray: ...
    def swapaxes(self, axis1: SupportsIndex, axis2: SupportsIndex, /) -> GPUArray: ...
    # protocols
    def __len__(self) -> int: ...
    def __getitem__(self, key: Any, /) -> GPUArray: ...
    def __setitem__(self, key: Any, value: Any, /) -> None: ...
    def __iter__(self) -> Any: ...
    def __bool__(self) -> bool: ...
    def __float__(self) -> float: ...
    def __int__(self) -> int: ...
    def __index__(self) -> int: ...
    def __complex__(self) -> complex: ...
    def item(self, *args: SupportsIndex | tuple[SupportsIndex, ...]) -> Any: ...
    def tolist(self) -> Any: ...
    def __array__(self, dtype: npt.DTypeLike = None, copy: bool | None = None) -> npt.NDArray[Any]: ...
    def __dlpack__(
        self,
        *,
        stream: int | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any: ...
    def __dlpack_device__(self) -> tuple[int, int]: ...
    __dlpack_c_exchange_api__: ClassVar[object]
    """The DLPack 1.3 C exchange table: a capsule named "dlpack_exchange_api"."""

# ---- GPUArray constructors --------------------------------------------------------

def empty(
    shape: _ShapeLike,
    dtype: npt.DTypeLike = None,
    order: _Order | _Allocator | None = None,
    allocator: _Allocator | _Order | None = None,
    *,
    stream: _StreamLike = None,
) -> GPUArray: ...
def zeros(
    shape: _ShapeLike,
    dtype: npt.DTypeLike = ...,
    order: _Order | _Allocator = "C",
    allocator: _Allocator | _Order | None = None,
    *,
    stream: _StreamLike = None,
) -> GPUArray: ...
def ones(
    shape: _ShapeLike,
    dtype: npt.DTypeLike = ...,
    order: _Order | _Allocator = "C",
    allocator: _Allocator | _Order | None = None,
    *,
    stream: _StreamLike = None,
) -> GPUArray: ...
def full(
    shape: _ShapeLike,
    fill_value: npt.ArrayLike,
    dtype: npt.DTypeLike = None,
    order: _Order = "C",
    *,
    stream: _StreamLike = None,
) -> GPUArray: ...
def arange(
    start: float | complex,
    stop: float | complex | None = None,
    step: float | complex | None = None,
    dtype: npt.DTypeLike = None,
    *,
    stream: _StreamLike = None,
) -> GPUArray: ...
def empty_like(
    a: GPUArray | npt.NDArray[Any], dtype: npt.DTypeLike = None, order: _OrderKACF = "K", shape: _ShapeLike | None = None
) -> GPUArray: ...
def zeros_like(
    a: GPUArray | npt.NDArray[Any], dtype: npt.DTypeLike = None, order: _OrderKACF = "K", shape: _ShapeLike | None = None
) -> GPUArray: ...
def ones_like(
    a: GPUArray | npt.NDArray[Any], dtype: npt.DTypeLike = None, order: _OrderKACF = "K", shape: _ShapeLike | None = None
) -> GPUArray: ...
def full_like(
    a: GPUArray | npt.NDArray[Any],
    fill_value: npt.ArrayLike,
    dtype: npt.DTypeLike = None,
    order: _OrderKACF = "K",
    shape: _ShapeLike | None = None,
) -> GPUArray: ...
def concatenate(
    arrays: Sequence[GPUArray | npt.ArrayLike],
    axis: SupportsIndex = 0,
    allocator: _Allocator | None = None,
    *,
    stream: _StreamLike = None,
) -> GPUArray: ...
def stack(
    arrays: Sequence[GPUArray | npt.ArrayLike],
    axis: SupportsIndex = 0,
    allocator: _Allocator | None = None,
    *,
    stream: _StreamLike = None,
) -> GPUArray: ...
def to_gpu(
    ary: npt.ArrayLike,
    stream: _StreamLike | _Allocator = None,
    allocator: _Allocator | _StreamLike = None,
    *,
    dtype: npt.DTypeLike = None,
) -> GPUArray: ...
def to_gpu_async(
    ary: npt.ArrayLike,
    stream: _StreamLike | _Allocator = None,
    allocator: _Allocator | _StreamLike = None,
    *,
    dtype: npt.DTypeLike = None,
) -> GPUArray: ...
def asarray(obj: Any, dtype: npt.DTypeLike = None) -> GPUArray: ...
def from_dlpack(
    x: Any,
    /,
    *,
    device: Device | SupportsIndex | tuple[int, int] | None = None,
    copy: bool | None = None,
) -> GPUArray: ...

# ---- the original PyGPU (pygpu.lowlevel, loaded on first use) ---------------------

def cudaGetErrorName(error: cudaError_t | SupportsIndex) -> str: ...
def cudaGetErrorString(error: cudaError_t | SupportsIndex) -> str: ...
def cudaGetLastError() -> cudaError_t: ...
def cudaPeekAtLastError() -> cudaError_t: ...
def cudaGetDeviceCount() -> tuple[int, cudaError_t]: ...
def cudaGetDevice() -> tuple[int | None, cudaError_t]: ...
def cudaSetDevice(device: SupportsIndex) -> cudaError_t: ...
def cudaDeviceSynchronize() -> cudaError_t: ...
def cudaDeviceReset() -> cudaError_t: ...
def cudaMemGetInfo() -> tuple[tuple[int, int] | None, cudaError_t]: ...

class cudaDeviceProp:
    """The properties of device `device`, read once; each accessor returns None when
    the device could not be read (see last_status())."""
    def __init__(self, device: SupportsIndex = 0) -> None: ...
    def name(self) -> str | None: ...
    def uuid(self) -> str | None: ...
    def pciDomainID(self) -> int | None: ...
    def pciBusID(self) -> int | None: ...
    def pciDeviceID(self) -> int | None: ...
    def totalGlobalMem(self) -> int | None: ...
    def multiProcessorCount(self) -> int | None: ...
    def major(self) -> int | None: ...
    def minor(self) -> int | None: ...
    def last_status(self) -> cudaError_t: ...

@type_check_only
class _Handle:
    """pygpu.lowlevel._Handle: the base of cudaEvent_t and cudaStream_t."""
    def get(self) -> int: ...
    def __int__(self) -> int: ...
    def last_status(self) -> cudaError_t: ...

class cudaEvent_t(_Handle):
    """An event: flags as cudaEventCreateWithFlags (1 blocking sync, 2 disable timing, 4 interprocess)."""
    def __init__(self, flags: SupportsIndex = 0) -> None: ...
    @property
    def event(self) -> Event | None: ...

class cudaStream_t(_Handle):
    """A stream: flags 1 for non-blocking; priority as cudaStreamCreateWithPriority."""
    def __init__(self, flags: SupportsIndex = 0, priority: SupportsIndex = 0) -> None: ...
    @property
    def stream(self) -> Stream | None: ...

def cudaEventRecord(event: cudaEvent_t | Event, stream: cudaStream_t | Stream | None = None) -> cudaError_t: ...
def cudaEventSynchronize(event: cudaEvent_t | Event) -> cudaError_t: ...
def cudaEventQuery(event: cudaEvent_t | Event) -> cudaError_t: ...
def cudaEventElapsedTime(start: cudaEvent_t | Event, end: cudaEvent_t | Event) -> tuple[float | None, cudaError_t]: ...
def cudaStreamSynchronize(stream: cudaStream_t | Stream | None = None) -> cudaError_t: ...
def cudaStreamQuery(stream: cudaStream_t | Stream | None = None) -> cudaError_t: ...
def cudaStreamWaitEvent(
    stream: cudaStream_t | Stream | None, event: cudaEvent_t | Event, flags: SupportsIndex = 0
) -> cudaError_t: ...

@type_check_only
class _PointerWrapper(Generic[_ScalarT]):
    """pygpu.lowlevel._PointerWrapper: the base of pointer_wrapper_<dtype>."""
    dtype: ClassVar[np.dtype[Any]]
    def __init__(self, address: SupportsIndex = 0) -> None: ...
    def create(self, n: SupportsIndex) -> None: ...
    def destroy(self) -> None: ...
    def is_safe(self) -> bool: ...
    def get(self) -> npt.NDArray[_ScalarT]: ...
    def unsafe_get(self) -> int: ...
    def print_address(self) -> None: ...
    def __int__(self) -> int: ...
    @property
    def _as_parameter_(self) -> int: ...

_PointerT = TypeVar("_PointerT", bound=_PointerWrapper[Any])

@type_check_only
class _DeviceArray(Generic[_ScalarT, _PointerT]):
    """pygpu.lowlevel._DeviceArray: the base of DeviceArray_<dtype> (host data and its
    device copy; the object exports the host side's buffer)."""
    dtype: ClassVar[np.dtype[Any]]
    @overload
    def __init__(self, size: SupportsIndex, /) -> None: ...
    @overload
    def __init__(self, shape: Sequence[SupportsIndex], order: Literal["C", "F"] | bool = ..., /) -> None: ...
    @overload
    def __init__(self, data: npt.ArrayLike, /) -> None: ...
    @overload
    def __init__(self, pointer: _PointerWrapper[Any], shape: _ShapeLike, order: Literal["C", "F"] | bool = ..., /) -> None: ...
    @overload
    def __init__(
        self,
        host_address: SupportsIndex,
        device_address: SupportsIndex,
        shape: _ShapeLike,
        order: Literal["C", "F"] | bool = ...,
        /,
    ) -> None: ...
    def allocate(self) -> cudaError_t: ...
    def allocated(self) -> bool: ...
    def to_device(self) -> cudaError_t: ...
    def to_host(self) -> cudaError_t: ...
    @overload
    def set(self, source: SupportsIndex | _PointerWrapper[Any] | npt.ArrayLike, /) -> cudaError_t: ...
    @overload
    def set(self, index: SupportsIndex, value: Any, /) -> cudaError_t: ...
    def set_val(self, index: SupportsIndex, value: Any) -> cudaError_t: ...
    def host_data(self) -> _PointerT: ...
    def device_data(self) -> _PointerT: ...
    def last_status(self) -> cudaError_t: ...
    def size(self) -> int: ...
    def nbytes(self) -> int: ...
    def shape(self) -> list[int]: ...
    def strides(self) -> list[int]: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...

class pointer_wrapper_bool(_PointerWrapper[np.bool_]):
    """An address of bool data (also ptr_wrapper_bool)."""

ptr_wrapper_bool = pointer_wrapper_bool

class DeviceArray_bool(_DeviceArray[np.bool_, pointer_wrapper_bool]):
    """bool host data and its device copy."""

class pointer_wrapper_int8(_PointerWrapper[np.int8]):
    """An address of int8 data (also ptr_wrapper_int8)."""

ptr_wrapper_int8 = pointer_wrapper_int8

class DeviceArray_int8(_DeviceArray[np.int8, pointer_wrapper_int8]):
    """int8 host data and its device copy."""

class pointer_wrapper_int16(_PointerWrapper[np.int16]):
    """An address of int16 data (also ptr_wrapper_int16)."""

ptr_wrapper_int16 = pointer_wrapper_int16

class DeviceArray_int16(_DeviceArray[np.int16, pointer_wrapper_int16]):
    """int16 host data and its device copy."""

class pointer_wrapper_int32(_PointerWrapper[np.int32]):
    """An address of int32 data (also ptr_wrapper_int32)."""

ptr_wrapper_int32 = pointer_wrapper_int32

class DeviceArray_int32(_DeviceArray[np.int32, pointer_wrapper_int32]):
    """int32 host data and its device copy."""

class pointer_wrapper_int64(_PointerWrapper[np.int64]):
    """An address of int64 data (also ptr_wrapper_int64)."""

ptr_wrapper_int64 = pointer_wrapper_int64

class DeviceArray_int64(_DeviceArray[np.int64, pointer_wrapper_int64]):
    """int64 host data and its device copy."""

class pointer_wrapper_uint8(_PointerWrapper[np.uint8]):
    """An address of uint8 data (also ptr_wrapper_uint8)."""

ptr_wrapper_uint8 = pointer_wrapper_uint8

class DeviceArray_uint8(_DeviceArray[np.uint8, pointer_wrapper_uint8]):
    """uint8 host data and its device copy."""

class pointer_wrapper_uint16(_PointerWrapper[np.uint16]):
    """An address of uint16 data (also ptr_wrapper_uint16)."""

ptr_wrapper_uint16 = pointer_wrapper_uint16

class DeviceArray_uint16(_DeviceArray[np.uint16, pointer_wrapper_uint16]):
    """uint16 host data and its device copy."""

class pointer_wrapper_uint32(_PointerWrapper[np.uint32]):
    """An address of uint32 data (also ptr_wrapper_uint32)."""

ptr_wrapper_uint32 = pointer_wrapper_uint32

class DeviceArray_uint32(_DeviceArray[np.uint32, pointer_wrapper_uint32]):
    """uint32 host data and its device copy."""

class pointer_wrapper_uint64(_PointerWrapper[np.uint64]):
    """An address of uint64 data (also ptr_wrapper_uint64)."""

ptr_wrapper_uint64 = pointer_wrapper_uint64

class DeviceArray_uint64(_DeviceArray[np.uint64, pointer_wrapper_uint64]):
    """uint64 host data and its device copy."""

class pointer_wrapper_float16(_PointerWrapper[np.float16]):
    """An address of float16 data (also ptr_wrapper_float16)."""

ptr_wrapper_float16 = pointer_wrapper_float16

class DeviceArray_float16(_DeviceArray[np.float16, pointer_wrapper_float16]):
    """float16 host data and its device copy."""

class pointer_wrapper_float32(_PointerWrapper[np.float32]):
    """An address of float32 data (also ptr_wrapper_float32)."""

ptr_wrapper_float32 = pointer_wrapper_float32

class DeviceArray_float32(_DeviceArray[np.float32, pointer_wrapper_float32]):
    """float32 host data and its device copy."""

class pointer_wrapper_float64(_PointerWrapper[np.float64]):
    """An address of float64 data (also ptr_wrapper_float64)."""

ptr_wrapper_float64 = pointer_wrapper_float64

class DeviceArray_float64(_DeviceArray[np.float64, pointer_wrapper_float64]):
    """float64 host data and its device copy."""

class pointer_wrapper_complex64(_PointerWrapper[np.complex64]):
    """An address of complex64 data (also ptr_wrapper_complex64)."""

ptr_wrapper_complex64 = pointer_wrapper_complex64

class DeviceArray_complex64(_DeviceArray[np.complex64, pointer_wrapper_complex64]):
    """complex64 host data and its device copy."""

class pointer_wrapper_complex128(_PointerWrapper[np.complex128]):
    """An address of complex128 data (also ptr_wrapper_complex128)."""

ptr_wrapper_complex128 = pointer_wrapper_complex128

class DeviceArray_complex128(_DeviceArray[np.complex128, pointer_wrapper_complex128]):
    """complex128 host data and its device copy."""
