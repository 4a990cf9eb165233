"""How fast can this host copy pageable memory into page-locked memory?

The staging pipeline's speed for mid-sized transfers (16-64 MiB) is bounded
by the host copy into its pinned buffers.  This measures that copy alone,
without PyGPU's pipeline: N Python threads (NumPy releases the GIL for
large copies) each copying its slice of a touched pageable array into a
page-locked one, repeatedly, with the aggregate GB/s; and one whole copy
with N threads joined each time (the pipeline's fork-join per chunk).

    python tools/research/host-copy-probe.py [sizes...]      e.g. 2M 16M 64M
"""
import sys
import threading
import time

import numpy as np

import pygpu
from pygpu import bench


def sustained(src, dst, nthreads, seconds=0.3):
    """Aggregate GB/s of nthreads copying their slices over and over."""
    n = src.size
    edges = np.linspace(0, n, nthreads + 1).astype(int)
    stop = threading.Event()
    counts = [0] * nthreads
    start = threading.Barrier(nthreads + 1)

    def work(k):
        s, d = src[edges[k]:edges[k + 1]], dst[edges[k]:edges[k + 1]]
        start.wait()
        while not stop.is_set():
            np.copyto(d, s)
            counts[k] += 1

    ts = [threading.Thread(target=work, args=(k,)) for k in range(nthreads)]
    for t in ts:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for t in ts:
        t.join()
    dt = time.perf_counter() - t0
    return sum(c * (edges[k + 1] - edges[k]) for k, c in enumerate(counts)) / dt / 1e9


def main():
    sizes = [bench.parse_size(s) for s in sys.argv[1:]] or [2 << 20, 16 << 20, 64 << 20, 256 << 20]
    print(f"host copy pageable -> page-locked ({pygpu.backend}); aggregate GB/s by threads")
    print(f"{'size':>8}" + "".join(f"{t:>8}" for t in (1, 2, 4, 8, 16)))
    for n in sizes:
        src = bench.pageable_array(n)
        dst = np.frombuffer(pygpu.mem_alloc_host(n), np.uint8)
        dst[:] = 0
        row = [sustained(src, dst, t) for t in (1, 2, 4, 8, 16)]
        print(f"{bench.size_name(n):>8}" + "".join(f"{v:8.1f}" for v in row))


if __name__ == "__main__":
    main()
