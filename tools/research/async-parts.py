"""Where an asynchronous call's time goes, in C: to_gpu_async and get_async
of touched pageable memory (16 and 64 MiB by default), each call waited
for after, with PYGPU_STAGING_TRACE=1 (its background tasks print the
time of each part of the call: task and block, event(s), hand-over to the
mover or lander, the chunks' runtime calls, the end), run again in a child
process with the trace on; prints each part's median of `reps` calls, and
the whole call's time from Python.

    python tools/research/async-parts.py [reps] [sizes in MiB, comma-separated]
"""
import os
import re
import statistics
import subprocess
import sys

CHILD = r"""
import sys, time, numpy as np, pygpu
reps, sizes = int(sys.argv[1]), [int(x) for x in sys.argv[2].split(",")]
s = pygpu.Stream()
for n in sizes:
    host = np.random.default_rng(0).integers(0, 255, n << 20, dtype=np.uint8)
    g = pygpu.to_gpu(host)
    for name, fn in (("up", lambda: pygpu.to_gpu_async(host, stream=s)),
                     ("down", lambda: g.get_async(stream=s, ary=host))):
        for _ in range(3):
            fn(); s.synchronize()
        print(f"## {name} {n}", file=sys.stderr, flush=True)
        calls = []
        for _ in range(reps):
            t0 = time.perf_counter(); out = fn(); t1 = time.perf_counter(); s.synchronize(); del out
            calls.append(t1 - t0)
        calls.sort()
        print(f"## python {name} {n} {calls[len(calls) // 2] * 1e6:.1f}", file=sys.stderr, flush=True)
"""

# Untraced, in this process: the calls, and the pieces around them that no trace shows.
BARE = r"""
import sys, time, numpy as np, pygpu
reps, sizes = int(sys.argv[1]), [int(x) for x in sys.argv[2].split(",")]
s = pygpu.Stream()
def med(fn):
    for _ in range(3):
        fn(); s.synchronize()
    t = []
    for _ in range(reps):
        t0 = time.perf_counter(); out = fn(); t1 = time.perf_counter(); s.synchronize(); del out
        t.append(t1 - t0)
    return sorted(t)[len(t) // 2] * 1e6
for n in sizes:
    host = np.random.default_rng(0).integers(0, 255, n << 20, dtype=np.uint8)
    g = pygpu.to_gpu(host)
    print(f"{n:4d} MiB untraced (us): to_gpu_async {med(lambda: pygpu.to_gpu_async(host, stream=s)):.1f}, "
          f"set_async {med(lambda: g.set_async(host, stream=s)):.1f}, "
          f"get_async {med(lambda: g.get_async(stream=s, ary=host)):.1f}, "
          f"empty {med(lambda: pygpu.empty(n << 20, np.uint8, stream=s)):.1f}, "
          f"record {med(lambda: s.record()):.1f}", flush=True)
"""


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    sizes = sys.argv[2] if len(sys.argv) > 2 else "16,64"
    env = dict(os.environ, PYGPU_STAGING_TRACE="1")
    out = subprocess.run([sys.executable, "-c", CHILD, str(reps), sizes], env=env, capture_output=True, text=True,
                         timeout=600)
    case, parts, head = None, {}, {}
    for line in out.stderr.splitlines():
        if line.startswith("## python"):
            _, _, name, n, us = line.split()
            cols = {k: statistics.median(v) for k, v in parts.items()}
            print(f"{name:>4} {n:>4} MiB: {head.get(case, '')}")
            print("   " + ", ".join(f"{k} {v:.1f}" for k, v in cols.items()) + f"; the call from Python {us} us")
            parts = {}
        elif line.startswith("## "):
            case = line[3:]
        elif "in the call (us):" in line and case:
            what, _, times = line.partition("; in the call (us):")
            head[case] = what
            for name, v in re.findall(r"([a-z][a-z -]*?) (\d+\.\d+)", times):
                parts.setdefault(name.strip(), []).append(float(v))
    if out.returncode:
        print(out.stderr[-3000:])
        return out.returncode
    return subprocess.run([sys.executable, "-c", BARE, str(reps), sizes], timeout=600).returncode


if __name__ == "__main__":
    sys.exit(main())
