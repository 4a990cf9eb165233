"""A small upload's time alone and while another thread uploads a big
array at a time, with PYGPU_STAGING_TRACE=1 set (stderr) while they run
together.  The trace follows one staged transfer at a time, whichever
begins while none is traced: beside a big one that is nearly always the
big one, whose timeline shows the size of its chunks and DMA calls while
the small one comes and goes.

    python tools/research/beside-trace.py [SMALL [BIG]]     default 1M 1G
"""
import os
import statistics
import sys
import threading
import time

os.environ["PYGPU_STAGING_TRACE"] = "1"

import pygpu  # noqa: E402
from pygpu import bench  # noqa: E402


def main(small="1M", big="1G", own_streams=True):
    host, big_host = bench.pageable_array(bench.parse_size(small)), bench.pageable_array(bench.parse_size(big))
    mine = pygpu.Stream(non_blocking=True) if own_streams else None
    devnull, saved = os.open(os.devnull, os.O_WRONLY), os.dup(2)
    os.dup2(devnull, 2)                 # (alone: no trace wanted)
    alone = []
    for _ in range(200):
        t0 = time.perf_counter()
        pygpu.to_gpu(host, stream=mine)
        alone.append(time.perf_counter() - t0)
    os.dup2(saved, 2)
    stop = threading.Event()

    def mover():
        s = pygpu.Stream(non_blocking=own_streams)
        while not stop.is_set():
            pygpu.to_gpu(big_host, stream=s)
    t = threading.Thread(target=mover, daemon=True)
    t.start()
    time.sleep(0.05)
    beside = []
    for _ in range(200):
        t0 = time.perf_counter()
        pygpu.to_gpu(host, stream=mine)
        beside.append(time.perf_counter() - t0)
    stop.set()
    t.join()
    print(f"{small} alone {statistics.median(alone) * 1e6:.0f} us, beside {big}: "
          f"{statistics.median(beside) * 1e6:.0f} us", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:3])
