"""What a copy between two devices costs beside the bytes, call by call.

    python tools/research/peer-costs.py [--reps N]

Needs 2 devices and CuPy (its runtime bindings make the raw calls).
Medians of N calls (microseconds): the runtime's device switch, an event
made and destroyed, an event recorded on one device and waited for on the
other's stream; the sequence PyGPU's dense copy between devices makes
(switch to the source, event, switch back, wait, MemcpyPeerAsync, stream
synchronize), raw, against the bare synchronous MemcpyPeer; PyGPU's
copy(device=1) (and apart: the call with its result kept, and the result's
free), b[...] = a and memcpy_peer, 1 and 16 MiB; and 8-byte
transfers, PyGPU's against a raw cudaMemcpy of the same host memory.
"""
import argparse

import numpy as np

from pygpu.__main__ import median_seconds


def median_us(fn, reps):
    return median_seconds(fn, reps, warm=20) * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2000)
    reps = ap.parse_args().reps
    import cupy as cp
    import pygpu
    rt = cp.cuda.runtime
    rows = []

    def row(name, fn, n=reps):
        rt.setDevice(0)
        us = median_us(fn, n)
        rows.append((name, us))
        print(f"{name:<60} {us:9.2f} us", flush=True)

    rt.setDevice(0)
    row("setDevice(0), current already", lambda: rt.setDevice(0))
    row("setDevice(1); setDevice(0)", lambda: (rt.setDevice(1), rt.setDevice(0)))
    row("getDevice()", rt.getDevice)
    row("eventCreateWithFlags(disable timing) + eventDestroy",
        lambda: rt.eventDestroy(rt.eventCreateWithFlags(2)))
    with cp.cuda.Device(1):
        s1 = cp.cuda.Stream(non_blocking=True)
    e0 = rt.eventCreateWithFlags(2)
    row("eventRecord(e on 0, legacy stream) + streamWaitEvent(stream of 1)",
        lambda: (rt.eventRecord(e0, 0), rt.streamWaitEvent(s1.ptr, e0, 0)))
    with cp.cuda.Device(1):
        bs1 = cp.cuda.Stream(non_blocking=False)
    with cp.cuda.Device(0):
        bs0 = cp.cuda.Stream(non_blocking=False)

    def record_remote():
        rt.setDevice(1)
        rt.eventRecord(e0, bs0.ptr)
        rt.streamWaitEvent(bs1.ptr, e0, 0)
        rt.setDevice(0)
    try:
        row("the same on a blocking stream of 0, device 1 current (+ switches)", record_remote)
    except Exception as e:      # (the runtime may refuse a stream of another device)
        print("record on a stream of a device not current:", e)
    row("eventRecord(e on 0, legacy stream) alone", lambda: rt.eventRecord(e0, 0))
    row("eventRecord(e on 0, blocking stream of 0) alone", lambda: rt.eventRecord(e0, bs0.ptr))
    ns0 = cp.cuda.Stream(non_blocking=True)
    row("eventRecord(e on 0, non-blocking stream of 0) alone", lambda: rt.eventRecord(e0, ns0.ptr))
    row("streamWaitEvent(non-blocking stream of 1, e on 0), 0 current",
        lambda: rt.streamWaitEvent(s1.ptr, e0, 0))
    row("streamWaitEvent(non-blocking stream of 0, e on 0)", lambda: rt.streamWaitEvent(ns0.ptr, e0, 0))

    def wait_legacy_1():
        rt.setDevice(1)
        rt.streamWaitEvent(0, e0, 0)
        rt.setDevice(0)
    row("streamWaitEvent(legacy stream of 1, e on 0) (+ switches)", wait_legacy_1)
    row("streamQuery(legacy stream of 0)", lambda: rt.streamQuery(0))
    row("eventQuery(e on 0)", lambda: rt.eventQuery(e0))
    row("streamSynchronize(legacy stream of 0), idle", lambda: rt.streamSynchronize(0))

    def alloc_1():
        rt.setDevice(1)
        rt.freeAsync(rt.mallocAsync(16 << 20, 0), 0)
        rt.setDevice(0)
    row("mallocAsync + freeAsync 16 MiB on 1 (+ switches)", alloc_1)

    def empty_1():
        with pygpu.Device(1):
            x = pygpu.empty(16 << 20, np.uint8)
        del x
    row("pygpu.empty(16 MiB) on 1, dropped on 0", empty_1)
    for x, y in ((0, 1), (1, 0)):
        rt.setDevice(x)
        try:
            rt.deviceEnablePeerAccess(y)
        except Exception as e:
            print("enable peer access", x, "->", y, ":", e)
    rt.setDevice(0)
    pygpu.to_gpu(np.zeros(8)).copy(device=1)        # (PyGPU's grants: each pool open to the other device)
    for n in (1 << 20, 16 << 20):
        with cp.cuda.Device(0):
            a = cp.arange(n, dtype=cp.uint8)
        with cp.cuda.Device(1):
            b = cp.empty(n, dtype=cp.uint8)
        rt.setDevice(0)
        row(f"{n >> 20} MiB memcpyPeer + streamSynchronize",
            lambda: (rt.memcpyPeer(b.data.ptr, 1, a.data.ptr, 0, n), rt.streamSynchronize(0)), 300)

        def sequence():
            rt.setDevice(0)
            e = rt.eventCreateWithFlags(2)
            rt.eventRecord(e, 0)
            rt.setDevice(1)
            rt.streamWaitEvent(0, e, 0)
            rt.memcpyPeerAsync(b.data.ptr, 1, a.data.ptr, 0, n, 0)
            rt.streamSynchronize(0)
            rt.eventDestroy(e)
            rt.setDevice(0)
        row(f"{n >> 20} MiB the sequence of a copy between devices, raw", sequence, 300)

        def cached():
            rt.eventRecord(e0, 0)
            rt.setDevice(1)
            rt.streamWaitEvent(0, e0, 0)
            rt.memcpyPeerAsync(b.data.ptr, 1, a.data.ptr, 0, n, 0)
            rt.streamSynchronize(0)
            rt.setDevice(0)
        row(f"{n >> 20} MiB the same, event kept, from the source device", cached, 300)

        def fresh():
            p = rt.mallocFromPoolAsync(n, rt.deviceGetDefaultMemPool(1), 0)
            rt.memcpyPeerAsync(p, 1, a.data.ptr, 0, n, 0)
            rt.streamSynchronize(0)
            rt.setDevice(1)
            rt.freeAsync(p, 0)
            rt.setDevice(0)
        try:
            row(f"{n >> 20} MiB a new array's sequence, raw (from 1's pool on 0's stream, copy, free on 1)", fresh, 300)
        except Exception as e:      # (an older CuPy without the pool calls)
            print("a new array's sequence:", e)
        with pygpu.Device(0):
            pa = pygpu.to_gpu(np.arange(n, dtype=np.uint8))
        with pygpu.Device(1):
            pb = pygpu.empty(n, np.uint8)
        rt.setDevice(0)
        row(f"{n >> 20} MiB pygpu a.copy(device=1)", lambda: pa.copy(device=1), 300)
        kept = []
        row(f"{n >> 20} MiB pygpu a.copy(device=1), kept (its free not timed)", lambda: kept.append(pa.copy(device=1)),
            200)
        row(f"{n >> 20} MiB pygpu dropping one such copy (its free on device 1)", kept.pop, 150)
        del kept

        def assign():
            pb[...] = pa
        row(f"{n >> 20} MiB pygpu b[...] = a", assign, 300)
        row(f"{n >> 20} MiB pygpu memcpy_peer", lambda: pygpu.memcpy_peer(pb.ptr, pa.ptr, n, 1, 0), 300)
        with pygpu.Device(1):
            row(f"{n >> 20} MiB pygpu a.copy(device=1), device 1 current", lambda: pa.copy(device=1), 300)
        assert (pa.copy(device=1).get() == pa.get()).all()

    rt.setDevice(0)
    h = np.arange(1, dtype=np.float64)
    d = cp.empty(1, dtype=cp.float64)
    g = pygpu.to_gpu(h)
    out = np.empty_like(h)
    pinned = cp.cuda.alloc_pinned_memory(8)
    row("8 B raw cudaMemcpy H2D, pageable", lambda: rt.memcpy(d.data.ptr, h.ctypes.data, 8, 1))
    row("8 B raw cudaMemcpy D2H, pageable", lambda: rt.memcpy(out.ctypes.data, d.data.ptr, 8, 2))
    row("8 B raw cudaMemcpy D2H, pinned", lambda: rt.memcpy(pinned.ptr, d.data.ptr, 8, 2))
    row("8 B np.empty(1)", lambda: np.empty(1))
    row("8 B pygpu.to_gpu", lambda: pygpu.to_gpu(h))
    row("8 B pygpu g.set(h)", lambda: g.set(h))
    row("8 B pygpu g.get()", g.get)
    row("8 B pygpu g.get(ary=out)", lambda: g.get(ary=out))
    row("8 B pygpu memcpy_dtoh(out, g.ptr)", lambda: pygpu.memcpy_dtoh(out, g.ptr))


if __name__ == "__main__":
    main()
