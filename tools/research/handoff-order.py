"""Does the bench's order of hand-offs change what torch.as_tensor of a
GPUArray costs?  Times torch.as_tensor of a GPUArray and of a CuPy array
(bench.time_call, ns) on fresh arrays, then runs the bench's whole
hand-off table, then times both again: on the same arrays and on fresh
ones, and after each of the bench's cases in turn (with that case's own
time).  `torch-first` imports PyTorch before CuPy (the bench's order).

    python tools/research/handoff-order.py [torch-first]     (CUDA backend, PyTorch, CuPy)
"""
import importlib
import sys

import numpy as np

import pygpu
from pygpu import bench

first, second = ("torch", "cupy") if "torch-first" in sys.argv[1:] else ("cupy", "torch")
mods = {name: importlib.import_module(name) for name in (first, second)}
torch, cp = mods["torch"], mods["cupy"]


def pair(ours, theirs, label):
    a = bench.time_call(lambda: torch.as_tensor(ours, device="cuda")) * 1e9
    b = bench.time_call(lambda: torch.as_tensor(theirs, device="cuda")) * 1e9
    print(f"{label:<60} ours {a:8.1f} ns   cupy {b:8.1f} ns", flush=True)


ours, theirs = pygpu.to_gpu(np.zeros((64, 64), np.float32)), cp.zeros((64, 64), np.float32)
for _ in range(2):
    pair(ours, theirs, "fresh arrays")
cases = bench.handoff_cases()
for name, fn in cases.items():
    own = bench.time_call(fn, 0.2) * 1e9
    pair(ours, theirs, f"after {name} ({own:.0f} ns)")
pair(pygpu.to_gpu(np.zeros((64, 64), np.float32)), cp.zeros((64, 64), np.float32), "new arrays")
