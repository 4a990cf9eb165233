"""Where the time goes in the transfers that are furthest from the link's
speed: each case runs a few times with PYGPU_STAGING_TRACE=1 (set here
before pygpu is imported), and each run's timeline is printed (stderr), then the
case's best GB/s.  For tuning the staging pipeline on a new machine.

    python tools/research/trace-cases.py [size]          default 16M
"""
import os
import sys
import time

os.environ["PYGPU_STAGING_TRACE"] = "1"

import numpy as np  # noqa: E402

import pygpu  # noqa: E402
from pygpu import bench  # noqa: E402

n = bench.parse_size(sys.argv[1]) if len(sys.argv) > 1 else 16 << 20
host = bench.pageable_array(n)
out = bench.pageable_array(n)
g = pygpu.to_gpu(host)
rows, row = bench.strided_rows(n)
g_rows = pygpu.empty((2 * rows, row), np.uint8)
h_rows = bench.pageable_array(rows * row).reshape(rows, row)
g_elems = pygpu.to_gpu(bench.pageable_array(2 * n).view(np.float32))

cases = {
    "to_gpu(pageable)": lambda: g.set(host),
    "get(ary=pageable)": lambda: g.get(ary=out),
    "rows [::2] up": lambda: g_rows[::2].set(h_rows),
    "elements [::2] down": lambda: g_elems[::2].get(),
}
for name, fn in cases.items():
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    print(f"== {name}, {bench.size_name(n)}: best {n / best / 1e9:.1f} GB/s of 5 (their traces above)",
          flush=True)
    sys.stderr.flush()
