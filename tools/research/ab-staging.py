"""Measure the staging pipeline's choices against each other, interleaved.

Runs on these shared machines vary from one to the next by more than most
choices change, so each setting is measured in its own process, the
settings taking turns, several rounds, and the medians compared:

    python tools/research/ab-staging.py [--reps N] [--sizes 16M,64M,...] [--async] [SETTING ...]

A SETTING is environment assignments separated by spaces: for example
PYTHONPATH=/path/to/another/checkout to measure
another build (`git worktree add DIR COMMIT`; it is built in place there
first when it has no build yet), or AB_THREADS=N, AB_THREADS_ALONE=N,
AB_CHUNK=BYTES, AB_DEPTH=N for transfer_config's settings.  The first column is as built.  Each
cell: median GB/s, the ratio to raw pinned cudaMemcpy (as built, same run;
none on the host backend), [lowest-highest].  With --async: how fast
to_gpu_async and get_async of touched pageable memory put the data on
the stream (bytes over the time from the call until the stream has them,
bench_scale.async_overlap), beside the blocking calls, and the call's
share of that time, instead.
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, os, sys
import numpy as np
import pygpu
from pygpu import bench
for key in ("threads", "threads_alone", "chunk", "depth"):      # AB_THREADS=16 and the like: transfer_config
    if os.environ.get("AB_" + key.upper()):
        pygpu.transfer_config(**{key: int(os.environ["AB_" + key.upper()])})
out = {}
raw = bench.RawCuda()
for label in (sys.argv[1:] if os.environ.get("AB_ASYNC") else []):
    from pygpu import bench_scale
    n = bench.parse_size(label)
    if raw.available():
        for d in ("H2D", "D2H"):
            fn, k = raw.case(d, n)
            out[f"raw {d} {label}"] = n / bench.time_case(fn, n, 0.25) / 1e9
            del k
    for down, name in ((False, "to_gpu"), (True, "get")):
        call, total, blocking = bench_scale.async_overlap(n, 0.5, down=down)
        out[f"{name}_async arrival {label}"] = n / total / 1e9
        out[f"{name}_async call share {label}"] = call / total
        out[f"{name} blocking {label}"] = n / blocking / 1e9
for label in ([] if os.environ.get("AB_ASYNC") else sys.argv[1:]):
    n = bench.parse_size(label)
    host, dst = bench.pageable_array(n), bench.pageable_array(n)
    g = pygpu.to_gpu(host)
    rows, row = bench.strided_rows(n)
    g_rows = pygpu.empty((2 * rows, row), np.uint8)
    h_rows = bench.pageable_array(rows * row).reshape(rows, row)
    g_elems = pygpu.to_gpu(bench.pageable_array(2 * n).view(np.float32 if n >= 8 else np.uint8))
    cases, keep = {}, []
    if raw.available():
        for d in ("H2D", "D2H"):
            fn, k = raw.case(d, n)
            cases["raw " + d] = fn
            keep.append(k)
    cases.update({
        "to_gpu(pageable)": lambda: g.set(host),
        "get(ary=pageable)": lambda: g.get(ary=dst),
        "rows [::2] up": lambda: g_rows[::2].set(h_rows),
        "elements [::2] down": lambda: g_elems[::2].get(),
        "get(ary=fresh)": lambda: g.get(ary=np.empty(n, np.uint8)),
    })
    for name, fn in cases.items():
        out[f"{name} {label}"] = n / bench.time_case(fn, n, 0.25) / 1e9
out["module"] = pygpu.__file__
print(json.dumps(out))
"""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--sizes", default="16M,64M,256M", help="comma-separated, e.g. 16M,1G")
    ap.add_argument("--async", dest="async_", action="store_true",
                    help="the async calls' arrival against the blocking calls instead")
    ap.add_argument("settings", nargs="*")
    args = ap.parse_args(argv)
    settings = [""] + args.settings
    for s in settings:                      # other checkouts: built in place once
        for kv in s.split():
            key, _, path = kv.partition("=")
            if key == "PYTHONPATH" and os.path.exists(os.path.join(path, "setup.py")) and \
                    not glob.glob(os.path.join(path, "pygpu", "_*.so")):
                subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=path, check=True,
                               capture_output=True)
    res = {s: {} for s in settings}
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    modules = {}
    for _ in range(args.reps):
        for s in settings:
            # (run from tools/research/, which holds no pygpu: this checkout comes by PYTHONPATH unless the
            # setting says)
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
            env.update(dict(kv.split("=", 1) for kv in s.split()))
            if args.async_:
                env["AB_ASYNC"] = "1"
            p = subprocess.run([sys.executable, "-c", CHILD, *args.sizes.split(",")], env=env, capture_output=True,
                               text=True, cwd=here)
            if p.returncode != 0 or not p.stdout.strip():
                print(f"{s or 'as built'}: failed: {p.stderr[-2000:]}", file=sys.stderr)
                return 1
            got = json.loads(p.stdout.strip().splitlines()[-1])
            modules[s] = got.pop("module")
            for k, v in got.items():
                res[s].setdefault(k, []).append(v)
    width = max(24, *(len(s) + 2 for s in settings))
    print(f"{'case':<28}" + "".join(f"{(s or 'as built'):>{width}}" for s in settings))
    for k in res[""]:
        size = k.rsplit(" ", 1)[1]
        up = "H2D" in k or " up" in k or "to_gpu" in k
        ceil = res[""].get(f"raw {'H2D' if up else 'D2H'} {size}")
        cells = []
        for s in settings:
            v = res[s][k]
            m = statistics.median(v)
            if " share " in k:              # (the call's time over the time until the stream has the data)
                cells.append(f"{m:.3f} [{min(v):.3f}-{max(v):.3f}]")
                continue
            ratio = f" ({m / statistics.median(ceil):.2f})" if ceil else ""
            cells.append(f"{m:.1f}{ratio} [{min(v):.0f}-{max(v):.0f}]")
        print(f"{k:<28}" + "".join(f"{c:>{width}}" for c in cells))
    for s in settings:
        print(f"({s or 'as built'}: {os.path.dirname(modules[s])})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
