"""Does a DMA into page-locked memory slow down when the CPU has just read
that memory (its lines in the cores' caches, to be snooped out)?  Raw
cudaMemcpy device -> pinned of SIZE, timed alone, after the pinned buffer
was read by 1 or 8 threads (as a download's copy-out does), and after that
read and a pass over another 64 MiB (pushing the lines out of the cores'
own caches); then host -> device from a buffer the CPU has just written.

    python tools/research/dma-after-read.py [SIZE]     default 4M
"""
import statistics
import sys
import threading
import time

import numpy as np

import pygpu
from pygpu import bench


def in_threads(fn, n):
    ts = [threading.Thread(target=fn, args=(k, n)) for k in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def main(size):
    n = bench.parse_size(size)
    raw = bench.RawCuda()
    if not raw.available():
        print("needs the CUDA runtime (a GPU)")
        return
    pinned = bench.pinned_array(n)
    dev = pygpu.mem_alloc(n)
    hp, dp = pinned.ctypes.data, int(dev)
    out = np.ones(n, np.uint8)
    other, other_out = np.ones(64 << 20, np.uint8), np.ones(64 << 20, np.uint8)

    def read(k, parts):
        a, b = n * k // parts, n * (k + 1) // parts
        np.copyto(out[a:b], pinned[a:b])

    def write(k, parts):
        a, b = n * k // parts, n * (k + 1) // parts
        np.copyto(pinned[a:b], out[a:b])

    cases = {
        "D2H, nothing between": ("D2H", lambda: None),
        "D2H, after 1 thread read it": ("D2H", lambda: read(0, 1)),
        "D2H, after 8 threads read it": ("D2H", lambda: in_threads(read, 8)),
        "D2H, after 8 read it, then 64 MiB copied": ("D2H", lambda: (in_threads(read, 8), np.copyto(other_out, other))),
        "H2D, nothing between": ("H2D", lambda: None),
        "H2D, after 8 threads wrote it": ("H2D", lambda: in_threads(write, 8)),
    }
    for name, (d, between) in cases.items():
        t = []
        for _ in range(60):
            between()
            t0 = time.perf_counter()
            if d == "D2H":
                raw.fn(hp, dp, n, raw.D2H)
            else:
                raw.fn(dp, hp, n, raw.H2D)
            t.append(time.perf_counter() - t0)
        m = statistics.median(t[10:])
        print(f"{size} {name}: {m * 1e6:.1f} us, {n / m / 1e9:.1f} GB/s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "4M")
