"""How soon a stream goes on after the host raises a counter it waits for.

    python tools/research/wait-latency.py [--reps N]

A stream (CuPy's, on the current device) is made to wait, then records an
event; the host raises a counter in page-locked memory after a delay and
spins on the event: the time from the raise to the event's completion is
the latency of the gate.  Gates: the driver's cuStreamWaitValue32 (as
background uploads use) and a one-thread kernel spinning on the counter.
Needs CuPy and the NVIDIA driver.
"""
import argparse
import ctypes
import statistics
import sys
import time

import numpy as np

SPIN = r"""
extern "C" __global__ void spin(const volatile unsigned *c, unsigned v) {
    while (*c < v) { __nanosleep(200); }
}
"""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args(argv)
    try:
        import cupy as cp
        cuda = ctypes.CDLL("libcuda.so.1")
        cp.cuda.runtime.getDeviceCount()
    except Exception as e:                  # (ImportError, OSError, CUDARuntimeError)
        print(f"needs CuPy and the NVIDIA driver with a device: {e}")
        return 0
    wait32 = cuda.cuStreamWaitValue32_v2
    wait32.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
    wait32.restype = ctypes.c_int
    mem = cp.cuda.alloc_pinned_memory(4096)
    ctr = np.frombuffer(mem, np.uint32, 1024)
    addr = mem.ptr
    s = cp.cuda.Stream(non_blocking=True)
    spin = cp.RawKernel(SPIN, "spin")

    def gate(kind, value):
        if kind == "wait":
            assert wait32(s.ptr, addr, value, 0) == 0
        else:
            spin((1,), (1,), (cp.uint64(addr), cp.uint32(value)), stream=s)

    ev = cp.cuda.Event(disable_timing=True)
    big = cp.empty(4 << 20, cp.uint8)
    hbig = cp.cuda.alloc_pinned_memory(4 << 20)

    def dma():
        big.data.copy_from_host_async(hbig.ptr, 4 << 20, stream=s)

    def after_raise(kind, delay, then):
        """Seconds from the raise to the event, the gate and then() queued before it."""
        ctr[0] = 0
        s.synchronize()
        if kind:
            gate(kind, 1)
        then()
        ev.record(s)
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < delay:
            pass
        ctr[0] = 1
        t1 = time.perf_counter()
        while not ev.done:
            pass
        return time.perf_counter() - t1

    for kind in ("wait", "kernel"):
        for delay in (0, 20e-6, 200e-6, 2e-3):
            lat = [after_raise(kind, delay, lambda: None) for _ in range(args.reps)]
            with_dma = [after_raise(kind, delay, dma) for _ in range(args.reps)]
            print(f"{kind:>6}, raised after {delay * 1e6:6.0f} us: the stream goes on "
                  f"{statistics.median(lat) * 1e6:7.1f} us later [{min(lat) * 1e6:.0f}-{max(lat) * 1e6:.0f}]; "
                  f"with a 4 MiB DMA after it {statistics.median(with_dma) * 1e6:7.1f} us", flush=True)
    alone = [after_raise(None, 0, dma) for _ in range(args.reps)]
    print(f"a 4 MiB DMA alone, from its call: {statistics.median(alone) * 1e6:.1f} us")


if __name__ == "__main__":
    sys.exit(main())
