"""Where does a download into fresh memory lose?  On this machine:

1. how fast the kernel faults in fresh anonymous memory (MADV_POPULATE_WRITE),
   in 4 KiB pages and after MADV_HUGEPAGE, from 1, 4 and all the staging
   threads at once, each its own part (GB/s of memory made ready);
2. how fast the host copies into touched memory from as many threads (the
   copy-out of a download, for comparison);
3. get(ary=...) of SIZE into a fresh NumPy array (NumPy advises huge pages
   for its own buffers of 4 MiB or more), into a fresh anonymous mapping
   (no advice of its own), and into touched memory, with the ratio to raw
   pinned cudaMemcpy where there is a GPU, and the time of a fresh get
   split into np.empty, the get and the free.  (PYGPU_STAGING_TRACE=1 set
   before the start traces each get on stderr.)

    python tools/research/fresh-pages.py [SIZE ...]      default 64M 256M
"""
import ctypes
import mmap
import os
import sys
import threading
import time

import numpy as np

MADV_HUGEPAGE, MADV_POPULATE_WRITE = 14, 23
libc = ctypes.CDLL(None, use_errno=True)
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]


def thp_settings():
    out = {}
    for name in ("enabled", "defrag"):
        try:
            with open(f"/sys/kernel/mm/transparent_hugepage/{name}") as f:
                out[name] = f.read().strip()
        except OSError:
            out[name] = "?"
    return out


def in_threads(part, nthreads):
    """Seconds for part(k), k in [0, nthreads), each on a thread of its own."""
    threads = [threading.Thread(target=part, args=(k,)) for k in range(nthreads)]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return time.perf_counter() - t


def private_mapping(n):
    """Private anonymous memory, as malloc gives (mmap.mmap(-1, n) alone is
    shared memory, which faults in differently)."""
    return mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)


def populate_rate(n, nthreads, huge):
    """GB/s of fresh memory faulted in by nthreads threads (ctypes calls
    release the GIL): a private mapping, with huge pages advised or not,
    or (huge == "numpy") a new NumPy array."""
    if huge == "numpy":
        m = np.empty(n, np.uint8)
        view, base = None, (m.ctypes.data + 4095) & ~4095
        n -= base - m.ctypes.data
        n &= ~4095
    else:
        m = private_mapping(n)
        view = ctypes.c_char.from_buffer(m)
        base = ctypes.addressof(view)
    if huge is True:
        lo = (base + (2 << 20) - 1) & ~((2 << 20) - 1)
        libc.madvise(lo, (base + n - lo) & ~((2 << 20) - 1), MADV_HUGEPAGE)
    per = (n // nthreads + (2 << 20) - 1) & ~((2 << 20) - 1)
    errors = []

    def part(k):
        a, b = k * per, min(n, (k + 1) * per)
        if a < b and libc.madvise(base + a, b - a, MADV_POPULATE_WRITE) != 0:
            errors.append(ctypes.get_errno())
    took = in_threads(part, nthreads)
    del view
    if huge != "numpy":
        m.close()
    return None if errors else n / took / 1e9


def copy_rate(n, nthreads):
    src, dst = np.ones(n, np.uint8), np.zeros(n, np.uint8)
    per = n // nthreads

    def part(k):
        np.copyto(dst[k * per:(k + 1) * per], src[k * per:(k + 1) * per])   # (releases the GIL)
    return max(n / in_threads(part, nthreads) / 1e9 for _ in range(3))


def main(argv):
    sizes = [s for s in argv] or ["64M", "256M"]
    import pygpu
    from pygpu import bench
    nthreads = pygpu.transfer_config()["threads"]
    print("THP:", thp_settings(), f"cpus {os.cpu_count()}, staging threads {nthreads}")
    n = 256 << 20
    for threads in sorted({1, 2, 4, nthreads}):
        cells = []
        for huge in (False, True, "numpy"):
            rates = [populate_rate(n, threads, huge) for _ in range(3)]
            cells.append("-" if None in rates else f"{min(rates):.1f}-{max(rates):.1f}")
        print(f"populate 256 MiB, {threads:>2} threads: 4 KiB pages {cells[0]:>10} GB/s, "
              f"huge pages advised {cells[1]:>10}, a new NumPy array {cells[2]:>10}; "
              f"copy into touched memory {copy_rate(n, threads):.1f} GB/s")
    raw = bench.RawCuda()
    for label in sizes:
        size = bench.parse_size(label)
        g = pygpu.to_gpu(bench.pageable_array(size))
        touched = bench.pageable_array(size)
        maps = []

        def into_mapping():
            m = private_mapping(size)
            maps.append(m)
            a = np.frombuffer(m, np.uint8)
            g.get(ary=a)
            del a
            if len(maps) > 2:
                maps.pop(0).close()
        cases = {"fresh NumPy array": lambda: g.get(ary=np.empty(size, np.uint8)),
                 "fresh anonymous mapping": into_mapping,
                 "touched": lambda: g.get(ary=touched)}
        ceil = None
        if raw.available():
            fn, keep = raw.case("D2H", size)
            ceil = size / bench.time_case(fn, size, 0.3) / 1e9
        for name, fn in cases.items():
            gbs = size / bench.time_case(fn, size, 0.3) / 1e9
            print(f"get(ary={name}) {label}: {gbs:.1f} GB/s" + (f" ({gbs / ceil:.2f})" if ceil else ""))
        del maps[:]
        # where the time of a fresh get goes: the allocation, the get, the free
        t = [0.0, 0.0, 0.0]
        for _ in range(10):
            t0 = time.perf_counter()
            a = np.empty(size, np.uint8)
            t1 = time.perf_counter()
            g.get(ary=a)
            t2 = time.perf_counter()
            del a
            t3 = time.perf_counter()
            for i, d in enumerate((t1 - t0, t2 - t1, t3 - t2)):
                t[i] += d / 10
        print(f"fresh get {label}, mean of 10: np.empty {t[0] * 1e3:.2f} ms, get {t[1] * 1e3:.2f} ms "
              f"({size / t[1] / 1e9:.1f} GB/s), free {t[2] * 1e3:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
