"""Host <-> device throughput: PyGPU beside CuPy, PyTorch, Numba and the raw
pinned cudaMemcpy ceiling, measured in one run.

    python -m pygpu.bench                      the table, sizes 8 B .. 1 GiB
    python -m pygpu.bench --sizes 16M 256M     some sizes
    python -m pygpu.bench --plot bench.png     also draw GB/s against size
    python -m pygpu.bench --devices            copies between devices 0 and 1
    python -m pygpu.bench --copies             only the copies on the device
    python -m pygpu.bench --handoff            only the hand-offs between libraries
    python -m pygpu.bench --scale              only transfers at scale: threads, a small transfer
                                               beside a big one, async (pygpu/bench_scale.py)

After the transfers comes the device-copy section: layout copies, a cast
and a fill of a 64 MiB array on the device, beside CuPy and PyTorch and the
contiguous device-to-device copy (the ceiling).  The same cases feed the
pytest-benchmark runs in benchmarks/test_transfers.py and
benchmarks/test_device_copies.py.  Each transfer case is a function of no
arguments doing one whole transfer (returning when the data is there);
GB/s counts the bytes the array holds.  "H2D pageable", "D2H pageable" and
"H2D rows [::2]" run with registration off (the staging path, which a
buffer met once takes); "H2D pageable reused" and "D2H pageable reused" are
the same copies with the defaults (a buffer of 1 MiB or more met again is
page-locked in place once 64 MiB have moved through it, and the copy is
the DMA alone).

Between devices (--devices: device 0 -> device 1 at 1 MiB, 16 MiB, 256 MiB
and 1 GiB, or --sizes; smaller on the host backend): the runtime's
MemcpyPeer with peer access (the ceiling) and without, PyGPU's
copy(device=1), b[...] = a, memcpy_peer on PyGPU arrays' pointers and the
staged copy (transfer_config(peer=False)), CuPy's and PyTorch's copies,
strided views (x[::2], x[:, ::-1], x.T) of a source of each size, for
PyGPU and CuPy, and the two pinned host links (the staged path's ceiling).
Every PyGPU copy is checked bit for bit once per case, outside the timing
(WRONG, and exit status 1, where one does not land).  Ratios: dense copies
and strided views (their bytes) to the ceiling, staged to the slower link.
benchmarks/test_devices.py runs the same cases under pytest-benchmark.

The hand-off section (--handoff, and benchmarks/test_interop.py) times
what giving an array to another library costs, per call: from_dlpack and
asarray of a torch tensor, torch.from_dlpack and torch.as_tensor of ours,
reading __cuda_array_interface__, __dlpack__(), beside CuPy's; and the
DLPack C exchange (a managed tensor out and its deleter; a DLTensor view)
timed in C by pygpu._exchange_timing, for our arrays and torch's.
"""
import argparse
import contextlib
import ctypes
import ctypes.util
import importlib
import os
import statistics
import sys
import time

import numpy as np

import pygpu

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
SIZES = [8, 64 * KiB, 1 * MiB, 16 * MiB, 64 * MiB, 256 * MiB, 1 * GiB]


def parse_size(text):
    units = {"K": KiB, "M": MiB, "G": GiB}
    text = text.strip().upper().rstrip("B") or "0"
    return int(float(text[:-1]) * units[text[-1]]) if text[-1] in units else int(text)


def size_name(n):
    for unit, name in ((GiB, "GiB"), (MiB, "MiB"), (KiB, "KiB")):
        if n >= unit and n % unit == 0:
            return f"{n // unit} {name}"
    return f"{n} B"


# ---- host memory of each kind -------------------------------------------------

def pinned_array(nbytes):
    """A uint8 NumPy array in page-locked memory (kept alive by the array)."""
    return np.frombuffer(pygpu.mem_alloc_host(nbytes), np.uint8)


def pageable_array(nbytes):
    """A touched (faulted-in) ordinary NumPy array."""
    a = np.empty(nbytes, np.uint8)
    a[:] = 1
    return a


def strided_rows(nbytes, row=256):
    """An every-other-row view of `nbytes` (rows of `row` bytes): the host
    side of the strided cases is contiguous, the device side is the view."""
    return (max(1, nbytes // row), row)


# ---- the ceiling: raw cudaMemcpy ----------------------------------------------

class RawCuda:
    """cudaMemcpy between page-locked host memory and device memory, called
    through CuPy's runtime binding when CuPy is there (thin), else ctypes."""

    H2D, D2H = 1, 2

    def __init__(self):
        self.fn = self.fn_async = None
        try:
            rt = importlib.import_module("cupy.cuda.runtime")
            self.fn = lambda d, s, n, k: rt.memcpy(d, s, n, k)
            self.fn_async = lambda d, s, n, k, stream: rt.memcpyAsync(d, s, n, k, stream)
        except Exception:  # noqa: BLE001 - CuPy missing or broken: use ctypes
            lib = None
            for name in ("libcudart.so", "libcudart.so.13", "libcudart.so.12",
                         ctypes.util.find_library("cudart"),
                         os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "lib64", "libcudart.so")):
                try:
                    lib = ctypes.CDLL(name) if name else None
                except OSError:
                    continue
                if lib:
                    break
            if lib:
                f, fa = lib.cudaMemcpy, lib.cudaMemcpyAsync
                f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
                fa.argtypes = f.argtypes + [ctypes.c_void_p]
                f.restype = fa.restype = ctypes.c_int

                def checked(name, err):
                    if err:
                        raise RuntimeError(f"{name} failed: {err}")
                self.fn = lambda d, s, n, k: checked("cudaMemcpy", f(d, s, n, k))
                self.fn_async = lambda d, s, n, k, stream: checked("cudaMemcpyAsync", fa(d, s, n, k, stream))

    def available(self):
        return self.fn is not None and pygpu.backend == "cuda"

    def case(self, direction, nbytes):
        host = pinned_array(nbytes)
        dev = pygpu.mem_alloc(nbytes)
        hp, dp = host.ctypes.data, int(dev)
        if direction == "H2D":
            return lambda: self.fn(dp, hp, nbytes, self.H2D), (host, dev)
        return lambda: self.fn(hp, dp, nbytes, self.D2H), (host, dev)

    def upload(self, nbytes, stream=None):
        """(a function that copies `nbytes` of page-locked host memory to
        the device and waits for it, what it needs kept): cudaMemcpy on
        the legacy stream, or with a pygpu.Stream cudaMemcpyAsync on it
        and that stream's synchronize."""
        if stream is None:
            return self.case("H2D", nbytes)
        host, dev = pinned_array(nbytes), pygpu.mem_alloc(nbytes)
        hp, dp, handle = host.ctypes.data, int(dev), stream.handle

        def run():
            self.fn_async(dp, hp, nbytes, self.H2D, handle)
            stream.synchronize()
        return run, (host, dev)


# ---- the cases ----------------------------------------------------------------

def pygpu_cases(nbytes):
    """name -> (setup) for PyGPU; setup() returns (fn, keepalive)."""
    def h2d(make_host):
        def setup():
            host = make_host(nbytes)
            return (lambda: pygpu.to_gpu(host)), host
        return setup

    def d2h_new():
        g = pygpu.to_gpu(pageable_array(nbytes))
        return (lambda: g.get()), g

    def d2h_into(make_host):
        def setup():
            g = pygpu.to_gpu(pageable_array(nbytes))
            out = make_host(nbytes)
            return (lambda: g.get(ary=out)), (g, out)
        return setup

    def d2h_fresh():
        # into memory never touched before: the copy takes the page faults
        g = pygpu.to_gpu(pageable_array(nbytes))
        return (lambda: g.get(ary=np.empty(nbytes, np.uint8))), g

    def strided_d2h(elementwise):
        def setup():
            if elementwise:
                g = pygpu.to_gpu(pageable_array(2 * nbytes).view(np.float32 if nbytes >= 4 else np.uint8))
                v = g[::2]
            else:
                rows, row = strided_rows(nbytes)
                g = pygpu.to_gpu(pageable_array(2 * rows * row).reshape(2 * rows, row))
                v = g[::2]
            return (lambda: v.get()), (g, v)
        return setup

    def strided_h2d():
        rows, row = strided_rows(nbytes)
        g = pygpu.empty((2 * rows, row), np.uint8)
        v = g[::2]
        host = pageable_array(rows * row).reshape(rows, row)
        return (lambda: v.set(host)), (g, v, host)

    def reused(setup):
        def met():      # (as often as registration waits for: the timed copies are the DMA alone)
            fn, keep = setup()
            if nbytes >= REGISTER_MIN:      # (smaller buffers are never registered: 8 bytes took 8M calls)
                for _ in range(-(-REGISTER_MOVED // nbytes)):
                    fn()
            return fn, keep
        return met

    return {
        "H2D pageable": h2d(pageable_array),
        "H2D pageable reused": reused(h2d(pageable_array)),
        "H2D pinned": h2d(pinned_array),
        "D2H new array": d2h_new,
        "D2H pageable": d2h_into(pageable_array),
        "D2H pageable reused": reused(d2h_into(pageable_array)),
        "D2H pageable fresh": d2h_fresh,
        "D2H pinned": d2h_into(pinned_array),
        "D2H rows [::2]": strided_d2h(False),
        "H2D rows [::2]": strided_h2d,
        "D2H elements [::2]": strided_d2h(True),
    }


# The cases of pageable buffers that a transfer meets again and again are
# timed with registration off (register_limit=0): they show the staged path
# that a buffer met once takes.  The "reused" ones are the same copies with
# the defaults: once 64 MiB have moved through it (1 MiB or more a copy, a
# GPU backend) the buffer is page-locked in place and the copy is the DMA
# alone (time_case's median is of the copies after).
STAGED_CASES = {"H2D pageable", "D2H pageable", "H2D rows [::2]"}
REGISTER_MOVED = 64 * MiB       # (src/tuning.h's PYGPU_REGISTER_MOVED: the bytes moved before a registration)
REGISTER_MIN = 1 * MiB          # (src/tuning.h's PYGPU_REGISTER_MIN: no smaller buffer is registered)


@contextlib.contextmanager
def registration(limit):
    """transfer_config(register_limit=limit) inside, then as it was (0:
    no host buffer page-locked in place, every pageable byte staged)."""
    before = pygpu.transfer_config()["register_limit"]
    pygpu.transfer_config(register_limit=limit)
    try:
        yield
    finally:
        pygpu.transfer_config(register_limit=before)


def case_settings(name):
    """The settings a case of pygpu_cases is timed under (STAGED_CASES)."""
    return registration(0) if name in STAGED_CASES else contextlib.nullcontext()


def peer_cases(lib, nbytes):
    """name -> setup for a peer library, or {} when it is not usable here."""
    if pygpu.backend != "cuda":
        return {}
    try:
        if lib == "cupy":
            import cupy as cp

            def h2d():
                host = pageable_array(nbytes)
                return (lambda: (cp.asarray(host), cp.cuda.get_current_stream().synchronize())), host

            def d2h_new():
                x = cp.asarray(pageable_array(nbytes))
                return (lambda: x.get()), x

            def d2h_into():
                x, out = cp.asarray(pageable_array(nbytes)), pageable_array(nbytes)
                return (lambda: x.get(out=out)), (x, out)
        elif lib == "torch":
            import torch

            def h2d():
                host = torch.from_numpy(pageable_array(nbytes))
                return (lambda: host.to("cuda")), host

            def d2h_new():
                x = torch.ones(nbytes, dtype=torch.uint8, device="cuda")
                return (lambda: x.cpu()), x

            def d2h_into():
                x, out = torch.ones(nbytes, dtype=torch.uint8, device="cuda"), torch.from_numpy(pageable_array(nbytes))
                return (lambda: out.copy_(x)), (x, out)
        elif lib == "numba":
            if not hasattr(np, "row_stack"):
                np.row_stack = np.vstack        # numba-cuda 0.30.4 on NumPy 2.5
            from numba import cuda

            def h2d():
                host = pageable_array(nbytes)
                return (lambda: cuda.to_device(host)), host

            def d2h_new():
                x = cuda.to_device(pageable_array(nbytes))
                return (lambda: x.copy_to_host()), x

            def d2h_into():
                x, out = cuda.to_device(pageable_array(nbytes)), pageable_array(nbytes)
                return (lambda: x.copy_to_host(out)), (x, out)
        else:
            return {}
    except Exception:  # noqa: BLE001 - the peer does not import here
        return {}
    return {"H2D pageable": h2d, "D2H new array": d2h_new, "D2H pageable": d2h_into}


# ---- timing -------------------------------------------------------------------

def time_case(fn, nbytes, budget=0.5, min_runs=3, max_runs=50):
    """Median seconds of fn() over runs filling about `budget` seconds."""
    fn()                                        # warm-up: pools, page faults
    times = []
    start = time.perf_counter()
    while len(times) < max_runs and (len(times) < min_runs or time.perf_counter() - start < budget):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(sizes, peers=("cupy", "torch", "numba"), progress=None, budget=0.5):
    """{(library, case): {size: (seconds, GB/s)}}."""
    results = {}
    raw = RawCuda()

    def run(key, setup, n):
        if progress:
            progress(f"{key[0]} {key[1]}, {size_name(n)}")
        fn, keep = setup()
        t = time_case(fn, n, budget)
        if n in results.get(key, {}):           # measured twice: keep the faster
            t = min(t, results[key][n][0])
        results.setdefault(key, {})[n] = (t, n / t / 1e9)
        del keep

    def ceilings(n):
        if raw.available():
            for d in ("H2D", "D2H"):
                run(("raw cudaMemcpy", f"{d} pinned"), lambda: raw.case(d, n), n)

    for n in sizes:
        # The ceiling is measured before and after PyGPU's cases, and the
        # faster of the two kept: a dip in one measurement of it (these
        # machines are shared) would otherwise flatter every ratio.
        ceilings(n)
        for name, setup in pygpu_cases(n).items():
            with case_settings(name):
                run(("pygpu", name), setup, n)
        ceilings(n)
        for lib in peers:
            if n > 256 * MiB:
                continue                        # the peers' pageable paths take seconds per GiB
            for name, setup in peer_cases(lib, n).items():
                run((lib, name), setup, n)
    return results


def ceiling(results, case, n):
    """Raw pinned GB/s in the direction of `case` at size n, or None."""
    key = ("raw cudaMemcpy", f"{case[:3]} pinned")
    return results.get(key, {}).get(n, (None, None))[1]


def table(results, sizes):
    """The report: GB/s and the ratio to the raw pinned ceiling."""
    lines = [f"PyGPU {pygpu.__version__}, backend {pygpu.backend}, "
             f"device {pygpu.Device(0).name}; GB/s (ratio to raw pinned cudaMemcpy, same run)"]
    head = f"{'library':<15} {'case':<19}" + "".join(f"{size_name(n):>17}" for n in sizes)
    lines += [head, "-" * len(head)]
    for (lib, case), row in sorted(results.items(), key=lambda kv: (kv[0][0] != "raw cudaMemcpy",
                                                                    kv[0][0] != "pygpu", kv[0])):
        cells = []
        for n in sizes:
            if n not in row:
                cells.append(f"{'':>17}")
                continue
            gbs, top = row[n][1], ceiling(results, case, n)
            ratio = f" ({gbs / top:4.2f})" if top and lib != "raw cudaMemcpy" else ""
            if n < 64 * KiB:
                cells.append(f"{row[n][0] * 1e6:>10.1f} us{ratio:>4}")
            else:
                cells.append(f"{gbs:>10.1f}{ratio:>7}")
        lines.append(f"{lib:<15} {case:<19}" + "".join(cells))
    return "\n".join(lines)


def plot(results, sizes, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("--plot needs matplotlib", file=sys.stderr)
        return False
    fig, axes = plt.subplots(1, 2, figsize=(13, 5), sharey=True)
    for ax, direction in zip(axes, ("H2D", "D2H")):
        for (lib, case), row in sorted(results.items()):
            if not case.startswith(direction):
                continue
            xs = [n for n in sizes if n in row and n >= 64 * KiB]
            style = "k--" if lib == "raw cudaMemcpy" else ("-o" if lib == "pygpu" else ":x")
            ax.plot(xs, [row[n][1] for n in xs], style, label=f"{lib}: {case}", markersize=4)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("bytes")
        ax.set_title(f"{direction} on {pygpu.Device(0).name}")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("GB/s")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


# ---- copies on the device -------------------------------------------------------

COPY_SHAPE = (4096, 2048)       # float64: 64 MiB, the issue's measurements

# name -> (what the copy reads from x, each library's spelling); "latency":
# a 1 KiB strided view, timed call by call.  PyGPU's copy() keeps the
# layout (order 'K', as PyCUDA's); the transpose asks for C order, as
# CuPy's and NumPy's copy() give it.
COPY_CASES = {
    "x.copy()": ("view", {"pygpu": lambda x: x.copy(), "cupy": lambda x: x.copy(), "torch": lambda x: x.clone()}),
    "x[::-1].copy()": ("view", {"pygpu": lambda x: x[::-1].copy(), "cupy": lambda x: x[::-1].copy(),
                                "torch": lambda x: x.flip(0)}),
    "x[:, ::-1].copy()": ("view", {"pygpu": lambda x: x[:, ::-1].copy(), "cupy": lambda x: x[:, ::-1].copy(),
                                   "torch": lambda x: x.flip(1)}),
    "x[:, ::2].copy()": ("half", {"pygpu": lambda x: x[:, ::2].copy(), "cupy": lambda x: x[:, ::2].copy(),
                                  "torch": lambda x: x[:, ::2].contiguous()}),
    "x[::2].copy()": ("half", {"pygpu": lambda x: x[::2].copy(), "cupy": lambda x: x[::2].copy(),
                               "torch": lambda x: x[::2].contiguous()}),
    "x.T.copy() (to C order)": ("view", {"pygpu": lambda x: x.T.copy(order="C"), "cupy": lambda x: x.T.copy(),
                                         "torch": lambda x: x.t().contiguous()}),
    "x.astype(float32)": ("cast", {"pygpu": lambda x: x.astype(np.float32), "cupy": lambda x: x.astype(np.float32),
                                   "torch": lambda x: x.to(_torch_f32())}),
    "x[:, ::2].fill(1.5)": ("fill", {"pygpu": lambda x: x[:, ::2].fill(1.5), "cupy": lambda x: x[:, ::2].fill(1.5),
                                     "torch": lambda x: x[:, ::2].fill_(1.5)}),
    "1 KiB view x[:8, :32:2].copy()": ("latency", {"pygpu": lambda x: x[:8, :32:2].copy(),
                                                     "cupy": lambda x: x[:8, :32:2].copy(),
                                                     "torch": lambda x: x[:8, :32:2].contiguous()}),
}


def _torch_f32():
    return importlib.import_module("torch").float32


def copy_libraries(peers):
    """{name: (x, synchronize)}: the 64 MiB float64 array on the device in
    PyGPU and in each peer that is usable here."""
    host = np.random.default_rng(0).standard_normal(COPY_SHAPE)
    libs = {"pygpu": (pygpu.to_gpu(host), pygpu.synchronize)}
    if pygpu.backend != "cuda":
        return libs
    for name in peers:
        try:
            if name == "cupy":
                cp = importlib.import_module("cupy")
                libs[name] = (cp.asarray(host), cp.cuda.Device().synchronize)
            elif name == "torch":
                torch = importlib.import_module("torch")
                libs[name] = (torch.from_numpy(host).cuda(), torch.cuda.synchronize)
        except Exception:  # noqa: BLE001 - a peer that does not work here is left out
            pass
    return libs


def time_queued(fn, sync, budget=0.5, latency=False):
    """Median seconds per call of fn(): batches of calls then one
    synchronize (the calls queue on the device), or, for `latency`, one call
    and its synchronize at a time."""
    fn()
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    once = time.perf_counter() - t0
    batch = 1 if latency else max(1, min(200, int(0.02 / max(once, 1e-6))))
    times, start = [], time.perf_counter()
    while len(times) < 5 or (time.perf_counter() - start < budget and len(times) < 400):
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        sync()
        times.append((time.perf_counter() - t0) / batch)
    return statistics.median(times)


def measure_copies(peers=("cupy", "torch"), progress=None, budget=0.5):
    """{case: {library: seconds}}, with the ceiling: the contiguous
    device-to-device copy of the whole array ('memcpy')."""
    libs = copy_libraries(peers)
    x, sync = libs["pygpu"]
    dst = pygpu.empty_like(x)
    results = {"contiguous memcpy (ceiling)": {
        "pygpu": time_queued(lambda: pygpu.memcpy_dtod_async(dst.ptr, x.ptr, x.nbytes), sync, budget)}}
    for case, (kind, spellings) in COPY_CASES.items():
        for lib, (arr, lib_sync) in libs.items():
            if progress:
                progress(f"{lib} {case}")
            results.setdefault(case, {})[lib] = time_queued(lambda: spellings[lib](arr), lib_sync, budget,
                                                            latency=kind == "latency")
    return results


def copies_table(results):
    """ms per copy, the ratio to CuPy's time, and GB/s as the bytes written
    and read once each (the ceiling's ratio for full-size copies)."""
    x_bytes = COPY_SHAPE[0] * COPY_SHAPE[1] * 8
    moved = {"view": 2 * x_bytes, "half": x_bytes, "cast": x_bytes + x_bytes // 2, "fill": x_bytes // 2}
    top = results["contiguous memcpy (ceiling)"]["pygpu"]
    lines = [f"copies on the device, {COPY_SHAPE[0]} x {COPY_SHAPE[1]} float64 (64 MiB), {pygpu.Device(0).name}: "
             f"time per copy; 'x CuPy' = PyGPU's time / CuPy's; GB/s = bytes read + written "
             f"(ratio to the contiguous copy's)"]
    head = f"{'copy':<32}{'PyGPU':>12}{'CuPy':>12}{'PyTorch':>12}{'x CuPy':>9}{'GB/s':>17}"
    lines += [head, "-" * len(head)]
    for case, row in results.items():
        kind = COPY_CASES[case][0] if case in COPY_CASES else "view"
        unit, scale = ("us", 1e6) if kind == "latency" else ("ms", 1e3)
        cells = "".join(f"{row[lib] * scale:>9.3f} {unit}" if lib in row else f"{'':>12}"
                        for lib in ("pygpu", "cupy", "torch"))
        ratio = f"{row['pygpu'] / row['cupy']:>9.2f}" if "cupy" in row else f"{'':>9}"
        gbs = ""
        if kind != "latency":
            nbytes = moved[kind]
            gbs = f"{nbytes / row['pygpu'] / 1e9:>9.0f}" + (
                f" ({nbytes / row['pygpu'] / (2 * x_bytes / top):.2f})" if kind == "view" else "")
        lines.append(f"{case:<32}{cells}{ratio}{gbs:>17}")
    return "\n".join(lines)


# ---- between two devices --------------------------------------------------------

DEVICE_SIZES = [1 * MiB, 16 * MiB, 256 * MiB, 1 * GiB]
# The host backend's devices are host memory and every copy a memcpy: the
# same table, at sizes that take milliseconds.
HOST_DEVICE_SIZES = [64 * KiB, 256 * KiB, 1 * MiB, 4 * MiB]

# The rows of --devices, device 0 -> device 1, in the table's order, and
# what each is compared with: "ceiling" the runtime's MemcpyPeer with peer
# access (on both contexts and both pools); "dense" copies, to the ceiling;
# "staged" (through pinned host buffers), to the slower of the two pinned
# host links ("link", raw copies, its own ceiling); "strided" views of a
# source of the column's size, counting the view's bytes, to the ceiling.
DEVICE_ROWS = {
    "MemcpyPeer, peer on": "ceiling",
    "MemcpyPeer, peer off": "dense",
    "pygpu copy(device=1)": "dense",
    "pygpu b[...] = a": "dense",
    "memcpy_peer(b.ptr, a.ptr)": "dense",
    "cupy x.copy() on 1": "dense",
    "torch t.to('cuda:1')": "dense",
    "pygpu staged": "staged",
    "H2D pinned to 1": "link",
    "D2H pinned from 0": "link",
    "pygpu x[::2] (1-d)": "strided",
    "cupy x[::2] (1-d)": "strided",
    "pygpu x[:, ::-1]": "strided",
    "cupy x[:, ::-1]": "strided",
    "pygpu x.T (to C)": "strided",
    "cupy x.T (to C)": "strided",
}

# Each strided case: the view of the source (a uint32 array, 1-d or 2-d),
# and PyGPU's spelling of its copy to device 1 (CuPy's is v.copy() with
# device 1 current: C order).
STRIDED = {
    "x[::2] (1-d)": (1, lambda x: x[::2], lambda v: v.copy(device=1)),
    "x[:, ::-1]": (2, lambda x: x[:, ::-1], lambda v: v.copy(device=1)),
    "x.T (to C)": (2, lambda x: x.T, lambda v: v.copy(order="C", device=1)),
}


class DeviceSource:
    """The data the cases of one size copy: `nbytes` random bytes on the
    host and on device 0 (words() gives them as uint32, 1-d or 2-d and
    square-ish, for the strided views).  CuPy's and PyTorch's copies are
    made on first use (cupy(), torch()); None where the library is not
    usable here."""

    def __init__(self, nbytes):
        self.nbytes, self.nwords = nbytes, nbytes // 4
        self.rows = 1 << (max(self.nwords, 1).bit_length() - 1) // 2
        self.cols = self.nwords // self.rows
        self.host = self._base = np.frombuffer(np.random.default_rng(nbytes).bytes(nbytes), np.uint8)
        self._k = 0
        with pygpu.Device(0):
            self.dev = pygpu.to_gpu(self.host)
        self._libs = {}

    def words(self, dims, x=None):
        """x (a NumPy, PyGPU or CuPy array of the source's bytes; the host
        source by default) as uint32: 1-d, or 2-d of rows x cols."""
        flat = (self.host if x is None else x)[:4 * self.nwords].view(np.uint32)
        return flat if dims == 1 else flat[:self.rows * self.cols].reshape(self.rows, self.cols)

    def vary(self, on=True):
        """Give the source (on the host and on device 0) bytes that no copy
        wrote before, its first bytes xor a number new at each call, or
        (on=False) its first bytes again: a check copy of them shows a copy
        that lands nothing, even where its destination comes from a pool
        block that held an earlier result."""
        self._k = self._k % 255 + 1
        self.host = np.bitwise_xor(self._base, np.uint8(self._k)) if on else self._base
        self.dev.set(self.host)
        pygpu.Device(0).synchronize()

    def _lib(self, name, make):
        if name not in self._libs:
            self._libs[name] = None
            mod = _import(name) if pygpu.backend == "cuda" else None
            if mod is not None:
                try:
                    self._libs[name] = (mod, make(mod))
                except Exception:  # noqa: BLE001 - not usable here (no CUDA build, no device)
                    pass
        return self._libs[name]

    def cupy(self):
        """(cupy, the source on device 0 as a uint8 cupy array), or None."""
        def make(cp):
            with cp.cuda.Device(0):
                return cp.asarray(self.host)
        return self._lib("cupy", make)

    def torch(self):
        """(torch, the source on cuda:0 as a uint8 tensor), or None."""
        def make(torch):
            return torch.from_numpy(self.host.copy()).to("cuda:0")
        return self._lib("torch", make)


def _same(got, want):
    """True if GPUArray `got` holds exactly NumPy's `want` (shape and bytes)."""
    host = got.get()
    return host.shape == want.shape and host.dtype == want.dtype and bool(np.array_equal(host, want))


def _peer_access(on):
    """Turn peer access between devices 0 and 1 on or off (both ways, the
    pools' grants included) where the hardware allows it."""
    if pygpu.can_access_peer(0, 1) and pygpu.can_access_peer(1, 0):
        for a, b in ((0, 1), (1, 0)):
            (pygpu.Device(a).enable_peer_access if on else pygpu.Device(a).disable_peer_access)(b)


def device_cases(src, peers=("cupy", "torch")):
    """{row: setup} for copies from device 0 to device 1 of the data in
    `src` (a DeviceSource), the rows of DEVICE_ROWS that run here.  setup()
    returns (fn, keep, verify): fn does one whole copy (returning when the
    data is there); verify() does one more, of new bytes, and says whether
    it landed bit for bit (None for other libraries: not checked).  The raw
    cases use the runtime's MemcpyPeer, on two allocations for the ceiling
    and on PyGPU's arrays for memcpy_peer(b.ptr, a.ptr); the host links are
    raw pinned copies to device 1 and from device 0 (the staged path's two
    legs)."""
    n, a, raw = src.nbytes, src.dev, RawCuda()

    def checked(fn, read, expect):
        """verify() for a PyGPU copy: fn() of new bytes (src.vary()), the
        result read(fn's return) against expect(the host source)."""
        def verify():
            src.vary()
            try:
                return _same(read(fn()), expect(src.host))
            finally:
                src.vary(on=False)
        return verify

    def peer_raw(on):
        def setup():
            with pygpu.Device(0):
                s = pygpu.to_gpu(src.host)
            with pygpu.Device(1):
                d = pygpu.empty(n, np.uint8)
            _peer_access(on)

            def run():
                pygpu.memcpy_peer(d.ptr, s.ptr, n, 1, 0)

            def verify():
                d.fill(0)
                run()
                return _same(d, src.host)
            return run, (s, d), verify
        return setup

    def pygpu_copy(fn, expect, peer=True):
        def setup():
            pygpu.transfer_config(peer=peer)
            return fn, None, checked(fn, lambda r: r, expect)
        return setup

    def into_b(copy):
        def setup():
            with pygpu.Device(1):
                b = pygpu.empty(n, np.uint8)

            def run():
                copy(b)
            return run, b, checked(run, lambda _: b, lambda h: h)
        return setup

    def assign(b):
        b[...] = a

    def pointers(b):
        pygpu.memcpy_peer(b.ptr, a.ptr, n, 1, 0)

    def link(direction):
        dev = pygpu.Device(1 if direction == "H2D" else 0)

        def setup():
            with dev:
                if raw.available():
                    fn, keep = raw.case(direction, n)
                else:
                    host, d = pinned_array(n), pygpu.mem_alloc(n)
                    fn, keep = ((lambda: pygpu.memcpy_htod(d, host)) if direction == "H2D"
                                else (lambda: pygpu.memcpy_dtoh(host, d))), (host, d)

            def run():
                with dev:
                    fn()
            return run, keep, None
        return setup

    cases = {
        "MemcpyPeer, peer on": peer_raw(True),
        "MemcpyPeer, peer off": peer_raw(False),
        "pygpu copy(device=1)": pygpu_copy(lambda: a.copy(device=1), lambda h: h),
        "pygpu b[...] = a": into_b(assign),
        "memcpy_peer(b.ptr, a.ptr)": into_b(pointers),
        "pygpu staged": pygpu_copy(lambda: a.copy(device=1), lambda h: h, peer=False),
        "H2D pinned to 1": link("H2D"),
        "D2H pinned from 0": link("D2H"),
    }
    for name, (dims, view, spell) in STRIDED.items():
        v = view(src.words(dims, a))
        cases[f"pygpu {name}"] = pygpu_copy(lambda v=v, spell=spell: spell(v),
                                            lambda h, dims=dims, view=view: view(src.words(dims, h)))
    if "cupy" in peers and src.cupy():
        cases.update(_cupy_device_cases(src))
    if "torch" in peers and src.torch():
        torch, t = src.torch()
        cases["torch t.to('cuda:1')"] = lambda: ((lambda: (t.to("cuda:1"), torch.cuda.synchronize(1))), None, None)
    return {name: cases[name] for name in DEVICE_ROWS if name in cases}


def _cupy_device_cases(src):
    """CuPy's rows: its copy() with device 1 current, of the source and of
    the strided views (C order; CuPy refuses some views across devices)."""
    cp, x = src.cupy()
    dst = cp.cuda.Device(1)

    def copy(v):
        def setup():
            def run():
                with dst:
                    y = v.copy()
                dst.synchronize()
                return y
            return run, None, None
        return setup

    cases = {"cupy x.copy() on 1": copy(x)}
    for name, (dims, view, _) in STRIDED.items():
        cases[f"cupy {name}"] = copy(view(src.words(dims, x)))
    return cases


def measure_devices(sizes, progress=None, budget=0.5, peers=("cupy", "torch")):
    """{row: {size: cell}} for copies from device 0 to 1, a cell being
    (seconds, GB/s of the bytes the copy writes, landed) -- landed True or
    False where the result was checked, None where it was not -- or
    ("n/a", why) where another library cannot make the copy.  The ceiling
    is measured first and last at each size and the faster kept."""
    results = {}
    for n in sizes:
        src = DeviceSource(n)
        cases = device_cases(src, peers)
        for name in list(cases) + ["MemcpyPeer, peer on"]:
            if progress:
                progress(f"devices {name}, {size_name(n)}")
            results.setdefault(name, {})[n] = measure_device_case(name, cases[name], device_moved(src, name),
                                                                   budget, results.get(name, {}).get(n))
        del cases, src
    return results


def device_moved(src, row):
    """The bytes a copy of row `row` writes: the view's for a strided one."""
    for name, (dims, view, _) in STRIDED.items():
        if row.endswith(name):
            return view(src.words(dims)).nbytes
    return src.nbytes


@contextlib.contextmanager
def device_case_scope():
    """Runs one case of device_cases: after it PyGPU's peer setting is as
    before and peer access between devices 0 and 1 on (where the hardware
    allows it), whatever the case changed."""
    old = pygpu.transfer_config()["peer"]
    try:
        yield
    finally:
        pygpu.transfer_config(peer=old)
        _peer_access(True)


def other_library(row):
    """True for the rows of CuPy and PyTorch: a copy they refuse is n/a."""
    return row.startswith(("cupy", "torch"))


def measure_device_case(name, setup, moved, budget, before):
    """One cell of measure_devices, a copy writing `moved` bytes (the faster
    of it and `before`, the same cell measured earlier)."""
    with device_case_scope():
        fn, keep, verify = setup()
        try:
            t = time_case(fn, moved, budget)
        except Exception as e:  # noqa: BLE001 - another library's refusal is a cell, PyGPU's an error
            if not other_library(name):
                raise
            return ("n/a", f"{type(e).__name__}: {e}")
        landed = verify() if verify else None
        del keep
    if before and before[0] != "n/a" and before[0] < t:
        return before
    return (t, moved / t / 1e9, landed)


def devices_table(results, sizes):
    """GB/s and ratios (DEVICE_ROWS says to what), a line on the pair, and
    a note for each n/a; a check that failed reads WRONG."""
    route, why = pygpu.Device(1).peer_route(0)
    try:
        rank = pygpu.Device(0).p2p_rank(1)
    except pygpu.GPUError:
        rank = "-"
    lines = [f"device 0 -> device 1 ({pygpu.Device(0).name} -> {pygpu.Device(1).name}): copies go {route} "
             f"({why}); the runtime's rank of the link {rank}",
             "GB/s of the bytes written; in brackets the ratio: dense copies to MemcpyPeer with peer on, strided "
             "views (of a source of the column's size) to the same, staged to the slower pinned host link"]
    head = f"{'case':<26}" + "".join(f"{size_name(n):>10}{'':7}" for n in sizes)
    lines += [head, "-" * len(head)]
    notes = []
    for name in (r for r in DEVICE_ROWS if r in results):
        row, kind = results[name], DEVICE_ROWS[name]
        cells = []
        for n in sizes:
            cell = row.get(n)
            if cell is None:
                cells.append(f"{'':>17}")
            elif cell[0] == "n/a":
                cells.append(f"{'n/a':>10}{'':7}")
                if not any(note.startswith(f"  {name}:") for note in notes):
                    notes.append(f"  {name}: {cell[1]}"[:160])
            else:
                cells.append(_device_cell(results, kind, n, cell))
        lines.append(f"{name:<26}" + "".join(cells))
    if notes:
        lines += ["n/a: the library refuses the copy:"] + notes
    return "\n".join(lines)


def _device_cell(results, kind, n, cell):
    """One measured cell: GB/s, the ratio, WRONG where the check failed."""
    def gbs(row):
        c = results.get(row, {}).get(n)
        return c[1] if c and c[0] != "n/a" else None
    if kind == "staged":
        links = [gbs("H2D pinned to 1"), gbs("D2H pinned from 0")]
        top = min(links) if all(links) else None
    else:
        top = gbs("MemcpyPeer, peer on") if kind in ("dense", "strided") else None
    ratio = f" ({cell[1] / top:4.2f})" if top else ""
    if cell[2] is False:
        ratio = "  WRONG"
    return f"{cell[1]:>10.1f}{ratio:<7}"


def measure_pairs(nbytes, progress=None, budget=0.5):
    """{(src, dst): (raw GB/s, raw landed, pygpu GB/s, pygpu landed)} for
    every ordered pair of devices: memcpy_peer between two PyGPU
    allocations (peer access on where the hardware allows it: the
    ceiling) and PyGPU's copy(device=dst), `nbytes` of random bytes, each
    checked bit for bit after it was timed."""
    host = np.frombuffer(np.random.default_rng(nbytes).bytes(nbytes), np.uint8)
    ndev, results = pygpu.device_count(), {}
    for a in range(ndev):
        with pygpu.Device(a):
            src = pygpu.to_gpu(host)
        for b in (k for k in range(ndev) if k != a):
            if progress:
                progress(f"devices {a} -> {b}, {size_name(nbytes)}")
            if pygpu.can_access_peer(b, a):
                pygpu.Device(b).enable_peer_access(a)
            with pygpu.Device(b):
                dst = pygpu.empty(nbytes, np.uint8)
            dst.fill(0)
            raw = time_case(lambda: pygpu.memcpy_peer(dst.ptr, src.ptr, nbytes, b, a), nbytes, budget)
            raw_landed = _same(dst, host)
            mine = time_case(lambda: src.copy(device=b), nbytes, budget)
            results[(a, b)] = (nbytes / raw / 1e9, raw_landed, nbytes / mine / 1e9, _same(src.copy(device=b), host))
            del dst
    return results


def pairs_table(results, nbytes):
    """One line a pair: the route, the ceiling, PyGPU and its ratio."""
    lines = [f"every ordered pair, {size_name(nbytes)}: GB/s of memcpy_peer between two allocations (the ceiling) "
             "and of copy(device=dst) (ratio), each checked bit for bit"]
    for (a, b), (raw, raw_ok, mine, mine_ok) in sorted(results.items()):
        route, _ = pygpu.Device(b).peer_route(a)
        lines.append(f"  {a} -> {b} ({route:>6}): memcpy_peer {raw:7.1f}{'' if raw_ok else ' WRONG'}   "
                     f"copy(device={b}) {mine:7.1f} ({mine / raw:4.2f}){'' if mine_ok else ' WRONG'}")
    return "\n".join(lines)


def devices_wrong(results):
    """The (row, size) cells whose copy did not land bit for bit."""
    return [(name, n) for name, row in results.items() for n, c in row.items() if c[0] != "n/a" and c[2] is False]


def handoff_cases(peers=("cupy", "torch")):
    """{name: function of no arguments doing one hand-off} for the peers
    that import (torch with CUDA for the rows with a tensor)."""
    cases = {}
    ours = pygpu.to_gpu(np.zeros((64, 64), np.float32))
    cuda = pygpu.backend == "cuda"
    cases["pygpu: __dlpack__()"] = ours.__dlpack__
    if cuda:
        cases["pygpu: __cuda_array_interface__ read"] = lambda: ours.__cuda_array_interface__
    torch = _import("torch") if "torch" in peers else None
    if torch is not None and cuda and torch.cuda.is_available():
        t = torch.zeros((64, 64), dtype=torch.float32, device="cuda")
        cases["pygpu.from_dlpack(torch tensor)"] = lambda: pygpu.from_dlpack(t)
        cases["pygpu.asarray(torch tensor)"] = lambda: pygpu.asarray(t)
        cases["torch.from_dlpack(pygpu array)"] = lambda: torch.from_dlpack(ours)
        cases["torch.as_tensor(pygpu array, device='cuda')"] = lambda: torch.as_tensor(ours, device="cuda")
        cp = _import("cupy") if "cupy" in peers else None
        if cp is not None:
            c = cp.zeros((64, 64), np.float32)
            cases["cupy.from_dlpack(torch tensor)"] = lambda: cp.from_dlpack(t)
            cases["cupy.asarray(torch tensor)"] = lambda: cp.asarray(t)
            cases["torch.from_dlpack(cupy array)"] = lambda: torch.from_dlpack(c)
            cases["torch.as_tensor(cupy array, device='cuda')"] = lambda: torch.as_tensor(c, device="cuda")
            cases["cupy: __cuda_array_interface__ read"] = lambda: c.__cuda_array_interface__
            cases["cupy: __dlpack__()"] = c.__dlpack__
    return cases


def c_exchange_cases(peers=("torch",)):
    """{name: (array, what)} for pygpu._exchange_timing: the C exchange of
    our arrays, and of torch's where its tensors carry the table."""
    ours = pygpu.to_gpu(np.zeros((64, 64), np.float32))
    cases = {"C exchange: pygpu managed tensor + deleter": (ours, "managed"),
             "C exchange: pygpu DLTensor view": (ours, "view"),
             "C exchange: pygpu view + current_work_stream": (ours, "stream")}
    torch = _import("torch") if "torch" in peers else None
    if torch is not None and hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
        dev = "cuda" if pygpu.backend == "cuda" and torch.cuda.is_available() else "cpu"
        t = torch.zeros((64, 64), dtype=torch.float32, device=dev)
        cases[f"C exchange: torch ({dev}) managed tensor + deleter"] = (t, "managed")
        cases[f"C exchange: torch ({dev}) DLTensor view"] = (t, "view")
    return cases


def _import(name):
    try:
        return importlib.import_module(name)
    except Exception:       # (a peer that does not import is left out)
        return None


def time_call(fn, budget=0.5):
    """Median seconds per call of fn() (host-side cost: nothing is queued)."""
    fn()
    times, start = [], time.perf_counter()
    while len(times) < 5 or (time.perf_counter() - start < budget and len(times) < 200):
        t0 = time.perf_counter()
        for _ in range(100):
            fn()
        times.append((time.perf_counter() - t0) / 100)
    return statistics.median(times)


HANDOFF_ROUNDS = 3


def measure_handoff(peers=("cupy", "torch"), progress=None, budget=0.5, rounds=HANDOFF_ROUNDS):
    """[(name, ns per call)]: the Python-level hand-offs timed here, in
    `rounds` rounds that take every case in turn (the least of a case's
    rounds: a host's calls ran at times twice as slow for seconds together,
    every library's alike, so that cases timed one after the other compared
    wrongly; docs/performance.md#hand-offs-in-rounds), the C exchanges timed
    in C (one million calls each)."""
    cases, best = handoff_cases(peers), {}
    for k in range(rounds):
        for name, fn in cases.items():
            if progress:
                progress(f"{name} (round {k + 1} of {rounds})")
            t = time_call(fn, budget / rounds)
            best[name] = min(best.get(name, t), t)
    rows = [(name, t * 1e9) for name, t in best.items()]
    for name, (x, what) in c_exchange_cases(peers).items():
        if progress:
            progress(name)
        rows.append((name, min(pygpu._exchange_timing(x, 1_000_000, what) for _ in range(3))))
    return rows


def handoff_table(rows):
    width = max(len(n) for n, _ in rows)
    lines = [f"hand-offs ({pygpu.backend} backend), per call", f"{'':{width}}  {'ns':>9}"]
    lines += [f"{n:{width}}  {v:9.1f}" for n, v in rows]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m pygpu.bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", nargs="+", type=parse_size, default=SIZES, help="sizes, e.g. 8 64K 16M 1G")
    ap.add_argument("--peers", nargs="*", default=["cupy", "torch", "numba"], help="peers to compare")
    ap.add_argument("--budget", type=float, default=0.5, help="seconds per cell (default 0.5)")
    ap.add_argument("--plot", metavar="FILE.png", help="draw GB/s against size (needs matplotlib)")
    ap.add_argument("--devices", action="store_true",
                    help="copies between devices 0 and 1 instead, then every ordered pair at one size")
    ap.add_argument("--copies", action="store_true",
                    help="only the copies on the device (layouts, casts, fills; after the transfers otherwise)")
    ap.add_argument("--no-copies", action="store_true", help="only the transfers")
    ap.add_argument("--handoff", action="store_true",
                    help="only the hand-offs between libraries (DLPack, CAI, the C exchange API)")
    ap.add_argument("--scale", action="store_true",
                    help="only transfers at scale: 1-8 threads at once, a small transfer beside a big one, async")
    ap.add_argument("--threads", nargs="+", type=int, default=None, metavar="N",
                    help="thread counts for --scale (default 1 2 4 8); --sizes' first is the size of each")
    args = ap.parse_args(argv)
    tty = sys.stderr.isatty()

    def progress(msg):
        sys.stderr.write(("\r\033[K" if tty else "") + f"measuring {msg} ..." + ("" if tty else "\n"))
        sys.stderr.flush()

    if args.scale:
        from pygpu import bench_scale
        print(bench_scale.scale_report(args.sizes[0] if args.sizes != SIZES else 64 * MiB,
                                       args.threads or bench_scale.THREADS,
                                       [p for p in args.peers if p in ("cupy", "torch")], progress, args.budget))
        if tty:
            sys.stderr.write("\r\033[K")
        return 0
    if args.handoff:
        rows = measure_handoff(args.peers, progress, args.budget)
        if tty:
            sys.stderr.write("\r\033[K")
        print(handoff_table(rows))
        return 0
    if args.devices:
        if pygpu.device_count() < 2:
            print("--devices needs two devices", file=sys.stderr)
            return 1
        sizes = ([n for n in args.sizes if n >= 64 * KiB] if args.sizes != SIZES
                 else HOST_DEVICE_SIZES if pygpu.backend == "host" else DEVICE_SIZES)
        results = measure_devices(sizes, progress, args.budget, [p for p in args.peers if p in ("cupy", "torch")])
        if tty:
            sys.stderr.write("\r\033[K")
        print(devices_table(results, sizes))
        wrong = devices_wrong(results)
        pair_bytes = min(max(sizes), 256 * MiB)
        pairs = measure_pairs(pair_bytes, progress, args.budget)
        if tty:
            sys.stderr.write("\r\033[K")
        print(pairs_table(pairs, pair_bytes))
        wrong += [(f"pygpu copy {a} -> {b}", pair_bytes) for (a, b), cell in pairs.items() if not cell[3]]
        if wrong:
            print("WRONG, the copy did not land bit for bit: " + ", ".join(f"{r} at {size_name(n)}" for r, n in wrong))
        return 1 if any(r.startswith("pygpu") for r, _ in wrong) else 0
    if not args.copies:
        results = measure(args.sizes, args.peers, progress, args.budget)
        if tty:
            sys.stderr.write("\r\033[K")
        print(table(results, args.sizes))
        if args.plot and plot(results, args.sizes, args.plot):
            print(f"plot: {args.plot}")
    if not args.no_copies:
        copies = measure_copies([p for p in args.peers if p in ("cupy", "torch")], progress, args.budget)
        if tty:
            sys.stderr.write("\r\033[K")
        print(copies_table(copies))
    return 0


if __name__ == "__main__":
    sys.exit(main())
