"""Sweep the staging pipeline's settings on the GPU machine: GB/s of to_gpu
from touched pageable memory and of get(ary=touched pageable array), against
raw pinned cudaMemcpy, for chunk sizes, depths and thread counts.

    python tools/research/tune-staging.py [sizes...]
"""
import sys

import numpy as np

import pygpu
from pygpu import bench

sizes = [bench.parse_size(s) for s in sys.argv[1:]] or [16 << 20, 256 << 20, 1 << 30]
raw = bench.RawCuda()
base = pygpu.transfer_config()
configs = [dict(threads=t) for t in (4, 8, 12, 16)]
configs += [dict(chunk=c << 20, threads=t) for c in (4, 8, 32) for t in (8, 16)]
configs += [dict(depth=d, threads=16) for d in (2, 3, 6)]
for n in sizes:
    host = bench.pageable_array(n)
    out = bench.pageable_array(n)
    g = pygpu.to_gpu(host)
    ceil = {}
    for d in ("H2D", "D2H") if raw.available() else ():
        fn, keep = raw.case(d, n)
        ceil[d] = n / bench.time_case(fn, n, 0.3) / 1e9
        del keep
    print(f"{bench.size_name(n)}: raw pinned H2D {ceil.get('H2D', 0):.1f} D2H {ceil.get('D2H', 0):.1f} GB/s")
    for cfg in configs:
        pygpu.transfer_config(**{**base, **cfg})
        h2d = n / bench.time_case(lambda: g.set(host), n, 0.4) / 1e9
        d2h = n / bench.time_case(lambda: g.get(ary=out), n, 0.4) / 1e9
        print(f"  {cfg!s:<32} set {h2d:6.1f} ({h2d / ceil.get('H2D', h2d):.2f})   "
              f"get(ary) {d2h:6.1f} ({d2h / ceil.get('D2H', d2h):.2f})")
    pygpu.transfer_config(**base)
