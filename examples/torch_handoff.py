#!/usr/bin/env python3
# requires: gpu, torch
# expect: torch_handoff: ok
"""PyGPU arrays to PyTorch and back, without a copy and without a race.

- torch.from_dlpack(g) views a GPUArray's memory (DLPack); on CUDA also
  torch.as_tensor(g, device="cuda") (__cuda_array_interface__).
- PyTorch's operations then run on it, in place or into new tensors.
- pygpu.from_dlpack(t) (or pygpu.asarray(t)) views a tensor's memory.
- Stream ordering: each hand-off makes the consumer's stream wait for the
  producer's pending work, so neither side reads a copy still in flight.

    python3 examples/torch_handoff.py

Needs a GPU (CUDA; or HIP with a ROCm build of PyTorch) and PyTorch.
"""
import numpy as np
import torch

import pygpu


def main():
    assert torch.cuda.is_available(), "PyTorch sees no GPU"
    n = 1 << 20
    h = np.arange(n, dtype=np.float32)

    # --- 1. PyGPU -> PyTorch: one memory, two views of it ----------------------------
    g = pygpu.to_gpu(h)
    t = torch.from_dlpack(g)                    # DLPack: no copy
    assert t.is_cuda and t.data_ptr() == g.ptr, "not zero-copy"
    print(f"g.ptr {g.ptr:#x}  torch.from_dlpack(g).data_ptr() {t.data_ptr():#x}: the same memory")
    if hasattr(g, "__cuda_array_interface__"):  # the CUDA backend only
        t2 = torch.as_tensor(g, device="cuda")  # __cuda_array_interface__: no copy either
        assert t2.data_ptr() == g.ptr

    t.mul_(2)                                   # PyTorch writes in place: PyGPU sees it
    # PyTorch's default stream is the legacy default stream, PyGPU's too:
    # g.get() is queued after mul_.
    assert np.array_equal(g.get(), 2 * h)

    # Views keep their strides (PyTorch counts them in elements, and has no
    # negative ones: a reversed view cannot go to PyTorch without a copy).
    m = pygpu.to_gpu(h[:24].reshape(4, 6))
    v = m[1:, ::2]
    tv = torch.from_dlpack(v)
    assert tv.data_ptr() == v.ptr and tv.stride() == (6, 2)
    assert np.array_equal(tv.cpu().numpy(), h[:24].reshape(4, 6)[1:, ::2])

    # --- 2. Stream ordering: pending PyGPU work, consumed by PyTorch -----------------
    s = pygpu.Stream(non_blocking=True)         # no implicit sync with other streams
    y = pygpu.empty(n, np.float32, stream=s)
    y.fill(1.0, stream=s)                       # queued on s, maybe not done yet
    # torch.from_dlpack passes PyTorch's current stream to __dlpack__; PyGPU
    # makes that stream wait (on the device, through an event) for s.
    ty = torch.from_dlpack(y)
    z = torch.sqrt(ty) + t                      # PyTorch kernels: y is ready
    assert z[:4].tolist() == (1 + 2 * h[:4]).tolist()

    # --- 3. PyTorch -> PyGPU: a view of the tensor's memory ----------------------------
    gz = pygpu.from_dlpack(z)                   # keeps z's memory alive
    assert gz.ptr == z.data_ptr(), "not zero-copy"
    assert np.array_equal(gz.get(), 1 + 2 * h)
    print(f"pygpu.from_dlpack(z).ptr {gz.ptr:#x} == z.data_ptr() {z.data_ptr():#x}")
    gz2 = pygpu.asarray(z)                      # __cuda_array_interface__ on CUDA, else DLPack
    assert gz2.ptr == z.data_ptr()
    gz[0] = -1.0                                # PyGPU writes: PyTorch sees it
    assert z[0].item() == -1.0

    # --- 4. Pending PyTorch work on a side stream, consumed by PyGPU -----------------
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())   # t's writes first (PyTorch's idiom)
    with torch.cuda.stream(side):
        w = torch.full((n,), 5.0, device="cuda")
        w.mul_(t)                               # queued on `side`
        # Asked for PyGPU's current stream, PyTorch makes it wait for its
        # current stream (`side`): call from_dlpack where the work was queued.
        gw = pygpu.from_dlpack(w)
    assert np.array_equal(gw.get(), 5 * 2 * h)     # on PyGPU's stream, after `side`
    # gw keeps w alive.  PyTorch's caching allocator reuses w's memory for
    # `side` as soon as w dies; where PyGPU may still have work queued on it
    # on another stream, tell PyTorch so (here get() has already finished):
    w.record_stream(torch.cuda.current_stream())

    print("torch_handoff: ok")


if __name__ == "__main__":
    main()
