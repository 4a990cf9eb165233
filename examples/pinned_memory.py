#!/usr/bin/env python3
# expect: pinned_memory: ok
"""Page-locked ("pinned") host memory: how to get it, and what it buys.

The GPU's copy engines read and write host memory directly only when it is
page-locked.  Ordinary (pageable) memory goes through a staging copy: the
CUDA/HIP runtimes' own path runs at a fraction of the link's speed, and
PyGPU's staging pipeline (used for pageable copies of 32 KiB or more on a
GPU: pygpu.transfer_config()["min_bytes"], which this script prints) gets
close to it, but only page-locked memory makes an async copy truly
asynchronous: the call just queues the DMA and the host goes on.

Three ways to get page-locked memory:

- pygpu.pagelocked_empty / pagelocked_zeros (and the *_like forms): new
  NumPy arrays in page-locked memory;
- pygpu.register_host_memory(ary): page-lock an existing array in place
  (here wrapped in a context manager that unregisters it);
- arrays returned by GPUArray.get() of 1 MiB or more come from PyGPU's pool
  of page-locked memory already.

    python3 examples/pinned_memory.py [--mib 256] [--repeat 5]

Runs on every backend.  On the host backend "device memory" is host memory
and nothing is page-locked (pygpu.is_pinned says False), so the numbers
only compare memcpy with memcpy.
"""
import argparse
import contextlib
import time

import numpy as np

import pygpu


@contextlib.contextmanager
def registered(ary):
    """Page-lock NumPy array `ary` in place for the `with` block.

    Yields an array viewing the same memory.  Any copy queued from or into
    it must be finished (synchronize its stream) before the block ends,
    since the runtime may not touch memory after it is unregistered."""
    pinned = pygpu.register_host_memory(ary)
    try:
        yield pinned
    finally:
        pinned.base.unregister()        # .base is the RegisteredHostMemory


def best_of(repeat, fn):
    """The shortest wall-clock time of `repeat` calls of fn(), in seconds."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def report(label, nbytes, seconds):
    print(f"  {label:<52} {nbytes / seconds / 1e9:7.2f} GB/s")


def main():
    gpu = pygpu.backend != "host"
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, default=256 if gpu else 64)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    n = (args.mib << 20) // 4
    nbytes = n * 4
    print(f"backend {pygpu.backend}: {args.mib} MiB, best of {args.repeat}")
    staged = pygpu.transfer_config()["min_bytes"]
    print(f"PyGPU stages pageable copies of {staged} bytes or more" if staged is not None
          else "PyGPU stages no pageable copy here (transfer_config()['min_bytes'] is None)")

    pageable = np.random.default_rng(0).random(n, dtype=np.float32)
    back = np.empty_like(pageable)
    dev = pygpu.empty(n, np.float32)
    stream = pygpu.Stream(non_blocking=True)

    # 1. Pageable memory, the runtime's own path: staging off for a moment
    #    (min_bytes=None: no pageable copy is staged by PyGPU).
    saved = pygpu.transfer_config()["min_bytes"]
    pygpu.transfer_config(min_bytes=None)
    try:
        print("pageable (NumPy) memory, the runtime's own copy:")
        report("H2D  dev.set(pageable)", nbytes, best_of(args.repeat, lambda: dev.set(pageable)))
        report("D2H  dev.get(ary=pageable)", nbytes, best_of(args.repeat, lambda: dev.get(ary=back)))
    finally:
        pygpu.transfer_config(min_bytes=saved)
    assert np.array_equal(back, pageable)

    # 2. Pageable memory through PyGPU's staging pipeline (the default on
    #    GPU backends; on the host backend it is off, as it only adds a copy).
    print("pageable (NumPy) memory, PyGPU's defaults:")
    report("H2D  dev.set(pageable)", nbytes, best_of(args.repeat, lambda: dev.set(pageable)))
    report("D2H  dev.get(ary=pageable)", nbytes, best_of(args.repeat, lambda: dev.get(ary=back)))

    # 3. Page-locked arrays: the async forms only queue the DMA on `stream`;
    #    the host array must be left alone until the stream has passed it.
    src = pygpu.pagelocked_empty(n, np.float32)         # a NumPy array
    dst = pygpu.pagelocked_zeros_like(src)
    src[:] = pageable
    print(f"page-locked memory (pygpu.is_pinned: {pygpu.is_pinned(src)}):")

    def h2d_pinned():
        dev.set_async(src, stream=stream)               # returns at once on a GPU
        stream.synchronize()                            # ... the copy is done here

    def new_array_pinned():
        g = pygpu.to_gpu_async(src, stream=stream)      # a new GPUArray, queued on `stream`
        stream.synchronize()
        return g

    def d2h_pinned():
        dev.get_async(stream=stream, ary=dst)           # into page-locked memory: only queued
        stream.synchronize()                            # ... dst holds the data here

    report("H2D  dev.set_async(pinned, stream)", nbytes, best_of(args.repeat, h2d_pinned))
    report("H2D  pygpu.to_gpu_async(pinned, stream), allocating", nbytes,
           best_of(args.repeat, new_array_pinned))
    report("D2H  dev.get_async(stream, ary=pinned)", nbytes, best_of(args.repeat, d2h_pinned))
    assert np.array_equal(dst, pageable)
    assert np.array_equal(new_array_pinned().get(), pageable)

    # 4. An array that already exists (from a file, from another library):
    #    page-lock it in place instead of copying it into a pinned one.
    #    Registering costs about as much as copying the data once, so it pays
    #    when the array is transferred several times.
    existing = pageable.copy()
    with registered(existing) as pinned:
        print(f"registered in place (pygpu.is_pinned: {pygpu.is_pinned(pinned)}, "
              f"shares memory: {np.shares_memory(pinned, existing)}):")

        def h2d_registered():
            dev.set_async(pinned, stream=stream)
            stream.synchronize()

        report("H2D  dev.set_async(registered, stream)", nbytes, best_of(args.repeat, h2d_registered))
        stream.synchronize()            # nothing may be in flight when it is unregistered
    assert np.array_equal(dev.get(), pageable)
    print("pinned_memory: ok")


if __name__ == "__main__":
    main()
