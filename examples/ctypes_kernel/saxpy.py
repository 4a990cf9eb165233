"""Call the saxpy kernel of libsaxpy.so (saxpy.cu) on PyGPU arrays through ctypes.

    nvcc -O2 -shared -Xcompiler -fPIC -o libsaxpy.so saxpy.cu
    python saxpy.py
"""
import ctypes
import os

import numpy as np

import pygpu


def load(path=os.path.join(os.path.dirname(os.path.abspath(__file__)), "libsaxpy.so")):
    """The library, with the launcher's C signature declared for ctypes."""
    lib = ctypes.CDLL(path)
    lib.saxpy.argtypes = [ctypes.c_float, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong, ctypes.c_void_p]
    lib.saxpy.restype = ctypes.c_int
    return lib


def saxpy(lib, a, x, y, stream):
    """y = a * x + y on `stream`: x and y are float32 GPUArrays of one size,
    contiguous (a kernel that takes a pointer and n sees them as flat)."""
    if x.dtype != np.float32 or y.dtype != np.float32 or x.size != y.size:
        raise TypeError("saxpy takes two float32 arrays of one size")
    if not (x.flags.c_contiguous and y.flags.c_contiguous):
        raise ValueError("saxpy takes contiguous arrays")
    status = lib.saxpy(a, x.ptr, y.ptr, x.size, stream.ptr)
    if status:                              # a cudaError_t: PyGPU names it
        raise RuntimeError(f"saxpy launch failed: {pygpu.cudaGetErrorName(status)} ({status}): "
                           f"{pygpu.cudaGetErrorString(status)}")


def main():
    if pygpu.backend != "cuda":             # the kernel runs on an NVIDIA GPU, through the CUDA backend
        raise SystemExit(f"saxpy.py launches a CUDA kernel: it needs PyGPU's cuda backend, and this is "
                         f"{pygpu.backend!r} (set PYGPU_BACKEND=cuda to see why the GPU cannot be used)")
    lib = load()
    n = (1 << 20) + 3                       # any n: the kernel's loop covers the tail
    x = pygpu.to_gpu(np.arange(n, dtype=np.float32))
    y = pygpu.to_gpu(np.ones(n, dtype=np.float32))
    expected = 2 * np.arange(n, dtype=np.float32) + 1

    stream = pygpu.Stream(non_blocking=True)
    saxpy(lib, 2.0, x, y, stream)           # queued on `stream`
    stream.synchronize()                    # PyGPU cannot see the launch: wait for its stream
    assert np.array_equal(y.get(), expected)

    # A contiguous view's .ptr is the address of its own element 0, so
    # kernels take views too; here on the legacy default stream.
    saxpy(lib, 1.0, x[10:], y[10:], pygpu.Stream.null)
    pygpu.synchronize()
    expected[10:] += np.arange(10, n, dtype=np.float32)
    assert np.array_equal(y.get(), expected)

    # A strided view is not flat memory: refused before anything is launched.
    try:
        saxpy(lib, 1.0, x[::2], y[::2], stream)
    except ValueError as e:
        print(f"x[::2] refused: {e}")
    else:
        raise AssertionError("a strided view was passed to a kernel that reads flat memory")

    assert lib.saxpy(1.0, x.ptr, y.ptr, 0, stream.ptr) == 0    # n = 0: nothing to launch
    print("saxpy: ok")


if __name__ == "__main__":
    main()
