"""Long create/slice/transfer/export/free loops leave nothing behind.

test_array_memory.py checks the GPUArray work loop (device memory and the
reference counts of its inputs).  This file runs loops over everything
else that allocates, in phases, and measures after each phase what could
leak:

  device     free bytes of mem_get_info (exact on the host backend with a
             PYGPU_HOST_MEMORY limit: it counts what PyGPU holds)
  pinned     the pinned pool's in_use and cached bytes
  python     tracemalloc's traced bytes, gc-tracked objects, the live
             instances of each PyGPU type (a heap type's reference count
             grows with its instances) and the reference counts of the
             long-lived inputs

Each phase runs a warm-up round (first-use caches are not leaks), then
ROUNDS rounds, measured between the first and the last.  The loops run in
a fresh interpreter (run_python) with the staging pipeline forced on in
small chunks and the block cache on, so that every path that takes and
gives back memory is exercised.
"""
import json
import os

import pytest

import pygpu

HOST = pygpu.backend == "host"
ROUNDS = int(os.environ.get("PYGPU_LEAK_ROUNDS", "200"))      # (fewer under the sanitizers: test_sanitizers.py)
MiB = 1 << 20
PRELUDE = "import sys; sys.path.insert(0, %r)\n" % os.path.dirname(os.path.abspath(__file__))

LOOPS = r"""
import gc, json, sys, tracemalloc, warnings
import numpy as np
import pygpu, pygpu.driver as drv
from dlpack_helpers import FakeProducer, READ_ONLY

warnings.simplefilter("ignore")
HOST = pygpu.backend == "host"
ROUNDS = %(rounds)d
pygpu.transfer_config(min_bytes=0, chunk=16 << 10, depth=3, threads=2)
rng = np.random.default_rng(1)
src = rng.standard_normal((96, 80))
big = rng.standard_normal(1 << 17)                  # 1 MiB: many staging chunks
ints = np.arange(1000, dtype=np.int32)
inputs = (src, big, ints)
TYPES = (pygpu.GPUArray, pygpu.DeviceAllocation, pygpu.HostAllocation, pygpu.Stream, pygpu.Event,
         pygpu.cudaError_t)


def phase_dlpack(i):
    g = pygpu.to_gpu(src)
    for mv in (None, (1, 0), (1, 1)):
        cap = g[::2, 1:].__dlpack__(max_version=mv)
        h = pygpu.from_dlpack(cap)                  # taken
        assert h.shape == (48, 79)
        del cap, h
        g.__dlpack__(max_version=mv)                # never taken: frees itself
    c = pygpu.from_dlpack(g, copy=True)
    if HOST:
        n = np.from_dlpack(g.T)                     # NumPy views it in place
        assert n[3, 5] == src[5, 3]
        v = pygpu.from_dlpack(src[::3])             # and we view NumPy's
        w = pygpu.asarray(ints)
        p = FakeProducer(src, flags=READ_ONLY if i & 1 else 0)
        f = pygpu.from_dlpack(p)
        del n, v, w, f
    h = g.__dlpack__(dl_device=(1, 0), copy=True)   # a host copy, flagged as copied
    del h, c, g


def phase_raw(i):
    a = pygpu.mem_alloc(4096 + i)
    b = pygpu.mem_alloc(4096 + i)
    pygpu.memcpy_htod(a, ints)
    pygpu.memcpy_dtod(b, a, 4000)
    pygpu.memset_d8(a, 7, 100)
    out = np.empty_like(ints)
    pygpu.memcpy_dtoh(out, b)
    assert (out == ints).all()
    g = pygpu.GPUArray((1000,), np.int32, gpudata=a, base=a)
    g2 = pygpu.GPUArray((10, 100), np.int32, gpudata=b.ptr, base=b, strides=(400, 4))
    a.free()                                        # g still uses it: given back with g
    del g, g2
    b.free()
    h = pygpu.mem_alloc_host(8192)
    np.frombuffer(h, np.uint8)[:] = 1
    h.free()
    p = pygpu.pagelocked_zeros((30, 40), np.float32, order="F")
    r = pygpu.register_host_memory(np.ones(512))
    r.base.unregister()
    m = drv.to_device(ints)
    back = drv.from_device(m, ints.shape, ints.dtype)
    assert (back == ints).all()
    del p, r, m


def phase_streams(i):
    s = pygpu.Stream(non_blocking=bool(i & 1), priority=-(i %% 3))
    e0, e1 = pygpu.Event(), pygpu.Event(timing=False)
    e0.record(s)
    with s:
        g = pygpu.to_gpu(ints)
        g.fill(3)
        e1.record()
    s.wait_event(e1)
    z = pygpu.mem_alloc(0, stream=s)                # (holds s: an empty allocation must let it go)
    with s:
        z2 = pygpu.mem_alloc(0)
    del z, z2
    s.synchronize()
    assert e0.query() and s.query()
    e2 = s.record()
    e2.synchronize()
    e0.elapsed_time(e2)
    with pygpu.Device(0):
        pygpu.synchronize()
    ev = pygpu.cudaEvent_t()
    st = pygpu.cudaStream_t(1)
    pygpu.cudaEventRecord(ev, st)
    pygpu.cudaStreamSynchronize(st)
    del g, s, e0, e1, e2, ev, st


def phase_staged(i):
    g = pygpu.to_gpu(big)                           # through the pipeline
    g[::2] = big[1::2]
    h = g.get()
    assert h[1] == big[1] and h[0] == big[1]
    h2 = g[::3].get(pagelocked=True)
    out = np.empty(len(big[::3]))
    g[::3].get(ary=out)
    g2 = pygpu.empty((256, 512))
    g2[::2, ::3] = np.asfortranarray(rng.standard_normal((128, 171)))
    g2.set_async(np.zeros((256, 512)))
    del g, h, h2, g2


def phase_errors(i):
    g = pygpu.to_gpu(src)
    bad = [
        lambda: pygpu.empty(-1), lambda: pygpu.empty(2 ** 62), lambda: pygpu.empty(3, object),
        lambda: g[1, 2, 3], lambda: g[[0, 1]], lambda: g.__setitem__(slice(None), np.ones(5)),
        lambda: g.get(ary=np.empty(3)), lambda: g.reshape(7, 7), lambda: g.view(np.int8).view(object),
        lambda: pygpu.GPUArray((4,), gpudata=pygpu.mem_alloc(32), strides=(2 ** 62,)),
        lambda: pygpu.to_gpu(np.array(["x"])), lambda: pygpu.memcpy_htod(pygpu.mem_alloc(8), ints),
        lambda: pygpu.from_dlpack(FakeProducer(src, lanes=2)),
        lambda: pygpu.from_dlpack(FakeProducer(src, strides=(2 ** 62, 1))),
        lambda: pygpu.from_dlpack(FakeProducer(src, version=(2, 0))),
        lambda: pygpu.from_dlpack(FakeProducer(src, device=(7, 0))),
        lambda: pygpu.Event().elapsed_time(pygpu.Event()), lambda: pygpu.Stream(priority="x"),
        lambda: pygpu.to_gpu(src, stream=-1), lambda: g.__dlpack__(dl_device=(7, 0)),
        lambda: pygpu.mem_alloc_host(2 ** 62),
    ]
    if HOST:                                        # out of memory mid-way (PYGPU_HOST_MEMORY)
        bad += [lambda: pygpu.empty(600 << 20, np.uint8), lambda: pygpu.to_gpu(np.zeros(600 << 20, np.uint8))]
    for call in bad:
        try:
            call()
        except Exception:
            pass
        else:
            raise AssertionError("no error")
    a = pygpu.mem_alloc(800)
    v = pygpu.GPUArray((100,), np.float64, gpudata=a)
    a.free()
    try:
        v.get()
    except ValueError:
        pass
    del g, v, a


def phase_lowlevel(i):
    da = pygpu.DeviceArray_int32(ints.copy())
    da.allocate()
    da.to_device()
    da.set(7, 1)
    da.to_host()
    da2 = pygpu.DeviceArray_float64([4, 5], "F")
    da2.allocate()
    da2.set(np.ones((4, 5)))
    p = pygpu.pointer_wrapper_float64()
    p.create(16)
    p.destroy()
    pygpu.cudaGetDevice(), pygpu.cudaMemGetInfo(), pygpu.cudaDeviceProp(0).name()
    del da, da2, p


def measure():
    gc.collect()
    free = pygpu.mem_get_info()[0]
    ps = pygpu.pinned_pool_stats()
    return {"device": free, "in_use": ps["in_use"], "cached": ps["cached"],
            "traced": tracemalloc.get_traced_memory()[0], "objects": len(gc.get_objects()),
            "instances": [sys.getrefcount(t) for t in TYPES],
            "inputs": [sys.getrefcount(x) for x in inputs]}


tracemalloc.start()
report = {}
for name in ("dlpack", "raw", "streams", "staged", "errors", "lowlevel"):
    fn = globals()["phase_" + name]
    for i in range(3):
        fn(i)                                       # warm-up: caches fill, first-use state
    before = measure()
    for i in range(ROUNDS):
        fn(i)
    after = measure()
    report[name] = {k: (after[k] - before[k]) if not isinstance(before[k], list)
                    else [b - a for a, b in zip(before[k], after[k])] for k in before}
tracemalloc.stop()
print(json.dumps({"rounds": ROUNDS, "phases": report}))
"""


def check_report(report, device_exact):
    bad = {}
    for name, d in report["phases"].items():
        problems = []
        if device_exact and d["device"] != 0:
            problems.append(f"device memory {-d['device']:+d} bytes")
        if not device_exact and abs(d["device"]) > 4 * MiB:
            problems.append(f"device memory {-d['device']:+d} bytes")
        if d["in_use"] != 0:
            problems.append(f"pinned in use {d['in_use']:+d}")
        # The pool keeps what the busiest moment took: on a loaded machine a
        # staged transfer whose workers lag takes a buffer more, and keeps it
        # cached (a leak of buffers shows as "in use", or as cached memory
        # growing with the rounds, past a few buffers).
        if d["cached"] > 4 * MiB:
            problems.append(f"pinned cached {d['cached']:+d}")
        if any(d["instances"]):
            problems.append(f"live instances of the PyGPU types {d['instances']}")
        if any(d["inputs"]):
            problems.append(f"input reference counts {d['inputs']}")
        # a few objects and bytes of interpreter caches may come and go
        if d["objects"] > 50:
            problems.append(f"{d['objects']:+d} gc-tracked objects")
        if d["traced"] > 64 << 10:
            problems.append(f"{d['traced']:+d} bytes traced by tracemalloc")
        if problems:
            bad[name] = problems
    assert not bad, json.dumps(bad, indent=1)


@pytest.mark.timing        # (how many staging buffers the pool keeps depends on the machine's load)
def test_loops_leave_nothing_host(run_python):
    """Six loops of ROUNDS rounds each on the host backend: device memory
    exactly flat, the pinned pool flat, nothing left in Python."""
    if not HOST:
        pytest.skip("exact device accounting is the host backend's (PYGPU_HOST_MEMORY)")
    code = PRELUDE + LOOPS % {"rounds": ROUNDS}
    proc = run_python(code, env={"PYGPU_BACKEND": "host", "PYGPU_HOST_MEMORY": "512M", "PYGPU_BLOCK_CACHE": "1"},
                      timeout=300)
    report = json.loads(proc.stdout.splitlines()[-1])
    print(f"\nleak loops: {len(report['phases'])} phases x {report['rounds']} rounds")
    check_report(report, device_exact=True)


@pytest.mark.gpu_only
def test_loops_leave_nothing_gpu(run_python):
    """The same loops on the GPU: the pool trimmed, device memory flat
    within the runtime's own slack."""
    code = (PRELUDE + LOOPS % {"rounds": ROUNDS}).replace(
        "    gc.collect()\n    free = pygpu.mem_get_info()[0]",
        "    gc.collect()\n    pygpu.synchronize()\n    pygpu.trim_memory_pool()\n    free = pygpu.mem_get_info()[0]")
    proc = run_python(code, timeout=600)
    check_report(json.loads(proc.stdout.splitlines()[-1]), device_exact=False)
