"""What each runtime call a background upload makes costs its caller.

    python tools/research/call-costs.py [--reps N]

On a stream held by a wait on a counter (so that nothing queued runs
while it is timed), the median of N batches of 16 calls of each kind:
a 4 MiB H2D cudaMemcpyAsync from page-locked memory (the runtime's, and
the driver's cuMemcpyHtoDAsync), the driver's cuStreamWaitValue32, an
event made, recorded, destroyed.  Then the same of PyGPU's to_gpu_async
of touched pageable memory (the whole call, 16 and 64 MiB), and of
get_async into it.  With PYGPU_STAGING_TRACE=1 set, also the median of
each part of those calls that PyGPU's background traces (its block, its
events, the hand-over, the chunks' calls, the end), the rest being the
route and the Python around them.  Needs CuPy and the NVIDIA driver.
"""
import argparse
import collections
import ctypes
import os
import re
import statistics
import sys
import tempfile
import time

import numpy as np

BATCH = 16


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=40)
    args = ap.parse_args(argv)
    try:
        import cupy as cp
        cuda = ctypes.CDLL("libcuda.so.1")
        cp.cuda.runtime.getDeviceCount()
    except Exception as e:                  # (ImportError, OSError, CUDARuntimeError)
        print(f"needs CuPy and the NVIDIA driver with a device: {e}")
        return 0
    rt = cp.cuda.runtime
    wait32 = cuda.cuStreamWaitValue32_v2
    wait32.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
    htod = cuda.cuMemcpyHtoDAsync_v2
    htod.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    nothing = cuda.cuCtxGetCurrent
    nothing.argtypes = [ctypes.c_void_p]
    mem = cp.cuda.alloc_pinned_memory(4096)
    ctr = np.frombuffer(mem, np.uint32, 1024)
    chunk = 4 << 20
    dev = cp.empty(BATCH * chunk, cp.uint8)
    pinned = cp.cuda.alloc_pinned_memory(BATCH * chunk)
    s = cp.cuda.Stream(non_blocking=True)
    events = [rt.eventCreateWithFlags(2) for _ in range(BATCH)]
    ctx = ctypes.c_void_p()

    def held(body):
        """Seconds a call of body(i) takes, the median over batches, the stream held meanwhile."""
        per = []
        for _ in range(args.reps):
            ctr[0] = 0
            assert wait32(s.ptr, mem.ptr, 1, 0) == 0
            t0 = time.perf_counter()
            for i in range(BATCH):
                body(i)
            per.append((time.perf_counter() - t0) / BATCH)
            ctr[0] = 1
            s.synchronize()
        return statistics.median(per)

    def made(i):
        e = rt.eventCreateWithFlags(2)
        rt.eventDestroy(e)

    cases = [
        ("a ctypes call to the driver that does nothing (cuCtxGetCurrent)", lambda i: nothing(ctypes.byref(ctx))),
        ("cudaMemcpyAsync, 4 MiB H2D, page-locked",
         lambda i: rt.memcpyAsync(dev.data.ptr + i * chunk, pinned.ptr + i * chunk, chunk, 1, s.ptr)),
        ("cuMemcpyHtoDAsync, 4 MiB, page-locked (ctypes)",
         lambda i: htod(dev.data.ptr + i * chunk, pinned.ptr + i * chunk, chunk, s.ptr)),
        ("cuStreamWaitValue32 (ctypes)", lambda i: wait32(s.ptr, mem.ptr + 4, 0, 0)),
        ("cudaEventRecord", lambda i: rt.eventRecord(events[i], s.ptr)),
        ("cudaEventCreateWithFlags + cudaEventDestroy", made),
    ]
    for name, body in cases:
        print(f"{held(body) * 1e6:8.2f} us  {name}", flush=True)
    try:
        import pygpu
    except ImportError as e:
        print(f"(no pygpu: {e})")
        return 0
    ps = pygpu.Stream()
    for n in (16 << 20, 64 << 20):
        host = np.ones(n, np.uint8)
        g = pygpu.to_gpu(host)
        for name, call in ((f"pygpu.to_gpu_async, {n >> 20} MiB touched pageable",
                            lambda: pygpu.to_gpu_async(host, stream=ps)),
                           (f"GPUArray.get_async, {n >> 20} MiB into touched pageable",
                            lambda: g.get_async(stream=ps, ary=host))):
            call()                              # (the first of a size makes the page-locked block)
            ps.synchronize()
            calls, parts = timed_traced(call, ps, args.reps)
            print(f"{statistics.median(calls) * 1e6:8.2f} us  {name}", flush=True)
            for part, us in parts.items():
                print(f"{statistics.median(us):8.2f} us    of which (traced) {part}", flush=True)
    return 0


def timed_traced(call, stream, reps):
    """([seconds of each call], {part: [us]} from the background's trace
    lines, which go to a file meanwhile; empty without the trace)."""
    calls, parts = [], collections.defaultdict(list)
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+") as f:
        os.dup2(f.fileno(), 2)
        try:
            for _ in range(reps):
                t0 = time.perf_counter()
                out = call()
                calls.append(time.perf_counter() - t0)
                stream.synchronize()
                del out
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        f.seek(0)
        for line in f:
            if line.startswith("pygpu background: ") and "; in the call (us):" in line:
                for part, us in re.findall(r" ([a-z -]+?) ([\d.]+)", line.split("; in the call (us):")[1]):
                    parts[part].append(float(us))
    return calls, parts


if __name__ == "__main__":
    sys.exit(main())
