"""Did the mover's page-locking for the pool (a warm task: cudaFreeHost of
an evicted block, then cudaHostAlloc) wait for a stream that holds a gated
upload queued behind it?  Those gates wait for the mover's copies: if the
runtime's free or allocation waits for the device, the two wait for each
other, and the process hangs.  Since 2026-11-29 a thread of its own (the
warmer) makes those blocks, and this build should never hang; against a
build before it (43940e9, say, unpacked with `git archive` into .ab-base
and built there) it tells whether the old order could:

    timeout 60 python tools/research/warm-beside-gates.py [ROUNDS]   (a hang: exit 124)
    PYTHONPATH=.ab-base timeout 60 python tools/research/warm-beside-gates.py

Blocks of 64 MiB (a ring), 24 MiB and 16 MiB cached; a pool limit that a
32 MiB block fits only by evicting the 24 MiB one.  Each round: a 256 MiB
upload on a stream of its own (a ring: the mover busy for milliseconds),
then a 32 MiB one (no block: staged, and a warm task queued behind the
ring), then a 16 MiB one (its block cached: gated on the stream, queued
behind the warm task), and the stream waited for."""
import sys, time
import numpy as np
import pygpu

MiB = 1 << 20
A, B, C, R = 16 * MiB, 32 * MiB, 24 * MiB, 256 * MiB
pygpu.transfer_config(min_bytes=0)
s, s0 = pygpu.Stream(), pygpu.Stream()
ha, hb, hc, hr = (np.full(n, k, np.uint8) for k, n in ((1, A), (2, B), (3, C), (4, R)))


def settle():
    end = time.monotonic() + 30
    while pygpu.pinned_pool_stats()["background"] and time.monotonic() < end:
        time.sleep(0.002)
    s.synchronize()
    s0.synchronize()


for r in range(int(sys.argv[1]) if len(sys.argv) > 1 else 6):
    pygpu.set_pinned_pool_limit(1 << 34)
    for h in (hr, hc, ha):
        for _ in range(2):
            pygpu.to_gpu_async(h, stream=s)
            settle()
    st = pygpu.pinned_pool_stats()
    pygpu.set_pinned_pool_limit(st["in_use"] + st["cached"] - C + B)
    t = time.perf_counter()
    g0 = pygpu.to_gpu_async(hr, stream=s0)
    gb = pygpu.to_gpu_async(hb, stream=s)
    ga = pygpu.to_gpu_async(ha, stream=s)
    queued = time.perf_counter() - t
    s.synchronize()
    waited = time.perf_counter() - t
    settle()
    ok = bool((ga.get() == 1).all() and (gb.get() == 2).all() and (g0.get() == 4).all())
    print(f"round {r}: queued in {1e3 * queued:.1f} ms, stream done after {1e3 * waited:.1f} ms, data "
          f"{'right' if ok else 'WRONG'}; cached at the start {st['cached'] >> 20} MiB, now "
          f"{pygpu.pinned_pool_stats()['cached'] >> 20} MiB", flush=True)
print("done")
