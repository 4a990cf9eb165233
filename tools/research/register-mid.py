"""Is page-locking in place worth it below 4 MiB (PYGPU_REGISTER_MIN)?  On
this machine, for each size:

1. what registering a touched buffer's whole pages costs, and letting them
   go (cudaHostRegister / cudaHostUnregister through pygpu.lowlevel),
   medians of 20;
2. a buffer met again and again: to_gpu(x) and g.get(ary=x), staged
   (register_limit=0) and with the defaults (page-locked in place once 64
   MiB have moved through it, where the build's minimum allows), beside raw pinned
   cudaMemcpy, medians, GB/s and ratio to raw;
3. a buffer met exactly twice (a new array each pair): the pair's time,
   staged and with the defaults (where the second meeting registers, it
   pays the registration, and the owner's end its release).

    python tools/research/register-mid.py [SIZE ...]      default 64K 256K 1M 2M 4M 16M
"""
import gc
import os
import statistics
import sys
import time

import pygpu
from pygpu.bench import MiB, RawCuda, pageable_array, parse_size, registration, size_name, time_case

ll = pygpu.backend_module                 # (its raw _host_register, _host_unregister)

PAGE = os.sysconf("SC_PAGESIZE")


def inside(a):
    lo = -a.ctypes.data % PAGE
    return a.ctypes.data + lo, (a.size - lo) // PAGE * PAGE


def register_cost(n, reps=20):
    """(register, unregister) median seconds of a touched buffer's whole pages."""
    a = pageable_array(n + 2 * PAGE)
    p, length = inside(a)
    reg, unreg = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        err = ll._host_register(p, length)
        t1 = time.perf_counter()
        if err:
            raise RuntimeError(f"register failed: {err}")
        ll._host_unregister(p)
        t2 = time.perf_counter()
        reg.append(t1 - t0)
        unreg.append(t2 - t1)
    return statistics.median(reg), statistics.median(unreg)


def met_twice(n, up, budget):
    """Median seconds of a pair of transfers of a new buffer."""
    g = pygpu.to_gpu(pageable_array(n))

    def pair():
        x = pageable_array(n)
        if up:
            pygpu.to_gpu(x)
            pygpu.to_gpu(x)
        else:
            g.get(ary=x)
            g.get(ary=x)
        del x
        gc.collect(0)
    return time_case(pair, n, budget)


def main(argv):
    sizes = [parse_size(s) for s in argv] or [64 << 10, 256 << 10, 1 << 20, 2 << 20, 4 << 20, 16 << 20]
    raw = RawCuda()
    print(f"PyGPU {pygpu.__version__}, backend {pygpu.backend}; register_limit "
          f"{pygpu.transfer_config()['register_limit'] >> 20} MiB")
    print(f"{'size':>8} {'reg us':>7} {'unreg':>6} | {'dir':>3} {'raw':>6} {'staged':>13} {'defaults':>13} "
          f"| {'twice: staged us':>16} {'defaults us':>11}")
    for n in sizes:
        r, u = register_cost(n)
        for d in ("H2D", "D2H"):
            rawt = None
            if raw.available():
                fn, keep = raw.case(d, n)
                rawt = time_case(fn, n, 0.3)
                del keep
            x = pageable_array(n)
            g = pygpu.to_gpu(x)
            fn = (lambda: pygpu.to_gpu(x)) if d == "H2D" else (lambda: g.get(ary=x))
            with registration(0):
                staged = time_case(fn, n, 0.3)
            for _ in range(-(-64 * MiB // n)):  # (64 MiB moved: page-locked in place where the build allows)
                fn()
            mine = time_case(fn, n, 0.3)
            with registration(0):
                twice_staged = met_twice(n, d == "H2D", 0.3)
            twice = met_twice(n, d == "H2D", 0.3)

            def cell(t):
                return f"{n / t / 1e9:6.1f}" + (f" ({rawt / t:.2f})" if rawt else "")
            print(f"{size_name(n):>8} {r * 1e6:7.1f} {u * 1e6:6.1f} | {d} {(f'{n / rawt / 1e9:6.1f}' if rawt else '-'):>6} "
                  f"{cell(staged):>13} {cell(mine):>13} | {twice_staged * 1e6:16.1f} {twice * 1e6:11.1f}")
            del g, x
            gc.collect()
    print("registered_stats:", pygpu.registered_stats())


if __name__ == "__main__":
    main(sys.argv[1:])
