"""Where do transfers from many threads lose?  Aggregate GB/s of N threads
each moving touched pageable memory on a stream of its own, for each
transfer_config setting given, the settings taking turns in processes of
their own, several rounds, medians compared (runs on the shared GPU
machines vary by more than most settings change):

    python tools/research/threads-sweep.py [--threads 8] [--reps 3] [--size 64M] [SETTING ...]

--threads takes several counts, comma-separated (1,2,4,8): each child
process measures them all, and a table is printed for each.

A SETTING is transfer_config keywords, comma-separated: chunk=4M,depth=4 or
threads=4 ('' or 'default': as built), or PYTHONPATH=DIR: another build as
built (a worktree of another commit, built in place), to compare builds the
same way, or other environment assignments (PYGPU_X=1 Y=2, space-separated).
Default settings: as built, chunk 2M/4M/8M, threads 4/8.  Each cell: median GB/s (ratio to raw pinned
cudaMemcpy of the same process) [lowest-highest].
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

# (this checkout's bench_scale measures every build alike, whichever pygpu it imports)
CHILD = r"""
import importlib.util, json, sys
import pygpu
spec = importlib.util.spec_from_file_location("bench_scale_here", sys.argv[4])
bench_scale = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench_scale)
measure_threads = bench_scale.measure_threads
setting, counts, size = sys.argv[1], [int(n) for n in sys.argv[2].split(",")], int(sys.argv[3])
if setting not in ("", "default"):
    pygpu.transfer_config(**{k: int(v) for k, v in (kv.split("=") for kv in setting.split(","))})
r, ceil = measure_threads(nbytes=size, counts=counts, peers=(), budget=0.6)
built = [getattr(m, "__file__", None) or "" for k, m in sys.modules.items() if k.startswith("pygpu.")]
built = [f for f in built if f.endswith(".so")] or [pygpu.__file__]    # (the compiled backend, where one loaded)
print(json.dumps({"pygpu": built[0], **{f"{d} {n}": [v[n], ceil.get(d)] for (lib, d), v in r.items() for n in counts}}))
"""


def size_arg(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(text[:-1]) * units[text[-1]]) if text[-1] in units else int(text)


def is_environment(setting):
    """PYTHONPATH=DIR, PYGPU_X=1 Y=2: environment assignments, not transfer_config keywords."""
    return setting.split("=")[0].isupper()


def setting_arg(text):
    """'chunk=4M,depth=4' with sizes spelled out in bytes for the child."""
    if text == "default":
        return ""
    if text == "" or is_environment(text):
        return text
    return ",".join(f"{k}={size_arg(v)}" for k, v in (kv.split("=") for kv in text.split(",")))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", default="8", help="a count, or several: 1,2,4,8")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--size", default="64M")
    ap.add_argument("settings", nargs="*",
                    default=["default", "chunk=2M", "chunk=4M", "chunk=8M", "threads=4", "threads=8"])
    args = ap.parse_args(argv)
    settings = [setting_arg(s) for s in args.settings]
    counts = [int(n) for n in args.threads.split(",")]
    res = {s: {} for s in settings}
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    for _ in range(args.reps):
        for s in settings:
            assign = dict(kv.split("=", 1) for kv in s.split()) if is_environment(s) else {}
            build = assign.pop("PYTHONPATH", root)
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [build, os.environ.get("PYTHONPATH")])))
            env.update(assign)
            p = subprocess.run([sys.executable, "-c", CHILD, "" if build != root or assign else s,
                                ",".join(map(str, counts)),
                                str(size_arg(args.size)), os.path.join(root, "pygpu", "bench_scale.py")],
                               env=env, capture_output=True, text=True, cwd=here)
            if p.returncode != 0:
                print(f"{s or 'default'}: failed: {p.stderr[-2000:]}", file=sys.stderr)
                return 1
            got = json.loads(p.stdout.strip().splitlines()[-1])
            where = os.path.realpath(got.pop("pygpu"))
            if build != root and not where.startswith(os.path.realpath(build) + os.sep):
                print(f"{s}: measured the pygpu at {where}, not the one in {build} (is it built there?)",
                      file=sys.stderr)
                return 1
            for d, (gbs, ceil) in got.items():
                res[s].setdefault(d, []).append((gbs, ceil))
    for n in counts:
        print(f"{n} threads, {args.size} each: median GB/s (ratio to raw pinned) [lowest-highest]")
        print(f"{'setting':<24}{'H2D':>28}{'D2H':>28}")
        for s in settings:
            cells = []
            for d in ("H2D", "D2H"):
                v = res[s].get(f"{d} {n}", [])
                if not v:
                    cells.append("-")
                    continue
                gbs = [g for g, _ in v]
                ceils = [c for _, c in v if c]
                ratio = f" ({statistics.median(gbs) / statistics.median(ceils):.2f})" if ceils else ""
                cells.append(f"{statistics.median(gbs):.1f}{ratio} [{min(gbs):.0f}-{max(gbs):.0f}]")
            print(f"{s or 'default':<24}" + "".join(f"{c:>28}" for c in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
