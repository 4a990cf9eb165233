"""Did the mover's page-locking for the pool (a warm task: freeing an
evicted block, then page-locking one) wait for a stream that holds a gated
upload queued behind it?  Those gates wait for the mover's copies: if the
runtime's free or allocation waits for the device, the two wait for each
other, and the process hangs.  Since 2026-11-29 a thread of its own (the
warmer) makes those blocks; against a build before it (43940e9, say,
unpacked with `git archive` into .ab-base and built there) it tells
whether the old order could (on an H200 it never hung: docs/performance.md,
"The warmer"):

    timeout 60 python tools/research/warm-beside-gates.py [ROUNDS]   (a hang: exit 124)
    PYTHONPATH=.ab-base timeout 60 python tools/research/warm-beside-gates.py

Blocks of 64 MiB (a ring), 24 MiB and 16 MiB cached; a pool limit that a
32 MiB block fits only by evicting the 24 MiB one.  Each round: a 256 MiB
upload on a stream of its own (a ring: the mover busy for milliseconds),
then a 32 MiB one (no block: staged, and a warm task queued behind the
ring), then a 16 MiB one (its block cached: gated on the stream, queued
behind the warm task), each call timed, and the stream waited for.  Then
what an eviction costs the caller (the device idle, then busy), and the
first upload of a size (a miss) against the next."""
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
    t = [time.perf_counter()]
    g0 = pygpu.to_gpu_async(hr, stream=s0)
    t.append(time.perf_counter())
    gb = pygpu.to_gpu_async(hb, stream=s)
    t.append(time.perf_counter())
    ga = pygpu.to_gpu_async(ha, stream=s)
    t.append(time.perf_counter())
    s.synchronize()
    t.append(time.perf_counter())
    settle()
    ok = bool((ga.get() == 1).all() and (gb.get() == 2).all() and (g0.get() == 4).all())
    ms = [f"{1e3 * (b - a):.1f}" for a, b in zip(t, t[1:])]
    print(f"round {r}: calls (ring, miss, gated) {ms[0]}, {ms[1]}, {ms[2]} ms, the stream done "
          f"{ms[3]} ms after; data {'right' if ok else 'WRONG'}; cached at the start "
          f"{st['cached'] >> 20} MiB, now {pygpu.pinned_pool_stats()['cached'] >> 20} MiB", flush=True)

# Does freeing a cached block (an eviction's cudaFreeHost, here on this
# thread) wait for the device?  Timed with the device idle, and with a 256
# MiB upload just queued on a stream of its own.
for r in range(3):
    for busy in (0, 1):
        pygpu.set_pinned_pool_limit(1 << 34)
        pygpu.to_gpu_async(hc, stream=s)
        settle()
        cached = pygpu.pinned_pool_stats()["cached"]
        if busy:
            g0 = pygpu.to_gpu_async(hr, stream=s0)
        t = time.perf_counter()
        pygpu.set_pinned_pool_limit(max(0, cached - C))
        freed = time.perf_counter() - t
        settle()
        print(f"evicting {C >> 20} MiB with the device {'busy' if busy else 'idle'}: {1e3 * freed:.2f} ms",
              flush=True)

# A first upload of a size (a miss: staged on this thread while a block is
# page-locked for the next, no eviction), then the next upload of that size.
pygpu.set_pinned_pool_limit(1 << 34)
for r in range(3):
    for n in (12 * MiB, 40 * MiB):
        h = np.full(n + r * 3 * MiB, 5, np.uint8)
        t = time.perf_counter()
        g = pygpu.to_gpu_async(h, stream=s)
        miss = time.perf_counter() - t
        settle()
        t = time.perf_counter()
        g = pygpu.to_gpu_async(h, stream=s)
        hit = time.perf_counter() - t
        settle()
        print(f"first upload of {h.nbytes >> 20} MiB (a miss) {1e3 * miss:.2f} ms, the next {1e3 * hit:.2f} ms; "
              f"data {'right' if (g.get() == 5).all() else 'WRONG'}", flush=True)
print("done")
