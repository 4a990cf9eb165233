"""Faults: running out of memory in the middle of an operation, fork()
after the device was used, a kernel that leaves a sticky error, and
KeyboardInterrupt during a long staged transfer.  After each, the process
goes on: what failed says why, nothing is leaked, later calls work (or, for
a sticky error, say that they cannot).

The out-of-memory and fork tests run in fresh interpreters (run_python) on
the host backend, which can be given a small memory (PYGPU_HOST_MEMORY) and
the GPUs' fork rule (PYGPU_HOST_FORK_RULE=gpu); their GPU versions, and the
sticky error, are gpu_only.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import pygpu

HOST = pygpu.backend == "host"
MiB = 1 << 20
needs_host = pytest.mark.skipif(not HOST, reason="host backend settings (PYGPU_HOST_MEMORY, fork rule)")

# ---- out of memory in the middle of an operation -------------------------------------------

# Each attempt fails after it has started: the destination exists, and the
# operation runs out while making a temporary on the device (a gather
# buffer, a copy for overlapping operands, a DLPack copy...).
MID_OOM = r"""
import gc, json
import numpy as np
import pygpu
MiB = 1 << 20
assert pygpu.mem_get_info()[1] == 64 * MiB
report = {}
host = np.arange(24 * MiB, dtype=np.uint8)
big = pygpu.empty(48 * MiB, np.uint8)              # 16 MiB left
big[:] = 5
other = pygpu.to_gpu(np.arange(4 * MiB, dtype=np.uint8))
pinned0 = pygpu.pinned_pool_stats()["in_use"]

def attempt(name, fn):
    gc.collect()
    before = pygpu.mem_get_info()[0]
    try:
        fn()
        r = {"raised": None}
    except Exception as e:
        r = {"raised": type(e).__name__, "memory_error": isinstance(e, MemoryError),
             "gpu_error": isinstance(e, pygpu.GPUError), "message": str(e)}
    gc.collect()
    r["leaked"] = before - pygpu.mem_get_info()[0]
    r["pinned_leaked"] = pygpu.pinned_pool_stats()["in_use"] - pinned0
    report[name] = r

attempt("fill strided view", lambda: big[::2].fill(7))                      # in place: PyGPU's fill kernel
attempt("fill unaligned view", lambda: big[1:-1].view(np.uint16)[::2].fill(7))  # a dense temporary
attempt("set strided view", lambda: big[::2].__setitem__(Ellipsis, host))   # upload buffer
attempt("get through a device gather", lambda: big.reshape(-1, 256)[:, :128].get())
def narrow_rows():                                  # 24 MiB of rows of 4 B: no room to gather them on the device
    out = big.reshape(-1, 8)[:, :4].get()
    assert out.shape == (6 * MiB, 4) and (out[:, 1::2] == 5).all()     # (odd elements: never written)
attempt("get narrow rows (the host gathers when the device has no room)", narrow_rows)
attempt("overlapping assignment", lambda: big.__setitem__(slice(1, None), big[:-1]))
attempt("copy", lambda: big.copy())
attempt("reshape needing a copy", lambda: big.reshape(-1, 4)[:, :2].reshape(-1))
attempt("DLPack copy=True", lambda: big.__dlpack__(copy=True))
attempt("from_dlpack copy=True", lambda: pygpu.from_dlpack(big, copy=True))
attempt("concatenate", lambda: pygpu.concatenate([big[: 10 * MiB], big[: 10 * MiB]]))
attempt("to_gpu", lambda: pygpu.to_gpu(host))

# everything still works, and holds what it held
report["big_intact"] = bool((big[1:: MiB].get() == 5).all())      # (odd elements: never written)
report["kernels"] = pygpu.copy_kernels()["ready"]
report["other_intact"] = bool((other.get() == np.arange(4 * MiB, dtype=np.uint8)).all())
del other
gc.collect()
big[: 16 * MiB : 2] = 9                            # the same kind of operation, with room for it
report["works_after"] = bool((big[:4].get() == [9, 5, 9, 5]).all())
v = big[: 8 * MiB : 2]
v[...] = host[: 4 * MiB]
report["strided_after"] = bool((v.get() == host[: 4 * MiB]).all())
del big, v
gc.collect()
report["all_back"] = pygpu.mem_get_info()[0] == 64 * MiB
print(json.dumps(report))
"""


@needs_host
@pytest.mark.parametrize("staged", [False, True], ids=["direct", "staged"])
def test_out_of_memory_mid_operation_host(run_python, staged):
    env = {"PYGPU_BACKEND": "host", "PYGPU_HOST_MEMORY": "64M"}
    code = MID_OOM
    if staged:              # the pipeline in small chunks, from a small pinned pool
        code = "import pygpu; pygpu.transfer_config(min_bytes=0, chunk=16 << 10, depth=3)\n" + code
        env["PYGPU_PINNED_LIMIT"] = "256K"
    report = json.loads(run_python(code, env=env).stdout.splitlines()[-1])
    # Staged, a strided upload goes from the staging buffers straight into
    # the rows of the view: it needs no device buffer, and succeeds.
    may_succeed = {"set strided view"} if staged else set()
    if report["kernels"]:
        may_succeed.add("fill strided view")     # (the kernel fills the view where it is: no temporary)
        may_succeed.add("get through a device gather")   # (no room to gather it there: the host gathers)
    may_succeed.add("get narrow rows (the host gathers when the device has no room)")
    bad = {k: r for k, r in report.items() if isinstance(r, dict) and not (
        (r["raised"] is None and k in may_succeed or
         r["raised"] == "GPUMemoryError" and r["memory_error"] and r["gpu_error"] and "out of memory" in r["message"])
        and r["leaked"] == 0 and r["pinned_leaked"] == 0)}
    assert not bad, json.dumps(bad, indent=1)
    for key in ("big_intact", "other_intact", "works_after", "strided_after", "all_back"):
        assert report[key] is True, (key, report)


def test_pinned_pool_exhausted_mid_transfer(run_python):
    """A pinned pool too small for the staging buffers and the arrays get()
    returns: every transfer still happens (through ordinary memory)."""
    code = r"""
    import numpy as np, pygpu
    pygpu.transfer_config(min_bytes=0, chunk=64 << 10, depth=4)
    rng = np.random.default_rng(3)
    for n in (1000, 100_000, 1_000_000):
        a = rng.standard_normal(n)
        g = pygpu.to_gpu(a)
        assert (g.get() == a).all() and (g[::3].get() == a[::3]).all()
        g[::2] = a[1::2][: len(a[::2])]
    s = pygpu.pinned_pool_stats()
    assert s["in_use"] + s["cached"] <= s["limit"], s
    print("ok")
    """
    env = {"PYGPU_PINNED_LIMIT": "128K"}
    if HOST:
        env["PYGPU_BACKEND"] = "host"
    assert run_python(code, env=env).stdout.split()[-1] == "ok"


# ---- fork after the device was used --------------------------------------------------------

FORK = r"""
import json, os, sys, threading
import numpy as np
import pygpu
a = np.arange(1 << 16, dtype=np.float64)
g = pygpu.to_gpu(a)
s = pygpu.Stream()
e = pygpu.Event().record(s)
stop = threading.Event()

def busy():                                        # transfers in flight while we fork
    while not stop.is_set():
        pygpu.to_gpu(a[::3]).get()

threads = [threading.Thread(target=busy) for _ in range(2)]
for t in threads:
    t.start()
CALLS = {
    "get": lambda: g.get(), "set": lambda: g.set(a), "to_gpu": lambda: pygpu.to_gpu(a),
    "empty": lambda: pygpu.empty(10), "mem_alloc": lambda: pygpu.mem_alloc(64),
    "memcpy_htod": lambda: pygpu.memcpy_htod(g.gpudata, a[:8]), "Stream": pygpu.Stream,
    "Event": pygpu.Event, "synchronize": pygpu.synchronize, "Stream.synchronize": s.synchronize,
    "Event.query": e.query, "mem_get_info": pygpu.mem_get_info, "Device": lambda: pygpu.Device(0).name,
    "get_device": pygpu.get_device, "dlpack": lambda: g.__dlpack__(), "copy": lambda: g.copy(),
}
results = []
for round in range(%(forks)d):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        out = {"view": g[::2].shape[0] == len(a) // 2}    # no device access: fine
        for name, call in CALLS.items():
            try:
                call()
                out[name] = "ok"
            except pygpu.GPUError as exc:
                out[name] = "GPUError: " + str(exc)
        os.write(w, json.dumps(out).encode())
        sys.exit(0)                                # a normal exit: the child's deallocations run
    os.close(w)
    data = b""
    while chunk := os.read(r, 1 << 16):
        data += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    results.append({"status": status, "child": json.loads(data or b"{}")})
stop.set()
for t in threads:
    t.join()
assert (g.get() == a).all()                        # the parent is untouched
print(json.dumps(results))
"""


def run_forks(run_python, env, forks=5):
    # A forked child keeps what the parent's other threads had allocated,
    # with no thread left to free it: LeakSanitizer (tools/asan.sh) looks away.
    env = dict(env, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
    proc = run_python(FORK % {"forks": forks}, env=env, timeout=120)
    results = json.loads(proc.stdout.splitlines()[-1])
    assert len(results) == forks
    for r in results:
        assert r["status"] == 0, r
        assert r["child"]["view"] is True
    return [r["child"] for r in results]


@needs_host
def test_fork_child_works_on_the_host_backend(run_python):
    """The host backend survives fork: the child works, even with transfers
    in flight in other threads of the parent at the fork (their locks are
    held over it)."""
    for child in run_forks(run_python, {"PYGPU_BACKEND": "host"}, forks=20):
        assert all(v == "ok" for k, v in child.items() if k != "view"), child


@needs_host
def test_fork_child_gets_a_clear_error_under_the_gpu_rule(run_python):
    """With the GPUs' rule, every call that would reach the device raises
    GPUError saying that the process forked after using the device; the
    child exits normally (no hang, no crash)."""
    for child in run_forks(run_python, {"PYGPU_BACKEND": "host", "PYGPU_HOST_FORK_RULE": "gpu"}):
        for name, v in child.items():
            if name == "view":
                continue
            assert v.startswith("GPUError: ") and "forked after it had used the host device" in v, (name, v)
            assert "spawn" in v


FORK_DURING_TRANSFER = r"""
import json, os, resource, threading, time
import numpy as np
import pygpu
pygpu.transfer_config(min_bytes=0, chunk=1 << 20, depth=3, threads=2)
a = np.arange(1 << 20, dtype=np.float64)            # 8 MiB: staged, in 1 MiB chunks
stop = threading.Event()

def busy():
    while not stop.is_set():
        pygpu.to_gpu(a).get()

t = threading.Thread(target=busy, daemon=True)     # (daemon: a failure below ends the run, not hangs it)
t.start()
time.sleep(0.05)
spent = []
for _ in range(4):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        for _ in range(3):                         # the child's own staged transfers, beside the
            if not (pygpu.to_gpu(a).get() == a).all():  # parent's on the pool's blocks both inherited
                os.write(w, b'"wrong data in the child"')
                os._exit(1)
        u = resource.getrusage(resource.RUSAGE_SELF)
        time.sleep(0.4)                            # then idle: its workers should be too
        v = resource.getrusage(resource.RUSAGE_SELF)
        os.write(w, json.dumps(v.ru_utime + v.ru_stime - u.ru_utime - u.ru_stime).encode())
        os._exit(0)
    os.close(w)
    spent.append(json.loads(os.read(r, 100) or b'"the child died"'))
    os.close(r)
    assert os.waitpid(pid, 0)[1] == 0, spent
stop.set()
t.join()
print(json.dumps(spent))
"""


@pytest.mark.timing
@needs_host
def test_a_child_forked_during_a_transfer_does_not_spin(run_python):
    """A transfer running in another thread at the fork is the parent's: the
    child's workers do not keep spinning for it once the child's own
    transfers are done (they did, a core each, for the child's life), and
    the child's transfers are right while the parent's go on (the host
    backend's pool blocks were shared pages: each wrote the other's, stop 62)."""
    env = {"PYGPU_BACKEND": "host", "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0"}
    proc = run_python(FORK_DURING_TRANSFER, env=env, timeout=120)
    spent = json.loads(proc.stdout.splitlines()[-1])
    assert len(spent) == 4
    assert max(spent) < 0.2, spent            # CPU seconds over 0.4 s of sleep


FORK_BEFORE_USE = r"""
import os
import numpy as np
import pygpu                                       # imported, not used yet
pid = os.fork()
a = np.arange(10.0)
assert (pygpu.to_gpu(a).get() == a).all()          # both sides may use the device
if pid == 0:
    os._exit(0)
assert os.waitpid(pid, 0)[1] == 0
print("ok")
"""


def test_fork_before_using_the_device_is_fine(run_python):
    env = {"PYGPU_BACKEND": "host", "PYGPU_HOST_FORK_RULE": "gpu"} if HOST else {}
    assert run_python(FORK_BEFORE_USE, env=env).stdout.split()[-1] == "ok"


@pytest.mark.gpu_only
def test_fork_child_gets_a_clear_error_on_the_gpu(run_python):
    for child in run_forks(run_python, {}):
        for name, v in child.items():
            if name != "view":
                assert v.startswith("GPUError: ") and "forked after it had used the" in v, (name, v)


# ---- a kernel that leaves a sticky error ----------------------------------------------------

BAD_KERNEL = r"""
#include <cuda_runtime.h>
__global__ void write_to_null(int *p) { p[threadIdx.x] = 1; }
extern "C" int launch(void *stream)
{
    write_to_null<<<1, 32, 0, (cudaStream_t)stream>>>((int *)0);
    return (int)cudaGetLastError();
}
"""

STICKY = r"""
import ctypes, sys
import numpy as np
import pygpu
g = pygpu.to_gpu(np.arange(1000.0))
s = pygpu.Stream()
lib = ctypes.CDLL(sys.argv[1])
lib.launch.argtypes = [ctypes.c_void_p]
assert lib.launch(s.ptr) == 0                      # the launch itself succeeds
seen = []
for call in (s.synchronize, pygpu.synchronize, lambda: pygpu.to_gpu(np.ones(4)), lambda: g.get(),
             lambda: pygpu.mem_alloc(1 << 20)):
    try:
        call()
        seen.append("no error")
    except pygpu.GPUError as e:
        seen.append(f"{e.name}|{e}")
print("\n".join(seen))
"""


@pytest.mark.gpu_only
def test_sticky_error_is_reported_and_later_calls_refuse(tmp_path):
    """A kernel writes to address 0: the next synchronizing call raises a
    GPUError naming the illegal address, saying the context is unusable,
    and so does every later call; the process exits without crashing."""
    if pygpu.backend != "cuda":
        pytest.skip("the kernel is CUDA C")
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not os.path.exists(nvcc):
        pytest.skip("no nvcc to build the faulting kernel")
    src = tmp_path / "bad.cu"
    src.write_text(BAD_KERNEL)
    lib = tmp_path / "libbad.so"
    subprocess.run([nvcc, "-shared", "-Xcompiler", "-fPIC", "-o", str(lib), str(src)], check=True,
                   capture_output=True, timeout=300)
    proc = subprocess.run([sys.executable, "-c", STICKY, str(lib)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYGPU_BACKEND": "cuda"})
    assert proc.returncode == 0, proc.stderr           # no crash, no abort at exit
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 5, proc.stdout
    first = lines[0]
    assert first.split("|")[0] in ("cudaErrorIllegalAddress", "cudaErrorLaunchFailure"), first
    for line in lines:
        assert "unusable" in line, line


# ---- KeyboardInterrupt during a long staged transfer --------------------------------------------

@pytest.fixture
def staged_small():
    saved = pygpu.transfer_config()
    pygpu.transfer_config(min_bytes=0, chunk=4096, depth=2, threads=1)
    yield
    pygpu.transfer_config(**saved)


def interrupt_after(seconds, call):
    """Run call() with a SIGALRM due after `seconds` whose handler raises
    KeyboardInterrupt: the time until call() raised it, or None where
    call() returned first (a machine busy while the baseline was measured
    can make the alarm late)."""
    inside = [True]

    def handler(signum, frame):
        if inside[0]:           # (late, once call() has returned: nothing to stop)
            raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, handler)
    try:
        t0 = time.perf_counter()
        try:
            try:        # (armed in here: a busy machine may deliver it at once, still inside)
                signal.setitimer(signal.ITIMER_REAL, seconds)
                call()
            finally:
                inside[0] = False
        except KeyboardInterrupt:
            return time.perf_counter() - t0
        return None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def full_time(call):
    """The shortest of three uninterrupted runs of call()."""
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - t0)
    return best


INTERRUPT_TRIES = 8


@pytest.mark.timing
@pytest.mark.parametrize("direction", ["get", "strided get", "strided set", "get into strided host",
                                       "strided set of 4-byte elements"])
def test_interrupt_stops_staged_transfers_cleanly(staged_small, direction):
    """test_transfers.py interrupts a set(); the other directions of the
    pipeline stop as cleanly: between chunks (well before the transfer
    would have ended), the staging buffers free for the next transfer,
    which is correct.  How soon it stopped is a time on the wall clock,
    which a loaded machine stretches (the thread may wait a second for a
    core between the alarm and the next chunk): it must be short in one
    of INTERRUPT_TRIES tries, each against a baseline measured just
    before; a transfer that only stops at its end never is.  Every try,
    whatever its time, leaves the buffers free."""
    if direction == "get" and pygpu.backend != "host":
        pytest.skip("get() of a new array is one DMA into page-locked memory on a GPU, not staged")
    if direction == "strided get" and pygpu.copy_kernels()["ready"]:
        pytest.skip("the view is gathered on the device by PyGPU's kernel (on the host backend: on the CPU), then "
                    "goes down whole; on a GPU into page-locked memory, in one DMA: tests/test_no_kernels.py runs "
                    "this case without the kernels")
    n = 32 << 20
    a = (np.arange(n) % 251).astype(np.uint8)
    g = pygpu.to_gpu(a)
    out = np.empty(2 * n, np.uint8)[::2]
    calls = {"get": lambda: g.get(), "strided get": lambda: g[::2].get(),
             "strided set": lambda: g.__setitem__(slice(None, None, 2), a[1::2]),
             "get into strided host": lambda: g.get(ary=out),
             # up dense, scattered on the device slab by slab as the DMA is queued
             "strided set of 4-byte elements": lambda: g32[::2].set(h32)}
    g32 = pygpu.to_gpu(a.view(np.uint32))
    h32 = np.ascontiguousarray(a.view(np.uint32)[1::2])
    tries = []
    for _ in range(INTERRUPT_TRIES):
        whole = full_time(calls[direction])      # (the buffers are taken now: part of the baseline)
        in_use = pygpu.pinned_pool_stats()["in_use"]
        took = interrupt_after(whole / 10, calls[direction])
        assert pygpu.pinned_pool_stats()["in_use"] == in_use
        tries.append("not interrupted" if took is None else f"{took * 1e3:.1f}")
        tries[-1] += f" of {whole * 1e3:.1f} ms"
        if took is not None and took < 0.6 * whole:
            break
    else:
        pytest.fail(f"never stopped well before the end of the transfer in {INTERRUPT_TRIES} tries: {tries}")
    g.set(a)
    np.testing.assert_array_equal(g[::4093].get(), a[::4093])
    np.testing.assert_array_equal(g[1::2].get()[:1000], a[1::2][:1000])
    g32[::2].set(h32)
    np.testing.assert_array_equal(g32[::2].get(), h32)


INTERRUPT_IN_THREAD = r"""
import signal, threading, time
import numpy as np
import pygpu
pygpu.transfer_config(min_bytes=0, chunk=4096, depth=2, threads=1)
a = np.ones(16 << 20, np.uint8)
g = pygpu.empty(a.shape, np.uint8)
other = threading.Thread(target=lambda: [pygpu.to_gpu(a[:1 << 20]).get() for _ in range(20)])
other.start()
signal.signal(signal.SIGALRM, lambda *a: (_ for _ in ()).throw(KeyboardInterrupt))
try:
    signal.setitimer(signal.ITIMER_REAL, 0.02)     # (armed inside the try: it may fire at once)
    for _ in range(100):
        g.set(a)
    print("not interrupted")
except KeyboardInterrupt:
    pass
other.join(60)
assert not other.is_alive()
g.set(a)
assert int(g[::4096].get().sum()) == len(a) // 4096
print("ok")
"""


@pytest.mark.timing
def test_interrupt_with_another_thread_transferring(run_python):
    """The main thread is interrupted while a second thread transfers too:
    both finish, nothing hangs."""
    env = {"PYGPU_BACKEND": "host"} if HOST else {}
    out = run_python(textwrap.dedent(INTERRUPT_IN_THREAD), env=env, timeout=120).stdout.split()
    assert out[-1] == "ok"
