"""Transfers of SIZE back to back against the same with a gap between the
calls (0.3 ms, 2 ms: the workers go back to sleep, the caches cool):
median us of PyGPU's get(ary=touched pageable) and set, and of raw pinned
cudaMemcpy both ways.  With PYGPU_STAGING_TRACE=1 set, 30 traced calls of
each after (the last ones show a call in a loop).

    python tools/research/loop-gap.py SIZE
"""
import os
import statistics
import sys
import time

import pygpu
from pygpu import bench


def median_us(fn, gap, reps=400):
    t = []
    for _ in range(reps):
        if gap:
            time.sleep(gap)
        t0 = time.perf_counter()
        fn()
        t.append(time.perf_counter() - t0)
    return statistics.median(t[50:]) * 1e6


def main(size):
    n = bench.parse_size(size)
    host, out = bench.pageable_array(n), bench.pageable_array(n)
    g = pygpu.to_gpu(host)
    raw = bench.RawCuda()
    cases = {"get": lambda: g.get(ary=out), "set": lambda: g.set(host)}
    keep = []
    if raw.available():
        for d, name in (("D2H", "raw down"), ("H2D", "raw up")):
            fn, k = raw.case(d, n)
            cases[name] = fn
            keep.append(k)
    for gap in (0, 0.0003, 0.002):
        cells = ", ".join(f"{name} {median_us(fn, gap):.1f}" for name, fn in cases.items())
        print(f"{size} gap {gap * 1e6:.0f} us: {cells} (us)", flush=True)
    if os.environ.get("PYGPU_STAGING_TRACE"):
        for name in ("get", "set"):
            for _ in range(30):
                cases[name]()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "4M")
