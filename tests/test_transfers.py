"""The transfer machinery: the staging pipeline (forced on for the host
backend with transfer_config(min_bytes=0), small chunks so that every copy
takes many), the pinned pool, interruption, and threads."""
import signal
import threading
import time

import numpy as np
import pytest

import pygpu
from cext import c_compiler

DTYPES = [np.uint8, np.int16, np.float32, np.complex128]


@pytest.fixture
def staging():
    """Stage every pageable copy through 4 KiB..64 KiB chunks for the test."""
    saved = pygpu.transfer_config()
    pygpu.transfer_config(min_bytes=0, chunk=16 << 10, depth=3, threads=4)
    yield
    pygpu.transfer_config(**saved)


def layouts(rng, shape, dtype):
    a = (rng.standard_normal(shape) * 100).astype(dtype)
    big = (rng.standard_normal(tuple(2 * n + 1 for n in shape)) * 100).astype(dtype)
    yield "C", a
    yield "F", np.asfortranarray(a)
    yield "strided", big[::2, 1::2, ::-2][: shape[0], : shape[1], : shape[2]]
    yield "transposed", np.ascontiguousarray(a.T).T


@pytest.mark.parametrize("dtype", DTYPES)
def test_staged_round_trips_every_layout(staging, dtype):
    rng = np.random.default_rng(7)
    shape = (33, 65, 17)        # odd sizes: chunks end mid-row
    for name, a in layouts(rng, shape, dtype):
        g = pygpu.to_gpu(a)
        np.testing.assert_array_equal(g.get(), a, err_msg=name)
        out = np.empty_like(a, order="F")
        assert g.get(ary=out) is out
        np.testing.assert_array_equal(out, a, err_msg=name)
        # into a strided device view, and out of one
        d = pygpu.zeros((2 * shape[0], shape[1], shape[2]), dtype)
        d[::2] = a
        np.testing.assert_array_equal(d[::2].get(), a, err_msg=name)
        np.testing.assert_array_equal(d[1::2].get(), np.zeros_like(a), err_msg=name)


def test_staged_async_and_streams(staging):
    a = np.arange(1 << 16, dtype=np.float64)
    s = pygpu.Stream(non_blocking=True)
    g = pygpu.to_gpu_async(a, stream=s)
    a[:] = -1                   # pageable source: reusable once the call returns
    s.synchronize()
    np.testing.assert_array_equal(g.get(stream=s), np.arange(1 << 16, dtype=np.float64))


def cached_soon(nbytes, timeout=30):
    """Wait for the warmer to put a block of nbytes or more in the pool."""
    end = time.monotonic() + timeout
    while pygpu.pinned_pool_stats()["cached"] < nbytes and time.monotonic() < end:
        time.sleep(0.002)
    return pygpu.pinned_pool_stats()["cached"] >= nbytes


def test_get_uses_the_pinned_pool(staging):
    """get()'s arrays of 1 MiB or more come from the pinned pool where it
    has a block cached; where it has none, the array is ordinary memory,
    and the warmer page-locks a block for the next get() of the size, not
    the caller."""
    pygpu.trim_pinned_pool()
    expect = np.arange(1 << 18, dtype=np.float32)
    g = pygpu.to_gpu(expect)
    before = pygpu.pinned_pool_stats()
    h = g.get()                 # none cached: not made on this thread
    np.testing.assert_array_equal(h, expect)
    assert not isinstance(h.base, pygpu.HostAllocation)
    assert cached_soon(h.nbytes), pygpu.pinned_pool_stats()
    assert pygpu.pinned_pool_stats()["in_use"] == before["in_use"]
    warmed = pygpu.pinned_pool_stats()
    h2 = g.get()                # the warmer's block
    assert isinstance(h2.base, pygpu.HostAllocation)
    during = pygpu.pinned_pool_stats()
    assert during["in_use"] >= warmed["in_use"] + h2.nbytes and during["hits"] > warmed["hits"]
    np.testing.assert_array_equal(h2, expect)
    del h2
    after = pygpu.pinned_pool_stats()
    assert after["in_use"] == before["in_use"]
    h3 = g.get()                # served from the cache again
    assert isinstance(h3.base, pygpu.HostAllocation) and pygpu.pinned_pool_stats()["hits"] > after["hits"]
    np.testing.assert_array_equal(h3, expect)
    del h3, h


def test_pool_limit_is_honoured(staging):
    stats = pygpu.pinned_pool_stats()
    try:
        pygpu.set_pinned_pool_limit(0)
        pygpu.trim_pinned_pool()
        g = pygpu.to_gpu(np.arange(100_000, dtype=np.int32))     # no staging possible: direct
        h = g.get()                                             # ordinary memory
        np.testing.assert_array_equal(h, np.arange(100_000, dtype=np.int32))
        s = pygpu.pinned_pool_stats()
        assert s["in_use"] == 0 and s["cached"] == 0 and s["limit"] == 0
    finally:
        pygpu.set_pinned_pool_limit(stats["limit"])


def test_transfer_config_validates():
    with pytest.raises(ValueError):
        pygpu.transfer_config(chunk=10)
    with pytest.raises(ValueError):
        pygpu.transfer_config(depth=1)
    with pytest.raises(ValueError):
        pygpu.transfer_config(threads=0)
    with pytest.raises(TypeError):
        pygpu.transfer_config(threads="4")
    with pytest.raises(TypeError):
        pygpu.transfer_config(8)
    with pytest.raises(TypeError, match="peer must be True or False"):
        pygpu.transfer_config(peer=1)
    with pytest.raises(ValueError, match="crowd_up must be 0 .as chunk. or at least 4096 bytes, not 100"):
        pygpu.transfer_config(crowd_up=100)
    cfg = pygpu.transfer_config()
    assert set(cfg) == {"chunk", "depth", "threads", "threads_alone", "min_bytes", "peer", "crowd_up", "crowd_down",
                        "crowd_threads", "register_limit", "numa"}


def test_transfer_config_threads_alone():
    """threads_alone is set and read back (0: as threads; by default at
    least as many as threads, at most 16 where the CPUs are many); setting
    threads without it sets it to 0, so that a thread count asked for holds
    for every transfer; a refused value changes nothing."""
    import os
    saved = pygpu.transfer_config()
    cpus = len(os.sched_getaffinity(0))
    assert 0 <= saved["threads_alone"] <= max(16, saved["threads"])      # (0 under PYGPU_TEST_STAGING)
    if saved["threads"] == min(16, cpus - cpus // 4):               # (the defaults)
        assert saved["threads_alone"] == min(16, cpus - cpus // 8) >= saved["threads"]
    try:
        assert pygpu.transfer_config(threads_alone=0)["threads_alone"] == 0
        assert pygpu.transfer_config(threads_alone=7)["threads_alone"] == 7
        assert pygpu.transfer_config(threads=3)["threads_alone"] == 0          # (threads asked for hold)
        assert pygpu.transfer_config(threads=3, threads_alone=5)["threads_alone"] == 5
        with pytest.raises(ValueError, match="threads_alone"):
            pygpu.transfer_config(threads_alone=65, threads=4)
        now = pygpu.transfer_config()
        assert (now["threads"], now["threads_alone"]) == (3, 5)
    finally:
        pygpu.transfer_config(**saved)
    assert pygpu.transfer_config() == saved


def test_thread_counts_follow_the_cpus_this_process_may_run_on(run_python):
    """The default thread counts come from the CPUs the process may run on
    (its affinity, as mpirun binds each rank to a core), not the machine's:
    on one CPU, one thread copies each chunk."""
    import os
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU here: no narrower affinity to set")
    code = """
        import os
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        import pygpu
        c = pygpu.transfer_config()
        print(c["threads"], c["threads_alone"], c["crowd_threads"])
    """
    assert run_python(code).stdout.split()[-3:] == ["1", "1", "0"]


def test_transfer_config_crowd_threads():
    """crowd_threads is set and read back (0: as threads; by default a
    third of the CPUs where there are six or more, else 0); setting threads
    without it sets it to 0; a refused value changes nothing."""
    import os
    saved = pygpu.transfer_config()
    cpus = len(os.sched_getaffinity(0))
    if saved["threads"] == min(16, cpus - cpus // 4):               # (the defaults)
        assert saved["crowd_threads"] == (cpus // 3 if cpus > 5 else 0)
    try:
        assert pygpu.transfer_config(crowd_threads=3)["crowd_threads"] == 3
        assert pygpu.transfer_config(threads=6)["crowd_threads"] == 0            # (threads asked for hold)
        assert pygpu.transfer_config(threads=6, crowd_threads=2)["crowd_threads"] == 2
        with pytest.raises(ValueError, match="crowd_threads must be 0 .as threads. or 1..64, not 65"):
            pygpu.transfer_config(crowd_threads=65, threads=4)
        with pytest.raises(TypeError):
            pygpu.transfer_config(crowd_threads="2")
        now = pygpu.transfer_config()
        assert (now["threads"], now["crowd_threads"]) == (6, 2)
    finally:
        pygpu.transfer_config(**saved)
    assert pygpu.transfer_config() == saved


def test_transfer_config_crowd_settings():
    """crowd_up and crowd_down are set, read back, and taken as given (0:
    as chunk), and a refused value changes nothing."""
    saved = pygpu.transfer_config()
    try:
        got = pygpu.transfer_config(crowd_up=64 << 10, crowd_down=0)
        assert (got["crowd_up"], got["crowd_down"]) == (64 << 10, 0)
        with pytest.raises(ValueError, match="crowd_down"):
            pygpu.transfer_config(crowd_down=4095, chunk=1 << 20)
        now = pygpu.transfer_config()
        assert (now["crowd_up"], now["crowd_down"], now["chunk"]) == (64 << 10, 0, saved["chunk"])
    finally:
        pygpu.transfer_config(**saved)
    assert pygpu.transfer_config() == saved


@pytest.mark.timing
def test_threads_transfer_at_once(staging):
    rng = np.random.default_rng(3)
    arrays = [rng.integers(0, 1000, (97, 131), dtype=np.int64) for _ in range(8)]
    errors = []

    def work(a):
        try:
            for _ in range(5):
                g = pygpu.to_gpu(a)
                np.testing.assert_array_equal(g.get(), a)
                np.testing.assert_array_equal(g.T.get(), a.T)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(a,)) for a in arrays]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a transfer thread hung"
    assert not errors, errors


@pytest.mark.timing
def test_interrupt_stops_a_long_transfer_cleanly(staging):
    pygpu.transfer_config(chunk=4096, depth=2, threads=1)
    a = np.ones(64 << 20, np.uint8)
    g = pygpu.empty(a.shape, np.uint8)
    g[:8192] = a[:8192]         # the staging buffers are taken: part of the baseline
    in_use = pygpu.pinned_pool_stats()["in_use"]

    def handler(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, handler)
    try:
        t0 = time.perf_counter()
        with pytest.raises(KeyboardInterrupt):
            signal.setitimer(signal.ITIMER_REAL, 0.01)     # (armed in here: it may fire at once)
            for _ in range(50):         # 3.2 GiB in 4 KiB chunks: far longer than 10 ms
                g.set(a)
        assert time.perf_counter() - t0 < 120    # (a hang guard: it stops at the next chunk)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    # the machinery is free and correct afterwards
    assert pygpu.pinned_pool_stats()["in_use"] == in_use
    g.set(a)
    assert int(g[::4096].get().sum()) == a.size // 4096


@pytest.mark.parametrize("dtype", DTYPES)
def test_staged_strided_device_views(staging, dtype):
    """Every-other-element and every-other-row views, both directions, with
    pageable and F-order host sides (windows and rows end mid-way)."""
    rng = np.random.default_rng(11)
    n = 50_001
    a = (rng.standard_normal(2 * n) * 100).astype(dtype)
    g = pygpu.to_gpu(a)
    np.testing.assert_array_equal(g[::2].get(), a[::2])
    np.testing.assert_array_equal(g[1::3].get(), a[1::3])
    np.testing.assert_array_equal(g[::-2].get(), a[::-2])
    out = np.empty(len(a[::2]) * 2, dtype)[::2]
    g[::2].get(ary=out)
    np.testing.assert_array_equal(out, a[::2])
    fresh = (rng.standard_normal(len(a[::2])) * 100).astype(dtype)
    g[::2] = fresh
    a[::2] = fresh
    np.testing.assert_array_equal(g.get(), a)
    m = (rng.standard_normal((301, 3, 7)) * 100).astype(dtype)
    d = pygpu.to_gpu(m)
    np.testing.assert_array_equal(d[::2, :, ::3].get(), m[::2, :, ::3])
    rows = (rng.standard_normal((151, 3, 7)) * 100).astype(dtype)
    d[::2] = np.asfortranarray(rows)
    m[::2] = rows
    np.testing.assert_array_equal(d.get(), m)


def test_staged_host_sides_of_several_dimensions_against_numpy(staging):
    """Random shapes (with dimensions of one), host sides C-contiguous,
    F-order, reversed or sliced, device sides strided views: staged up and
    down, element for element as NumPy has them (the pipeline merges the
    host dimensions that run on in memory)."""
    rng = np.random.default_rng(23)
    for trial in range(40):
        nd = int(rng.integers(2, 5))
        shape = tuple(int(rng.choice([1, 2, 3, 17, 40])) for _ in range(nd))
        dtype = DTYPES[trial % len(DTYPES)]
        axis = int(rng.integers(nd))
        big_shape = tuple(2 * n if i == axis else n for i, n in enumerate(shape))
        base = (rng.standard_normal(big_shape) * 100).astype(dtype)
        d = pygpu.to_gpu(base)
        key = tuple(slice(None, None, 2) if i == axis else slice(None) for i in range(nd))
        view, expect = d[key], base[key]
        src = (rng.standard_normal(shape) * 100).astype(dtype)
        kind = trial % 4
        host = (src if kind == 0 else np.asfortranarray(src) if kind == 1
                else np.ascontiguousarray(src[::-1])[::-1] if kind == 2
                else np.pad(src, [(0, 1)] * nd)[tuple(slice(0, n) for n in shape)])
        np.testing.assert_array_equal(view.get(), expect, err_msg=str((shape, axis)))
        out = np.zeros(shape, dtype, order="F" if kind == 1 else "C")
        view.get(ary=out)
        np.testing.assert_array_equal(out, expect, err_msg=str((shape, axis)))
        view.set(host)
        base[key] = src
        np.testing.assert_array_equal(d.get(), base, err_msg=str((shape, axis, kind)))


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float64, np.int64])
def test_every_other_element_down_into_any_alignment(staging, dtype):
    """Every other element of 4- and 8-byte types, gathered out of the
    staging buffers: destinations at every offset from a 16-byte boundary,
    and odd counts, hold what NumPy has."""
    rng = np.random.default_rng(np.dtype(dtype).itemsize)
    a = (rng.standard_normal(2 * 40_003 + 1) * 1000).astype(dtype)
    g = pygpu.to_gpu(a)
    np.testing.assert_array_equal(g[::2].get(), a[::2])
    np.testing.assert_array_equal(g[1::2].get(), a[1::2])
    for shift in range(4):
        buf = np.zeros(len(a[::2]) + 4, dtype)
        out = buf[shift:shift + len(a[::2])]
        g[::2].get(ary=out)
        np.testing.assert_array_equal(out, a[::2], err_msg=str(shift))
        assert not buf[:shift].any() and not buf[shift + len(out):].any()
    m = a[: len(a) // 14 * 14].reshape(-1, 14)
    gm = pygpu.to_gpu(m)
    np.testing.assert_array_equal(gm[:, ::2].get(), m[:, ::2])


@pytest.mark.parametrize("pipeline", [False, True], ids=["as set", "staged small"])
def test_views_up_from_any_host_layout(request, pipeline):
    """Uploads to device views (dense up and scattered on the device, or
    staged straight into rows): random views and host layouts; every
    element of the device array as NumPy has it (the ones outside the view
    untouched)."""
    if pipeline:
        request.getfixturevalue("staging")
    rng = np.random.default_rng(21 + pipeline)
    cases = [(np.uint8, (6 << 20,), (slice(None, None, 2),)),                 # 3 MiB of single bytes
             (np.float32, (3_000, 700), (slice(None, None, 2), slice(None))),   # rows of 2800 B
             (np.float64, (1_001, 900), (slice(1, None, 3), slice(None, None, 2))),
             (np.int16, (5, 400_000), (slice(None), slice(None, None, -3)))]    # 5 slabs, backwards
    for _ in range(3):
        dt = rng.choice([np.float32, np.int64, np.uint16])
        shape = (int(rng.integers(200, 2000)), int(rng.integers(200, 2000)))
        cases.append((dt, shape, tuple(slice(int(rng.integers(0, 3)), None, int(rng.choice([1, 2, -2, 3])))
                                       for _ in shape)))
    for dt, shape, key in cases:
        base = (rng.standard_normal(shape) * 1000).astype(dt)
        d = pygpu.to_gpu(base)
        want = base.copy()
        src = (rng.standard_normal(want[key].shape) * 1000).astype(dt)
        what = str((np.dtype(dt).name, shape, key))
        for layout in (np.ascontiguousarray, np.asfortranarray,
                       lambda x: np.concatenate([x, x], axis=-1)[..., : x.shape[-1]]):
            src = -src                                  # new values each time
            host = layout(src)
            want[key] = host
            d[key] = host
            np.testing.assert_array_equal(d.get(), want, err_msg=what)


@pytest.mark.parametrize("pipeline", [False, True], ids=["as set", "staged small"])
def test_narrow_views_down_are_gathered_on_the_device_in_pieces(request, pipeline):
    """Views of 1 MiB and more whose rows are 4 to 63 bytes come down
    gathered on the device in pieces, each sent down once gathered, when the
    destination is page-locked (else the host gathers): random shapes, steps
    and offsets, into a new array, a pageable or page-locked one, a strided
    one, and asynchronously; the same elements as NumPy."""
    if pipeline:
        request.getfixturevalue("staging")
    rng = np.random.default_rng(11 + pipeline)
    cases = [(np.float32, (3_000_000,), (slice(None, None, 2),)),          # 5.7 MiB: 4 pieces
             (np.float64, (2_400_001,), (slice(None, None, -3),)),         # backwards
             (np.complex128, (150_000,), (slice(7, None, 2),)),            # 16-byte rows
             (np.int32, (9, 70_001), (slice(None), slice(1, None, 2))),    # fewer rows than pieces
             (np.int16, (2_000, 1_000), (slice(None, None, 3), slice(2, 14)))]   # 24-byte rows
    for _ in range(4):
        dt = rng.choice([np.float32, np.float64, np.uint32, np.int64])
        n0 = int(rng.integers(300, 3000))
        n1 = int(rng.integers(300, 1000))
        cases.append((dt, (n0, n1), (slice(int(rng.integers(0, 3)), None, int(rng.integers(1, 4))),
                                      slice(int(rng.integers(0, 5)), None, int(rng.integers(2, 6))))))
    for dt, shape, key in cases:
        a = (rng.standard_normal(shape) * 1000).astype(dt)
        g = pygpu.to_gpu(a)
        want = a[key]
        what = str((np.dtype(dt).name, shape, key))
        np.testing.assert_array_equal(g[key].get(), want, err_msg=what)
        for out in (np.zeros(want.shape, dt), pygpu.pagelocked_zeros(want.shape, dt),
                    np.zeros(want.shape, dt, order="F"),
                    np.zeros(tuple(2 * n for n in want.shape), dt)[(slice(None, None, 2),) * want.ndim]):
            g[key].get(ary=out)
            np.testing.assert_array_equal(out, want, err_msg=what)
        s = pygpu.Stream(non_blocking=True)
        out = pygpu.pagelocked_zeros(want.shape, dt)
        g[key].get_async(s, out)
        s.synchronize()
        np.testing.assert_array_equal(out, want, err_msg=what)


@pytest.mark.parametrize("threads", [1, 2, 6])
@pytest.mark.parametrize("chunk, depth", [(4 << 20, 4), (16 << 20, 3)])   # through the ring; all in the buffers
def test_downloads_into_fresh_or_partly_touched_memory(chunk, depth, threads):
    """A download of 32 MiB or more into memory never touched has its pages
    faulted in while the first DMAs run, by however many threads; the
    elements are right whether the destination is fresh, touched in part or
    all, or a view."""
    saved = pygpu.transfer_config()
    pygpu.transfer_config(min_bytes=0, chunk=chunk, depth=depth, threads=threads)
    try:
        n = (33 << 20) // 8
        a = np.random.default_rng(3).standard_normal(n)
        g = pygpu.to_gpu(a)
        fresh = np.empty(n)
        np.testing.assert_array_equal(g.get(ary=fresh), a)
        part = np.empty(n)
        part[: n // 2] = -1
        np.testing.assert_array_equal(g.get(ary=part), a)
        np.testing.assert_array_equal(g.get(ary=part), a)            # touched now
        wide = np.empty(2 * n)
        g.get(ary=wide[1::2])
        np.testing.assert_array_equal(wide[1::2], a)
    finally:
        pygpu.transfer_config(**saved)


@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.complex128])
def test_downloads_take_turns_round_the_staging_buffers(dtype):
    """Downloads that fit the staging buffers each land a slot further on
    in them than the last (so that the DMA does not write over lines the
    cores have just read); sizes that leave slots straddling two buffers,
    several element sizes and many turns round all arrive whole, also
    beside uploads through the same buffers, and with a strided
    destination."""
    saved = pygpu.transfer_config()
    pygpu.transfer_config(min_bytes=0, chunk=96 << 10, depth=3)      # 288 KiB: slots of 64-192 KiB
    try:
        rng = np.random.default_rng(11)
        dt = np.dtype(dtype)
        for nbytes in (40 << 10, 100 << 10, 130 << 10, 250 << 10):
            n = nbytes // dt.itemsize
            raw = rng.integers(0, 255, n * dt.itemsize, dtype=np.uint8)
            a = raw.view(dt)
            g = pygpu.to_gpu(a)
            for turn in range(9):
                out = np.zeros_like(a)
                g.get(ary=out)
                assert out.tobytes() == a.tobytes(), (nbytes, turn)
                if turn % 3 == 1:
                    g.set(a[::-1].copy())                           # (an upload through the same buffers)
                    assert g.get().tobytes() == a[::-1].tobytes()
                    g.set(a)
            wide = np.zeros(2 * n, dt)
            g.get(ary=wide[::2])
            assert wide[::2].tobytes() == a.tobytes()
    finally:
        pygpu.transfer_config(**saved)


def vm_flags(addr, nbytes):
    """The VmFlags of the mappings over [addr, addr + nbytes), from
    /proc/self/smaps."""
    import re
    flags, inside = [], False
    with open("/proc/self/smaps") as f:
        for line in f:
            m = re.match(r"([0-9a-f]+)-([0-9a-f]+) ", line)
            if m:
                lo, hi = int(m.group(1), 16), int(m.group(2), 16)
                inside = lo < addr + nbytes and hi > addr
            elif inside and line.startswith("VmFlags:"):
                flags.append(line.split()[1:])
    return flags


@pytest.mark.parametrize("cache", [None, "1M"])
def test_downloads_past_the_cache_are_copied_out_with_streaming_stores(run_python, cache):
    """A blocking download bigger than the host's last-level cache
    (PYGPU_CACHE_BYTES where set, else the CPU's) is copied out of the
    staging buffers with non-temporal stores, whether through whole
    buffers or the ring, and a smaller one with plain stores: the trace
    names them by size.  Either way every destination layout and dtype gets
    NumPy's answer."""
    import re
    code = """
import numpy as np, pygpu
pygpu.transfer_config(min_bytes=0, chunk=256 << 10, depth=4)
rng = np.random.default_rng(5)
for n in (512 << 10, 3 << 20):          # (in the staging buffers; through the ring)
    for dtype in (np.float64, np.int16, np.uint8):
        a = rng.integers(0, 100, n // np.dtype(dtype).itemsize).astype(dtype).reshape(16, -1)
        g = pygpu.to_gpu(a)
        big = np.zeros((32, 2 * a.shape[1]), dtype)
        for dest in (np.zeros_like(a), np.zeros_like(a, order="F"), big[::2, ::2], big[::-2, 1::2]):
            dest[...] = 0
            g.get(ary=dest)
            np.testing.assert_array_equal(dest, a)
        np.testing.assert_array_equal(g[:, ::2].get(), a[:, ::2])
"""
    env = {"PYGPU_STAGING_TRACE": "1"}
    if cache:
        env["PYGPU_CACHE_BYTES"] = cache
    p = run_python(code, env=env)
    downs = re.findall(r"pygpu staging (d2h[^:]*): copy entered [^;]*; b0@[\d.]+\[(\d+)K\]", p.stderr)
    assert len(downs) >= 24, p.stderr[-2000:]
    # (the paths: whole buffers, the ring, and where the device does not
    # gather a strided view, the host's gather of it: "d2h (view)")
    small = [name for name, k in downs if int(k) <= 1024]
    big = [name for name, k in downs if int(k) > 1024]
    assert "d2h (whole)" in small and any(name.split(" (")[0] == "d2h" for name in big), downs
    assert not any("streaming" in name for name in small), downs
    if cache:       # (1 MiB said: the 3 MiB downloads, and the 1.5 MiB views, past it)
        assert all(name.endswith("streaming stores)") for name in big), downs
    else:           # (no CPU's last-level cache is under 3 MiB)
        assert not any("streaming" in name for name in big), downs


def test_uploads_alone_that_fill_the_buffers_go_through_the_ring(run_python):
    """An upload that finds no other transfer at work and fills the staging
    buffers (depth x chunk) goes through them as a ring, named in the trace
    ("alone on the device, plain stores"); a smaller one through them whole.  Every host
    layout and dtype arrives as NumPy has it."""
    import re
    code = """
import numpy as np, pygpu
pygpu.transfer_config(min_bytes=0, chunk=256 << 10, depth=4)      # (buffers of 1 MiB)
rng = np.random.default_rng(7)
for n in (512 << 10, 1 << 20, (3 << 20) + 4096):
    for dtype in (np.float64, np.int16, np.uint8):
        big = rng.integers(0, 100, 4 * n // np.dtype(dtype).itemsize).astype(dtype).reshape(32, -1)
        for a in (big[:16], big[::2], big[::-2, ::2], np.asfortranarray(big[:16])):
            g = pygpu.to_gpu(a)
            np.testing.assert_array_equal(g.get(), a)
"""
    p = run_python(code, env={"PYGPU_STAGING_TRACE": "1"})
    ups = re.findall(r"pygpu staging (h2d[^:]*): copy entered [^;]*; b0@[\d.]+\[(\d+)K\]", p.stderr)
    assert len(ups) >= 24, p.stderr[-2000:]
    assert {name for name, k in ups if int(k) < 1024} == {"h2d (whole)"}, ups
    assert {name for name, k in ups if int(k) >= 1024} == {"h2d (alone on the device, plain stores)"}, ups


def test_fresh_destinations_are_given_huge_pages():
    """A download into a fresh mapping that NumPy did not make (so no
    advice of its own) asks for huge pages over its 2 MiB-aligned interior
    before the workers fault it in: the mappings there carry the kernel's
    `hg` flag, and the bytes are right."""
    import mmap
    import os
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            thp = f.read()
    except OSError:
        pytest.skip("no transparent huge pages here")
    if "[never]" in thp or not os.path.exists("/proc/self/smaps"):
        pytest.skip("transparent huge pages are off")
    saved = pygpu.transfer_config()
    pygpu.transfer_config(min_bytes=0)
    n = 40 << 20
    m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        src = np.random.default_rng(5).integers(0, 255, n, dtype=np.uint8)
        out = np.frombuffer(m, np.uint8)
        addr = out.ctypes.data
        assert not [f for f in vm_flags(addr, n) if "hg" in f]      # (before: no advice)
        pygpu.to_gpu(src).get(ary=out)
        np.testing.assert_array_equal(out, src)
        lo = (addr + (2 << 20) - 1) & ~((2 << 20) - 1)
        hi = (addr + n) & ~((2 << 20) - 1)
        inner = vm_flags(lo, hi - lo)
        assert inner and all("hg" in f for f in inner), inner
        del out
    finally:
        pygpu.transfer_config(**saved)
        m.close()


DEFAULT_THRESHOLD_SCRIPT = r"""
import json, time, numpy as np, pygpu
small, mid, big = (np.arange(n, dtype=np.float64) for n in (2048, 4096, 1 << 17))    # 16 KiB, 32 KiB, 1 MiB
gs, gm, gb = pygpu.to_gpu(small), pygpu.to_gpu(mid), pygpu.to_gpu(big)
out = np.empty_like(mid)
gm.get(ary=out)
first = pygpu.is_pinned(gb.get())       # (none cached: the warmer makes one for the next)
end = time.monotonic() + (30 if pygpu.backend != "host" else 0)    # (the host backend has no pinned pool)
while pygpu.pinned_pool_stats()["cached"] < big.nbytes and time.monotonic() < end:
    time.sleep(0.002)
print(json.dumps({"min_bytes": pygpu.transfer_config()["min_bytes"], "first": first,
                  "small": pygpu.is_pinned(gs.get()),
                  "mid": pygpu.is_pinned(gm.get()), "big": pygpu.is_pinned(gb.get()),
                  "ok": bool((gs.get() == small).all() and (gm.get() == mid).all() and (out == mid).all() and
                             (gb.get() == big).all())}))
"""


def test_default_pipeline_threshold():
    """By default copies of pageable memory from 32 KiB up are staged on GPU
    backends, and get() returns page-locked arrays (from the pinned pool)
    from 1 MiB up, once the pool has a block of the size (the first get()
    of a size is ordinary memory: the warmer makes the block); neither on
    the host backend."""
    import json
    import os
    import subprocess
    import sys
    env = dict(os.environ)
    env.pop("PYGPU_TEST_STAGING", None)
    p = subprocess.run([sys.executable, "-c", DEFAULT_THRESHOLD_SCRIPT], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout.strip().splitlines()[-1])
    gpu = pygpu.backend != "host"
    assert got == {"min_bytes": 32768 if gpu else None, "first": False, "small": False, "mid": False, "big": gpu,
                   "ok": True}, got


def test_page_locked_arrays_and_is_pinned():
    a = pygpu.pagelocked_empty((3, 5), np.float32, order="F")
    assert a.shape == (3, 5) and a.dtype == np.float32 and a.flags.f_contiguous
    z = pygpu.pagelocked_zeros_like(a)
    assert z.flags.f_contiguous and not z.any()
    e = pygpu.pagelocked_empty_like(np.zeros((2, 2), np.int16))
    assert e.shape == (2, 2) and e.dtype == np.int16
    assert not pygpu.is_pinned(np.zeros(16))
    # page-locked memory only exists on GPU backends
    assert pygpu.is_pinned(a) == (pygpu.backend != "host")
    assert pygpu.is_pinned(pygpu.to_gpu(np.arange(1 << 18, dtype=np.float64)).get()) == \
        (pygpu.backend != "host")       # get() of 2 MiB comes from the pinned pool
    with pytest.raises(TypeError):
        pygpu.is_pinned(3)
    h = np.ones(1 << 16)
    r = pygpu.register_host_memory(h)
    assert np.shares_memory(r, h) and pygpu.is_pinned(r)     # (registered memory reads so on the host backend too)
    assert not pygpu.is_pinned(np.concatenate([h, h])[1:])
    np.testing.assert_array_equal(pygpu.to_gpu(r).get(), h)
    r.base.unregister()
    assert not isinstance(h.base, pygpu.HostAllocation)


@pytest.mark.timing
@pytest.mark.gpu_only
def test_a_second_thread_progresses_during_a_big_transfer():
    """While one thread moves 1 GiB through the pipeline (GIL released), a
    second thread's small transfers keep completing and stay correct."""
    big = np.ones(1 << 30, np.uint8)
    g = pygpu.empty(big.shape, np.uint8)
    small = np.arange(1000, dtype=np.float64)
    done = threading.Event()

    def mover():
        try:
            for _ in range(3):
                g.set(big)
        finally:
            done.set()

    # (A count of round trips in a stretch of wall-clock time: a loaded
    # machine can keep this thread off the cores for most of one try.
    # With the GIL held through a set(), no try comes near ten.)
    counts = []
    for _ in range(5):
        done.clear()
        t = threading.Thread(target=mover)
        t.start()
        count = 0
        while not done.is_set():
            np.testing.assert_array_equal(pygpu.to_gpu(small).get(), small)
            count += 1
        t.join()
        counts.append(count)
        if count >= 10:
            break
    assert counts[-1] >= 10, f"only {counts} small round trips while 3 GiB moved (each try)"
    assert int(g[:: 1 << 20].get().sum()) == 1 << 10


@pytest.mark.timing
@pytest.mark.parametrize("how", ["get_async", "get(async_=True)", "memcpy_dtoh_async", "rows view"])
def test_async_download_into_page_locked_memory_only_queues(how):
    """Into page-locked memory the async downloads return once the copy is
    queued (on a GPU the 256 MiB upload queued before it is still running);
    the array holds the data once the stream is synchronized."""
    s = pygpu.Stream(non_blocking=True)
    big = pygpu.pagelocked_empty(256 << 20, np.uint8)      # about 5 ms of DMA
    gbig = pygpu.empty(big.shape, np.uint8)
    src = np.arange(1 << 12, dtype=np.float64)
    g = pygpu.to_gpu(src)
    if how == "rows view":      # every other row of 2 KiB: one 2-D DMA
        full = np.concatenate([src, -src]).reshape(16, 512)
        g, src = pygpu.to_gpu(full)[::2, 256:], full[::2, 256:]
    # A call that waited for the stream finds it done every time; one that
    # only queues finds it busy unless this thread lost its core for the 5
    # ms between the two calls (a loaded machine): busy in one of ten tries.
    busy = []
    for r in range(10):
        out = pygpu.pagelocked_zeros(src.shape, src.dtype)
        gbig.set_async(big, stream=s)
        if how in ("get_async", "rows view"):
            assert g.get_async(s, out) is out
        elif how == "get(async_=True)":
            assert g.get(ary=out, async_=True, stream=s) is out
        else:
            pygpu.memcpy_dtoh_async(out, g.ptr, s)
        busy.append(not s.query())
        s.synchronize()
        np.testing.assert_array_equal(out, src)
        if r >= 2 and (any(busy) or pygpu.backend == "host"):     # (host streams are done on return)
            break
    if pygpu.backend != "host":
        assert any(busy), "the download waited for the stream (each of ten tries)"


def test_async_downloads_into_pageable_or_new_arrays_are_complete_on_return():
    s = pygpu.Stream(non_blocking=True)
    big = pygpu.pagelocked_empty(64 << 20, np.uint8)
    gbig = pygpu.empty(big.shape, np.uint8)
    src = np.arange(1 << 12, dtype=np.float64)
    g = pygpu.to_gpu(src)
    whole = np.arange(1 << 14, dtype=np.float64)
    view = pygpu.to_gpu(whole)[::2]     # narrow elements: gathered on the device (or the host)
    for get in (lambda: g.get_async(s), lambda: g.get_async(s, np.zeros_like(src)),
                lambda: g.get(ary=np.zeros_like(src), async_=True, stream=s)):
        gbig.set_async(big, stream=s)
        np.testing.assert_array_equal(get(), src)
    # a view: PyGPU's kernel gathers it on the device, and into page-locked
    # memory the copy down is only queued, as for a dense array; without the
    # kernels the host gathers it, and it is complete on return
    out = pygpu.pagelocked_zeros(view.shape, view.dtype)
    gbig.set_async(big, stream=s)
    view.get_async(s, out)
    if pygpu.copy_kernels()["ready"] and pygpu.backend != "host":
        s.synchronize()
    np.testing.assert_array_equal(out, whole[::2])


@pytest.mark.parametrize("rows", [1 << 12, 1 << 15])
def test_rows_up_by_2d_copies_or_dense_and_scattered(rows):
    """Every other row of 256 B, staged: transfers that fill whole chunks go by
    2-D copies from the staging buffers, smaller ones up dense and scattered
    on the device; the same elements either way."""
    saved = pygpu.transfer_config()
    pygpu.transfer_config(min_bytes=0, chunk=1 << 20, depth=2, threads=2)
    try:
        host = np.random.default_rng(rows).integers(0, 256, (rows, 256), dtype=np.uint8)
        d = pygpu.zeros((2 * rows, 256), np.uint8)
        d[1::2] = host
        expect = np.zeros((2 * rows, 256), np.uint8)
        expect[1::2] = host
        np.testing.assert_array_equal(d.get(), expect)
    finally:
        pygpu.transfer_config(**saved)


TRACE_SCRIPT = r"""
import numpy as np, pygpu
pygpu.transfer_config(min_bytes=0, chunk=256 << 10, depth=3, threads=2)
a = np.arange(1 << 18, dtype=np.float64)            # 2 MiB
g = pygpu.to_gpu(a)                                  # h2d (alone on the device, plain stores): the ring
out = np.empty_like(a)
g.get(ary=out)                                       # d2h (whole)
assert (out == a).all()
h = np.arange(1 << 20, dtype=np.int16)               # 2 MiB of 2-byte elements: the host gathers them
assert (pygpu.to_gpu(h)[::2].get() == h[::2]).all()  # d2h (view)
d = pygpu.zeros((2048, 256), np.uint8)
rows = np.ones((1024, 256), np.uint8)
d[::2] = rows                                        # h2d (rows)
assert (d.get()[::2] == 1).all() and not d.get()[1::2].any()
small = a[: 1 << 16]                                 # 512 KiB: fits the buffers
assert (pygpu.to_gpu(small).get() == small).all()    # h2d (whole)
"""


def test_staging_trace_names_every_pipeline():
    """PYGPU_STAGING_TRACE=1 prints each staged transfer's timeline."""
    import os
    import subprocess
    import sys
    env = dict(os.environ, PYGPU_BACKEND="host", PYGPU_STAGING_TRACE="1", PYGPU_KERNELS="0")  # (views: the pipeline's gather)
    p = subprocess.run([sys.executable, "-c", TRACE_SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = [line for line in p.stderr.splitlines() if line.startswith("pygpu staging")]
    for name in ("h2d (alone on the device, plain stores):", "h2d (whole):", "d2h (whole):", "d2h (view):", "h2d (rows):"):
        hits = [line for line in lines if line.startswith("pygpu staging " + name)]
        assert hits, (name, p.stderr)
        assert " b0@" in hits[0] and " e0@" in hits[0] and "(us)" in hits[0], hits[0]
        if "(whole)" in name:       # and when each DMA call ended on the device, in order
            ends = hits[0].split("; DMA calls ended, from the device's start")[1].split()[:-1]
            assert ends and [int(e.split("@")[0]) for e in ends] == list(range(len(ends))), hits[0]
            times = [float(e.split("@")[1]) for e in ends]
            assert times == sorted(times) and times[0] >= 0, hits[0]


ROUTE_SCRIPT = r"""
import sys
import numpy as np, pygpu
pygpu.transfer_config(min_bytes=1 << 20, chunk=256 << 10, depth=3, threads=2)
def case(name, got, want):
    np.testing.assert_array_equal(got, want)
    print("case", name, file=sys.stderr, flush=True)
a = np.arange(8, dtype=np.float64)
case("small", pygpu.to_gpu(a).get(), a)
b = np.arange(1 << 19, dtype=np.float64)                        # 4 MiB
case("big", pygpu.to_gpu(b).get(ary=np.empty_like(b)), b)
x = pygpu.zeros((64, 1024), np.float32)
w = np.ones((64, 512), np.float32)
x[:, :512] = w                                                  # 128 KiB in 2 KiB rows
case("wide", x[:, :512].get(ary=np.empty_like(w)), w)
r = np.arange(1 << 20, dtype=np.float32).reshape(-1, 64)        # 4 MiB in 256 B rows
y = pygpu.zeros((2 * r.shape[0], 64), np.float32)
y[::2] = r
case("rows", y[::2].get(ary=np.empty_like(r)), r)
n = np.arange(1 << 20, dtype=np.float32).reshape(-1, 4)         # single elements at a pitch
z = pygpu.zeros((n.shape[0], 8), np.float32)
z[:, ::2] = n
case("elements", z[:, ::2].get(ary=np.empty_like(n)), n)
s = np.arange(4096, dtype=np.int8).reshape(64, 64)
t = pygpu.zeros((64, 128), np.int8)
t[:, ::2] = s
case("small view", t[:, ::2].get(ary=np.empty_like(s)), s)
u = np.arange(3 << 17, dtype=np.float32).reshape(-1, 2, 4)      # 16 B rows at two pitches
v = pygpu.zeros((u.shape[0], 3, 8), np.float32)
v[:, :2, :4] = u
case("two pitches", v[:, :2, :4].get(ary=np.empty_like(u)), u)
m = pygpu.zeros((1 << 15, 16), np.float32)
pygpu.transfer_config(min_bytes=64 << 20)                       # nothing staged from here
q = np.empty((1 << 15, 8), np.float32)
m[:, :8].get(ary=q)
case("rows unstaged", q, 0)
"""

# The route each copy above takes on the host backend (all host memory
# pageable there), with PyGPU's kernels and without: (up or down, route).
ROUTES = {
    "small": ([("up", "one DMA"), ("down", "through a page-locked block")],) * 2,
    "big": ([("up", "staged"), ("down", "staged")],) * 2,
    "wide": ([("up", "runtime copies"), ("down", "runtime copies")],) * 2,
    "rows": ([("up", "staged rows"), ("down", "gathered on the device")],) * 2,
    "elements": ([("up", "staged rows"), ("down", "staged view")],
                 [("up", "staged rows"), ("down", "gathered on the device")]),
    "small view": ([("up", "scattered"), ("down", "gathered on the host")],
                   [("up", "scattered"), ("down", "gathered on the device")]),
    "two pitches": ([("up", "scattered as it arrives"), ("down", "staged view")],
                    [("up", "scattered as it arrives"), ("down", "gathered on the device")]),
    "rows unstaged": ([("down", "gathered on the device in pieces")],
                      [("down", "gathered on the device")]),
}


@pytest.mark.parametrize("kernels", [0, 1])
def test_staging_trace_names_each_route(kernels):
    """PYGPU_STAGING_TRACE=1 names the route of every copy between host and
    device, and why (copy/host_routes.c's route_up and route_down): each layout goes
    the way the planner's rule says, and arrives as NumPy has it."""
    import os
    import subprocess
    import sys
    env = dict(os.environ, PYGPU_BACKEND="host", PYGPU_STAGING_TRACE="1", PYGPU_KERNELS=str(kernels))
    p = subprocess.run([sys.executable, "-c", ROUTE_SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    seen, taken = {}, []
    for line in p.stderr.splitlines():
        if line.startswith("pygpu route: "):
            way, rest = line[len("pygpu route: "):].split(" ", 1)
            nbytes, rest = rest.split(" B: ", 1)
            assert int(nbytes) > 0 and rest.endswith(")") and " (" in rest, line
            taken.append((way, rest.split(" (")[0]))
        elif line.startswith("case "):
            seen[line[5:]], taken = taken, []
    assert seen == {name: ways[kernels] for name, ways in ROUTES.items()}, p.stderr


@pytest.mark.parametrize("nbytes", [(1 << 20) - 8, 3 << 20, (4 << 20) - 24])
def test_uploads_that_fill_several_staging_buffers(nbytes):
    """Uploads that fit the staging buffers go up in merged DMA calls, never
    one across two buffers (each its own page-locked allocation, however
    they lie in memory); dense and strided sources, read back as NumPy has
    them."""
    saved = pygpu.transfer_config()
    pygpu.transfer_config(min_bytes=0, chunk=1 << 20, depth=4, threads=4)
    try:
        rng = np.random.default_rng(nbytes)
        a = rng.standard_normal(nbytes // 8)
        big = rng.standard_normal(2 * a.size)
        for src in (a, big[::2], a.reshape(-1, 3)[:, ::-1] if a.size % 3 == 0 else a[::-1]):
            g = pygpu.to_gpu(src)
            np.testing.assert_array_equal(g.get(), src)
            g.set(src * 2)
            np.testing.assert_array_equal(g.get(), src * 2)
    finally:
        pygpu.transfer_config(**saved)


FEWER_THREADS_SCRIPT = r"""
import json, resource, time
import numpy as np, pygpu
a = np.arange(1 << 19, dtype=np.float64)                # 4 MiB
pygpu.transfer_config(min_bytes=0, chunk=256 << 10, depth=3, threads=4)
assert (pygpu.to_gpu(a).get() == a).all()              # three workers started
pygpu.transfer_config(threads=1)                       # now the caller alone
g = pygpu.to_gpu(a)
u, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
while time.perf_counter() - t0 < 0.5:
    g.set(a)
    g.get()
v, t1 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
print(json.dumps((v.ru_utime + v.ru_stime - u.ru_utime - u.ru_stime) / (t1 - t0)))
"""


@pytest.mark.timing
def test_workers_beyond_the_thread_setting_sleep():
    """After transfer_config(threads=...) is lowered, the workers started
    for the earlier setting neither take part nor spin while transfers run
    (they did: a core each)."""
    import json
    import os
    import subprocess
    import sys
    p = subprocess.run([sys.executable, "-c", FEWER_THREADS_SCRIPT], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYGPU_BACKEND="host"))
    assert p.returncode == 0, p.stderr
    cores_busy = json.loads(p.stdout.splitlines()[-1])
    assert cores_busy < 1.5, cores_busy        # CPU seconds per second: the caller's one


STORES_SCRIPT = r"""
import numpy as np, pygpu
pygpu.transfer_config(min_bytes=0, chunk=1 << 20, depth=3, threads=2)
rng = np.random.default_rng(9)
for n in (5 << 17, (3 << 20) + 13):                  # fits the buffers; through the ring
    a = rng.integers(0, 255, n, dtype=np.uint8)
    assert (pygpu.to_gpu(a).get() == a).all()
    b = rng.standard_normal((n // 64, 8))[:, ::2]     # gathered into the buffers
    assert (pygpu.to_gpu(b).get() == b).all()
print("ok")
"""


def test_non_temporal_stores_fill_the_staging_buffers_right():
    """Chunks going up are written into the staging buffers with
    non-temporal stores (runs of 4 KiB or more, in chunks of up to 8 MiB):
    the same bytes as the source, at every alignment and size."""
    import os
    import subprocess
    import sys
    p = subprocess.run([sys.executable, "-c", STORES_SCRIPT], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYGPU_BACKEND="host"))
    assert p.returncode == 0 and p.stdout.split()[-1] == "ok", p.stderr


PARTS_SCRIPT = r"""
import numpy as np, pygpu
rng = np.random.default_rng(5)
for threads in (4, 2):                                # fewer threads after more: the bound holds
    pygpu.transfer_config(min_bytes=0, chunk=1 << 20, depth=3, threads=threads)
    big = rng.standard_normal((1024, 1024))           # 8 MiB; every other column: 4 MiB gathered
    a = big[:, ::2]
    g = pygpu.to_gpu(a)
    assert (g.get() == a).all()
    out = np.empty((1024, 1024))
    g.get(ary=out[:, 1::2])                           # scattered into a strided host view
    assert (out[:, 1::2] == a).all()
"""


def test_host_copies_are_cut_into_parts_per_thread():
    """Each chunk's host copy is cut into up to 4 parts per thread, of 32
    KiB or more, run on no more threads than transfer_config asks for, even
    after more were asked for; the elements arrive right."""
    import os
    import re
    import subprocess
    import sys
    per_thread = 4
    env = dict(os.environ, PYGPU_BACKEND="host", PYGPU_STAGING_TRACE="1")
    p = subprocess.run([sys.executable, "-c", PARTS_SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = [line for line in p.stderr.splitlines() if line.startswith("pygpu staging")]
    assert len(lines) == 6, p.stderr                  # per setting: up, down, down into a view
    smallest = 32 << 10
    for line, threads in zip(lines, (4, 4, 4, 2, 2, 2)):
        copies = re.findall(r"c\d+@[\d.]+\[(\d+)K\]\{(\d+) parts on (\d+) threads", line)
        assert copies, line
        for kib, parts, ran_on in copies:      # (threads, not CPUs: a thread may move mid-part)
            nbytes, parts, ran_on = int(kib) << 10, int(parts), int(ran_on)
            assert parts == max(1, min(nbytes // smallest, per_thread * threads)), line
            assert 1 <= ran_on <= threads, line


@pytest.mark.parametrize("tool, args, want", [
    ("loop-gap.py", ["64K"], "64K gap 2000 us: get"),
    ("dma-after-read.py", [], "needs the CUDA runtime"),
    ("wait-latency.py", ["--reps", "2"], ("needs CuPy and the NVIDIA driver", "a 4 MiB DMA alone")),
    ("ab-staging.py", ["--async", "--reps", "1", "--sizes", "2M"], "to_gpu_async call share 2M"),
    ("call-costs.py", ["--reps", "2"], ("needs CuPy and the NVIDIA driver", "pygpu.to_gpu_async, 64 MiB")),
    ("beside-floor.py", ["--rounds", "1", "--big", "16777216", "--seconds", "0.05"],
     "1 MiB from pageable beside 16 MiB from pageable"),
])
def test_research_tools_run_on_the_host_backend(tool, args, want):
    """tools/research's loop-gap, dma-after-read, wait-latency, ab-staging
    --async (with the call's share), call-costs and beside-floor run (on
    the host backend, where the raw runtime calls are missing, they say so;
    wait-latency and call-costs use CuPy, and measure wherever CuPy finds a
    device)."""
    import os
    import pathlib
    import subprocess
    import sys
    path = pathlib.Path(__file__).resolve().parent.parent / "tools" / "research" / tool
    p = subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYGPU_BACKEND="host"))
    assert p.returncode == 0, p.stderr[-2000:]
    assert any(w in p.stdout for w in ((want,) if isinstance(want, str) else want)), p.stdout


@pytest.mark.skipif(c_compiler() is None, reason="no C compiler")
def test_fresh_fill_probe_fills_fresh_memory(tmp_path):
    """tools/research/fresh-fill.c (the floor of a download into fresh
    memory, docs/performance.md) builds and fills fresh memory with the
    source's bytes in each way it measures (it checks every byte itself and
    fails on a mismatch); the userfaultfd way where the kernel lets this
    process use it."""
    import pathlib
    import subprocess
    src = pathlib.Path(__file__).resolve().parent.parent / "tools" / "research" / "fresh-fill.c"
    exe = tmp_path / "fresh-fill"
    subprocess.run([c_compiler(), "-O2", "-pthread", str(src), "-o", str(exe)], check=True, capture_output=True)
    names = {0: "populate+copy", 1: "copy (faulting)", 2: "uffd copy", 3: "touched copy"}
    for mode, name in names.items():
        p = subprocess.run([str(exe), "8", "2", str(mode), "64"], capture_output=True, text=True, timeout=60)
        if mode == 2 and p.returncode != 0 and "userfaultfd" in p.stderr and "MISMATCH" not in p.stderr:
            continue        # (not allowed here: a container's seccomp, or vm.unprivileged_userfaultfd)
        assert p.returncode == 0, (mode, p.stderr)
        assert p.stdout.startswith(name) and "GB/s" in p.stdout, p.stdout


@pytest.mark.skipif(c_compiler() is None, reason="no C compiler")
@pytest.mark.skipif(__import__("platform").machine() not in ("x86_64", "AMD64"), reason="x86 probes (SSE4.1)")
@pytest.mark.parametrize("probe", ["register-fresh.c", "wc-probe.c", "down-slots.c", "batch-copy.c", "ipc-probe.c"])
def test_cuda_probes_compile(probe):
    """The C probes that need the CUDA runtime (run by gpu-check.sh probes on
    the GPU machine) compile cleanly where its headers are."""
    import os
    import pathlib
    import subprocess
    inc = pathlib.Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "include"
    if not (inc / "cuda_runtime.h").exists():
        pytest.skip("no CUDA headers")
    src = pathlib.Path(__file__).resolve().parent.parent / "tools" / "research" / probe
    p = subprocess.run([c_compiler(), "-std=gnu11", "-O2", "-msse4.1", "-Wall", "-Wextra", "-Werror", "-pthread",
                        f"-I{inc}", "-fsyntax-only", str(src)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def test_trace_cases_tool_runs():
    """tools/research/trace-cases.py (run on the GPU machine by gpu-check.sh ab) works."""
    import os
    import pathlib
    import subprocess
    import sys
    tool = pathlib.Path(__file__).resolve().parent.parent / "tools" / "research" / "trace-cases.py"
    p = subprocess.run([sys.executable, str(tool), "1M"], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYGPU_BACKEND="host"))
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("\n== ") + p.stdout.startswith("== ") == 4, p.stdout


def test_ab_staging_tool_runs():
    """tools/research/ab-staging.py (run on the GPU machine by gpu-check.sh ab) gives
    a row per case and size, a column per setting, from separate processes."""
    import os
    import pathlib
    import subprocess
    import sys
    import re
    from conftest import PACKAGE_ROOT
    checkout = pathlib.Path(__file__).resolve().parent.parent
    if pathlib.Path(PACKAGE_ROOT).resolve() != checkout:
        pytest.skip("the tool measures the checkout's build; the pygpu under test is installed elsewhere")
    tool = checkout / "tools" / "research" / "ab-staging.py"
    p = subprocess.run([sys.executable, str(tool), "--reps", "1", "--sizes", "256K,1M", "AB_THREADS=1"],
                       capture_output=True, text=True, timeout=300, env=dict(os.environ, PYGPU_BACKEND="host"))
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert "as built" in lines[0] and "AB_THREADS=1" in lines[0], p.stdout
    assert len(lines) == 1 + 5 * 2 + 2, p.stdout
    assert lines[-2].startswith("(as built: ") and lines[-1].startswith("(AB_THREADS=1: "), p.stdout
    for line in lines[1:-2]:
        assert len(re.findall(r"\d+\.\d \[\d+-\d+\]", line)) == 2, line


def test_get_past_the_pool_limit_uses_prefaulted_ordinary_memory(staging):
    """When the pinned pool is full, get() returns ordinary memory holding
    the right elements."""
    saved = pygpu.pinned_pool_stats()["limit"]
    pygpu.trim_pinned_pool()
    pygpu.set_pinned_pool_limit(0)
    try:
        for n in (1, 4095, 1 << 20, (5 << 20) + 3, (33 << 20) + 5):     # (the last: faulted in as it comes)
            a = np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8)
            out = pygpu.to_gpu(a).get()
            assert not pygpu.is_pinned(out)
            np.testing.assert_array_equal(out, a)
        assert pygpu.pinned_pool_stats()["in_use"] == 0
    finally:
        pygpu.set_pinned_pool_limit(saved)


@pytest.mark.parametrize("nbytes", [64 << 10, 1 << 20, 3 << 20 | 24])
def test_uploads_waited_for_and_queued_take_turns_through_the_staging_buffers(nbytes):
    """A synchronous staged upload waits for its stream itself and gives
    its staging buffers back free (no event left for the next transfer to
    wait on); an asynchronous one leaves them busy until its DMA is done.
    Taking turns, on the legacy stream and a stream of their own, a
    synchronous upload's host side rewritten as soon as it returns (an
    asynchronous one's only once its stream is done: from 1 MiB it reads
    its host side in the background): every upload lands whole (one written
    into buffers that a DMA was still reading would not)."""
    saved = pygpu.transfer_config()
    pygpu.transfer_config(min_bytes=0)         # (staged on the host backend too)
    try:
        rng = np.random.default_rng(nbytes)
        n = nbytes // 8
        s = pygpu.Stream(non_blocking=True)
        host = np.empty(n, np.int64)
        gs, want, kept = [pygpu.empty(n, np.int64) for _ in range(8)], [], []
        for k, g in enumerate(gs):
            host[:] = rng.integers(0, 2**62, n)
            want.append(host.copy())
            if k % 3 == 1:
                kept.append(want[-1].copy())
                g.set_async(kept[-1], stream=s)
            else:
                g.set(host)
                host[:] = -1                    # (pageable: the caller's again once the call returns)
        s.synchronize()
        for k, (g, w) in enumerate(zip(gs, want)):
            np.testing.assert_array_equal(g.get(), w, err_msg=f"upload {k}")
    finally:
        pygpu.transfer_config(**saved)
