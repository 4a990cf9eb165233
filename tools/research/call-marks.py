"""Where a small staged transfer's microseconds go, untraced: a build with
marks (src/marks.h) notes the time at fixed points of each call, and this
prints, for `set` and `get(ary)` of touched pageable memory (registration
off, as bench --scale's mid-size table), the median time between each mark
and the next, beside the bare loop's whole transfer.

    CFLAGS=-DPYGPU_MARKS python setup.py build_ext --inplace
    python tools/research/call-marks.py [--reps N] [--after [--sections LIST]] [SIZE ...]     (default 64K 256K 1M)

With --after: measured, then bench --scale's "beside" and fresh-destination
sections run (a thread moving 1 GiB beside 1 MiB copies, downloads into
fresh 256 MiB arrays), then measured again: in the whole --scale run the
mid-size calls come out slower than in a fresh process.  --sections takes
a comma-separated list of the sections to run, measured again after each,
in turn: threads (registration off, with CuPy's and PyTorch's rows, as
the whole run has them), threads-own (PyGPU's alone), registered (the
pygpu* rows: the defaults, each thread's buffer page-locked in place),
async, beside, fresh, mid (the mid-size table itself, printed); a+b runs
two before measuring (default beside+fresh).

The marks (a mark a call does not pass is left out):
   0 the method entered (arguments not yet parsed)
   1 the host array ready, pygpu_copy called
   2 pygpu_copy entered
   3 the device entered, the capture checked
   4 the registration checked, the GIL about to be released
   5 the route chosen: staged
   6 a lane taken (staging_take)
   7 its buffers free (buffers_free)
   8 up: the host copy joined; down: the DMA queued
   9 up: the DMA queued; down: its event waited for
  10 up: the stream waited for; down: the copy out joined
  11 the GIL taken back
  12 pygpu_copy returning
  13 the method returning
and "python" is the time from the caller's clock before the call to mark 0
plus mark 13 to its clock after.
"""
import argparse
import os
import time

import numpy as np

NAMES = {
    0: "method entered", 1: "host array ready", 2: "pygpu_copy entered", 3: "device, capture",
    4: "registration, GIL to release", 5: "route: staged", 6: "lane taken", 7: "buffers free",
    8: "up: host copy / down: DMA queued", 9: "up: DMA queued / down: DMA waited",
    10: "up: stream waited / down: copy out", 11: "GIL back", 12: "pygpu_copy returning", 13: "method returning",
}


def main():
    import pygpu
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--after", action="store_true")
    ap.add_argument("--sections", default="beside+fresh")
    ap.add_argument("sizes", nargs="*", default=["64K", "256K", "1M"])
    args = ap.parse_args()
    lib = pygpu.backend_module
    if lib._marks() is None:
        raise SystemExit("call-marks: build with CFLAGS=-DPYGPU_MARKS first")
    measure(args, lib)
    print(f"== threads in the process: {threads()}")
    for name in args.sections.split(",") if args.after else ():
        for part in name.split("+"):
            SECTIONS[part]()
        print(f"== after bench --scale's {name} section; threads in the process: {threads()}")
        measure(args, lib)


def _sections():
    import pygpu
    from pygpu import bench_scale

    from pygpu.bench import registration

    def threads_section(peers, limit=0, **kw):      # (registration off, as the whole run's threads table)
        def run():
            with registration(pygpu.transfer_config()["register_limit"] if limit is None else limit):
                bench_scale.measure_threads(64 << 20, (1, 2, 4, 8), peers, None, 0.5, **kw)
        return run

    def both_ways(fn):
        return lambda: [fn(n, 0.5, down=d) for d in (False, True) for n in (16 << 20, 64 << 20, 256 << 20)]
    return {
        "threads": threads_section(("cupy", "torch")),
        "threads-own": threads_section(()),
        "registered": threads_section((), None, ceilings=False),      # (the pygpu* rows: the defaults, met again: registered)
        "async": both_ways(bench_scale.async_overlap),
        "beside": lambda: bench_scale.latency_beside(budget=0.3, own_streams=True),
        "fresh": lambda: bench_scale.fresh_downloads((256 << 20,), 0.3),
        "mid": lambda: print(bench_scale.mid_size_table(bench_scale.mid_size())),
    }


class _Lazy(dict):
    def __missing__(self, key):
        self.update(_sections())
        return self[key]


SECTIONS = _Lazy()


def threads():
    """The process's threads (PyGPU's workers among them), where Linux tells."""
    return len(switches()) or "?"


def switches():
    """{thread id: (voluntary, involuntary context switches, last CPU)} of
    the process's threads, where Linux tells."""
    out = {}
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/status") as f:
                v = {k: int(x) for k, x in (ln.split(":") for ln in f if "ctxt_switches" in ln)}
            with open(f"/proc/self/task/{tid}/stat") as f:
                cpu = int(f.read().rsplit(")", 1)[1].split()[36])
        except (OSError, ValueError, IndexError):
            continue
        out[tid] = (v.get("voluntary_ctxt_switches", 0), v.get("nonvoluntary_ctxt_switches", 0), cpu)
    return out


def switched(before, after, calls):
    """What the threads did while `calls` calls ran: the threads that slept
    (voluntary switches) or were preempted (involuntary) at least once in
    ten calls, with their counts, and the CPUs the threads were last on."""
    busy = []
    for tid, (v, nv, cpu) in after.items():
        v0, nv0, _ = before.get(tid, (0, 0, cpu))
        if (v - v0) * 10 >= calls or (nv - nv0) * 10 >= calls:
            busy.append(f"{v - v0}/{nv - nv0}@{cpu}")
    cpus = sorted(c for _, _, c in after.values())
    return (f"threads sleeping or preempted at least once in ten calls (voluntary/involuntary@cpu): "
            f"{' '.join(busy) or 'none'}; last CPUs of all {len(cpus)}: {cpus}")


def measure(args, lib):
    """Each size's set and get(ary): the median time of each step, beside the bare loop's."""
    import pygpu
    from pygpu.bench import pageable_array, parse_size, registration, size_name
    with registration(0):
        for n in map(parse_size, args.sizes):
            h, out = pageable_array(n), pageable_array(n)
            g = pygpu.to_gpu(h)
            for name, fn in (("set", lambda: g.set(h)), ("get(ary)", lambda: g.get(ary=out))):
                steps, total, first = {}, [], []
                for i in range(args.reps + 50):
                    if i == 50:
                        seen_before = switches()
                    t0 = time.perf_counter_ns()
                    fn()
                    t1 = time.perf_counter_ns()
                    m = lib._marks()
                    if i < 50:
                        first.append(t1 - t0)
                        continue
                    total.append(t1 - t0)
                    seen = [k for k in range(len(m)) if m[k]]
                    for a, b in zip(seen, seen[1:]):
                        steps.setdefault((a, b), []).append(m[b] - m[a])
                    steps.setdefault("python", []).append((t1 - t0) - (m[13] - m[0]))
                seen_after = switches()
                up = name == "set"
                bare = lib._bare_loop(up, n, 1, args.reps) * 1e6
                print(f"== {name} {size_name(n)}: median {np.median(total) / 1e3:.2f} us "
                      f"(bare loop, 1 window: {bare:.2f} us; the first 50 calls, not counted: "
                      f"median {np.median(first) / 1e3:.2f} us, mean {np.mean(first) / 1e3:.2f})")
                print(f"   {switched(seen_before, seen_after, args.reps)}")
                for key, v in steps.items():
                    label = key if isinstance(key, str) else f"{key[0]:>2} -> {key[1]:>2}  {NAMES[key[1]]}"
                    print(f"   {label:<48} {np.median(v) / 1e3:7.2f} us")


if __name__ == "__main__":
    main()
