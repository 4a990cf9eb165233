"""Does where a host array begins (its address modulo a page) change what a
staged set / get(ary) of it costs?  For each size, views of one touched
buffer at several offsets from a page boundary, registration off, the median
of each call; also where NumPy puts a new array of the size now.

    python tools/research/offset-sweep.py [--reps N] [--after] [SIZE ...]   (default 64K 256K 1M)
"""
import argparse
import time

import numpy as np

OFFSETS = (0, 16, 64, 256, 1024, 2048, 3072, 4032, 4080)


def median_us(fn, reps):
    t = []
    for i in range(reps + 50):
        t0 = time.perf_counter_ns()
        fn()
        if i >= 50:
            t.append(time.perf_counter_ns() - t0)
    return np.median(t) / 1e3


def main():
    import pygpu
    from pygpu.bench import parse_size, registration, size_name
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("sizes", nargs="*", default=["64K", "256K", "1M"])
    ap.add_argument("--after", action="store_true",
                    help="first run bench --scale's beside and fresh-destination sections, as call-marks.py --after")
    args = ap.parse_args()
    if args.after:
        from pygpu import bench_scale
        bench_scale.latency_beside(budget=0.3, own_streams=True)
        bench_scale.fresh_downloads((256 << 20,), 0.3)
        print("== after bench --scale's beside and fresh-destination sections")
    with registration(0):
        for n in map(parse_size, args.sizes):
            fresh = np.empty(n, np.uint8)
            base = np.ones(n + 3 * 4096, np.uint8)
            start = (-base.ctypes.data) % 4096
            g = pygpu.to_gpu(np.zeros(n, np.uint8))
            print(f"== {size_name(n)}: a new np.empty of it begins at {fresh.ctypes.data % 4096} of its page")
            for off in OFFSETS:
                v = base[start + off:start + off + n]
                up = median_us(lambda: g.set(v), args.reps)
                down = median_us(lambda: g.get(ary=v), args.reps)
                print(f"   offset {off:>5}: set {up:7.2f} us   get(ary) {down:7.2f} us")


if __name__ == "__main__":
    main()
