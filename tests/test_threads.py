"""Threads: eight Python threads transferring, slicing and exporting on
shared arrays, each on its own stream, get the right results, with no
deadlock (every join has a timeout, so a deadlock fails the test instead of
hanging it), and blocking calls let other threads run (the GIL is released).

The staging pipeline is forced on in small chunks, so that the threads
contend for its engine and workers and for the pinned pool (process-wide
state behind locks); one variant also turns on the block cache (module
state, under the GIL).
"""
import os
import threading
import time

import numpy as np
import pytest

import pygpu

HOST = pygpu.backend == "host"
NTHREADS = 8
ROUNDS = 25
JOIN_TIMEOUT = 120


@pytest.fixture
def staging():
    saved = pygpu.transfer_config()
    pygpu.transfer_config(min_bytes=0, chunk=16 << 10, depth=3, threads=2)
    yield
    pygpu.transfer_config(**saved)


def run_threads(target, n=NTHREADS, timeout=JOIN_TIMEOUT):
    """Start n threads on target(k) together; join with a timeout (seconds);
    re-raise the first error."""
    errors = []
    barrier = threading.Barrier(n)

    def body(k):
        try:
            barrier.wait(timeout=timeout)
            target(k)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append((k, e))

    threads = [threading.Thread(target=body, args=(k,), daemon=True) for k in range(n)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    hung = [t.name for t in threads if t.is_alive()]
    assert not hung, f"deadlock: {hung} still running after {timeout} s"
    if errors:
        k, e = errors[0]
        raise AssertionError(f"thread {k} failed ({len(errors)} of {n} did)") from e


def shared_work(shared_host, shared, out):
    """Each thread reads slices of `shared`, writes its own rows of `out`,
    moves its own arrays through the pipeline and exports through DLPack."""
    rows = out.shape[0] // NTHREADS

    def work(k):
        rng = np.random.default_rng(k)
        s = pygpu.Stream(non_blocking=bool(k & 1))
        mine = rng.standard_normal((200, 130))
        for r in range(ROUNDS):
            # reading shared data, through views, on my stream
            key = (slice(k, None, NTHREADS), slice(None, None, -(1 + r % 3)))
            np.testing.assert_array_equal(shared[key].get(stream=s), shared_host[key])
            np.testing.assert_array_equal(shared.T[::7].copy(stream=s).get(stream=s), shared_host.T[::7])
            # writing my rows of a shared array
            block = np.full((rows, out.shape[1]), k * 1000 + r, out.dtype)
            out[k * rows:(k + 1) * rows] = block
            out[k * rows:(k + 1) * rows:2].fill(k * 1000 + r, stream=s)
            s.synchronize()
            # my own data, up and down through the pipeline (strided both ways)
            g = pygpu.to_gpu(mine, stream=s)
            g[::2, 1::3] = mine[1::2, 2::3]
            expect = mine.copy()
            expect[::2, 1::3] = mine[1::2, 2::3]
            np.testing.assert_array_equal(g.get(stream=s), expect)
            # exports: DLPack out and back (and NumPy on the host backend)
            v = pygpu.from_dlpack(g[3:, ::2])
            np.testing.assert_array_equal(v.get(), expect[3:, ::2])
            if HOST:
                n = np.from_dlpack(shared[k::NTHREADS])
                np.testing.assert_array_equal(n, shared_host[k::NTHREADS])
                back = pygpu.from_dlpack(mine[::3])
                np.testing.assert_array_equal(back.get(), mine[::3])
            with s:
                e = pygpu.Event().record()
            e.synchronize()
            del g, v
    return work


@pytest.mark.timing
def test_eight_threads_shared_arrays(staging):
    rng = np.random.default_rng(0)
    shared_host = rng.standard_normal((NTHREADS * 12, 96))
    shared = pygpu.to_gpu(shared_host)
    out = pygpu.zeros((NTHREADS * 10, 64), np.int64)
    pygpu.trim_pinned_pool()        # (what is in use now is held by arrays, not by the staging lanes)
    in_use = pygpu.pinned_pool_stats()["in_use"]
    run_threads(shared_work(shared_host, shared, out))
    np.testing.assert_array_equal(shared.get(), shared_host)       # nobody wrote it
    final = out.get()
    for k in range(NTHREADS):
        np.testing.assert_array_equal(final[k * 10:(k + 1) * 10], k * 1000 + ROUNDS - 1)
    del final                       # (get() gave it pinned memory from the pool)
    pygpu.trim_pinned_pool()
    assert pygpu.pinned_pool_stats()["in_use"] == in_use


LANES_SCRIPT = r"""
import sys
sys.path.insert(0, TESTS_HERE)
import numpy as np, pygpu, test_threads as t
nthreads, rounds = NTHREADS_HERE, 4
pygpu.transfer_config(min_bytes=0, chunk=64 << 10, depth=3, threads=2)
ndev = pygpu.device_count()

def work(k):
    dev = k % ndev
    a = np.random.default_rng(k).standard_normal((1 << 17) + 64 * k)   # about 1 MiB, each its own size
    with pygpu.Device(dev):
        for r in range(rounds):
            g = pygpu.to_gpu(a * r)
            assert g.device.id == dev
            out = np.empty_like(a)
            g.get(ary=out)
            np.testing.assert_array_equal(out, a * r)
            v = g[::3]
            v.get(ary=out[: v.size])                    # (a view: gathered, or the staged view)
            np.testing.assert_array_equal(out[: v.size], (a * r)[::3])

t.run_threads(work, nthreads)                           # (together; a hang or an error fails)
pygpu.trim_pinned_pool()
print("in use", pygpu.pinned_pool_stats()["in_use"])
"""


@pytest.mark.timing
@pytest.mark.parametrize("nthreads,devices", [(4, 1), (12, 1), (8, 2)])
def test_concurrent_transfers_each_take_a_lane(run_python, nthreads, devices):
    """Threads transferring at once (more than a device's lanes, too, and on
    two devices) are all staged: each takes a lane of staging buffers of
    its own (or waits for one), none declines to the runtime's slow way,
    the data arrive whole, and once trimmed no page-locked memory stays in
    use."""
    env = {"PYGPU_STAGING_TRACE": "1"}
    if HOST:
        env.update(PYGPU_BACKEND="host", PYGPU_HOST_DEVICES=str(devices))
    elif pygpu.device_count() < devices:
        pytest.skip(f"needs {devices} devices")
    import os
    code = LANES_SCRIPT.replace("NTHREADS_HERE", str(nthreads)).replace(
        "TESTS_HERE", repr(os.path.dirname(os.path.abspath(__file__))))
    proc = run_python(code, env=env, timeout=JOIN_TIMEOUT + 60)
    routes = [line for line in proc.stderr.splitlines() if line.startswith("pygpu route:")]
    assert not [line for line in routes if "declined" in line], proc.stderr[-2000:]
    ups = [line for line in routes if line.startswith("pygpu route: up ")]
    downs = [line for line in routes if line.startswith("pygpu route: down ")]
    assert len(ups) == nthreads * 4 and all(": staged (" in line for line in ups), ups[:4]
    assert len([line for line in downs if ": staged (" in line]) == nthreads * 4, downs[:4]
    assert proc.stdout.split()[-1] == "0"


CROWD_SCRIPT = r"""
import re, sys
sys.path.insert(0, TESTS_HERE)
import numpy as np, pygpu, test_threads as t
pygpu.transfer_config(min_bytes=0, chunk=256 << 10, depth=4, threads=2, crowd_up=128 << 10, crowd_down=128 << 10,
                      crowd_threads=1)

def work(k):
    rng = np.random.default_rng(k)
    for r in range(3):
        a = rng.standard_normal(rng.integers(1 << 15, 1 << 18))    # 256 KiB to 2 MiB: whole and ring
        g = pygpu.to_gpu(a if r < 2 else a[::2])                    # (and a gathered upload)
        host = a if r < 2 else a[::2]
        out = np.empty_like(host)
        g.get(ary=out)
        np.testing.assert_array_equal(out, host)
        np.testing.assert_array_equal(g[1::3].get(), host[1::3])    # (a strided device view)
for _ in range(ROUNDS_HERE):
    t.run_threads(work)
pygpu.trim_pinned_pool()
print("in use", pygpu.pinned_pool_stats()["in_use"])
"""


@pytest.mark.timing
def test_crowded_transfers_take_small_lanes(run_python):
    """Eight threads transferring at once: the transfers that start while
    another is at work on the device go through lanes of crowd_up (uploads)
    or crowd_down (downloads) bytes, which the trace shows as chunks of at
    most that size in transfers of more (alone, their first chunk is of 256
    KiB); an upload's chunks are copied by crowd_threads threads while
    another transfer is at work (one part each here, where two threads cut
    a chunk of more than 64 KiB in two or more), a download's by threads;
    every transfer arrives whole, in lanes of either size, and once trimmed
    no page-locked memory is in use."""
    import os
    import re
    env = {"PYGPU_STAGING_TRACE": "1"}
    if HOST:
        env.update(PYGPU_BACKEND="host", PYGPU_HOST_DEVICES="1")
    code = CROWD_SCRIPT.replace("TESTS_HERE", repr(os.path.dirname(os.path.abspath(__file__)))).replace(
        "ROUNDS_HERE", "3")
    proc = run_python(code, env=env, timeout=JOIN_TIMEOUT + 60)
    assert proc.stdout.split()[-1] == "0"
    biggest = {"h2d": [], "d2h": []}        # each staged transfer of over 256 KiB: its biggest chunk
    parts = {"h2d": [], "d2h": []}          # the parts of each host copy of more than 64 KiB
    for line in proc.stderr.splitlines():
        m = re.match(r"pygpu staging (h2d|d2h)( \(whole\))?: .* b0@[0-9.]+\[(\d+)K\]", line)
        if m and int(m.group(3)) > 256:
            biggest[m.group(1)].append(max(int(c) for c in re.findall(r" c\d+@[0-9.]+\[(\d+)K\]", line)))
        if m:
            parts[m.group(1)] += [int(n) for k, n in re.findall(r" c\d+@[0-9.]+\[(\d+)K\]\{(\d+) parts", line)
                                  if int(k) > 64]
    assert 1 in parts["h2d"], sorted(parts["h2d"])                      # crowded uploads: crowd_threads
    assert parts["d2h"] and min(parts["d2h"]) >= 2, sorted(parts["d2h"])   # downloads: threads
    assert biggest["h2d"] and biggest["d2h"], proc.stderr[-2000:]
    assert max(biggest["h2d"] + biggest["d2h"]) <= 256                 # (chunk)
    assert min(biggest["h2d"]) <= 128, sorted(biggest["h2d"])           # crowded uploads: crowd_up
    assert min(biggest["d2h"]) <= 128, sorted(biggest["d2h"])          # crowded downloads: crowd_down
    assert max(biggest["h2d"]) == 256 or max(biggest["d2h"]) == 256     # (a transfer alone: chunk)


ALONE_SCRIPT = r"""
import sys, threading
import numpy as np, pygpu
pygpu.transfer_config(min_bytes=0, chunk=1 << 20, depth=2, threads=2, threads_alone=5,
                      register_limit=0)                        # (staged every time: not page-locked in place)
a = np.random.default_rng(1).standard_normal(1 << 20)        # 8 MiB: more than the buffers' 2 MiB
g, out = pygpu.to_gpu(a), np.empty_like(a)

def phase(name):
    pygpu.synchronize()
    print("phase", name, file=sys.stderr, flush=True)
phase("alone")
for _ in range(3):
    g.get(ary=out)
    pygpu.to_gpu(a)
phase("small")
for _ in range(3):
    g[: 1 << 18].get(ary=out[: 1 << 18])                      # 2 MiB: not more than the buffers
phase("crowded")
stop, started, uploads = threading.Event(), threading.Event(), [0]
b = np.random.default_rng(2).standard_normal(1 << 23)        # 64 MiB: each upload outlasts several gets

def other():
    while not stop.is_set():
        pygpu.to_gpu(b)
        uploads[0] += 1
        started.set()
t = threading.Thread(target=other)
t.start()
assert started.wait(60)
# (20 gets, and on until the other thread has made 4 uploads meanwhile:
# on a loaded machine it may find no core during the first gets, and the
# trace must show a get that started beside one of its uploads; uploads
# eight times a get's size keep one at work through most gets' starts --
# with uploads of a get's size, the CI's 2 cores once ran 20 of each
# without one starting beside the other.)
gets, before = 0, uploads[0]
while gets < 20 or uploads[0] - before < 4:
    g.get(ary=out)
    gets += 1
stop.set()
t.join()
phase("setting 0")
pygpu.transfer_config(threads_alone=0)
g.get(ary=out)
np.testing.assert_array_equal(out, a)
print("ok")
"""


def traced_copies(stderr, marker):
    """(phase, [(KiB, parts) of each host copy]) for each staged transfer
    in a PYGPU_STAGING_TRACE=1 log, its phase the last group of the last
    line before it matching `marker`."""
    import re
    phase = None
    for line in stderr.splitlines():
        m = re.match(marker, line)
        if m:
            phase = m.group(1)
        elif line.startswith("pygpu staging") and phase is not None:
            yield phase, [(int(k), int(p)) for k, p in re.findall(r" c\d+@[0-9.]+\[(\d+)K\]\{(\d+) parts", line)]


@pytest.mark.timing
def test_a_big_transfer_alone_takes_threads_alone(run_python):
    """A transfer of more than depth x chunk bytes while no other is at
    work in the process copies each chunk on threads_alone threads (the
    trace shows its chunks' copies of 512 KiB or more cut into up to 4 parts
    per thread: 20 for 5 threads); one that is not bigger, one that starts
    while another thread transfers, and any with threads_alone=0 use
    `threads` (8 parts for 2)."""
    env = {"PYGPU_STAGING_TRACE": "1"}
    if HOST:
        env.update(PYGPU_BACKEND="host", PYGPU_HOST_DEVICES="1")
    proc = run_python(ALONE_SCRIPT, env=env, timeout=JOIN_TIMEOUT)
    assert proc.stdout.split()[-1] == "ok"
    parts = {}
    for name, copies in traced_copies(proc.stderr, r"phase (.*)"):
        full = [p for k, p in copies if k >= 512]
        if full:
            parts.setdefault(name, []).append(max(full))
    assert set(parts["alone"]) == {20}, parts
    assert set(parts["small"]) == {8}, parts
    assert 8 in parts["crowded"], parts
    assert set(parts["setting 0"]) == {8}, parts


def test_a_transfer_of_64_kib_is_copied_by_its_caller_alone(run_python):
    """Staged transfers of at most 64 KiB are copied by the calling thread
    alone (handing half to a worker cost more than it saved): the trace
    shows one part on one CPU for uploads and downloads of 64 KiB, and
    more parts for 96 KiB, whatever the thread setting; the data arrive
    whole."""
    code = """
import sys, numpy as np, pygpu
pygpu.transfer_config(min_bytes=0, threads=4)
rng = np.random.default_rng(3)
for n in (64 << 10, 96 << 10):
    a = rng.integers(0, 256, n, dtype=np.uint8)
    print("size", n, file=sys.stderr, flush=True)
    g = pygpu.to_gpu(a)
    out = np.empty_like(a)
    out[...] = 0
    g.get(ary=out)
    assert (out == a).all()
print("ok")
"""
    env = {"PYGPU_STAGING_TRACE": "1"}
    if HOST:
        env.update(PYGPU_BACKEND="host")
    proc = run_python(code, env=env, timeout=JOIN_TIMEOUT)
    assert proc.stdout.split()[-1] == "ok"
    parts = {}
    for size, copies in traced_copies(proc.stderr, r"size (\d+)"):
        parts.setdefault(int(size), []).extend(p for _, p in copies)
    assert parts[64 << 10] and set(parts[64 << 10]) == {1}, parts
    assert parts[96 << 10] and max(parts[96 << 10]) >= 2, parts


@pytest.mark.timing
@pytest.mark.parametrize("limit", [0, 200 << 10, 1 << 20])
def test_threads_at_the_pinned_pool_limit(staging, limit):
    """Eight threads transferring while the pinned pool's limit leaves room
    for no lane, for one, or for a few: the transfers that find no buffers
    go the runtime's way, every one arrives whole, nothing hangs, the pool
    stays within its limit, and once trimmed no page-locked memory is in
    use."""
    saved = pygpu.pinned_pool_stats()["limit"]
    pygpu.trim_pinned_pool()
    in_use = pygpu.pinned_pool_stats()["in_use"]
    pygpu.set_pinned_pool_limit(in_use + limit)
    peak = []

    def work(k):
        rng = np.random.default_rng(k)
        for r in range(6):
            a = rng.standard_normal(3000 + 1000 * k + r)
            g = pygpu.to_gpu(a)
            out = np.empty_like(a)
            g.get(ary=out)
            np.testing.assert_array_equal(out, a)
            np.testing.assert_array_equal(g[::2].get(), a[::2])
            s = pygpu.pinned_pool_stats()
            peak.append(s["in_use"] + s["cached"] - s["limit"])
    try:
        run_threads(work)
    finally:
        pygpu.set_pinned_pool_limit(saved)
    assert max(peak) <= 0, max(peak)
    pygpu.trim_pinned_pool()
    assert pygpu.pinned_pool_stats()["in_use"] == in_use


SURPLUS_SCRIPT = r"""
import sys, time
sys.path.insert(0, TESTS_HERE)
import numpy as np, pygpu, test_threads as t
pygpu.transfer_config(min_bytes=0, chunk=64 << 10, depth=3, threads=2)
lane = 3 * (64 << 10)
hosts = [np.full(1 << 20, k, np.float64) for k in range(8)]        # 8 MiB each

def burst(k):
    for _ in range(3):
        assert (pygpu.to_gpu(hosts[k]).get() == k).all()
t.run_threads(burst, 8)
after_burst = pygpu.pinned_pool_stats()["in_use"]
time.sleep(1.3)                                         # the burst is over
small = np.arange(4096.0)
for _ in range(10):                                     # (each transfer gives back at most one lane)
    pygpu.to_gpu(small)
print(after_burst // lane, pygpu.pinned_pool_stats()["in_use"] // lane, pygpu.pinned_pool_stats()["in_use"] % lane)
"""


@pytest.mark.timing
def test_a_burst_of_threads_leaves_one_lane(run_python):
    """After eight threads transfer at once, their lanes keep their buffers
    while the burst lasts; once it has been over for a second, the next
    transfers give back the device's lanes beyond one."""
    import os
    env = {"PYGPU_BACKEND": "host", "PYGPU_HOST_DEVICES": "1"} if HOST else {}
    code = SURPLUS_SCRIPT.replace("TESTS_HERE", repr(os.path.dirname(os.path.abspath(__file__))))
    burst, left, rest = map(int, run_python(code, env=env, timeout=JOIN_TIMEOUT).stdout.split()[-3:])
    assert burst >= 2, burst
    assert (left, rest) == (1, 0)


THREADS_WITH_CACHE = r"""
import sys
sys.path.insert(0, %r)
import numpy as np, pygpu, test_threads as t
pygpu.transfer_config(min_bytes=0, chunk=16 << 10, depth=2, threads=3)
rng = np.random.default_rng(1)
host = rng.standard_normal((t.NTHREADS * 12, 96))
shared, out = pygpu.to_gpu(host), pygpu.zeros((t.NTHREADS * 10, 64), np.int64)
def small(k):                       # block-cache sized allocations, freed at once
    for r in range(200):
        a = pygpu.mem_alloc(512 + 64 * (r %% 8))
        pygpu.memset_d8(a, k, a.size)
        b = np.empty(a.size, np.uint8)
        pygpu.memcpy_dtoh(b, a)
        assert (b == k).all()
t.run_threads(small)
t.run_threads(t.shared_work(host, shared, out))
print("ok")
"""


def test_eight_threads_with_the_block_cache(run_python):
    import os
    code = THREADS_WITH_CACHE % os.path.dirname(os.path.abspath(__file__))
    env = {"PYGPU_BLOCK_CACHE": "1"}
    if HOST:
        env.update(PYGPU_BACKEND="host", PYGPU_HOST_MEMORY="1G")
    proc = run_python(code, env=env, timeout=JOIN_TIMEOUT + 60)
    assert proc.stdout.split()[-1] == "ok"


GIL_TRIES = 30


def progress_during(call, seconds=0.05):
    """How many times another Python thread got to run while call() ran
    (and how long call() took)."""
    count = 0
    done, running = threading.Event(), threading.Event()

    def ticker():
        nonlocal count
        while not done.is_set():
            count += 1
            running.set()
            time.sleep(0)           # let the GIL go at once

    t = threading.Thread(target=ticker, daemon=True)
    t.start()
    assert running.wait(60)         # the ticker is running
    time.sleep(seconds)
    before = count
    t0 = time.perf_counter()
    call()
    took = time.perf_counter() - t0
    ticks = count - before
    done.set()
    t.join(60)
    return ticks, took


@pytest.mark.timing
@pytest.mark.parametrize("what", ["staged set", "staged get", "strided staged get", "direct copy",
                                  "device copy"])
def test_the_gil_is_released_while_data_moves(staging, what):
    """A second thread keeps running while one thread moves 64 MiB: the
    copies run without the GIL (taken back only between chunks)."""
    a = np.ones(8 << 20, np.float64)
    g = pygpu.empty(a.shape, np.float64)
    if (os.cpu_count() or 1) <= 2:
        # With two cores, a worker spinning beside the copying thread leaves
        # the ticker only scraps of a core: it sometimes missed a short copy.
        pygpu.transfer_config(threads=1)
    if what == "direct copy":
        pygpu.transfer_config(min_bytes=None)       # no pipeline: one runtime copy
    calls = {"staged set": lambda: g.set(a), "staged get": lambda: g.get(),
             "strided staged get": lambda: g[::2].get(), "direct copy": lambda: g.set(a),
             "device copy": lambda: g.copy()}
    calls[what]()                                   # warm: buffers made, pages touched
    # Holding the GIL for the whole call would allow no tick at all (or one),
    # every time.  (On a GPU a device copy only queues the work: it returns in
    # microseconds.)  The best of GIL_TRIES tries: a copy of a few
    # milliseconds (the host backend's direct copy: 4 ms on CI's two cores)
    # can find the ticker descheduled, and on a machine whose cores are busy
    # with other work, often.
    def ran_beside(ticks, took):
        return ticks >= 3 or (what == "device copy" and took < 0.005)

    seen = []
    for _ in range(GIL_TRIES):
        ticks, took = progress_during(calls[what])
        seen.append((ticks, round(took * 1e3, 1)))
        if ran_beside(ticks, took):
            break
    assert ran_beside(ticks, took), \
        f"{what}: another thread ran too little beside the call in each of {GIL_TRIES} tries (ticks, ms): {seen}"


@pytest.mark.timing
@pytest.mark.gpu_only
def test_the_gil_is_released_while_waiting():
    """synchronize(), Stream.synchronize() and Event.synchronize() wait
    without the GIL (on a GPU they wait for real work)."""
    g = pygpu.empty(1 << 28, np.uint8)
    s = pygpu.Stream()
    for wait in (pygpu.synchronize, s.synchronize, lambda: s.record().synchronize()):
        seen = []
        for _ in range(GIL_TRIES):      # (the ticker may find no core in one wait on a loaded machine)
            for _ in range(4):
                g.fill(1, stream=s)
            ticks, took = progress_during(wait, 0.01)
            seen.append((ticks, took))
            if ticks >= 1 or took < 0.005:
                break
        assert ticks >= 1 or took < 0.005, seen


def test_threads_sweep_tool_runs():
    """tools/research/threads-sweep.py (run on the GPU machine by gpu-check.sh
    scale) gives a row per setting with both directions, each measured in
    processes of its own."""
    import pathlib
    import subprocess
    import sys
    tool = pathlib.Path(__file__).resolve().parent.parent / "tools" / "research" / "threads-sweep.py"
    p = subprocess.run([sys.executable, str(tool), "--threads", "2", "--reps", "1", "--size", "2M", "default",
                        "chunk=1M,depth=2"], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PYGPU_BACKEND="host"))
    assert p.returncode == 0, p.stderr
    rows = p.stdout.splitlines()[2:]
    assert [r.split()[0] for r in rows] == ["default", "chunk=1048576,depth=2"], p.stdout
    # (the setting, then GB/s, the ratio to raw pinned where there is a GPU, and the range, twice)
    assert all(len(r.split()) in (5, 7) for r in rows), p.stdout


def test_threads_sweep_tool_takes_several_counts():
    """--threads 1,2 measures both counts in each child and prints a table
    for each, in order."""
    import pathlib
    import subprocess
    import sys
    tool = pathlib.Path(__file__).resolve().parent.parent / "tools" / "research" / "threads-sweep.py"
    p = subprocess.run([sys.executable, str(tool), "--threads", "1,2", "--reps", "1", "--size", "1M", "default"],
                       capture_output=True, text=True, timeout=300, env=dict(os.environ, PYGPU_BACKEND="host"))
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert [line.split(",")[0] for line in lines[::3]] == ["1 threads", "2 threads"], p.stdout
    assert [line.split()[0] for line in lines[2::3]] == ["default", "default"], p.stdout
    assert all(len(line.split()) in (5, 7) for line in lines[2::3]), p.stdout


def test_threads_sweep_tool_refuses_a_build_it_did_not_measure(tmp_path):
    """A PYTHONPATH=DIR setting compares another build; where DIR holds no
    build of pygpu, the tool fails and says so, instead of reporting the
    build that the child's import found under DIR's name."""
    import pathlib
    import shutil
    import subprocess
    import sys
    root = pathlib.Path(__file__).resolve().parent.parent
    shutil.copytree(root / "pygpu", tmp_path / "pygpu", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    p = subprocess.run([sys.executable, str(root / "tools" / "research" / "threads-sweep.py"), "--threads", "1",
                        "--reps", "1", "--size", "1M", f"PYTHONPATH={tmp_path}"], capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, PYGPU_BACKEND="host"))
    assert p.returncode != 0
    # (where an installed pygpu serves the import, the guard speaks; where none does, the child fails to import)
    assert f"not the one in {tmp_path}" in p.stderr or f"PYTHONPATH={tmp_path}: failed" in p.stderr, p.stderr


def test_threads_sweep_tool_takes_environment_settings():
    """A setting of environment assignments (PYGPU_X=1 Y=2) reaches the
    child's environment: a backend that does not exist fails the child,
    and the tool names the setting; another runs and gets its row."""
    import pathlib
    import subprocess
    import sys
    tool = pathlib.Path(__file__).resolve().parent.parent / "tools" / "research" / "threads-sweep.py"
    run = [sys.executable, str(tool), "--threads", "1", "--reps", "1", "--size", "1M"]
    env = dict(os.environ, PYGPU_BACKEND="host")
    p = subprocess.run(run + ["PYGPU_BACKEND=nosuch"], capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode != 0
    assert "PYGPU_BACKEND=nosuch: failed" in p.stderr and "'nosuch' is not a backend" in p.stderr, p.stderr
    p = subprocess.run(run + ["PYGPU_HOST_WAIT_VALUE=0 PYGPU_BACKEND=host"], capture_output=True, text=True,
                       timeout=300, env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[2].startswith("PYGPU_HOST_WAIT_VALUE=0 PYGPU_BACKEND=host "), p.stdout
