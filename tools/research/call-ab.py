"""Per-call costs of the Python faces, timed in one process a variant:
run it in each tree being compared, in turns (`python3 call-ab.py` from the
tree's root, so that its pygpu is imported).  Prints one line per case:
the median of 7 runs of 20000 calls, in ns."""
import statistics
import sys
import timeit

import numpy as np

import pygpu

a = pygpu.to_gpu(np.zeros((64, 64), np.float32))
h8 = np.zeros(1, np.float64)
g8 = pygpu.to_gpu(h8)
cases = {
    "__dlpack__()": a.__dlpack__,
    "shape": lambda: a.shape,
    "ptr": lambda: a.ptr,
    "a.T": lambda: a.T,
    "a[1:5, ::2]": lambda: a[1:5, ::2],
    "empty(1000)": lambda: pygpu.empty(1000, np.float32),
    "to_gpu(8 B)": lambda: pygpu.to_gpu(h8),
    "get(8 B)": lambda: g8.get(h8),
}
if pygpu.backend == "cuda":
    cases["__cuda_array_interface__"] = lambda: a.__cuda_array_interface__
for name, fn in cases.items():
    n = 20000 if "B)" not in name else 2000
    fn()
    runs = [timeit.timeit(fn, number=n) / n * 1e9 for _ in range(7)]
    print(f"{sys.argv[1] if len(sys.argv) > 1 else '':8} {name:28} {statistics.median(runs):9.1f} ns")
