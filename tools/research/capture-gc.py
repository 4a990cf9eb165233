"""Which finalizers break a graph capture in global mode?  Each case makes
garbage (an object in a reference cycle, so that only the collector frees
it), begins a global capture of a non-blocking stream of its own, runs
gc.collect() inside it and prints the capture's end status (0: valid,
901: invalidated).  PyGPU's own objects first, then CuPy's, PyTorch's,
Numba's and JAX's where they import; then the registered-buffer release of
tests/test_registered.py, repeated, with a collection inside and without.
Research only (2026-11-29): the owner-collected case of
test_pages_an_asynchronous_copy_was_queued_on_are_let_go_after_it broke its
capture once in the whole CUDA suite."""
import gc
import sys
import time

import numpy as np

import pygpu

lib = pygpu.backend_module
MiB = 1 << 20


def cycle(obj):
    hold = [obj]
    hold.append(hold)


def around(label, make, inside=gc.collect):
    gc.collect()
    s = pygpu.Stream(non_blocking=True)
    make()
    rc = lib._stream_begin_capture(s.handle, 0)
    if rc:
        print(f"{label:48s} begin refused {rc}")
        return
    try:
        inside()
    finally:
        rc = lib._stream_end_capture(s.handle)
    print(f"{label:48s} {rc}", flush=True)


def pygpu_cases():
    around("nothing", lambda: None)
    around("sleep 0.3 s", lambda: None, lambda: time.sleep(0.3))
    around("pygpu GPUArray (default stream)", lambda: cycle(pygpu.to_gpu(np.ones(1 << 20))))
    around("pygpu GPUArray (own stream)",
           lambda: cycle(pygpu.to_gpu(np.ones(1 << 20), stream=pygpu.Stream(non_blocking=True))))
    around("pygpu GPUArray 64 MiB", lambda: cycle(pygpu.empty(64 * MiB, np.uint8)))
    around("pygpu pagelocked_empty", lambda: cycle(pygpu.pagelocked_empty(1 << 20, np.uint8)))
    around("pygpu Stream", lambda: cycle(pygpu.Stream(non_blocking=True)))
    around("pygpu Event", lambda: cycle(pygpu.Event()))
    def queued():
        s = pygpu.Stream(non_blocking=True)
        g = pygpu.to_gpu_async(np.ones(4 * MiB), stream=s)
        cycle((s, g))
    around("pygpu to_gpu_async pageable", queued)


def registered(label, collect):
    before = pygpu.transfer_config()["register_limit"]
    pygpu.transfer_config(register_limit=256 * MiB)
    bad = 0
    try:
        for _ in range(10):
            gc.collect()
            x = np.random.default_rng().integers(0, 255, 34 * MiB, dtype=np.uint8)
            pygpu.to_gpu(x)
            pygpu.to_gpu(x)
            lo = -x.ctypes.data % 4096
            pages = x[lo:lo + (x.size - lo) // 4096 * 4096]
            s = pygpu.Stream(non_blocking=True)
            g = pygpu.to_gpu_async(pages, stream=s)
            back = pygpu.pagelocked_empty(pages.shape, np.uint8)
            g.get_async(ary=back, stream=s)
            c = pygpu.Stream(non_blocking=True)
            assert lib._stream_begin_capture(c.handle, 0) == 0
            try:
                del x, pages
                if collect:
                    gc.collect()
            finally:
                rc = lib._stream_end_capture(c.handle)
            bad += rc != 0
            s.synchronize()
    finally:
        pygpu.transfer_config(register_limit=before)
    print(f"{label:48s} broken {bad} of 10", flush=True)


def main():
    print("backend", pygpu.backend)
    pygpu_cases()
    registered("registered release, no collection", False)
    registered("registered release, gc.collect inside", True)
    try:
        import cupy
        around("cupy array", lambda: cycle(cupy.ones(1 << 20)))
        around("cupy stream", lambda: cycle(cupy.cuda.Stream(non_blocking=True)))
    except Exception as e:
        print("cupy:", type(e).__name__, e)
    try:
        import torch
        around("torch tensor", lambda: cycle(torch.ones(1 << 20, device="cuda")))
        around("torch pinned tensor", lambda: cycle(torch.ones(1 << 20).pin_memory()))
        around("torch stream", lambda: cycle(torch.cuda.Stream()))
        around("torch from pygpu (dlpack)", lambda: cycle(torch.from_dlpack(pygpu.to_gpu(np.ones(1000)))))
    except Exception as e:
        print("torch:", type(e).__name__, e)
    try:
        if not hasattr(np, "row_stack"):
            np.row_stack = np.vstack
        from numba import cuda
        around("numba device array", lambda: cycle(cuda.to_device(np.ones(1 << 20))))
        def many():
            for _ in range(20):
                cycle(cuda.to_device(np.ones(1 << 16)))
        around("numba 20 device arrays", many)
    except Exception as e:
        print("numba:", type(e).__name__, e)
    try:
        import jax
        import jax.numpy as jnp
        around("jax array", lambda: cycle(jnp.ones(1 << 20).block_until_ready()))
        around("jax alive, sleep 0.3 s", lambda: None, lambda: time.sleep(0.3))
    except Exception as e:
        print("jax:", type(e).__name__, e)
    registered("registered release after all, gc inside", True)
    registered("registered release after all, no gc", False)
    for label, inside in (("after all, gc.collect alone", gc.collect),
                          ("after all, sleep 0.2 s alone", lambda: time.sleep(0.2))):
        bad = 0
        took = []
        for _ in range(20):
            gc.collect()
            c = pygpu.Stream(non_blocking=True)
            assert lib._stream_begin_capture(c.handle, 0) == 0
            t = time.perf_counter()
            try:
                inside()
            finally:
                took.append(time.perf_counter() - t)
                bad += lib._stream_end_capture(c.handle) != 0
        print(f"{label:48s} broken {bad} of 20, {1e3 * sorted(took)[10]:.0f} ms each", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
