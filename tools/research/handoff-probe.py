"""Where the time of pygpu.from_dlpack(torch tensor) goes: the call with
its result freed at once (as the bench times it), the call alone (results
kept), freeing the results alone, and the pieces the import is made of.

    python tools/research/handoff-probe.py      (CUDA backend, PyTorch)
"""
import time

import numpy as np
import torch

import pygpu

N = 200_000


def per_call(fn, n=N):
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n)
    return best * 1e9


def kept(fn, n=N):
    out = [None] * n
    t0 = time.perf_counter()
    for i in range(n):
        out[i] = fn()
    made = (time.perf_counter() - t0) / n
    t0 = time.perf_counter()
    del out[:]
    return made * 1e9, (time.perf_counter() - t0) / n * 1e9


t = torch.zeros((64, 64), dtype=torch.float32, device="cuda")
ours = pygpu.to_gpu(np.zeros((64, 64), np.float32))
from pygpu import bench     # noqa: E402  (the bench's own timing: median of 100-call batches)
print(f"bench.time_call(from_dlpack(t)), cold {bench.time_call(lambda: pygpu.from_dlpack(t)) * 1e9:8.1f} ns")
print(f"loop alone                            {per_call(lambda: None):8.1f} ns")
print(f"pygpu.from_dlpack(t), freed at once   {per_call(lambda: pygpu.from_dlpack(t)):8.1f} ns")
made, freed = kept(lambda: pygpu.from_dlpack(t))
print(f"pygpu.from_dlpack(t), made / freed    {made:8.1f} / {freed:.1f} ns")
print(f"pygpu.from_dlpack(ours)               {per_call(lambda: pygpu.from_dlpack(ours)):8.1f} ns")
print(f"ours[...] (a view)                    {per_call(lambda: ours[...]):8.1f} ns")
print(f"pygpu.GPUArray((64, 64), 'f4', gpudata=ptr, base=t) {per_call(lambda: pygpu.GPUArray((64, 64), np.float32, gpudata=t.data_ptr(), base=t)):8.1f} ns")
print(f"t.__dlpack__() (torch's capsule)      {per_call(lambda: t.__dlpack__()):8.1f} ns")
print(f"torch.cuda.current_stream()           {per_call(torch.cuda.current_stream):8.1f} ns")
print(f"bench.time_call(from_dlpack(t)), warm {bench.time_call(lambda: pygpu.from_dlpack(t)) * 1e9:8.1f} ns")
print(f"bench.time_call(asarray(t)), warm     {bench.time_call(lambda: pygpu.asarray(t)) * 1e9:8.1f} ns")
print(f"pygpu.asarray(t), best of 5 x {N}     {per_call(lambda: pygpu.asarray(t)):8.1f} ns")
