"""get() of arrays of 1 MiB or more comes from the pinned pool; where no
cached block fits (a size met for the first time, or a program that keeps
its results, so that none goes back), the pool page-locks a new block on
the caller's thread.  What does a get() cost then, against one whose block
comes back each time, and against a get into fresh or touched NumPy memory?

    python tools/research/get-held.py [ROUNDS]

GB/s, best of ROUNDS, each round 4 gets of each size; then, for the kept
results, which of the 4 were page-locked (from the pool)."""
import sys, time
import numpy as np
import pygpu

MiB = 1 << 20
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
for n in (4 * MiB, 16 * MiB, 64 * MiB, 256 * MiB):
    g = pygpu.to_gpu(np.ones(n, np.uint8))
    touched = np.ones(n, np.uint8)
    ways = {
        "get(), each result dropped": lambda: g.get(),
        "get(), the results kept": None,
        "get(ary=np.empty(...))": lambda: g.get(ary=np.empty(n, np.uint8)),
        "get(ary=touched)": lambda: g.get(ary=touched),
    }
    for name, f in ways.items():
        best = 0
        for r in range(rounds):
            kept = []
            g.get(ary=touched)              # (the staging buffers made)
            if f is None:                   # (no cached block: as for a size met first; the
                limit = pygpu.pinned_pool_stats()["limit"]     # staging buffers kept, unlike a trim's)
                pygpu.set_pinned_pool_limit(0)
                pygpu.set_pinned_pool_limit(limit)
            else:
                f()                         # (a dropped get's block back in the pool)
            t = time.perf_counter()
            for _ in range(4):
                if f is None:
                    kept.append(g.get())
                else:
                    f()
            best = max(best, 4 * n / (time.perf_counter() - t) / 1e9)
            pinned = "".join("p" if pygpu.is_pinned(k) else "-" for k in kept)
            del kept
        print(f"{n >> 20:4d} MiB  {name:28s} {best:6.1f} GB/s {pinned}", flush=True)
