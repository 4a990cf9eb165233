"""`python -m pygpu`: what PyGPU sees here (the backend, what the build did
with each, the devices and, with two or more, how each pair reaches the
other), a round-trip check, and a short throughput table.

    python -m pygpu            all of it
    python -m pygpu --no-bench without the throughput table

The table times memcpy_htod and memcpy_dtoh between device memory and host
arrays that both exist already (the median of --repeats runs), from pageable
and from page-locked memory.  `python -m pygpu.bench` times whole calls
instead (to_gpu(), which allocates its array, get(), get(ary=...)) beside
the raw cudaMemcpy ceiling and other libraries; where a call does the same
work (to_gpu() of 64 MiB on the host backend reuses freed memory as the
GPU runtimes' pools do), the two agree.
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

import pygpu

MiB = 1 << 20


def gib(n):
    return f"{n / (1 << 30):.1f} GiB"


def build_report():
    """Lines saying what the build did with each backend (built, with what;
    skipped, and why), from the report setup.py writes beside the
    extensions; pip shows the build's own lines only with -v."""
    path = os.path.join(os.path.dirname(os.path.abspath(pygpu.__file__)), "_build_report.json")
    try:
        with open(path) as f:
            report = json.load(f)
    except (OSError, ValueError):
        return ["build report: none beside the package (built by an older setup.py, or by hand)"]
    lines = [f"build report ({report.get('when', '?')}, setuptools {report.get('setuptools', '?')}):"]
    for name in ("cuda", "hip", "host"):
        if name in report.get("built", {}):
            what = report["built"][name]
            lines.append(f"  {name}: built" + (f", {what}" if what else ""))
        elif name in report.get("skipped", {}):
            lines.append(f"  {name}: skipped: {report['skipped'][name]}")
    return lines


def describe_devices():
    n = pygpu.device_count()
    print(f"devices: {n}")
    for i in range(n):
        d = pygpu.Device(i)
        free, total = d.mem_info()
        cc = ".".join(map(str, d.compute_capability))
        node = d.numa_node
        where = f" (NUMA node {node})" if node >= 0 else ""
        print(f"  [{i}] {d.name}: compute capability {cc}, {d.multiprocessor_count} multiprocessors, "
              f"{gib(total)} ({gib(free)} free), PCI {d.pci_bus_id}{where}, uuid {d.uuid}")


def describe_peers():
    """Lines on each ordered pair of devices, src -> dst: whether src can
    address dst's memory, the runtime's performance rank of the link, and
    how copies from src to dst go (Device(dst).peer_route(src), which
    enables peer access as a first copy would), with its reason; none with
    one device."""
    n = pygpu.device_count()
    if n < 2:
        return []
    lines = ["peers (src -> dst: can src address dst's memory, the runtime's rank of the link, "
             "lower is faster; how copies go, and why):"]
    for src in range(n):
        for dst in range(n):
            if src == dst:
                continue
            can = pygpu.can_access_peer(src, dst)
            try:
                rank = str(pygpu.Device(src).p2p_rank(dst))
            except pygpu.GPUError:
                rank = "-"              # (the runtime ranks no link it refuses: the host backend's)
            route, why = pygpu.Device(dst).peer_route(src)
            lines.append(f"  {src} -> {dst}: {'can' if can else 'cannot'} access, rank {rank}, {route}: {why}")
    return lines


def round_trip(nbytes=8 * MiB):
    """Host -> device -> device -> host; True if the bytes come back unchanged."""
    src = np.random.default_rng().integers(0, 256, nbytes, dtype=np.uint8)
    back = np.empty_like(src)
    a, b = pygpu.mem_alloc(nbytes), pygpu.mem_alloc(nbytes)
    s = pygpu.Stream()
    pygpu.memcpy_htod(a, src, stream=s)
    pygpu.memcpy_dtod(b, a, nbytes, stream=s)
    pygpu.memcpy_dtoh(back, b, stream=s)
    return bool(np.array_equal(src, back))


def progress(msg):
    """A progress line on stderr, rewritten in place on a terminal."""
    if sys.stderr.isatty():
        sys.stderr.write("\r\033[K" + msg)
    elif msg:
        sys.stderr.write(msg + "\n")
    sys.stderr.flush()


def median_seconds(fn, repeats, warm=1):
    """The median of `repeats` runs of fn() (after `warm` runs not counted),
    seconds: as python -m pygpu.bench takes it."""
    for _ in range(warm):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def throughput(sizes, repeats):
    """Rows of (size, {column: GB/s}) for host<->device copies."""
    rows = []
    for size in sizes:
        dev = pygpu.mem_alloc(size)
        pageable = np.ones(size, np.uint8)
        pinned_mem = pygpu.mem_alloc_host(size)
        pinned = np.frombuffer(pinned_mem, np.uint8)
        pinned[:] = 1
        cases = {
            "H2D pageable": lambda: pygpu.memcpy_htod(dev, pageable),
            "H2D pinned": lambda: pygpu.memcpy_htod(dev, pinned),
            "D2H pageable": lambda: pygpu.memcpy_dtoh(pageable, dev),
            "D2H pinned": lambda: pygpu.memcpy_dtoh(pinned, dev),
        }
        row = {}
        for name, fn in cases.items():
            progress(f"measuring {name}, {size // MiB} MiB ...")
            row[name] = size / median_seconds(fn, repeats) / 1e9
        rows.append((size, row))
        del pinned
        pinned_mem.free()
        dev.free()
    progress("")
    return rows


def print_table(rows, repeats):
    cols = list(rows[0][1])
    ceiling = ("both are memcpy in host memory on the host backend" if pygpu.backend == "host"
               else "pinned is the link's ceiling")
    print(f"throughput, GB/s: memcpy_htod/dtoh between host and device memory that exist already, median of "
          f"{repeats} runs\n  ({ceiling}; python -m pygpu.bench times to_gpu() and get()):")
    print("  " + f"{'size':>9}" + "".join(f"{c:>14}" for c in cols))
    for size, row in rows:
        print("  " + f"{size // MiB:>5} MiB" + "".join(f"{row[c]:>14.1f}" for c in cols))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m pygpu", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-bench", action="store_true", help="skip the throughput table")
    ap.add_argument("--repeats", type=int, default=5, help="timed runs per cell (default 5)")
    args = ap.parse_args(argv)

    print(f"PyGPU {pygpu.__version__} on Python {sys.version.split()[0]}, NumPy {np.__version__}")
    print(f"backend: {pygpu.backend} (built: {', '.join(pygpu.backends())})")
    if pygpu._why_host:
        print(f"no GPU backend: {'; '.join(pygpu._why_host)}")
    print("\n".join(build_report()))
    if pygpu.backend != "host":
        print(f"runtime version {pygpu.runtime_version()}, driver version {pygpu.driver_version()}")
    try:
        describe_devices()
        for line in describe_peers():
            print(line)
    except pygpu.GPUError as e:
        print(f"no usable device: {e}")
        print(f"device copies (layout copies, casts, fills), once a device is there: PyGPU's kernels, "
              f"{pygpu.copy_kernels()['origin']}")
        return 1
    k = pygpu.copy_kernels()
    if k["ready"]:
        print(f"device copies (layout copies, casts, fills): PyGPU's kernels, {k['origin']}")
    else:
        print(f"device copies (layout copies, casts, fills): many runtime copies or through the host: PyGPU's "
              f"kernels do not run here ({k['why']}; kernels: {k['origin']})")
    ok = round_trip()
    print(f"round trip host -> device -> device -> host, 8 MiB: {'ok' if ok else 'FAILED: data differ'}")
    if not ok:
        return 1
    if not args.no_bench:
        big = 256 * MiB if pygpu.backend != "host" else 64 * MiB
        repeats = max(1, args.repeats)
        print_table(throughput([1 * MiB, 16 * MiB, big], repeats), repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
