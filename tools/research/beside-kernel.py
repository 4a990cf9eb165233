"""Can a copy kernel (SMs reading or writing page-locked host memory over the
bus) carry a small transfer while the copy engine is busy with a big one on
another stream?  Raw runtime calls and a CuPy RawKernel (no PyGPU): alone,
the copy engine against the kernel from 64 KiB to 16 MiB, both directions;
then a 1 MiB copy of each kind beside a thread moving 1 GiB (one copy, or
4 MiB pieces two queued) in the same direction, on non-blocking streams;
and the big copy's bandwidth with and without the small loop beside it.

    python tools/research/beside-kernel.py
"""
import statistics
import threading
import time

import cupy as cp
import numpy as np

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
rt = cp.cuda.runtime
H2D, D2H = 1, 2

SRC = r"""
extern "C" __global__ void copy16(const uint4 *__restrict__ s, uint4 *__restrict__ d, unsigned long long n)
{
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    unsigned long long step = (unsigned long long)gridDim.x * blockDim.x;
    for (; i + 3 * step < n; i += 4 * step) {
        uint4 a = s[i], b = s[i + step], c = s[i + 2 * step], e = s[i + 3 * step];
        d[i] = a; d[i + step] = b; d[i + 2 * step] = c; d[i + 3 * step] = e;
    }
    for (; i < n; i += step)
        d[i] = s[i];
}
"""
kern = cp.RawKernel(SRC, "copy16")
SMS = cp.cuda.Device().attributes["MultiProcessorCount"]


def registered(n):
    a = np.ones(n, np.uint8)
    rt.hostRegister(a.ctypes.data, n, 0)
    return a


def kcopy(dst, src, n, stream, blocks=None):
    words = n // 16
    threads = 512
    b = blocks or max(1, min(SMS * 4, (words + threads * 4 - 1) // (threads * 4)))
    kern((b,), (threads,), (cp.uint64(src), cp.uint64(dst), cp.uint64(words)), stream=stream)


def timed(fn, stream, seconds):
    times = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(times) < 5:
        t0 = time.perf_counter()
        fn()
        stream.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def small_fn(how, direction, dev, hostp, n, s):
    if how == "ce":
        if direction == H2D:
            return lambda: rt.memcpyAsync(dev, hostp, n, H2D, s.ptr)
        return lambda: rt.memcpyAsync(hostp, dev, n, D2H, s.ptr)
    if direction == H2D:
        return lambda: kcopy(dev, hostp, n, s)
    return lambda: kcopy(hostp, dev, n, s)


def mover(dev, hostp, n, piece, direction, s, stop, moved):
    ev = [cp.cuda.Event(disable_timing=True), cp.cuda.Event(disable_timing=True)]
    used = [False, False]
    while not stop.is_set():
        t0 = time.perf_counter()
        for i, off in enumerate(range(0, n, piece)):
            k = i % 2
            if used[k]:
                ev[k].synchronize()
            ln = min(piece, n - off)
            if direction == H2D:
                rt.memcpyAsync(dev + off, hostp + off, ln, H2D, s.ptr)
            else:
                rt.memcpyAsync(hostp + off, dev + off, ln, D2H, s.ptr)
            ev[k].record(s)
            used[k] = True
        s.synchronize()
        moved.append((n, time.perf_counter() - t0))


def main():
    s = cp.cuda.Stream(non_blocking=True)
    print("== alone (us, GB/s): size, direction, copy engine, kernel", flush=True)
    for n in (64 * KiB, 256 * KiB, MiB, 4 * MiB, 16 * MiB):
        h, d = registered(n), cp.zeros(n, cp.uint8)
        for direction in (H2D, D2H):
            ce = timed(small_fn("ce", direction, d.data.ptr, h.ctypes.data, n, s), s, 0.2)
            kk = timed(small_fn("kernel", direction, d.data.ptr, h.ctypes.data, n, s), s, 0.2)
            print(f"{n >> 10:6d} KiB {'up' if direction == H2D else 'down':4}: ce {ce * 1e6:7.1f} us "
                  f"{n / ce / 1e9:5.1f} GB/s, kernel {kk * 1e6:7.1f} us {n / kk / 1e9:5.1f} GB/s", flush=True)
        # correctness of the kernel both ways
        h[...] = np.arange(n, dtype=np.uint8)
        small_fn("kernel", H2D, d.data.ptr, h.ctypes.data, n, s)()
        s.synchronize()
        assert (d.get() == h).all()
        h[...] = 0
        small_fn("kernel", D2H, d.data.ptr, h.ctypes.data, n, s)()
        s.synchronize()
        assert (h == np.arange(n, dtype=np.uint8)).all()
        rt.hostUnregister(h.ctypes.data)
    print("== 1 MiB beside 1 GiB, non-blocking streams", flush=True)
    bigh, bigd = registered(GiB), cp.zeros(GiB, cp.uint8)
    sh, sd = registered(MiB), cp.zeros(MiB, cp.uint8)
    for direction in (H2D, D2H):
        for piece in (GiB, 4 * MiB):
            stop, moved, sb = threading.Event(), [], cp.cuda.Stream(non_blocking=True)
            t = threading.Thread(target=mover, args=(bigd.data.ptr, bigh.ctypes.data, GiB, piece, direction, sb,
                                                     stop, moved))
            t.start()
            time.sleep(0.3)
            n_alone = len(moved)
            big_alone = sum(m[0] for m in moved) / sum(m[1] for m in moved) if moved else float("nan")
            res = []
            for how in ("ce", "kernel"):
                fn = small_fn(how, direction, sd.data.ptr, sh.ctypes.data, MiB, s)
                mark = len(moved)
                lat = timed(fn, s, 1.0)
                during = moved[mark + 1:]
                bw = sum(m[0] for m in during) / sum(m[1] for m in during) if during else float("nan")
                res.append(f"{how} {lat * 1e6:7.0f} us (big {bw / 1e9:5.1f} GB/s)")
            stop.set()
            t.join()
            print(f"{'up' if direction == H2D else 'down':4} big piece {piece >> 20:4d} MiB (alone {big_alone / 1e9:5.1f} "
                  f"GB/s, {n_alone} rounds): " + ", ".join(res), flush=True)


if __name__ == "__main__":
    main()
