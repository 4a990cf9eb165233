#!/usr/bin/env python3
# expect: streams_pipeline: ok
"""A chunked host -> device -> host pipeline on two streams, timed with events.

Data goes up in chunks on one stream and comes back down on another.  The
download of chunk i waits for its upload through an event recorded on the
upload stream (ordering on the device, without stopping the host), so it
overlaps the uploads of the chunks after it: GPUs have a copy engine for
each direction.  Events recorded around every copy time each stage.

    python3 examples/streams_pipeline.py [--mib 256] [--chunks 8]

Runs on every backend.  On the host backend copies happen at once, in
order, and events carry the time they were recorded: the pipeline is
correct, if trivially fast, and there is nothing to overlap.
"""
import argparse

import numpy as np

import pygpu


def pipeline(src, dev, dst, chunks, up, down):
    """Copy page-locked `src` to the device array `dev` and back into
    page-locked `dst` in `chunks` pieces: uploads on stream `up`, downloads
    on stream `down`.

    Returns the events: `start`, `end` and, for each chunk, the four events
    around its upload and its download."""
    n = src.size
    bounds = np.linspace(0, n, chunks + 1).astype(int)
    pieces = [(lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:])]
    start = pygpu.Event().record(up)

    # 1. Queue every upload.  From page-locked memory set_async only queues
    #    the DMA and returns: leave src alone until `up` has passed it.
    uploads = []
    for lo, hi in pieces:
        up_start = pygpu.Event().record(up)
        dev[lo:hi].set_async(src[lo:hi], stream=up)     # dev[lo:hi]: a view, no copy
        up_end = pygpu.Event().record(up)               # chunk i is on the device
        uploads.append((up_start, up_end))

    # 2. Download each chunk once its upload is done.  wait_event orders
    #    `down` after the event on the device; into page-locked dst,
    #    get_async only queues the DMA, so all of this is queued at once and
    #    the copy engines move chunks up and down at the same time.
    stages = []
    for (lo, hi), (up_start, up_end) in zip(pieces, uploads):
        down.wait_event(up_end)
        down_start = pygpu.Event().record(down)
        dev[lo:hi].get_async(stream=down, ary=dst[lo:hi])
        down_end = pygpu.Event().record(down)
        stages.append((up_start, up_end, down_start, down_end))

    # The end: the last download, which waited for the last upload, which
    # followed all the others on `up`.
    end = pygpu.Event().record(down)
    end.synchronize()
    return start, end, stages


def serial(src, dev, dst, stream):
    """The same copies without overlap: all up, then all down, on one stream."""
    start = pygpu.Event().record(stream)
    dev.set_async(src, stream=stream)
    dev.get_async(stream=stream, ary=dst)
    end = pygpu.Event().record(stream)
    end.synchronize()
    return start.elapsed_time(end)


def gbps(nbytes, ms):
    return nbytes / (ms * 1e6) if ms > 0 else float("inf")


def main():
    gpu = pygpu.backend != "host"
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, default=256 if gpu else 64, help="MiB moved each way")
    parser.add_argument("--chunks", type=int, default=8)
    args = parser.parse_args()

    n = (args.mib << 20) // 4
    # Page-locked host memory: the only kind that the DMA engines read and
    # write asynchronously (see examples/pinned_memory.py).
    src = pygpu.pagelocked_empty(n, np.float32)
    dst = pygpu.pagelocked_zeros(n, np.float32)
    src[:] = np.random.default_rng(0).random(n, dtype=np.float32)

    up = pygpu.Stream(non_blocking=True)        # non-blocking: no implicit sync
    down = pygpu.Stream(non_blocking=True)      # with the legacy default stream

    # Allocated in `up`'s order (the pool is stream-ordered), so the first
    # upload finds the memory ready; `down` only touches it after an upload.
    dev = pygpu.empty(n, np.float32, stream=up)

    pipeline(src, dev, dst, args.chunks, up, down)      # warm up (driver, first touch)
    dst[:] = 0

    start, end, stages = pipeline(src, dev, dst, args.chunks, up, down)
    assert np.array_equal(dst, src), "the data did not come back intact"

    nbytes = src.nbytes
    chunk_bytes = nbytes // args.chunks
    print(f"backend {pygpu.backend}: {args.mib} MiB each way in {args.chunks} chunks")
    print(f"{'chunk':>5}  {'H2D ms':>8}  {'D2H ms':>8}  {'D2H starts at ms':>16}")
    for i, (u0, u1, d0, d1) in enumerate(stages):
        # elapsed_time: milliseconds between two events (it waits for both).
        print(f"{i:>5}  {u0.elapsed_time(u1):8.3f}  {d0.elapsed_time(d1):8.3f}"
              f"  {start.elapsed_time(d0):16.3f}")
    h2d = sum(u0.elapsed_time(u1) for u0, u1, _, _ in stages)
    d2h = sum(d0.elapsed_time(d1) for _, _, d0, d1 in stages)
    total = start.elapsed_time(end)
    print(f"H2D stages {h2d:.3f} ms ({gbps(nbytes, h2d):.1f} GB/s), "
          f"D2H stages {d2h:.3f} ms ({gbps(nbytes, d2h):.1f} GB/s), "
          f"chunks of {chunk_bytes / 2**20:.2f} MiB")
    print(f"pipeline  {total:.3f} ms ({gbps(2 * nbytes, total):.1f} GB/s both ways together)")

    dst[:] = 0
    t_serial = serial(src, dev, dst, up)
    assert np.array_equal(dst, src)
    ratio = f"{total / t_serial:.2f}" if t_serial > 0 else "-"
    print(f"serial    {t_serial:.3f} ms, everything on one stream: the pipeline takes {ratio} of that")
    print("streams_pipeline: ok")


if __name__ == "__main__":
    main()
