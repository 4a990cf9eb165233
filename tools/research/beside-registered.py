"""Why does a 1 MiB to_gpu beside a 1 GiB one wait for all of it when the
big buffer is page-locked in place and each thread has a non-blocking
stream of its own?  (4 H200 host, 2026-11-27: 20 ms beside against 50 us
alone, 405 times, where the same on the default streams took 7.4 times
once big DMAs went in pieces, and the staged path 2.75.)  Each case a 1
MiB (or 512 KiB: staged, under the registration minimum) to_gpu alone and
beside a thread moving 1 GiB in a loop, medians, on streams of their own
and on the default streams: the small one registered, staged, or
page-locked memory of its own, the big one registered in place or
page-locked memory of its own.

    python tools/research/beside-registered.py
"""
import threading, time, statistics, numpy as np, pygpu
from pygpu.bench import pageable_array, pinned_array
MiB, GiB = 1 << 20, 1 << 30
def beside(small_host, big_host, own, label):
    mine = pygpu.Stream(non_blocking=True) if own else None
    for _ in range(80):
        pygpu.to_gpu(small_host, stream=mine)
    ts = []
    for _ in range(200):
        t = time.perf_counter(); pygpu.to_gpu(small_host, stream=mine); ts.append(time.perf_counter() - t)
    alone = statistics.median(ts)
    stop = threading.Event()
    def mover():
        s = pygpu.Stream(non_blocking=own)
        while not stop.is_set():
            pygpu.to_gpu(big_host, stream=s)
    t = threading.Thread(target=mover); t.start(); time.sleep(0.1)
    ts, end = [], time.perf_counter() + 0.6
    while time.perf_counter() < end or len(ts) < 5:
        t0 = time.perf_counter(); pygpu.to_gpu(small_host, stream=mine); ts.append(time.perf_counter() - t0)
    stop.set(); t.join()
    b = statistics.median(ts)
    print(f"{label} own={own}: alone {alone*1e6:.0f} us beside {b*1e6:.0f} us ({b/alone:.1f}x)", flush=True)
big = pageable_array(GiB)
for _ in range(3):
    pygpu.to_gpu(big)
pin_big = pinned_array(GiB)
for own in (True, False):
    beside(pageable_array(MiB), big, own, "small 1M registered, big registered")
    beside(pageable_array(512 << 10), big, own, "small 512K staged, big registered")
    beside(pinned_array(MiB), pin_big, own, "small 1M pinned, big pinned")
    beside(pinned_array(MiB), big, own, "small 1M pinned, big registered")
