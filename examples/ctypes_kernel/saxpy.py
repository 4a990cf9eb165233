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
    if status:
        raise RuntimeError(f"saxpy launch failed: cudaError {status}")


def main():
    lib = load()
    n = 1 << 20
    x = pygpu.to_gpu(np.arange(n, dtype=np.float32))
    y = pygpu.to_gpu(np.ones(n, dtype=np.float32))
    stream = pygpu.Stream(non_blocking=True)
    saxpy(lib, 2.0, x, y, stream)
    stream.synchronize()
    assert np.array_equal(y.get(), 2 * np.arange(n, dtype=np.float32) + 1)
    print("saxpy: ok")


if __name__ == "__main__":
    main()
