#!/usr/bin/env python3
# requires: cuda, cupy
# expect: cupy_handoff: ok
"""PyGPU arrays to CuPy and back, without a copy and without a race.

- cupy.from_dlpack(g) and cupy.asarray(g) view a GPUArray's memory (DLPack,
  __cuda_array_interface__): same pointer, writes seen both ways.
- CuPy's element-wise operations and RawKernels then run on it.
- pygpu.asarray(c) / pygpu.from_dlpack(c) view CuPy's memory the same way.
- Stream ordering: each hand-off makes the consumer's stream wait for the
  producer's pending work, or you launch CuPy's kernels on PyGPU's stream
  with cupy.cuda.ExternalStream(stream.ptr) and everything is in one order.

    python3 examples/cupy_handoff.py

Needs a CUDA GPU (pygpu.backend == "cuda") and CuPy.
"""
import cupy as cp
import numpy as np

import pygpu

# A kernel of your own, compiled by CuPy (NVRTC) at first launch.
SAXPY = cp.RawKernel(r"""
extern "C" __global__ void saxpy(float a, const float *x, float *y, long long n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}
""", "saxpy")


def main():
    n = 1 << 20
    h = np.arange(n, dtype=np.float32)

    # --- 1. PyGPU -> CuPy: one memory, two views of it ----------------------------
    x = pygpu.to_gpu(h)                         # host -> device, returns when copied
    cx = cp.from_dlpack(x)                      # DLPack
    cx2 = cp.asarray(x)                         # __cuda_array_interface__
    assert cx.data.ptr == x.ptr == cx2.data.ptr, "not zero-copy"
    print(f"x.ptr {x.ptr:#x}  cupy.from_dlpack(x).data.ptr {cx.data.ptr:#x}: the same memory")

    cx *= 2                                     # CuPy writes in place: PyGPU sees it
    assert np.array_equal(x.get(), 2 * h)       # both on the legacy default stream: in order

    # --- 2. Stream ordering: pending PyGPU work, consumed by CuPy --------------------
    s = pygpu.Stream(non_blocking=True)         # no implicit sync with other streams
    y = pygpu.empty(n, np.float32, stream=s)
    y.fill(1.0, stream=s)                       # queued on s, maybe not done yet
    # CuPy passes its current stream to __dlpack__; PyGPU makes that stream
    # wait (on the device, through an event) for y's pending work on s.
    cy = cp.from_dlpack(y)
    z = cp.sqrt(cy) + cx                        # CuPy kernels on CuPy's stream: y is ready
    assert cp.asnumpy(z[:4]).tolist() == (1 + 2 * h[:4]).tolist()

    # --- 3. CuPy -> PyGPU: a view of CuPy's memory -------------------------------
    # z's __cuda_array_interface__ names CuPy's stream; PyGPU makes its
    # current stream wait for it, so z.get() below reads finished data.
    gz = pygpu.asarray(z)
    gz2 = pygpu.from_dlpack(z)                  # the same through DLPack
    assert gz.ptr == z.data.ptr == gz2.ptr, "not zero-copy"
    assert gz.base is not None                  # gz keeps z's memory alive
    assert np.array_equal(gz.get(), 1 + 2 * h)
    print(f"pygpu.asarray(z).ptr {gz.ptr:#x} == z.data.ptr {z.data.ptr:#x}")

    # --- 4. A RawKernel on PyGPU arrays, launched on PyGPU's stream ----------------
    # y = 3 * x + y.  With CuPy's current stream set to s, the launch is
    # queued behind y's fill and the copies PyGPU queued on s.
    with cp.cuda.ExternalStream(s.ptr):
        SAXPY(((n + 255) // 256,), (256,),
              (np.float32(3.0), cp.asarray(x), cp.asarray(y), np.int64(n)))
    # PyGPU did not see the launch: read y in s's order (get waits for it)...
    out = y.get(stream=s)
    assert np.array_equal(out, 3 * (2 * h) + 1)
    # ...or synchronize s before using y elsewhere: s.synchronize().

    # --- 5. An element-wise kernel writing into PyGPU memory ----------------------
    clamp = cp.ElementwiseKernel("float32 v, float32 lo, float32 hi", "float32 r",
                                 "r = fminf(fmaxf(v, lo), hi)", "clamp")
    w = pygpu.empty_like(x)
    clamp(cp.asarray(x), np.float32(10), np.float32(100), cp.asarray(w))   # writes w in place
    # CuPy's default stream and PyGPU's are the legacy default stream (or
    # CuPy's per-thread one, which syncs with it): w.get() comes after clamp.
    assert np.array_equal(w.get(), np.clip(2 * h, 10, 100))

    print("cupy_handoff: ok")


if __name__ == "__main__":
    main()
