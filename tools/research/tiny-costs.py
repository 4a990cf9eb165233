"""Issue 40's small gaps, priced piece by piece on the GPU machine:

    python tools/research/tiny-costs.py [--reps N] [--rounds R] [part ...]

Parts (default all): `small` (an 8-byte to_gpu / get against raw
cudaMemcpy, and the pieces of the call: the allocation, set, the raw
copies from pageable and page-locked memory, CuPy's and PyTorch's own),
`handoff` (torch.as_tensor of a GPUArray against a CuPy array, and of
plain objects that carry either one's __cuda_array_interface__ as it is,
with its stream entry None, and without it: what PyTorch's stream
handling costs), `async` (to_gpu_async of 16 MiB: the call, and the
pieces it is made of).  Needs CuPy (the raw calls); PyTorch for handoff.
Each row: the median of N calls, microseconds, in each of R rounds (the
cases of a part interleaved round by round, so that a host's drift
touches them all alike).
"""
import argparse
import time

import numpy as np

from pygpu.__main__ import median_seconds


class Carrier:
    """A plain object whose __cuda_array_interface__ is a given dict."""

    def __init__(self, iface):
        self.__cuda_array_interface__ = iface


def rounds(cases, reps, nrounds):
    """Print each case's medians (us) over the rounds, cases interleaved."""
    got = {name: [] for name in cases}
    for _ in range(nrounds):
        for name, fn in cases.items():
            got[name].append(median_seconds(fn, reps, warm=max(10, reps // 20)) * 1e6)
    width = max(map(len, cases))
    for name, us in got.items():
        print(f"  {name:<{width}}  " + "  ".join(f"{u:8.2f}" for u in us) + "   us", flush=True)


def small(reps, nrounds):
    import cupy as cp
    import pygpu
    from pygpu.bench import pinned_array
    rt = cp.cuda.runtime
    h = np.ones(1, np.float64)
    p = np.frombuffer(pinned_array(8), np.float64)
    p[:] = 1
    g = pygpu.to_gpu(h)
    d = g.ptr
    c = cp.zeros(1, np.float64)
    out = np.empty(1, np.float64)
    cases = {
        "raw cudaMemcpy H2D, page-locked": lambda: rt.memcpy(d, p.ctypes.data, 8, 1),
        "raw cudaMemcpy H2D, pageable": lambda: rt.memcpy(d, h.ctypes.data, 8, 1),
        "raw cudaMemcpyAsync H2D pageable + sync": lambda: (rt.memcpyAsync(d, h.ctypes.data, 8, 1, 0),
                                                           rt.streamSynchronize(0)),
        "raw cudaMemcpy D2H, page-locked": lambda: rt.memcpy(p.ctypes.data, d, 8, 2),
        "raw cudaMemcpy D2H, pageable": lambda: rt.memcpy(out.ctypes.data, d, 8, 2),
        "pygpu.to_gpu(pageable)": lambda: pygpu.to_gpu(h),
        "pygpu.to_gpu(page-locked)": lambda: pygpu.to_gpu(p),
        "pygpu.empty(1) (allocation and free)": lambda: pygpu.empty(1, np.float64),
        "g.set(pageable)": lambda: g.set(h),
        "g.set(page-locked)": lambda: g.set(p),
        "g.get()": g.get,
        "g.get(ary=pageable)": lambda: g.get(ary=out),
        "pygpu.memcpy_htod(ptr, pageable)": lambda: pygpu.memcpy_htod(d, h),
        "cupy.asarray(pageable)": lambda: cp.asarray(h),
        "cupy c.set(pageable)": lambda: c.set(h),
        "cupy c.get()": c.get,
    }
    try:
        import torch
        if torch.cuda.is_available():
            th = torch.from_numpy(h)
            cases["torch.from_numpy(pageable).cuda()"] = lambda: th.cuda()
    except ImportError:
        pass
    print("== 8 bytes")
    rounds(cases, reps, nrounds)


def handoff(reps, nrounds):
    import cupy as cp
    import pygpu
    import torch
    ours = pygpu.to_gpu(np.zeros((64, 64), np.float32))
    theirs = cp.zeros((64, 64), np.float32)
    cp.cuda.Device().synchronize()
    mine_d, cupy_d = ours.__cuda_array_interface__, theirs.__cuda_array_interface__
    print("== hand-offs to PyTorch")
    print("  ours: ", {k: v for k, v in mine_d.items() if k != "descr"})
    print("  CuPy's:", {k: v for k, v in cupy_d.items() if k != "descr"})

    def without(d, key):
        return {k: v for k, v in d.items() if k != key}
    cases = {
        "torch.as_tensor(ours)": lambda: torch.as_tensor(ours, device="cuda"),
        "torch.as_tensor(cupy)": lambda: torch.as_tensor(theirs, device="cuda"),
        "read ours": lambda: ours.__cuda_array_interface__,
        "read cupy": lambda: theirs.__cuda_array_interface__,
    }
    for name, d in (("ours", mine_d), ("cupy", cupy_d)):
        for how, dd in (("as it is", d), ("stream None", dict(d, stream=None)),
                        ("no stream entry", without(d, "stream"))):
            obj = Carrier(dd)
            cases[f"torch.as_tensor(carrier of {name}'s dict, {how})"] = (
                lambda obj=obj: torch.as_tensor(obj, device="cuda"))
    rounds(cases, reps, nrounds)


def async_parts(reps, nrounds):
    import pygpu
    from pygpu.bench import pageable_array, registration
    n = 16 << 20
    h, s = pageable_array(n), pygpu.Stream()
    g = pygpu.to_gpu(h)

    def call_only(fn):
        def run():
            t0 = time.perf_counter()
            out = fn()
            t1 = time.perf_counter()
            s.synchronize()
            del out
            return t1 - t0
        return run

    cases = {
        "to_gpu_async(16 MiB pageable, stream): the call": call_only(lambda: pygpu.to_gpu_async(h, stream=s)),
        "g.set_async(16 MiB pageable, stream): the call": call_only(lambda: g.set_async(h, stream=s)),
        "pygpu.empty(16 MiB, stream=s), made and freed": call_only(lambda: pygpu.empty(n, np.uint8, stream=s)),
        "to_gpu(16 MiB pageable, stream), whole": call_only(lambda: pygpu.to_gpu(h, stream=s)),
    }
    print("== 16 MiB asynchronous, registration off: the call's time alone (the stream waited for after)")
    with registration(0):
        got = {name: [] for name in cases}
        for _ in range(nrounds):
            for name, fn in cases.items():
                fn()
                ts = sorted(fn() for _ in range(max(20, reps // 20)))
                got[name].append(ts[len(ts) // 2] * 1e6)
        width = max(map(len, cases))
        for name, us in got.items():
            print(f"  {name:<{width}}  " + "  ".join(f"{u:8.2f}" for u in us) + "   us", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("parts", nargs="*", default=["small", "handoff", "async"])
    args = ap.parse_args()
    for part in args.parts:
        {"small": small, "handoff": handoff, "async": async_parts}[part](args.reps, args.rounds)


if __name__ == "__main__":
    main()
