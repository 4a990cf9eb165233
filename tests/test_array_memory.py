"""GPUArray memory: no leaks of device memory or references, views keep
their memory alive, out-of-memory is a GPUMemoryError the process survives
(docs/api.md, GPUArray; host backend accounting from Backends).

The accounting tests run in a fresh interpreter on the host backend with a
small PYGPU_HOST_MEMORY, where mem_get_info() counts exactly what PyGPU
holds."""
import gc
import json
import re
import sys

import numpy as np

import pygpu
from gpuarray_helpers import assert_matches, assert_same_array, random_array

MiB = 1 << 20

# One round of everything that allocates, views, copies or frees.  Shared by
# the in-process reference count test and the host accounting subprocess.
WORK = r"""
import numpy as np
import pygpu

def work(i, src, out, key):
    g = pygpu.to_gpu(src)
    v = g[key]
    c = v.copy()
    h = c.get()
    assert (h == src[key]).all()
    assert v.get(ary=out) is out
    g2 = pygpu.GPUArray(src)
    g2.set(src)
    g2[1:5] = src[0]
    g2[::3] = g[::3]
    z = pygpu.zeros((100, 100), np.float32)
    e = pygpu.empty(1000 + i, np.uint8)
    o = pygpu.ones((7, 9), np.complex64, order="F")
    r = g.reshape(48, 64)
    f = g[:, ::2].reshape(-1)
    t = g.T.copy(order="F")
    fl = g.flatten()
    cat = pygpu.concatenate([g, g2], axis=1)
    st = pygpu.stack([g, g2])
    ar = pygpu.arange(100)
    fu = pygpu.full((10, 10), 1.5)
    like = pygpu.ones_like(g)
    zl = pygpu.zeros_like(src)
    el = pygpu.empty_like(g, dtype=np.int8)
    fl2 = pygpu.full_like(g, 2)
    vv = g.view(np.uint8)
    sq = g[None, :, None].squeeze()
    sw = g.swapaxes(0, 1)
    g.fill(0)
    z.fill(3)
    _ = repr(v), str(z)
    _ = np.asarray(g[5])
    try:
        g[[1, 2]]
    except IndexError:
        pass
    try:
        g.get(ary=np.empty(3))
    except (ValueError, TypeError):
        pass
"""

ns = {}
exec(WORK, ns)
work = ns["work"]


def make_inputs(rng):
    src = random_array(rng, (64, 48), np.float64)
    key = (slice(None, None, 2), slice(None, None, -1))
    out = np.empty(src[key].shape, np.float64)
    return src, out, key


def test_work_loop_reference_counts_flat(rng):
    """What the loop touches on the host side is released every time."""
    src, out, key = make_inputs(rng)
    work(0, src, out, key)  # first-use caches are not leaks
    gc.collect()
    before = [sys.getrefcount(x) for x in (src, out, key)]
    for i in range(500):
        work(i, src, out, key)
    gc.collect()
    after = [sys.getrefcount(x) for x in (src, out, key)]
    # (dtype objects are not counted: NumPy 2.4's own np.empty(n) and
    # np.zeros(n) leak a reference to float64 each call)
    assert after == before, "(src, out, key) reference counts"


def test_gpuarray_reference_counts_flat(rng):
    a = random_array(rng, (10, 12), np.float32)
    g = pygpu.to_gpu(a)
    owner = pygpu.mem_alloc(480)
    gc.collect()
    rc_g, rc_a, rc_owner = sys.getrefcount(g), sys.getrefcount(a), sys.getrefcount(owner)
    for _ in range(300):
        views = [g[1:], g.T, g.reshape(120), g.view(np.int32), g[3, ::2], g.squeeze(),
                 g.transpose(1, 0), g.swapaxes(0, 1)]
        views.append(views[0][::-1])
        del views
        g.set(a)
        g[...] = a
        g.get(ary=a)
        h = pygpu.GPUArray((10, 12), np.float32, gpudata=owner, base=owner)
        h[...] = g
        del h
    gc.collect()
    assert sys.getrefcount(g) == rc_g
    assert sys.getrefcount(a) == rc_a
    assert sys.getrefcount(owner) == rc_owner


HOST_LOOP = WORK + r"""
import gc, json, sys
MiB = 1 << 20
assert pygpu.backend == "host"
src = np.random.default_rng(5).standard_normal((64, 48))
key = (slice(None, None, 2), slice(None, None, -1))
out = np.empty(src[key].shape)
work(0, src, out, key)
gc.collect()
free0, total = pygpu.mem_get_info()
rc0 = [sys.getrefcount(src), sys.getrefcount(out)]
lowest = free0
for i in range(500):
    work(i, src, out, key)
    lowest = min(lowest, pygpu.mem_get_info()[0])  # freed when the names go, no gc
gc.collect()
free1 = pygpu.mem_get_info()[0]
print(json.dumps({"total": total, "free0": free0, "free1": free1, "lowest": lowest,
                  "rc_delta": [sys.getrefcount(src) - rc0[0], sys.getrefcount(out) - rc0[1]]}))
"""


def test_work_loop_device_memory_flat_host(run_python):
    proc = run_python(HOST_LOOP, env={"PYGPU_BACKEND": "host", "PYGPU_HOST_MEMORY": "256M"})
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["total"] == 256 * MiB, out
    assert abs(out["free1"] - out["free0"]) <= MiB, out
    assert out["free0"] - out["lowest"] <= MiB, ("memory is held past the loop body", out)
    assert out["rc_delta"] == [0, 0], out


# ---- views keep their memory alive -----------------------------------------------------

def test_views_outlive_their_parent(rng):
    a = random_array(rng, (40, 50), np.complex128)
    g = pygpu.to_gpu(a)
    v = g[1::2, ::-3]
    t = g.T
    r = g.reshape(2000)
    vv = v[2:, None]
    parent_id = id(g)
    del g
    gc.collect()
    assert id(v.base) == parent_id, "the view keeps its base"
    junk = [pygpu.to_gpu(np.full((40, 50), 7 + 7j)) for _ in range(20)]  # reuse freed memory
    assert_matches(v, a[1::2, ::-3])
    assert_matches(t, a.T)
    assert_matches(r, a.reshape(2000))
    del v, t, r
    gc.collect()
    junk += [pygpu.to_gpu(np.full((40, 50), 9 + 9j)) for _ in range(20)]
    assert_matches(vv, a[1::2, ::-3][2:, None])
    vv[...] = 1j
    expect = a[1::2, ::-3][2:, None].copy()
    expect[...] = 1j
    assert_same_array(vv.get(), expect)


def test_view_of_mem_alloc_keeps_base_alive(rng):
    a = random_array(rng, (16,), np.float64)
    alloc = pygpu.mem_alloc(a.nbytes)
    pygpu.memcpy_htod(alloc, a)
    g = pygpu.GPUArray((4, 4), np.float64, gpudata=alloc, base=alloc)
    v = g[::-1, 1]
    del alloc, g
    gc.collect()
    junk = [pygpu.to_gpu(np.full(16, -1.0)) for _ in range(20)]
    assert_matches(v, a.reshape(4, 4)[::-1, 1])
    del junk


HOST_VIEW_LIFETIME = r"""
import gc, json
import numpy as np
import pygpu
MiB = 1 << 20
gc.collect()
free0 = pygpu.mem_get_info()[0]
g = pygpu.empty((4 * MiB,), np.uint8)
held = free0 - pygpu.mem_get_info()[0]
v = g[MiB:2 * MiB:3]
w = g.reshape(2 * MiB, 2)[5]
del g
gc.collect()
after_parent = free0 - pygpu.mem_get_info()[0]
del v
gc.collect()
after_one_view = free0 - pygpu.mem_get_info()[0]
del w
freed_without_gc = free0 - pygpu.mem_get_info()[0]
gc.collect()
print(json.dumps({"held": held, "after_parent": after_parent,
                  "after_one_view": after_one_view, "freed_without_gc": freed_without_gc,
                  "end": free0 - pygpu.mem_get_info()[0]}))
"""


def test_views_hold_and_release_memory_host(run_python):
    proc = run_python(HOST_VIEW_LIFETIME,
                      env={"PYGPU_BACKEND": "host", "PYGPU_HOST_MEMORY": "64M"})
    out = json.loads(proc.stdout.splitlines()[-1])
    assert 4 * MiB <= out["held"] <= 5 * MiB, out
    assert out["after_parent"] == out["held"], ("freed while views live", out)
    assert out["after_one_view"] == out["held"], ("freed while a view lives", out)
    assert out["freed_without_gc"] <= MiB // 4, ("not freed with the last view", out)
    assert out["end"] <= MiB // 4, out


# ---- out of memory ---------------------------------------------------------------------

HOST_OOM = r"""
import gc, json, sys
import numpy as np
import pygpu
MiB = 1 << 20
LIMIT = 64 * MiB
assert pygpu.mem_get_info()[1] == LIMIT
free0 = pygpu.mem_get_info()[0]
host_big = np.zeros(LIMIT + 8, np.uint8)
rc_host = sys.getrefcount(host_big)
report = {}

def attempt(name, fn):
    before = pygpu.mem_get_info()[0]
    try:
        fn()
        result = {"raised": None}
    except Exception as e:
        result = {"raised": type(e).__name__,
                  "gpu_memory_error": isinstance(e, pygpu.GPUMemoryError),
                  "memory_error": isinstance(e, MemoryError), "message": str(e)}
    gc.collect()
    result["leaked"] = before - pygpu.mem_get_info()[0]
    report[name] = result

n8 = LIMIT // 8 + 1
attempt("GPUArray", lambda: pygpu.GPUArray(n8))
attempt("GPUArray 2-d", lambda: pygpu.GPUArray((8192, 8192), np.complex64))
attempt("empty", lambda: pygpu.empty((n8,), np.float64))
attempt("empty F", lambda: pygpu.empty((2, n8 // 2 + 1), order="F"))
attempt("zeros", lambda: pygpu.zeros(n8))
attempt("ones", lambda: pygpu.ones(n8))
attempt("full", lambda: pygpu.full(n8, 1.5))
attempt("arange", lambda: pygpu.arange(n8, dtype=np.float64))
attempt("to_gpu", lambda: pygpu.to_gpu(host_big))
attempt("GPUArray(host)", lambda: pygpu.GPUArray(host_big))
attempt("zeros_like host", lambda: pygpu.zeros_like(host_big))

big = pygpu.empty(40 * MiB, np.uint8)            # 24 MiB left
free_big = pygpu.mem_get_info()[0]
attempt("copy", lambda: big.copy())
attempt("copy F", lambda: big.reshape(4, -1).copy(order="F"))
attempt("flatten", lambda: big.reshape(2, -1).flatten())
attempt("reshape copy", lambda: big.reshape(2, -1)[:, ::1].T.reshape(-1))
attempt("concatenate", lambda: pygpu.concatenate([big, big[:1]]))
attempt("stack", lambda: pygpu.stack([big]))
attempt("empty_like", lambda: pygpu.empty_like(big))
attempt("full_like", lambda: pygpu.full_like(big, 3))
report["free_big_unchanged"] = pygpu.mem_get_info()[0] == free_big

# the process goes on: memory still works and comes back
src = np.random.default_rng(2).standard_normal(MiB)  # 8 MiB
g = pygpu.to_gpu(src)
report["round_trip_while_big"] = bool((g.get() == src).all())
del big, g
gc.collect()
report["free_back"] = pygpu.mem_get_info()[0] == free0
half = pygpu.empty(LIMIT // 2, np.uint8)
half.fill(7)
report["half_ok"] = bool((half[::MiB].get() == 7).all())
del half
gc.collect()
report["free_end"] = pygpu.mem_get_info()[0] == free0
report["rc_host_delta"] = sys.getrefcount(host_big) - rc_host
print(json.dumps(report))
"""


def test_out_of_memory_host(run_python):
    proc = run_python(HOST_OOM, env={"PYGPU_BACKEND": "host", "PYGPU_HOST_MEMORY": "64M"})
    report = json.loads(proc.stdout.splitlines()[-1])
    bad = {}
    for name, result in report.items():
        if not isinstance(result, dict):
            continue
        if not (result["raised"] == "GPUMemoryError" and result["gpu_memory_error"]
                and result["memory_error"] and result["message"] and result["leaked"] == 0):
            bad[name] = result
    assert not bad, "expected GPUMemoryError, nothing held afterwards: %s" % json.dumps(
        bad, indent=1)
    # Each names what it asked for as NumPy does, and the device's memory.
    named = re.compile(r"Unable to allocate \S+ \S+ for an array with shape \([0-9, ]+\) and data type "
                       r"\w+ on device 0 \(\S+ \S+ free of 64.0 MiB\): hostMallocAsync: ")
    unnamed = {k: r["message"] for k, r in report.items() if isinstance(r, dict) and not named.match(r["message"])}
    assert not unnamed, json.dumps(unnamed, indent=1)
    assert report["to_gpu"]["message"].startswith(
        "Unable to allocate 64.0 MiB for an array with shape (67108872,) and data type uint8 on device 0 "
        "(64.0 MiB free of 64.0 MiB): "), report["to_gpu"]
    assert report["GPUArray 2-d"]["message"].startswith(
        "Unable to allocate 512. MiB for an array with shape (8192, 8192) and data type complex64 on device 0 "
        "(64.0 MiB free of 64.0 MiB): "), report["GPUArray 2-d"]
    assert report["copy"]["message"].startswith(
        "Unable to allocate 40.0 MiB for an array with shape (41943040,) and data type uint8 on device 0 "
        "(24.0 MiB free of 64.0 MiB): "), report["copy"]
    for key in ("free_big_unchanged", "round_trip_while_big", "free_back", "half_ok",
                "free_end"):
        assert report[key] is True, (key, report)
    assert report["rc_host_delta"] == 0, report
