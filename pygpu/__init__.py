"""PyGPU: light-weight, fast Python glue for the GPU kernels you already have.

Device control, streams and events, device memory and copies, on NVIDIA
(CUDA runtime) and AMD (HIP), or on host memory where there is no GPU.  PyGPU
never launches device code of its own.

The backend is chosen at import: ``PYGPU_BACKEND=cuda|hip|host`` forces one;
otherwise the first built GPU backend whose device files are present (the
driver is not initialised at import), else ``host`` with one warning line
saying why.  ``pygpu.backend`` names the choice and
``pygpu.backends()`` lists what was built.
"""
import importlib
import importlib.util
import os
import re
import warnings

from ._errors import BackendWarning, GPUError, GPUMemoryError

__version__ = "0.1.0"

_GPU_BACKENDS = ("cuda", "hip")
_ALL_BACKENDS = _GPU_BACKENDS + ("host",)


def backends():
    """The backends that were built, in the order they are tried."""
    return tuple(b for b in _ALL_BACKENDS if importlib.util.find_spec(f"pygpu._{b}") is not None)


def get_include():
    """The folder to add to a C extension's include path for
    ``#include <pygpu/pygpu_api.h>`` (PyGPU's C API)."""
    here = os.path.dirname(os.path.abspath(__file__))
    for d in (os.path.join(here, "include"), os.path.join(os.path.dirname(here), "include")):
        if os.path.exists(os.path.join(d, "pygpu", "pygpu_api.h")):
            return d
    raise FileNotFoundError("PyGPU's C headers are not installed beside the package")


def _load(name):
    return importlib.import_module(f"pygpu._{name}")


def _device_nodes(name):
    """Why `name` can have no device here, judged from the device files
    alone (None if it may have one).  Asking the runtime would initialise
    the driver, which costs 100-300 ms; that is left to the first call."""
    if name == "cuda":
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        if visible is not None and visible.strip() in ("", "-1", "NoDevFiles"):
            return "CUDA_VISIBLE_DEVICES hides every device"
        nodes = ("/dev/nvidiactl", "/proc/driver/nvidia/gpus", "/dev/dxg")
        return None if any(os.path.exists(n) for n in nodes) else "no NVIDIA device files"
    for var in ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        visible = os.environ.get(var)
        if visible is not None and visible.strip() in ("", "-1"):
            return f"{var} hides every device"
    return None if os.path.exists("/dev/kfd") else "no AMD device files (/dev/kfd)"


# The oldest driver branch of each CUDA major (NVIDIA's table of minimum
# driver versions), and where Linux's driver names its version.
_CUDA_MIN_DRIVER = {13: 580, 12: 525}
_NVIDIA_VERSION_FILE = "/proc/driver/nvidia/version"


def _cuda_driver_too_old(built):
    """Why the installed NVIDIA driver cannot run a CUDA backend built with
    runtime `built` (13050 for 13.5), or None (new enough, or not known
    without loading the driver: the first call then says).  Reads the
    kernel module's version, which costs microseconds where asking the
    runtime would load the driver."""
    major = built // 1000
    need = _CUDA_MIN_DRIVER.get(major)
    try:
        with open(_NVIDIA_VERSION_FILE) as f:
            m = re.search(r"Kernel Module(?:\s+for\s+\S+)?\s+(\d+)\.(\d+)", f.read())
    except OSError:
        return None
    if not need or not m or int(m.group(1)) >= need:
        return None
    older = [f"CUDA {k}" for k, v in sorted(_CUDA_MIN_DRIVER.items(), reverse=True) if int(m.group(1)) >= v]
    fits = f", or build PyGPU for {older[0]} (PYGPU_CUDA_MAJOR={older[0][5:]} pip install .)" if older else ""
    return (f"the NVIDIA driver {m.group(1)}.{m.group(2)} is older than this CUDA {major}.{built % 1000 // 10} "
            f"build needs (driver {need} or newer): update the driver{fits}")


def _unusable(name, module):
    """Why a loaded GPU backend cannot run here, judged without loading the
    driver, or None."""
    if name == "cuda":
        return _cuda_driver_too_old(getattr(module, "_built_runtime_version", 0))
    return None


def _choose():
    forced = os.environ.get("PYGPU_BACKEND", "").strip().lower()
    if forced:
        if forced not in _ALL_BACKENDS:
            raise ImportError(f"PYGPU_BACKEND={forced!r} is not a backend: choose one of "
                              + ", ".join(_ALL_BACKENDS))
        try:
            return _load(forced)
        except ImportError as e:
            raise ImportError(f"PYGPU_BACKEND={forced}: the {forced} backend was not built "
                              f"or does not load ({e}); built: {', '.join(backends())}") from e
    why = []
    for name in _GPU_BACKENDS:
        if importlib.util.find_spec(f"pygpu._{name}") is None:
            why.append(f"{name}: not built")
            continue
        absent = _device_nodes(name)
        if absent:
            why.append(f"{name}: {absent}")
            continue
        try:
            module = _load(name)
        except ImportError as e:
            why.append(f"{name}: does not load ({e})")
            continue
        unusable = _unusable(name, module)
        if not unusable:
            return module
        why.append(f"{name}: {unusable}")
    # One line, without a source line under it: no file to quote.  It says
    # why, and how to choose (PYGPU_BACKEND=host also quiets it).
    built = [n for n in _GPU_BACKENDS if importlib.util.find_spec(f"pygpu._{n}") is not None]
    ask = f"; PYGPU_BACKEND={' or '.join(built)} says why the GPU cannot be used" if built else ""
    _why_host.extend(why)
    warnings.warn_explicit(f"no GPU found ({'; '.join(why)}): using the host backend "
                           f"(PYGPU_BACKEND=host chooses it without this warning{ask})",
                           BackendWarning, "pygpu", 0)
    return _load("host")


_why_host = []                  # why the import fell back to host (python -m pygpu prints it)
backend_module = _choose()
backend = backend_module.backend
_C_API = backend_module._C_API  # the C API capsule, see include/pygpu/pygpu_api.h
_exchange_timing = backend_module._exchange_timing  # ns per DLPack C exchange, timed in C (the bench's)

_exported = [n for n in vars(backend_module) if not n.startswith("_")
             and n not in ("backend", "GPUError", "GPUMemoryError")]
globals().update({n: getattr(backend_module, n) for n in _exported})

from . import _creation  # noqa: E402  (needs the backend's names in place)

_exported += _creation.install(globals())


def can_access_peer(device, peer):
    """True if `device` can address `peer`'s memory directly (peer to peer)."""
    return Device(device).can_access_peer(peer)


def enable_peer_access(device, peer):
    """Let `device` address `peer`'s memory directly; GPUError naming both
    where the hardware refuses.  Copies between devices do this themselves."""
    return Device(device).enable_peer_access(peer)


_exported += ["can_access_peer", "enable_peer_access"]

# The original PyGPU's interface (pygpu/lowlevel.py) loads on first use of
# one of its names; pygpu.driver (PyCUDA's driver idioms) on first use too.
_LOWLEVEL_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                    "float16", "float32", "float64", "complex64", "complex128")
_LOWLEVEL_NAMES = (
    "use_hip", "cudaGetErrorName", "cudaGetErrorString", "cudaGetLastError", "cudaPeekAtLastError",
    "cudaGetDeviceCount", "cudaGetDevice", "cudaSetDevice", "cudaDeviceSynchronize", "cudaDeviceReset",
    "cudaMemGetInfo", "cudaDeviceProp", "cudaEvent_t", "cudaStream_t", "cudaEventRecord",
    "cudaEventSynchronize", "cudaEventQuery", "cudaEventElapsedTime", "cudaStreamSynchronize",
    "cudaStreamQuery", "cudaStreamWaitEvent",
) + tuple(f"{kind}_{t}" for kind in ("DeviceArray", "pointer_wrapper", "ptr_wrapper") for t in _LOWLEVEL_DTYPES)
_SUBMODULES = ("driver", "lowlevel", "autoinit", "bench", "bench_mpi", "mpi")
# Page-locked host arrays, PyCUDA's way (from pygpu.driver), also at the top.
_DRIVER_NAMES = ("pagelocked_empty", "pagelocked_zeros", "pagelocked_empty_like", "pagelocked_zeros_like",
                 "register_host_memory")


def __getattr__(name):
    if name in _DRIVER_NAMES:
        from . import driver
        globals().update({n: getattr(driver, n) for n in _DRIVER_NAMES})
        return globals()[name]
    if name in _LOWLEVEL_NAMES:
        from . import lowlevel
        globals().update({n: getattr(lowlevel, n) for n in _LOWLEVEL_NAMES})
        return globals()[name]
    if name in _SUBMODULES:
        return importlib.import_module(f"pygpu.{name}")
    raise AttributeError(f"module 'pygpu' has no attribute {name!r}")


# The standard modules this file imports for itself: not PyGPU's names.
_OWN_IMPORTS = ("importlib", "os", "re", "warnings")


def __dir__():
    return sorted((set(globals()) - set(_OWN_IMPORTS)) | set(_LOWLEVEL_NAMES) | set(_DRIVER_NAMES) | set(_SUBMODULES))


__all__ = sorted(_exported + list(_LOWLEVEL_NAMES) + list(_DRIVER_NAMES) + [
    "backend", "backend_module", "backends", "get_include", "BackendWarning", "GPUError", "GPUMemoryError",
    "__version__"])
del _exported
