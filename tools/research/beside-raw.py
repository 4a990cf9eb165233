"""Does the copy engine let a small host-to-device copy in between the pieces
of a big one on another non-blocking stream?  Raw runtime calls through
CuPy (no PyGPU): a thread moves 1 GiB of page-locked memory in a loop, as
one copy or in pieces (P bytes, Q queued behind events), while the main
thread times a 1 MiB copy on a stream of its own; page-locked memory from
cudaHostAlloc or ordinary memory registered in place.

    python tools/research/beside-raw.py
"""
import statistics
import sys
import threading
import time

import cupy as cp
import numpy as np

MiB, GiB = 1 << 20, 1 << 30
rt = cp.cuda.runtime


def host(n, registered):
    if registered:
        a = np.ones(n, np.uint8)
        rt.hostRegister(a.ctypes.data, n, 0)
        return a, a.ctypes.data
    m = cp.cuda.alloc_pinned_memory(n)
    a = np.frombuffer(m, np.uint8, n)
    a[...] = 1
    return m, a.ctypes.data


def mover(dst, src, n, piece, queued, stream, stop):
    evs = [cp.cuda.Event(disable_timing=True) for _ in range(queued)]
    used = [False] * queued
    while not stop.is_set():
        i = 0
        for off in range(0, n, piece):
            k = i % queued
            if used[k]:
                evs[k].synchronize()
            rt.memcpyAsync(dst + off, src + off, min(piece, n - off), 1, stream.ptr)
            evs[k].record(stream)
            used[k] = True
            i += 1
        stream.synchronize()


def small_times(dst, src, n, stream, seconds):
    times = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(times) < 5:
        t0 = time.perf_counter()
        rt.memcpyAsync(dst, src, n, 1, stream.ptr)
        stream.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def case(registered, piece, queued, non_blocking):
    big_keep, big_src = host(GiB, registered)
    small_keep, small_src = host(MiB, registered)
    big_dst, small_dst = cp.empty(GiB, cp.uint8), cp.empty(MiB, cp.uint8)
    s_big, s_small = cp.cuda.Stream(non_blocking=non_blocking), cp.cuda.Stream(non_blocking=non_blocking)
    alone = small_times(small_dst.data.ptr, small_src, MiB, s_small, 0.3)
    stop = threading.Event()
    t = threading.Thread(target=mover, args=(big_dst.data.ptr, big_src, GiB, piece, queued, s_big, stop))
    t.start()
    time.sleep(0.05)
    beside = small_times(small_dst.data.ptr, small_src, MiB, s_small, 1.0)
    stop.set()
    t.join()
    cp.cuda.Device().synchronize()
    if registered:
        rt.hostUnregister(big_src)
        rt.hostUnregister(small_src)
    kind = "registered" if registered else "hostalloc"
    print(f"{kind:10} piece {piece >> 20:5d} MiB queued {queued} non_blocking {non_blocking!s:5}: "
          f"alone {alone * 1e6:6.0f} us beside {beside * 1e6:7.0f} us ({beside / alone:6.1f}x)", flush=True)


def main():
    for registered in (False, True):
        for piece, queued in ((GiB, 1), (4 * MiB, 2), (4 * MiB, 1), (16 * MiB, 2), (64 * MiB, 1)):
            case(registered, piece, queued, True)
    case(False, 4 * MiB, 2, False)


if __name__ == "__main__":
    sys.exit(main())
