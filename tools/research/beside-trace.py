"""Where a small upload's time goes while another thread uploads a big
array: PYGPU_STAGING_TRACE=1 (set here before pygpu is imported) traces
every staged transfer; the small ones' timelines are printed, with their
times alone first, on streams of their own and on the default stream.

    python tools/research/beside-trace.py [SMALL] [BIG]      default 1M 1G
"""
import os
import sys
import threading
import time

os.environ["PYGPU_STAGING_TRACE"] = "1"

import numpy as np  # noqa: E402

import pygpu  # noqa: E402
from pygpu import bench  # noqa: E402


def main(argv):
    small = bench.parse_size(argv[0]) if argv else 1 << 20
    big = bench.parse_size(argv[1]) if len(argv) > 1 else 1 << 30
    host, big_host = bench.pageable_array(small), bench.pageable_array(big)
    for own in (True, False):
        mine = pygpu.Stream(non_blocking=True) if own else None
        where = "streams of their own" if own else "the default stream"
        for _ in range(20):
            pygpu.to_gpu(host, stream=mine)
        if mine is not None:
            mine.synchronize()
        print(f"== {where}: alone", file=sys.stderr, flush=True)
        t = []
        for _ in range(3):
            t0 = time.perf_counter()
            pygpu.to_gpu(host, stream=mine)
            t.append(time.perf_counter() - t0)
        stop = threading.Event()

        def mover():
            s = pygpu.Stream(non_blocking=own)
            while not stop.is_set():
                pygpu.to_gpu(big_host, stream=s)
        th = threading.Thread(target=mover, daemon=True)
        th.start()
        time.sleep(0.05)
        print(f"== {where}: beside", file=sys.stderr, flush=True)
        b = []
        for _ in range(5):
            t0 = time.perf_counter()
            pygpu.to_gpu(host, stream=mine)
            b.append(time.perf_counter() - t0)
            time.sleep(0.003)
        stop.set()
        th.join()
        print(f"{where}: alone {min(t) * 1e6:.0f} us; beside {', '.join(f'{x * 1e6:.0f}' for x in b)} us",
              file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
