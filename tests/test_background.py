"""Asynchronous transfers of pageable memory that complete in the
background (src/transfer/background*.c).  Uploads: to_gpu_async and
set_async of 1 MiB or more of pageable memory into a dense device array
queue the DMA of each chunk behind a gate that the mover thread opens once
it has copied that chunk into a page-locked block, and return; the
stream's later work sees the data; the host memory's owner is kept until
the upload is over, then released; the block goes back to the pinned pool.
Downloads: get_async of a dense device array into 1 MiB or more of
pageable memory queues each chunk's DMA into a page-locked block and an
event after it, then a host function that holds the stream until the
lander thread has copied every chunk out, and returns; the destination is
kept the same way.  On the host backend the gates and host functions run
at once (its streams are done when a call returns), so these tests hold
the data, the routes and the references; on a GPU the same tests also
hold the ordering on the stream.
"""
import collections
import gc
import re
import threading
import time
import weakref

import numpy as np
import pytest

import pygpu
from test_threads import run_threads

MiB = 1 << 20
DTYPES = [np.float64, np.float32, np.int16, np.uint8, np.complex128]


@pytest.fixture
def pageable():
    """Staging on for pageable memory of any size (the background route
    needs the host side to be worth staging)."""
    saved = pygpu.transfer_config()
    pygpu.transfer_config(min_bytes=0)
    yield
    pygpu.transfer_config(**saved)


@pytest.fixture
def sigint():
    """Python's own SIGINT handler while the test runs, so that
    _thread.interrupt_main raises KeyboardInterrupt: a process started in
    the background by a shell begins with SIGINT ignored, and then
    interrupt_main does nothing."""
    import signal
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


def warm(nbytes):
    """The first async upload of a size is staged while the mover
    page-locks a block of that size for the pool; wait until it is there,
    so that the next goes in the background."""
    s = pygpu.Stream()
    pygpu.to_gpu_async(np.ones(nbytes // 8), stream=s)
    s.synchronize()
    wait_for_the_mover()


def wait_for_the_mover():
    """Until no background task is pending (each stats call reaps what is
    over), 120 s at most (a hang guard)."""
    end = time.monotonic() + 120
    while pygpu.pinned_pool_stats()["background"] and time.monotonic() < end:
        time.sleep(0.002)
    assert not pygpu.pinned_pool_stats()["background"], "the mover never finished"


def upload_in_threads(nthreads, rounds, nelems, check=lambda: None):
    """nthreads threads, each on its own stream, each uploading `rounds`
    float64 arrays of nelems(k, r) elements in the background and reading
    them back: every one whole, check() after each, no hang."""
    errors = []

    def work(k):
        try:
            s = pygpu.Stream()
            rng = np.random.default_rng(k)
            for r in range(rounds):
                a = rng.standard_normal(nelems(k, r))
                g = pygpu.to_gpu_async(a, stream=s)
                s.synchronize()
                np.testing.assert_array_equal(g.get(stream=s), a)
                check()
        except BaseException as e:          # (re-raised in the main thread)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(nthreads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not [t for t in threads if t.is_alive()], "a thread hung"
    if errors:
        raise errors[0]


def host_layouts(rng, dtype, nbytes):
    """C, F, strided and reversed host arrays of about nbytes."""
    n = max(2, int(nbytes // np.dtype(dtype).itemsize))
    rows = int(rng.integers(16, 64))
    base = (rng.standard_normal((rows, n // rows * 2)) * 100).astype(dtype)
    return {"C": np.ascontiguousarray(base[:, : n // rows]), "F": np.asfortranarray(base[:, : n // rows]),
            "strided": base[:, ::2], "reversed": base[::-1, ::-2]}


@pytest.mark.parametrize("dtype", DTYPES)
def test_async_uploads_arrive_whole(pageable, dtype):
    """Every host layout of 1 MiB or more, to_gpu_async and set_async: the
    stream's next work (a device copy queued right after) sees NumPy's
    answer."""
    rng = np.random.default_rng(np.dtype(dtype).num)
    s = pygpu.Stream()
    for name, a in host_layouts(rng, dtype, int(rng.integers(1, 5)) * MiB + 8).items():
        warm(a.nbytes)
        g = pygpu.to_gpu_async(a, stream=s)
        after = g.copy(stream=s)
        s.synchronize()
        np.testing.assert_array_equal(after.get(), a, err_msg=name)
        b = (a * 2).astype(dtype) if dtype != np.uint8 else a[::-1].copy()
        g.set_async(b, stream=s)
        s.synchronize()
        np.testing.assert_array_equal(g.get(), b, err_msg=name)


def test_an_upload_waits_for_what_its_stream_holds_before_it(pageable):
    """An upload in the background comes after what its stream holds
    before it: a fill of the destination queued behind many big fills on
    that stream comes first, and the upload lands on top of it; work queued
    after the upload sees its data."""
    rng = np.random.default_rng(11)
    s = pygpu.Stream()
    a = rng.standard_normal(16 * MiB // 8)
    warm(a.nbytes)
    busy = pygpu.empty(256 * MiB, np.uint8, stream=s)
    g = pygpu.empty(a.shape, a.dtype, stream=s)
    for r in range(3):
        with s:
            for _ in range(20):             # (tens of ms of the stream's work before the upload)
                busy.fill(r)
            g.fill(-1.0)
        g.set_async(a + r, stream=s)
        after = g.copy(stream=s)
        s.synchronize()
        np.testing.assert_array_equal(after.get(), a + r)
        np.testing.assert_array_equal(g.get(stream=s), a + r)
    wait_for_the_mover()


def test_a_transfers_array_dropped_at_once(pageable):
    """An async transfer's device array dropped as the call returns (the
    result of to_gpu_async not kept, a set_async target deleted, a
    get_async from a temporary): the call has queued the DMAs on the
    stream, so the array's memory goes back in stream order after them;
    nothing fails, and nothing of it is kept once the transfer is over."""
    import weakref
    rng = np.random.default_rng(12)
    s = pygpu.Stream()
    a = rng.standard_normal(3 * MiB // 8)
    warm(a.nbytes)
    for _ in range(6):
        pygpu.to_gpu_async(a, stream=s)
    g = pygpu.empty(a.shape, a.dtype, stream=s)
    g.set_async(a, stream=s)
    kept = weakref.ref(g)
    del g
    s.synchronize()
    pygpu.synchronize()
    wait_for_the_mover()
    gc.collect()
    assert kept() is None
    np.testing.assert_array_equal(pygpu.to_gpu_async(a, stream=s).get(stream=s), a)
    out = np.empty_like(a)
    for k in range(4):
        pygpu.to_gpu(a + k).get_async(stream=s, ary=out)
        s.synchronize()
        np.testing.assert_array_equal(out, a + k)
    wait_for_the_mover()


def test_async_transfers_on_two_devices_from_threads(pageable):
    """Each thread on a device of its own, uploads and downloads in the
    background at once (one mover and one lander for both): every byte
    arrives (bit for bit) on the device it was meant for."""
    from concurrent.futures import ThreadPoolExecutor
    if pygpu.device_count() < 2:
        pytest.skip("needs two devices")

    def work(dev):
        with pygpu.Device(dev):
            rng = np.random.default_rng(dev)
            s = pygpu.Stream()
            a = rng.integers(0, 1 << 62, 5 * MiB // 8 + 3, dtype=np.int64)
            warm(a.nbytes)
            out = np.empty_like(a)
            for k in range(6):
                g = pygpu.to_gpu_async(a + k, stream=s)
                assert int(g.device) == dev
                g.get_async(stream=s, ary=out)
                s.synchronize()
                np.testing.assert_array_equal(out, a + k)

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(work, (0, 1)))            # (a thread's exception raised here)
    wait_for_the_mover()


# The start of the ring tests' subprocesses: staging on for every size, a
# stream, and settle(), which waits until no background task is pending.
RING_PREAMBLE = """
import time, numpy as np, pygpu
pygpu.transfer_config(min_bytes=0)
rng = np.random.default_rng(SEED)
s = pygpu.Stream()
def settle():
    end = time.monotonic() + 60
    while pygpu.pinned_pool_stats()["background"] and time.monotonic() < end:
        time.sleep(0.002)
"""


@pytest.mark.timing
@pytest.mark.parametrize("wait", ["1", "0"])
def test_uploads_bigger_than_a_ring_go_through_one(run_python, wait):
    """An upload bigger than a ring (four chunks of 16 MiB) goes through
    one where the stream can wait on a counter and write one (the mover
    copying each chunk once the device has written that the DMA four
    chunks back is over); else, and below that size, through a block as
    big as the upload.  The trace says which; either way every host layout
    and dtype arrives whole, and the stream's next work sees it."""
    if wait == "0" and pygpu.backend != "host":
        pytest.skip("PYGPU_HOST_WAIT_VALUE is the host backend's switch")
    code = RING_PREAMBLE.replace("SEED", "12") + """
def layouts(n, dtype):
    pattern = rng.integers(0, 100, 4099).astype(dtype)          # (a prime period: a misplaced run shows)
    base = np.resize(pattern, 2 * n // np.dtype(dtype).itemsize).reshape(32, -1)
    c = np.ascontiguousarray(base[::2])
    return {"C": c, "F": np.asfortranarray(c), "strided": base[:, ::2], "reversed": base[::-1, ::-2]}
cases = [(60 * MiB, np.float64, "C"), (60 * MiB, np.uint8, "reversed")]
cases += [(68 * MiB + 4096, dtype, name) for dtype, name in
          ((np.float64, "C"), (np.float64, "F"), (np.int16, "strided"), (np.uint8, "reversed"))]
for n, dtype, name in cases:
    a = layouts(n, dtype)[name]
    for _ in range(2):              # (the first makes the block for the next)
        g = pygpu.to_gpu_async(a, stream=s)
        after = g.copy(stream=s)
        s.synchronize()
        settle()
        np.testing.assert_array_equal(after.get(), a, err_msg=f"{n} {dtype} {name}")
assert pygpu.pinned_pool_stats()["background"] == 0
""".replace("MiB", str(MiB))
    p = run_python(code, env={"PYGPU_STAGING_TRACE": "1", "PYGPU_HOST_WAIT_VALUE": wait})
    ups = [line for line in p.stderr.splitlines() if line.startswith("pygpu background: up in ")]
    whole = [line for line in ups if " in 8 chunks through a whole block," in line]
    ring = [line for line in ups if " in 8 chunks through a ring," in line]
    assert len(ups) >= 6, p.stderr[-2000:]
    if wait == "1":             # (60 MiB: a block of 8 MiB chunks; 68 MiB: a ring of 8.5 MiB ones)
        assert whole and ring and len(whole) + len(ring) == len(ups), ups
    else:                       # (no ring without the stream's wait and write)
        assert not ring and len([line for line in ups if "through a whole block" in line]) == len(ups), ups


@pytest.mark.timing
def test_the_route_is_named(run_python):
    """With PYGPU_STAGING_TRACE=1 the route says an async upload of 1 MiB
    or more went in the background once the pool holds a block of its size
    (the first is staged while the mover page-locks one); under 1 MiB it
    is staged as before, and a synchronous to_gpu is never in the
    background."""
    code = """
import time, numpy as np, pygpu
pygpu.transfer_config(min_bytes=0)
s = pygpu.Stream()
pygpu.to_gpu_async(np.ones(MiB // 8 * 3), stream=s); s.synchronize()
end = time.monotonic() + 60
while pygpu.pinned_pool_stats()["background"] and time.monotonic() < end:
    time.sleep(0.002)
pygpu.to_gpu_async(np.ones(MiB // 8 * 3), stream=s); s.synchronize()
pygpu.to_gpu_async(np.ones(1000), stream=s); s.synchronize()
pygpu.to_gpu(np.ones(MiB // 8 * 3))
""".replace("MiB", str(MiB))
    p = run_python(code, env={"PYGPU_STAGING_TRACE": "1"})
    ups = [line for line in p.stderr.splitlines() if line.startswith("pygpu route: up ")]
    assert len(ups) == 5, p.stderr[-2000:]
    assert p.stderr.count("pygpu route: up: not in the background (no cached page-locked block") == 1
    assert ": in the background (" in ups[0] and ": staged (" in ups[1], ups[:2]     # (tried first, declined)
    assert ": in the background (" in ups[2], ups[2]
    assert not [u for u in ups[3:] if ": in the background" in u]


@pytest.mark.timing
@pytest.mark.parametrize("wait", ["1", "0"])
def test_the_gates_are_the_devices_wait_where_it_has_one(run_python, wait):
    """Each chunk's gate is the stream waiting for the upload's counter in
    page-locked memory, which the mover raises chunk by chunk, where the
    device has such a wait (CUDA; the host backend unless
    PYGPU_HOST_WAIT_VALUE=0), else a host function waiting for the mover:
    the trace names which, and either way many uploads in a row, of several
    sizes, in several layouts, on two streams, arrive whole; an upload goes
    in chunks of 8 MiB, or in four below 32 MiB."""
    if wait == "0" and pygpu.backend != "host":
        pytest.skip("PYGPU_HOST_WAIT_VALUE is the host backend's switch")
    code = """
import time, numpy as np, pygpu
pygpu.transfer_config(min_bytes=0)
rng = np.random.default_rng(5)
streams = [pygpu.Stream(), pygpu.Stream()]
def settle():
    for s in streams:
        s.synchronize()
    end = time.monotonic() + 60
    while pygpu.pinned_pool_stats()["background"] and time.monotonic() < end:
        time.sleep(0.002)
sizes = [MiB // 8 * 3, MiB // 8 * 17, MiB // 8 * 40]
for n in sizes:                                 # (a block of each size for the pool)
    pygpu.to_gpu_async(np.ones(n), stream=streams[0])
    settle()
for r in range(12):
    n = sizes[r % 3]
    a = rng.standard_normal(2 * n).reshape(2, n)
    host = a[:, ::2] if r % 2 else a[0]
    s = streams[r % 2]
    g = pygpu.to_gpu_async(host, stream=s)
    s.synchronize()
    np.testing.assert_array_equal(g.get(stream=s), host)
    settle()            # (its block back in the pool for the next of its size, which the mover may not have counted yet)
assert pygpu.pinned_pool_stats()["background"] == 0
""".replace("MiB", str(MiB))
    p = run_python(code, env={"PYGPU_STAGING_TRACE": "1", "PYGPU_HOST_WAIT_VALUE": wait})
    gates = [line for line in p.stderr.splitlines() if line.startswith("pygpu background: up in ")]
    assert len(gates) >= 12, p.stderr[-2000:]
    chunks = sorted({int(line.split()[4]) for line in gates})
    assert chunks == [4, 5], chunks                 # (8 MiB each, or a quarter of less than 32 MiB)
    named = "the device's wait on a counter" if wait == "1" else "host functions"
    assert all(line.split("; in the call")[0].endswith("gated by " + named) for line in gates), gates
    # (and where the call's time went, part by part, adding up to the whole)
    for line in gates:
        parts = re.findall(r"(task and block|event|hand-over|chunks|end) ([\d.]+)", line.split("; in the call")[1])
        whole = float(re.search(r"\(([\d.]+) in all\)", line).group(1))
        assert [name for name, _ in parts] == ["task and block", "event", "hand-over", "chunks", "end"], line
        assert abs(sum(float(us) for _, us in parts) - whole) < 0.1 * len(parts), line


def test_the_host_array_is_kept_until_the_upload_is_over(pageable):
    """The caller may drop its array at once: the upload keeps it (a weak
    reference still resolves after `del`) until the stream has passed the
    upload and the next PyGPU call has reaped it; then it is released,
    and the device has the data."""
    s = pygpu.Stream()
    warm(3 * MiB)
    a = np.arange(3 * MiB // 8, dtype=np.float64)
    want = a.copy()
    ref = weakref.ref(a)
    g = pygpu.to_gpu_async(a, stream=s)
    del a
    gc.collect()
    assert ref() is not None, "the upload dropped the host array it reads"
    s.synchronize()
    pygpu.pinned_pool_stats()               # (reaps finished uploads)
    gc.collect()
    assert ref() is None, "the host array outlived its upload"
    np.testing.assert_array_equal(g.get(), want)


def test_the_host_array_cannot_be_resized_under_an_upload(pageable):
    """NumPy refuses to resize an array that others reference: while the
    upload holds it (until it is reaped), `a.resize` raises, and the device
    gets the data as it was; once reaped, the array may be resized."""
    s = pygpu.Stream()
    warm(3 * MiB)
    a = np.arange(3 * MiB // 8, dtype=np.float64)
    want = a.copy()
    g = pygpu.to_gpu_async(a, stream=s)
    with pytest.raises(ValueError, match="referenc"):
        a.resize(10)
    s.synchronize()
    np.testing.assert_array_equal(g.get(), want)         # (this call reaps the finished upload)
    a.resize(10, refcheck=True)
    assert a.shape == (10,)


def test_a_converted_source_is_kept_too(pageable):
    """A list or another dtype is converted first; the converted array is
    what the background reads, and it is kept the same way."""
    s = pygpu.Stream()
    src = np.arange(3 * MiB // 4, dtype=np.int32)
    g = pygpu.to_gpu_async(src, stream=s, dtype=np.float64)
    s.synchronize()
    np.testing.assert_array_equal(g.get(), src.astype(np.float64))


def test_many_uploads_leave_nothing_behind(pageable):
    """Two hundred background uploads: once the stream is done and the
    pool trimmed, no page-locked memory is in use beyond the pool's before,
    and every host array is released."""
    s = pygpu.Stream()
    pygpu.trim_pinned_pool()
    before = pygpu.pinned_pool_stats()["in_use"]
    refs, last = [], None
    for k in range(200):
        a = np.full(MiB // 8 + k, float(k))
        refs.append(weakref.ref(a))
        last = pygpu.to_gpu_async(a, stream=s)
        del a
    s.synchronize()
    pygpu.trim_pinned_pool()
    gc.collect()
    assert pygpu.pinned_pool_stats()["in_use"] <= before
    assert not [r for r in refs if r() is not None]
    np.testing.assert_array_equal(last.get(), np.full(MiB // 8 + 199, 199.0))


@pytest.mark.timing
def test_threads_upload_in_the_background_at_once(pageable):
    """Eight threads, each on its own stream, each uploading arrays of its
    own in the background and reading them back: every one whole, no
    hang."""
    upload_in_threads(8, 6, lambda k, r: MiB // 8 + 1000 * k + r)


def test_exit_with_uploads_in_flight(run_python):
    """A process that queues background uploads and exits at once (no
    synchronize) exits cleanly: the mover finishes what it has."""
    proc = run_python("""
import numpy as np, pygpu
pygpu.transfer_config(min_bytes=0)
s = pygpu.Stream()
keep = [pygpu.to_gpu_async(np.full(1 << 21, float(k)), stream=s) for k in range(8)]
print("queued")
""", timeout=120)
    assert proc.stdout.strip().endswith("queued")


def test_a_forked_child_uploads_in_the_background_too(run_python):
    """The child of a fork starts with no mover and no tasks of the
    parent's; its own background uploads start a mover of its own and
    arrive whole (host backend: a CUDA child may not touch the device)."""
    if pygpu.backend != "host":
        pytest.skip("a forked child uses the device on the host backend only")
    proc = run_python("""
import os, time, numpy as np, pygpu
pygpu.transfer_config(min_bytes=0)
s = pygpu.Stream()
def upload(v):
    for _ in range(2):                      # (the first of a size warms the pool)
        a = np.full(1 << 18, v)
        g = pygpu.to_gpu_async(a, stream=s)
        s.synchronize()
        end = time.monotonic() + 60
        while pygpu.pinned_pool_stats()["background"] and time.monotonic() < end:
            time.sleep(0.002)
    assert (g.get() == v).all()
upload(1.0)
pid = os.fork()
if pid == 0:
    try:
        upload(2.0)
        os._exit(0)
    except BaseException:
        os._exit(3)
_, status = os.waitpid(pid, 0)
upload(3.0)
print("child", os.waitstatus_to_exitcode(status))
""", timeout=120)
    assert proc.stdout.split()[-1] == "0", proc.stdout + proc.stderr


@pytest.mark.timing
def test_an_interrupt_among_uploads_loses_nothing(pageable, sigint):
    """KeyboardInterrupt while uploads are going on in the background: the
    uploads already queued complete (the interrupt stops the caller, not
    the mover), every array that a call returned holds its data, and
    nothing stays pending or page-locked in use."""
    import _thread
    warm(MiB)
    s = pygpu.Stream()
    pygpu.trim_pinned_pool()
    before = pygpu.pinned_pool_stats()["in_use"]
    done = collections.deque(maxlen=20)     # (the last ones: device memory stays bounded)
    timer = threading.Timer(0.05, _thread.interrupt_main)
    try:
        with pytest.raises(KeyboardInterrupt):
            for k in range(100000):
                a = np.full(MiB // 8, float(k))
                done.append((pygpu.to_gpu_async(a, stream=s), k))
                if k == 0:      # (the clock starts once one call is back: a first one may take a while)
                    timer.start()
    finally:
        timer.cancel()
    s.synchronize()
    assert done, "the interrupt came before any upload"
    for g, k in done:
        np.testing.assert_array_equal(g.get(stream=s), np.full(MiB // 8, float(k)))
    del done, g
    wait_for_the_mover()
    pygpu.trim_pinned_pool()
    assert pygpu.pinned_pool_stats()["in_use"] <= before


@pytest.mark.timing
def test_threads_at_the_pinned_pool_limit(pageable):
    """Eight threads uploading while the pinned pool's limit leaves room
    for no block of their size: the mover cannot page-lock one, every
    upload goes another way, and each arrives whole; nothing is left
    pending, and the limit is kept."""
    saved = pygpu.pinned_pool_stats()["limit"]
    pygpu.trim_pinned_pool()
    pygpu.set_pinned_pool_limit(MiB)

    def limit_kept():
        assert pygpu.pinned_pool_stats()["in_use"] <= MiB

    try:
        upload_in_threads(8, 4, lambda k, r: 2 * MiB // 8 + 100 * k + r, limit_kept)
        wait_for_the_mover()
    finally:
        pygpu.set_pinned_pool_limit(saved)


# ---- downloads -------------------------------------------------------------------------------


def download_layouts(rng, dtype, nbytes):
    """(device array, host source, empty destination) for C, F, strided
    and reversed destinations of about nbytes."""
    out = {}
    for name, a in host_layouts(rng, dtype, nbytes).items():
        big = np.zeros((a.shape[0] * 2, a.shape[1] * 2), dtype)
        dest = {"C": np.zeros_like(a, order="C"), "F": np.zeros_like(a, order="F"),
                "strided": big[::2, ::2], "reversed": big[::-2, ::-2]}[name]
        out[name] = (pygpu.to_gpu(a), a, dest)
    return out


@pytest.mark.parametrize("dtype", DTYPES)
def test_async_downloads_arrive_whole(pageable, dtype):
    """get_async into pageable memory of 1 MiB or more, every destination
    layout: once the stream is synchronized the array holds NumPy's
    answer, and work queued on the stream after the call (a fill of the
    device array) does not reach what came down."""
    rng = np.random.default_rng(np.dtype(dtype).num + 100)
    s = pygpu.Stream()
    for name, (g, a, dest) in download_layouts(rng, dtype, int(rng.integers(1, 5)) * MiB + 8).items():
        warm(a.nbytes)
        got = g.get_async(stream=s, ary=dest)
        g.fill(0, stream=s)
        s.synchronize()
        assert got is dest
        np.testing.assert_array_equal(dest, a, err_msg=name)
        np.testing.assert_array_equal(g.get(), np.zeros_like(a), err_msg=name)


@pytest.mark.timing
def test_the_download_route_is_named(run_python):
    """With PYGPU_STAGING_TRACE=1 the route says an async download of 1 MiB
    or more into pageable memory went in the background once the pool
    holds a block of its size (the first is staged while the mover
    page-locks one); a synchronous get never is."""
    code = """
import time, numpy as np, pygpu
pygpu.transfer_config(min_bytes=0)
s = pygpu.Stream()
g = pygpu.to_gpu(np.arange(MiB // 8 * 3, dtype=np.float64))
out = np.zeros(MiB // 8 * 3)
g.get_async(stream=s, ary=out); s.synchronize()
end = time.monotonic() + 60
while pygpu.pinned_pool_stats()["background"] and time.monotonic() < end:
    time.sleep(0.002)
out[:] = 0
g.get_async(stream=s, ary=out); s.synchronize()
assert (out == np.arange(MiB // 8 * 3)).all()
g.get(ary=out)
""".replace("MiB", str(MiB))
    p = run_python(code, env={"PYGPU_STAGING_TRACE": "1"})
    downs = [line for line in p.stderr.splitlines() if line.startswith("pygpu route: down ")]
    assert len(downs) == 4, p.stderr[-2000:]
    assert p.stderr.count("pygpu route: down: not in the background (no cached page-locked block") == 1
    assert ": in the background (" in downs[0] and ": staged (" in downs[1], downs[:2]
    assert ": in the background (" in downs[2], downs[2]
    assert ": staged (" in downs[3], downs[3]


@pytest.mark.timing
@pytest.mark.parametrize("cache, wait", [(None, "1"), ("2M", "1"), ("2M", "0")])
def test_downloads_bigger_than_the_cache_go_through_a_ring(run_python, cache, wait):
    """A download bigger than the host's last-level cache (PYGPU_CACHE_BYTES
    where set, else the CPU's) goes through a ring of four chunks where
    the stream can wait on a counter (each DMA waiting for the lander to
    have copied out the chunk four before it), and is copied out with
    non-temporal stores; a smaller one goes through a block as big as it
    and plain stores.  The trace says which; either way every destination
    layout and dtype gets NumPy's answer, and work queued after the call
    (a fill) does not reach what came down."""
    if wait == "0" and pygpu.backend != "host":
        pytest.skip("PYGPU_HOST_WAIT_VALUE is the host backend's switch")
    code = RING_PREAMBLE.replace("SEED", "11") + """
for n in (3 * MiB // 2, 3 * MiB + 4096):
    for dtype in (np.float64, np.int16, np.uint8):
        a = rng.integers(0, 100, n // np.dtype(dtype).itemsize).astype(dtype).reshape(16, -1)
        big = np.zeros((32, 2 * a.shape[1]), dtype)
        for dest in (np.zeros_like(a), np.zeros_like(a, order="F"), big[::2, ::2], big[::-2, ::-2]):
            for _ in range(2):              # (the first makes the block for the next)
                g = pygpu.to_gpu(a)
                dest[...] = 0
                g.get_async(stream=s, ary=dest)
                g.fill(0, stream=s)
                s.synchronize()
                settle()
                np.testing.assert_array_equal(dest, a)
assert pygpu.pinned_pool_stats()["background"] == 0
""".replace("MiB", str(MiB))
    env = {"PYGPU_STAGING_TRACE": "1", "PYGPU_HOST_WAIT_VALUE": wait}
    if cache:
        env["PYGPU_CACHE_BYTES"] = cache
    p = run_python(code, env=env)
    downs = [line.split("; in the call")[0] for line in p.stderr.splitlines()
             if line.startswith("pygpu background: down in ")]
    whole = [line for line in downs
             if line.endswith(" in 4 chunks through a whole block, copied out with plain stores")]
    ring = [line for line in downs if line.endswith(" in 8 chunks through a ring, copied out with streaming stores")]
    assert len(downs) >= 12, p.stderr[-2000:]
    if not cache:   # (no CPU's last-level cache is under 3 MiB)
        assert len(whole) == len(downs), downs
    elif wait == "1":           # (1.5 MiB under the 2 MiB said, 3 MiB over it)
        assert whole and ring and len(whole) + len(ring) == len(downs), downs
    else:                       # (no ring without the stream's wait)
        assert not ring and any(line.endswith("whole block, copied out with streaming stores") for line in downs)


@pytest.mark.timing
def test_allocations_beside_gated_transfers_do_not_deadlock(run_python):
    """A thread that allocates and frees device and page-locked memory
    through the runtime (whose frees wait for the device) while another
    moves data in the background, through a ring download (each DMA
    waiting for the lander's copy-out four chunks back) and a gated
    upload (each DMA waiting for the mover): the gates wait on host work
    that a free cannot hold up, so both threads go on, and the data is
    whole.  A deadlock times the subprocess out."""
    code = """
import threading, time, numpy as np, pygpu
pygpu.transfer_config(min_bytes=0)
pygpu.set_memory_pool(False)        # (device memory through the runtime's malloc and free)
n, big = 12 * MiB, 68 * MiB          # (a download past the cache said, an upload past a ring)
a = np.random.default_rng(5).integers(0, 256, big, dtype=np.uint8)
g, up, out = pygpu.to_gpu(a[:n]), pygpu.empty(big, np.uint8), np.zeros(n, np.uint8)
s = pygpu.Stream()
def once():
    out[...] = 0
    g.get_async(stream=s, ary=out)
    up.set_async(a[::-1], stream=s)
    s.synchronize()
    np.testing.assert_array_equal(out, a[:n])
    np.testing.assert_array_equal(up.get(), a[::-1])
once()                              # (staged: the mover makes the blocks for the rest)
end = time.monotonic() + 60
while pygpu.pinned_pool_stats()["background"] and time.monotonic() < end:
    time.sleep(0.002)
stop, churned = threading.Event(), [0]
def churn():
    while not stop.is_set():
        d = pygpu.mem_alloc(16 * MiB)
        h = pygpu.pagelocked_empty(MiB, np.uint8)
        del d, h
        churned[0] += 1
t = threading.Thread(target=churn, daemon=True)
t.start()
# (3 s and 3 rounds at least, and on until the churn has gone round twice
# meanwhile: a loaded machine may give its thread no core for a while)
end, rounds, first = time.monotonic() + 3, 0, churned[0]
while (time.monotonic() < end or rounds < 3 or churned[0] - first < 2) and time.monotonic() < end + 120:
    once()
    rounds += 1
stop.set()
t.join(60)
assert not t.is_alive() and churned[0] - first >= 2, (churned, first)
print("rounds", rounds, "churned", churned[0])
""".replace("MiB", str(MiB))
    p = run_python(code, env={"PYGPU_CACHE_BYTES": "2M", "PYGPU_STAGING_TRACE": "1"}, timeout=300)
    assert "pygpu background: down in 8 chunks through a ring" in p.stderr, p.stderr[-2000:]
    assert "pygpu background: up in 8 chunks through a ring, gated by the device's wait" in p.stderr, \
        p.stderr[-2000:]


@pytest.mark.timing
def test_threads_on_the_default_stream_and_their_own_do_not_deadlock(run_python):
    """Threads moving data in the background at once, one on the legacy
    default stream (which waits for the work queued before on every
    blocking stream, and which they wait for) and the others on blocking
    streams of their own, through rings both ways (each DMA of a ring
    waits for a background thread).  The background threads take the
    transfers in the order their work reaches the streams, so none waits
    for a transfer queued after its own.  A deadlock times the subprocess
    out."""
    code = """
import threading, time, numpy as np, pygpu
pygpu.transfer_config(min_bytes=0)
n, big = 3 * MiB, 68 * MiB           # (a download past the cache said, an upload past a ring)
srcs = [np.random.default_rng(k).integers(0, 256, big, dtype=np.uint8) for k in range(4)]
errors, rounds = [], [0] * 4
def work(k):
    try:
        s = pygpu.Stream.null if k == 0 else pygpu.Stream()
        g, out = pygpu.to_gpu(srcs[k][:n]), np.zeros(n, np.uint8)
        up = pygpu.empty(big, np.uint8)
        end = time.monotonic() + 3
        while time.monotonic() < end or rounds[k] < 3:
            g.get_async(stream=s, ary=out)
            up.set_async(srcs[k], stream=s)
            s.synchronize()
            np.testing.assert_array_equal(out, srcs[k][:n])
            np.testing.assert_array_equal(up.get(stream=s), srcs[k])
            rounds[k] += 1
    except BaseException as e:
        errors.append(e)
s = pygpu.Stream()                  # (a first of each size, staged: the mover makes the blocks for the rest)
pygpu.to_gpu(srcs[0][:n]).get_async(stream=s, ary=np.zeros(n, np.uint8))
pygpu.empty(big, np.uint8).set_async(srcs[0], stream=s)
s.synchronize()
end = time.monotonic() + 60
while pygpu.pinned_pool_stats()["background"] and time.monotonic() < end:
    time.sleep(0.002)
threads = [threading.Thread(target=work, args=(k,), daemon=True) for k in range(4)]
for t in threads:
    t.start()
end = time.monotonic() + 120
for t in threads:
    t.join(max(0.0, end - time.monotonic()))
assert not any(t.is_alive() for t in threads), "deadlock"
assert not errors, errors
print("rounds", rounds)
""".replace("MiB", str(MiB))
    p = run_python(code, env={"PYGPU_CACHE_BYTES": "2M", "PYGPU_STAGING_TRACE": "1"}, timeout=300)
    assert "pygpu background: down in 8 chunks through a ring" in p.stderr, p.stderr[-2000:]
    assert "pygpu background: up in 8 chunks through a ring" in p.stderr, p.stderr[-2000:]


def test_the_destination_is_kept_until_the_download_is_over(pageable):
    """The caller may drop the destination at once: the download keeps it
    until the stream has passed it and the next PyGPU call has reaped it,
    then releases it; a destination kept meanwhile cannot be resized."""
    s = pygpu.Stream()
    warm(3 * MiB)
    g = pygpu.to_gpu(np.arange(3 * MiB // 8, dtype=np.float64))
    out = np.zeros(3 * MiB // 8)
    ref = weakref.ref(out)
    g.get_async(stream=s, ary=out)
    del out
    gc.collect()
    assert ref() is not None, "the download dropped the array it writes"
    s.synchronize()
    pygpu.pinned_pool_stats()               # (reaps finished tasks)
    gc.collect()
    assert ref() is None, "the destination outlived its download"
    out = np.zeros(3 * MiB // 8)
    g.get_async(stream=s, ary=out)
    with pytest.raises(ValueError, match="referenc"):
        out.resize(10)
    s.synchronize()
    np.testing.assert_array_equal(out, np.arange(3 * MiB // 8, dtype=np.float64))


def test_many_downloads_leave_nothing_behind(pageable):
    """Two hundred background downloads on one stream: every destination
    holds its data, and once the pool is trimmed no page-locked memory is
    in use beyond the pool's before and every destination the caller
    dropped is released."""
    s = pygpu.Stream()
    warm(MiB + 8 * 199)
    pygpu.trim_pinned_pool()
    before = pygpu.pinned_pool_stats()["in_use"]
    g = pygpu.to_gpu(np.arange(MiB // 8 + 199, dtype=np.float64))
    refs, kept = [], []
    for k in range(200):
        out = np.zeros(MiB // 8 + k)
        refs.append(weakref.ref(out))
        g[: MiB // 8 + k].get_async(stream=s, ary=out)
        if k % 50 == 0:
            kept.append((k, out))
        del out
    s.synchronize()
    for k, out in kept:
        np.testing.assert_array_equal(out, np.arange(MiB // 8 + k, dtype=np.float64))
    del kept, out
    wait_for_the_mover()
    pygpu.trim_pinned_pool()
    gc.collect()
    assert pygpu.pinned_pool_stats()["in_use"] <= before
    assert not [r for r in refs if r() is not None]


@pytest.mark.timing
def test_threads_download_in_the_background_at_once(pageable):
    """Eight threads, each on its own stream, each downloading arrays of its
    own in the background (and uploading them first): every one whole, no
    hang."""
    errors = []

    def work(k):
        try:
            s = pygpu.Stream()
            rng = np.random.default_rng(k)
            for r in range(6):
                a = rng.standard_normal(MiB // 8 + 1000 * k + r)
                g = pygpu.to_gpu_async(a, stream=s)
                out = np.empty_like(a)
                g.get_async(stream=s, ary=out)
                s.synchronize()
                np.testing.assert_array_equal(out, a)
        except BaseException as e:          # (re-raised in the main thread)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not [t for t in threads if t.is_alive()], "a thread hung"
    if errors:
        raise errors[0]


def test_exit_with_downloads_in_flight(run_python):
    """A process that queues background downloads and exits at once (no
    synchronize) exits cleanly: the lander finishes what it has."""
    proc = run_python("""
import numpy as np, pygpu
pygpu.transfer_config(min_bytes=0)
s = pygpu.Stream()
g = pygpu.to_gpu(np.ones(1 << 21))
keep = [g.get_async(stream=s, ary=np.zeros(1 << 21)) for k in range(8)]
print("queued")
""", timeout=120)
    assert proc.stdout.strip().endswith("queued")


@pytest.mark.timing
def test_threads_that_end_with_transfers_queued(pageable):
    """Threads that queue a background upload and a background download
    on a stream of their own and end at once, dropping the stream and the
    host arrays: every transfer completes (the destinations hold the
    data), the host arrays are released once it has, and nothing stays
    pending or page-locked in use."""
    n = MiB // 8 + 24
    warm(8 * n)
    pygpu.trim_pinned_pool()
    before = pygpu.pinned_pool_stats()["in_use"]
    results, refs = {}, []

    def work(k):
        s = pygpu.Stream()
        src = np.arange(n, dtype=np.float64) + 1000 * k
        g = pygpu.to_gpu_async(src, stream=s)
        dest = np.zeros(n)
        g.get_async(stream=s, ary=dest)
        results[k] = (g, dest)
        refs.append(weakref.ref(src))
        # (the thread ends here: no synchronize, the stream and src dropped)

    run_threads(work, 6)        # (each ends at once; a hang or an error fails)
    wait_for_the_mover()
    pygpu.synchronize()
    wait_for_the_mover()        # (and what finished is reaped)
    for k, (g, dest) in results.items():
        want = np.arange(n, dtype=np.float64) + 1000 * k
        np.testing.assert_array_equal(dest, want, err_msg=f"thread {k}'s download")
        np.testing.assert_array_equal(g.get(), want, err_msg=f"thread {k}'s upload")
    gc.collect()
    assert not [r for r in refs if r() is not None], "a host array outlived its upload"
    del results, g, dest
    pygpu.trim_pinned_pool()
    assert pygpu.pinned_pool_stats()["in_use"] <= before


@pytest.mark.timing
def test_a_thread_stopped_by_an_exception_mid_transfers(pageable):
    """A thread stopped by an exception raised in it from outside (the
    nearest Python has to killing a thread: PyThreadState_SetAsyncExc)
    while it moves data in a loop, blocking and in the background: the
    transfer in progress finishes (the exception comes between two
    steps), everything the thread had checked was right, and nothing
    stays pending or page-locked in use."""
    import ctypes

    class Stop(Exception):
        pass

    n = MiB // 8 + 40
    warm(8 * n)
    pygpu.trim_pinned_pool()
    before = pygpu.pinned_pool_stats()["in_use"]
    steps, ended = [0], []
    started = threading.Event()

    def work():
        s = pygpu.Stream()
        try:
            for r in range(100000):
                src = np.full(n, float(r))
                g = pygpu.to_gpu_async(src, stream=s)
                out = np.empty(n)
                g.get_async(stream=s, ary=out)
                s.synchronize()
                np.testing.assert_array_equal(out, src)
                np.testing.assert_array_equal(g.get(), src)
                steps[0] = r + 1
                started.set()
        except Stop:
            ended.append("stopped")
        except BaseException as e:      # (anything else fails the test below)
            ended.append(e)

    t = threading.Thread(target=work)
    t.start()
    assert started.wait(60), "the thread never moved any data"
    time.sleep(0.05)
    assert ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(t.ident), ctypes.py_object(Stop)) == 1
    t.join(60)
    assert not t.is_alive(), "the thread hung"
    assert ended == ["stopped"], f"the thread ended with {ended}"
    assert steps[0] >= 1
    pygpu.synchronize()
    wait_for_the_mover()
    gc.collect()
    pygpu.trim_pinned_pool()
    assert pygpu.pinned_pool_stats()["in_use"] <= before


@pytest.mark.timing
def test_an_interrupt_among_downloads_loses_nothing(pageable, sigint):
    """KeyboardInterrupt while downloads go on in the background: those
    queued complete, every destination that a call returned holds its
    data, and nothing stays pending or page-locked in use."""
    import _thread
    warm(MiB)
    s = pygpu.Stream()
    pygpu.trim_pinned_pool()
    before = pygpu.pinned_pool_stats()["in_use"]
    g = pygpu.to_gpu(np.arange(MiB // 8, dtype=np.float64))
    done = collections.deque(maxlen=20)
    timer = threading.Timer(0.05, _thread.interrupt_main)
    try:
        with pytest.raises(KeyboardInterrupt):
            for k in range(100000):
                done.append(g.get_async(stream=s, ary=np.zeros(MiB // 8)))
                if k == 0:      # (the clock starts once one call is back: a first one may take a while)
                    timer.start()
    finally:
        timer.cancel()
    s.synchronize()
    assert done, "the interrupt came before any download"
    for out in done:
        np.testing.assert_array_equal(out, np.arange(MiB // 8, dtype=np.float64))
    del done, out
    wait_for_the_mover()
    pygpu.trim_pinned_pool()
    assert pygpu.pinned_pool_stats()["in_use"] <= before


def test_downloads_at_the_pinned_pool_limit(pageable):
    """Downloads while the pinned pool's limit leaves room for no block of
    their size: each goes another way and arrives whole; nothing is left
    pending, and the limit is kept."""
    saved = pygpu.pinned_pool_stats()["limit"]
    pygpu.trim_pinned_pool()
    pygpu.set_pinned_pool_limit(MiB)
    try:
        s = pygpu.Stream()
        for k in range(4):
            a = np.random.default_rng(k).standard_normal(2 * MiB // 8 + k)
            out = np.empty_like(a)
            pygpu.to_gpu(a).get_async(stream=s, ary=out)
            s.synchronize()
            np.testing.assert_array_equal(out, a)
            assert pygpu.pinned_pool_stats()["in_use"] <= MiB
        wait_for_the_mover()
    finally:
        pygpu.set_pinned_pool_limit(saved)


FAILED_PART_WAY = """
import time, numpy as np, pygpu
pygpu.transfer_config(min_bytes=0, depth=DEPTH)    # (staging windows of other sizes than the chunks')
s = pygpu.Stream()
n = NBYTES
def settle():
    end = time.monotonic() + 60
    while pygpu.pinned_pool_stats()["background"] and time.monotonic() < end:
        time.sleep(0.002)
    assert pygpu.pinned_pool_stats()["background"] == 0
src = np.arange(n, dtype=np.int64).astype(np.uint8)
g = pygpu.to_gpu(src)
def once():
    if UP:
        return pygpu.to_gpu_async(src, stream=s)
    out = np.zeros(n, np.uint8)
    g.get_async(stream=s, ary=out)
    return out
once()                                  # (the first of the size: staged, and a block made for the next)
s.synchronize()
settle()
in_use = pygpu.pinned_pool_stats()["in_use"]
try:
    once()
    s.synchronize()
    raise SystemExit("no error")
except pygpu.GPUError as e:
    print("raised:", e)
settle()
assert pygpu.pinned_pool_stats()["in_use"] == in_use, (pygpu.pinned_pool_stats(), in_use)
for _ in range(3):                      # (the next ones go through whole: nothing was left shut)
    got = once()
    s.synchronize()
    np.testing.assert_array_equal(got.get() if UP else got, src)
    settle()                            # (the block back in the pool for the next)
print("after: whole")
"""


SMALL, BIG = 3 * MiB + 8000, 64 * MiB + 8000     # (BIG: an upload past a ring's 4 chunks of 16 MiB)
# (MID: whole blocks in quarters, which no staging window of it matches: a
# window of a 3 MiB transfer is a quarter of it too)
MID = 5 * MiB + 8000


@pytest.mark.skipif(pygpu.backend != "host", reason="PYGPU_HOST_FAIL_COPY is the host backend's")
@pytest.mark.parametrize("case, up, n, depth, chunk, nth, env", [
    ("ring download, a gated chunk", False, SMALL, 2, SMALL // 8, 6, {"PYGPU_CACHE_BYTES": "2M"}),
    ("ring download, the first chunk", False, SMALL, 2, SMALL // 8, 1, {"PYGPU_CACHE_BYTES": "2M"}),
    ("whole-block download", False, MID, 4, MID // 4, 3, {"PYGPU_CACHE_BYTES": "64M"}),
    ("upload gated by the wait", True, MID, 4, MID // 4, 3, {}),
    ("upload gated by host functions", True, MID, 4, MID // 4, 3, {"PYGPU_HOST_WAIT_VALUE": "0"}),
    ("ring upload, a chunk after the ring came round", True, BIG, 2, BIG // 8, 6, {}),
    ("ring upload, the first chunk", True, BIG, 2, BIG // 8, 1, {}),
])
@pytest.mark.timing
def test_a_chunk_failing_part_way_raises_and_leaves_nothing(run_python, case, up, n, depth, chunk, nth, env):
    """A background transfer whose K-th chunk DMA fails (the host backend's
    PYGPU_HOST_FAIL_COPY, for copies of the chunks' size): the call raises
    GPUError, nothing hangs (a ring's gates after the failure are never
    queued, those before open as the lander copies out; a ring upload's
    mover, waiting for a slot that no DMA will free, is told to stop), the
    block goes back to the pool and the task ends, and the next transfers
    of the same size go through whole."""
    code = (FAILED_PART_WAY.replace("MiB", str(MiB)).replace("DEPTH", str(depth)).replace("UP", str(up))
            .replace("NBYTES", str(n)))
    p = run_python(code, env={"PYGPU_STAGING_TRACE": "1", "PYGPU_HOST_FAIL_COPY": f"{chunk}:{nth}", **env})
    assert "raised: " in p.stdout and "cudaErrorInvalidValue" in p.stdout, p.stdout + p.stderr[-2000:]
    assert "after: whole" in p.stdout, case
    bg = [line for line in p.stderr.splitlines() if line.startswith("pygpu background: ")]
    assert len(bg) == 4, (case, bg)
    if "ring" in case:
        assert all(" through a ring" in line for line in bg), bg


def test_a_device_reset_waits_for_the_transfers_in_flight(run_python):
    """A device reset frees every allocation of the device, the page-locked
    blocks and events of background transfers among them: the transfers
    still in flight are waited for and let go first (none is left), the
    host buffers page-locked in place are let go, and the device works
    again after.  (The host backend's transfers are over when their call
    returns: there this holds the reset's way alone.)"""
    proc = run_python("""
        import numpy as np, pygpu
        pygpu.transfer_config(min_bytes=0, register_limit=256 << 20)
        h = np.random.default_rng(0).random(4 << 20)
        big = np.random.default_rng(1).integers(0, 255, 34 << 20, dtype=np.uint8)
        for _ in range(2):                          # (met again: page-locked in place)
            pygpu.to_gpu(big)
        back = np.empty_like(h)
        s = pygpu.Stream()
        g = pygpu.to_gpu(h)
        sent = [pygpu.to_gpu_async(h, stream=s) for _ in range(3)] + [pygpu.to_gpu_async(big, stream=s)]
        g.get_async(stream=s, ary=back)
        print(pygpu.cudaDeviceReset(), pygpu.pinned_pool_stats()["background"])
        del sent, g
        for _ in range(3):                          # (its registration gone with the reset: let go, met anew)
            assert (pygpu.to_gpu(big).get() == big).all()
        s2 = pygpu.Stream()
        for _ in range(3):
            x = pygpu.to_gpu_async(h, stream=s2)
            y = np.empty_like(h)
            x.get_async(stream=s2, ary=y)
            s2.synchronize()
            assert (y == h).all()
        print("ok")
        """, env={"PYGPU_BACKEND": pygpu.backend})
    assert proc.stdout.split() == ["<cudaError:", "code=0>", "0", "ok"], proc.stdout + proc.stderr
