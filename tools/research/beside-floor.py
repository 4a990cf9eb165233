"""How long a 1 MiB upload takes beside a thread uploading 1 GiB at a time,
from page-locked memory (a plain DMA: the floor) and from pageable memory
(staged), each thread on a non-blocking stream of its own.

    python tools/research/beside-floor.py [--rounds N]

Each line: the small upload's median time alone, beside the big one, and
the ratio, for the four pairs of sources (small from pinned or pageable,
big from pinned or pageable), the pairs taking turns for N rounds.
"""
import argparse
import statistics
import threading
import time

import numpy as np

import pygpu
from pygpu.bench import pageable_array

MiB, GiB = 1 << 20, 1 << 30


def small_times(g, host, s, seconds):
    times = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(times) < 5:
        t0 = time.perf_counter()
        g.set(host, stream=s)
        s.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--big", type=int, default=GiB)
    ap.add_argument("--seconds", type=float, default=0.5)
    args = ap.parse_args(argv)
    src = {"pinned": {}, "pageable": {}}
    for n in (MiB, args.big):
        src["pageable"][n] = pageable_array(n)
        p = pygpu.pagelocked_empty(n, np.uint8)
        p[...] = 1
        src["pinned"][n] = p
    g_small, g_big = pygpu.empty(MiB, np.uint8), pygpu.empty(args.big, np.uint8)
    s_small, s_big = pygpu.Stream(non_blocking=True), pygpu.Stream(non_blocking=True)
    res = {}
    for _ in range(args.rounds):
        for small_kind in ("pinned", "pageable"):
            for big_kind in ("pinned", "pageable"):
                alone = small_times(g_small, src[small_kind][MiB], s_small, args.seconds / 2)
                stop = threading.Event()

                def mover():
                    while not stop.is_set():
                        g_big.set(src[big_kind][args.big], stream=s_big)
                        s_big.synchronize()

                t = threading.Thread(target=mover, daemon=True)
                t.start()
                time.sleep(0.05)
                beside = small_times(g_small, src[small_kind][MiB], s_small, args.seconds)
                stop.set()
                t.join()
                res.setdefault((small_kind, big_kind), []).append((alone, beside))
    for (small_kind, big_kind), v in res.items():
        alone = statistics.median(a for a, _ in v)
        beside = statistics.median(b for _, b in v)
        ratios = [b / a for a, b in v]
        print(f"1 MiB from {small_kind:>8} beside {args.big // MiB} MiB from {big_kind:>8}: "
              f"{alone * 1e6:6.1f} us alone, {beside * 1e6:6.1f} us beside ({beside / alone:.2f}x; "
              f"rounds {min(ratios):.2f}-{max(ratios):.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
