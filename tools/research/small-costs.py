"""Where a small staged transfer's time goes (64 KiB to 1 MiB), untraced.

    python tools/research/small-costs.py [--reps N] [SIZE ...]

Needs CuPy (its runtime bindings make the raw calls).  Medians of N calls,
microseconds, for each size (default 64K 256K 1M), with registration off
(every byte of pageable memory staged, as bench --scale's mid-size table):

  pygpu set / get(ary)        touched pageable memory, staged (on the legacy
                              stream, and on a non-blocking stream as the bare loop)
  pygpu set / get(ary) pinned the same from and into page-locked memory
                              (PyGPU's call around one DMA, no staging)
  bare loop, 1 window         backend_module._bare_loop (bench --scale's floor, on
                              a stream of its own; and on the legacy stream)
  raw DMA + sync              cudaMemcpyAsync of page-locked memory and
                              cudaStreamSynchronize, through CuPy (legacy
                              stream; up also on a non-blocking one)
  raw staged by hand          the same with NumPy's copy into (out of) the
                              page-locked buffer before (after) it

and the calls around a copy (8 bytes, the legacy stream): cudaStreamIsCapturing,
cudaPointerGetAttributes of pageable memory (how PyGPU tells it from
page-locked), cudaEventRecord, cudaEventQuery and cudaEventSynchronize of a done event,
and an 8-byte PyGPU get(ary) of pinned memory.  PyGPU's staged call minus
its pinned call prices the staging's own work; the pinned call minus the
raw DMA prices the call around it.
"""
import argparse

import numpy as np

from pygpu.__main__ import median_seconds


def median_us(fn, reps):
    return median_seconds(fn, reps, warm=30) * 1e6


def main():
    import cupy as cp
    import pygpu
    from pygpu.bench import pageable_array, parse_size, pinned_array, registration, size_name
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("sizes", nargs="*", default=["64K", "256K", "1M"])
    args = ap.parse_args()
    rt = cp.cuda.runtime
    lib = pygpu.backend_module

    def row(name, fn):
        print(f"{name:<72} {median_us(fn, args.reps):9.2f} us", flush=True)

    s = pygpu.Stream(non_blocking=True)
    with registration(0):
        for n in map(parse_size, args.sizes):
            print(f"== {size_name(n)}")
            h, out = pageable_array(n), pageable_array(n)
            ph, pout = pinned_array(n), pinned_array(n)
            g = pygpu.to_gpu(h)
            row("pygpu set(touched pageable)", lambda: g.set(h))
            row("pygpu get(ary=touched pageable)", lambda: g.get(ary=out))
            row("pygpu set(page-locked)", lambda: g.set(ph))
            row("pygpu get(ary=page-locked)", lambda: g.get(ary=pout))
            # (the bare loop runs on a stream of its own, not the legacy stream)
            row("pygpu set(touched pageable), a non-blocking stream", lambda: g.set(h, stream=s))
            row("pygpu get(ary=touched pageable), a non-blocking stream", lambda: g.get(ary=out, stream=s))
            for up in (1, 0):
                for legacy in (0, 1):
                    us = lib._bare_loop(up, n, 1, args.reps, legacy) * 1e6
                    name = f"bare loop, 1 window, {'up' if up else 'down'}{', the legacy stream' if legacy else ''}"
                    print(f"{name:<72} {us:9.2f} us", flush=True)
            d = g.ptr
            row("raw cudaMemcpyAsync H2D (page-locked) + sync",
                lambda: (rt.memcpyAsync(d, ph.ctypes.data, n, 1, 0), rt.streamSynchronize(0)))
            row("raw cudaMemcpyAsync D2H (page-locked) + sync",
                lambda: (rt.memcpyAsync(pout.ctypes.data, d, n, 2, 0), rt.streamSynchronize(0)))
            row("raw cudaMemcpyAsync H2D (page-locked) + sync, a non-blocking stream",
                lambda: (rt.memcpyAsync(d, ph.ctypes.data, n, 1, s.ptr), rt.streamSynchronize(s.ptr)))

            def up_by_hand():
                np.copyto(ph, h)
                rt.memcpyAsync(d, ph.ctypes.data, n, 1, 0)
                rt.streamSynchronize(0)

            def down_by_hand():
                rt.memcpyAsync(pout.ctypes.data, d, n, 2, 0)
                rt.streamSynchronize(0)
                np.copyto(out, pout)
            row("raw staged by hand, up (NumPy copy, DMA, sync)", up_by_hand)
            row("raw staged by hand, down (DMA, sync, NumPy copy)", down_by_hand)
            assert (g.get() == h).all()
    print("== the calls around a copy")
    e = rt.eventCreateWithFlags(2)
    rt.eventRecord(e, 0)
    rt.eventSynchronize(e)
    row("cudaStreamIsCapturing(legacy)", lambda: rt.streamIsCapturing(0))
    plain = pageable_array(4096)
    try:
        row("cudaPointerGetAttributes(pageable memory)", lambda: rt.pointerGetAttributes(plain.ctypes.data))
    except Exception as exc:        # (some runtimes call plain host memory an error)
        print("cudaPointerGetAttributes(pageable memory):", exc)
    row("cudaEventRecord(legacy)", lambda: rt.eventRecord(e, 0))
    rt.eventSynchronize(e)
    row("cudaEventQuery (done)", lambda: rt.eventQuery(e))
    row("cudaEventSynchronize (done)", lambda: rt.eventSynchronize(e))
    g8, p8 = pygpu.to_gpu(np.zeros(1)), np.frombuffer(pygpu.mem_alloc_host(8), np.float64)
    row("pygpu get(ary=page-locked), 8 B", lambda: g8.get(ary=p8))
    row("pygpu shape (an attribute: Python's call alone)", lambda: g8.shape)
    rt.eventDestroy(e)


if __name__ == "__main__":
    main()
