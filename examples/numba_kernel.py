#!/usr/bin/env python3
# requires: cuda, numba
# expect: numba_kernel: ok
"""Numba @cuda.jit kernels that take PyGPU arrays directly.

Numba reads a GPUArray's __cuda_array_interface__ (pointer, shape, strides,
dtype, and the stream of its pending work), so a GPUArray, or any view of
one, is passed to a kernel as it is: no copy, no conversion call.  Kernels
can be launched on a PyGPU stream through numba.cuda.external_stream.

    python3 examples/numba_kernel.py

Needs a CUDA GPU (pygpu.backend == "cuda") and numba-cuda.
"""
import numpy as np

# numba-cuda (0.30) still refers to numpy.row_stack, which NumPy 2.5
# removed; give it the old name back before numba.cuda is imported.
if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack

from numba import cuda  # noqa: E402  (after the NumPy fix above)

import pygpu  # noqa: E402


@cuda.jit
def add(x, y, out):
    """out = x + y, one element per thread (1-D)."""
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + y[i]


@cuda.jit
def scale(a, factor):
    """a *= factor in place, on a 2-D array of any strides."""
    i, j = cuda.grid(2)
    if i < a.shape[0] and j < a.shape[1]:
        a[i, j] *= factor


def main():
    n = 100_000
    hx = np.arange(n, dtype=np.float32)
    hy = np.full(n, 0.5, dtype=np.float32)

    # --- 1. GPUArrays straight into a kernel ----------------------------------------
    x, y = pygpu.to_gpu(hx), pygpu.to_gpu(hy)
    out = pygpu.empty(n, np.float32)
    threads = 128
    add[(n + threads - 1) // threads, threads](x, y, out)    # Numba's default stream
    cuda.synchronize()
    assert np.array_equal(out.get(), hx + hy)

    # Numba's view of a GPUArray is the same memory:
    d = cuda.as_cuda_array(out)
    assert d.device_ctypes_pointer.value == out.ptr, "not zero-copy"
    print(f"out.ptr {out.ptr:#x}  numba's device_ctypes_pointer {d.device_ctypes_pointer.value:#x}")

    # --- 2. A strided view, written in place -----------------------------------------
    h = np.arange(16 * 20, dtype=np.float64).reshape(16, 20)
    g = pygpu.to_gpu(h)
    v = g[::2, 1::3]                            # a view: shape (8, 7), strides in bytes
    scale[(1, 1), (8, 8)](v, 3.0)               # Numba follows v's strides
    cuda.synchronize()
    expected = h.copy()
    expected[::2, 1::3] *= 3
    assert np.array_equal(g.get(), expected)

    # --- 3. On a PyGPU stream, ordered after pending PyGPU work -----------------------
    s = pygpu.Stream(non_blocking=True)
    a = pygpu.empty(n, np.float32, stream=s)
    a.fill(2.0, stream=s)                       # queued on s
    ns = cuda.external_stream(s.ptr)            # Numba's handle on the same stream
    # Before a launch, Numba also waits for the stream that each argument's
    # __cuda_array_interface__ names (a's pending fill on s), unless
    # NUMBA_CUDA_ARRAY_INTERFACE_SYNC=0; on s itself the order holds anyway.
    add[(n + threads - 1) // threads, threads, ns](a, x, out)   # queued after the fill
    result = out.get(stream=s)                  # read in s's order; returns with the data
    assert np.array_equal(result, hx + 2)

    # --- 4. Numba -> PyGPU: a view of Numba's memory --------------------------------
    nd = cuda.to_device(hy)
    back = pygpu.asarray(nd)                    # __cuda_array_interface__: no copy
    assert back.ptr == nd.device_ctypes_pointer.value
    back[:10] = 7.0                             # PyGPU writes, Numba reads
    assert nd.copy_to_host()[:10].tolist() == [7.0] * 10

    print("numba_kernel: ok")


if __name__ == "__main__":
    main()
