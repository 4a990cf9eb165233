"""The asynchronous calls' share of their transfer (bench_scale.async_overlap), alone:
to_gpu_async and get_async of touched pageable memory, 16, 64 and 256 MiB, two rounds.

    python tools/research/async-share.py      (any backend)
"""
import pygpu  # noqa: F401 - (the backend chosen first)
from pygpu import bench_scale
MiB = 1 << 20
for rnd in range(2):
    for down in (False, True):
        for n in (16, 64, 256):
            call, total, blocking = bench_scale.async_overlap(n * MiB, 0.5, down=down)
            print(f"round {rnd} {'get_async' if down else 'to_gpu_async'} {n:4d} MiB call {call*1e6:7.1f} us total {total*1e6:8.1f} us share {call/total:.3f} blocking {blocking*1e6:8.1f}", flush=True)
