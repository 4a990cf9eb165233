"""Host buffers page-locked in place (transfer_config(register_limit=)):
a NumPy array's buffer that synchronous transfers of 1 MiB or more meet
again, once 64 MiB have moved through it in all (a 34 MiB buffer at its
second meeting, a 4 MiB one at its 16th), is registered with the runtime
where it lies, until its owner is collected, the limit needs the room, or
registration is turned off.
The data are NumPy's either way; registered_stats() counts what is held.
Only the whole pages inside a buffer are registered (the partial pages at
either end are shared with malloc's neighbours), and a copy that begins in
page-locked memory and runs past it is one the runtime refuses: the host
backend keeps the registered ranges and refuses such copies as CUDA does,
so these tests hold the copy paths to it everywhere."""
import gc
import json
import os

import numpy as np
import pytest

import pygpu

MiB = 1 << 20
# Arrays past glibc's largest mmap threshold (32 MiB) get pages of their
# own; smaller ones may come from the heap side by side, sharing a page with
# a neighbour, and a buffer that shares a page with one registered already
# is left as it is (the runtime registers whole pages, each once).
BIG = 34 * MiB
PAGE = os.sysconf("SC_PAGESIZE")


def inside(a):
    """The bytes of contiguous `a` from its first whole page to its last."""
    b = a.reshape(-1).view(np.uint8)
    lo = -b.ctypes.data % PAGE
    return b[lo:lo + (b.size - lo) // PAGE * PAGE]


@pytest.fixture
def limit():
    """Registration on (256 MiB), and off again after the test."""
    before = pygpu.transfer_config()["register_limit"]
    pygpu.transfer_config(register_limit=256 * MiB)
    yield 256 * MiB
    pygpu.transfer_config(register_limit=before)
    gc.collect()


def stats():
    return pygpu.registered_stats()


def test_the_default_and_the_environment(run_python):
    """On a GPU backend, an eighth of physical memory by default; on the
    host backend off (its device memory is host memory); PYGPU_REGISTER_LIMIT
    sets the limit a process starts with (0: off), and with the limit at 0
    nothing is registered, however often a buffer is met."""
    code = "import pygpu; print(pygpu.transfer_config()['register_limit'])"
    share = os.sysconf("SC_PHYS_PAGES") * PAGE // 8
    default = 0 if pygpu.backend == "host" else share
    assert run_python(code, env={"PYGPU_REGISTER_LIMIT": ""}).stdout.split()[-1] == str(default)
    assert run_python(code, env={"PYGPU_REGISTER_LIMIT": "3G"}).stdout.split()[-1] == str(3 << 30)
    assert run_python(code, env={"PYGPU_REGISTER_LIMIT": "0"}).stdout.split()[-1] == "0"
    before = pygpu.transfer_config()["register_limit"]
    pygpu.transfer_config(register_limit=0)
    try:
        x = np.ones(8 * MiB, np.uint8)
        for _ in range(3):
            pygpu.to_gpu(x)
        assert stats()["buffers"] == 0 and stats()["limit"] == 0
    finally:
        pygpu.transfer_config(register_limit=before)


def test_a_buffer_met_twice_is_registered_and_its_views_share_it(limit, rng):
    made = stats()["registered"]
    x = rng.standard_normal((1024, BIG // 8192 + 7))   # (pages of its own; not a whole number of them)
    g = pygpu.to_gpu(x)
    assert stats()["buffers"] == 0                     # met once
    np.testing.assert_array_equal(pygpu.to_gpu(x).get(), x)
    s = stats()
    assert s["buffers"] == 1 and s["registered"] == made + 1 and s["bytes"] == inside(x).nbytes
    # the runtime itself says so (copies DMA from it): the whole pages, not the partial ones at the ends
    assert pygpu.is_pinned(inside(x)) and pygpu.is_pinned(inside(x)[PAGE:-PAGE:3])
    assert not pygpu.is_pinned(x) and not pygpu.is_pinned(x[1:])
    assert s["bytes"] % os.sysconf("SC_PAGESIZE") == 0 and s["bytes"] <= s["limit"]
    # its views, either way, and get into it: the same registration, NumPy's data
    for view in (x[::2], x[:, 3:], x[1:-1, ::-3], x.T):
        np.testing.assert_array_equal(pygpu.to_gpu(view).get(), view)
    out = np.zeros_like(x)
    pygpu.to_gpu(out)
    g.get(ary=out)                                      # (met twice: registered)
    np.testing.assert_array_equal(out, x)
    out[...] = 0
    g[::2, 1:].get(ary=out[::2, 1:])
    np.testing.assert_array_equal(out[::2, 1:], x[::2, 1:])
    assert not out[1::2].any() and not out[:, 0].any()
    x[...] = 7                                          # a registered buffer is the user's still
    g.set(x)
    np.testing.assert_array_equal(g.get(), x)
    assert stats()["registered"] == made + 2 and stats()["buffers"] == 2


def test_a_buffer_is_registered_once_enough_has_moved_through_it(limit, rng):
    """A buffer met again is registered once 64 MiB have moved through it
    (a registration costs about two staged copies of the buffer): 4 MiB at
    the 16th meeting, 1 MiB at the 64th, up or down alike, the bytes of
    views counted; a buffer met a few times is never registered."""
    for n, meetings in ((4 * MiB, 16), (MiB, 64)):
        made = stats()["registered"]
        x = rng.integers(0, 255, n, dtype=np.uint8)
        g = pygpu.to_gpu(x)
        for k in range(meetings - 2):
            if k % 2:
                g.set(x)
            else:
                g.get(ary=x)
        assert stats()["registered"] == made, n
        np.testing.assert_array_equal(pygpu.to_gpu(x).get(), x)     # (the last meeting)
        assert stats()["registered"] == made + 1 and pygpu.is_pinned(inside(x)), n
        del g, x
        gc.collect()
    made = stats()["registered"]
    x = rng.integers(0, 255, 8 * MiB, dtype=np.uint8)
    for _ in range(4):
        pygpu.to_gpu(x[: 2 * MiB])                     # (views count their own bytes: 8 MiB in all)
    for _ in range(6):
        pygpu.to_gpu(x)
    assert stats()["registered"] == made               # (56 MiB)
    pygpu.to_gpu(x)
    assert stats()["registered"] == made + 1


def test_the_owner_collected_lets_its_registration_go(limit):
    x = np.ones(BIG, np.uint8)
    pygpu.to_gpu(x)
    pygpu.to_gpu(x)
    assert stats()["buffers"] == 1
    released = stats()["released"]
    view = inside(x)
    assert pygpu.is_pinned(view)
    del x
    gc.collect()
    assert pygpu.is_pinned(view)                        # (a view keeps the owner alive)
    del view
    gc.collect()
    assert stats()["buffers"] == 0 and stats()["bytes"] == 0 and stats()["released"] == released + 1


def test_temporaries_small_and_asynchronous_transfers_are_not_registered(limit):
    made = stats()["registered"]
    x = np.ones(BIG, np.uint8)
    for _ in range(4):
        pygpu.to_gpu(x + 0)                            # a new owner each time, perhaps at the same address
        pygpu.to_gpu(np.frombuffer(bytes(BIG), np.uint8))   # memory a NumPy array does not own
    small = np.ones(MiB - PAGE, np.uint8)
    for _ in range(200):
        pygpu.to_gpu(small)
    s = pygpu.Stream()
    for _ in range(3):
        pygpu.to_gpu_async(x, stream=s)
    s.synchronize()
    assert stats()["registered"] == made and stats()["buffers"] == 0


def test_the_limit_lets_the_least_recently_used_go(limit):
    """Within 80 MiB two 34 MiB buffers fit: a third met twice takes the place
    of the one used least recently.  (Which ones are held shows through
    NumPy: a registered array is weakly referenced and cannot be resized.)"""
    pygpu.transfer_config(register_limit=80 * MiB)
    arrays = [np.full(BIG, k, np.uint8) for k in range(4)]
    for a in arrays:
        pygpu.to_gpu(a)
        pygpu.to_gpu(a)
        assert stats()["bytes"] <= 80 * MiB
    assert stats()["buffers"] == 2                     # 2 and 3 (0 and 1 made room)
    pygpu.to_gpu(arrays[2])                            # 2 used after 3
    pygpu.to_gpu(arrays[0])
    pygpu.to_gpu(arrays[0])                            # 0 again: 3 goes
    assert stats()["buffers"] == 2
    held = [pygpu.is_pinned(inside(a)) for a in arrays]  # (the runtime agrees: 3 unregistered, 0 and 2 not)
    assert held == [True, False, True, False]
    arrays[3].resize(4 * MiB, refcheck=False)          # let go: no reference left to it
    with pytest.raises(ValueError):
        arrays[2].resize(4 * MiB, refcheck=False)      # held
    pygpu.transfer_config(register_limit=40 * MiB)     # lowered: the least recently used goes (2)
    assert stats()["buffers"] == 1 and stats()["bytes"] <= 40 * MiB
    arrays[2].resize(4 * MiB, refcheck=False)
    pygpu.transfer_config(register_limit=0)
    assert stats()["buffers"] == 0 and stats()["bytes"] == 0
    for k, a in enumerate(arrays):
        np.testing.assert_array_equal(pygpu.to_gpu(a).get(), np.full(a.size, k, np.uint8))


def test_registered_arrays_cannot_be_resized_until_let_go(limit):
    """NumPy refuses to resize an array that is weakly referenced, as a
    registered (or once met) buffer's owner is: its pages cannot move under
    a registration.  Turned off, registration forgets it."""
    x = np.ones(BIG, np.uint8)
    pygpu.to_gpu(x)
    pygpu.to_gpu(x)
    with pytest.raises(ValueError):
        x.resize(2 * BIG, refcheck=False)
    pygpu.transfer_config(register_limit=0)
    x.resize(2 * BIG, refcheck=False)
    assert x.nbytes == 2 * BIG


def test_the_limit_is_checked():
    with pytest.raises(ValueError):
        pygpu.transfer_config(register_limit=-1)
    with pytest.raises(TypeError):
        pygpu.transfer_config(register_limit="1G")


@pytest.mark.skipif(pygpu.backend != "host", reason="a forked child may not use the device on a GPU backend")
def test_a_forked_child_reads_a_registered_array_whole(limit):
    x = np.arange(BIG // 4, dtype=np.int32)
    pygpu.to_gpu(x)
    pygpu.to_gpu(x)
    assert stats()["buffers"] == 1
    pid = os.fork()
    if pid == 0:
        os._exit(0 if int(x[-1]) == BIG // 4 - 1 and int(x.sum()) == int(np.arange(BIG // 4).sum()) else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    # after the fork the registration was let go, and the next meetings make a new one
    made = stats()["registered"]
    pygpu.to_gpu(x)
    np.testing.assert_array_equal(pygpu.to_gpu(x).get(), x)
    assert stats()["registered"] >= made


def test_events_of_asynchronous_copies_come_back_after_a_fork(limit):
    """Asynchronous copies of registered pages keep an event each until
    the pages are let go; a fork unregisters the pages first (after those
    copies), and the registration let go after it gives the events back to
    the device's reuse, none lost."""
    lib = pygpu.backend_module
    x = np.arange(BIG // 4, dtype=np.int32)
    pygpu.to_gpu(x)
    pygpu.to_gpu(x)
    assert stats()["buffers"] == 1
    pages = inside(x)
    s = pygpu.Stream(non_blocking=True)
    sent = [pygpu.to_gpu_async(pages[:MiB], stream=s) for _ in range(3)]
    s.synchronize()
    kept = lib._events_kept(pygpu.get_device())
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    pygpu.transfer_config(register_limit=0)
    assert stats()["buffers"] == 0
    assert lib._events_kept(pygpu.get_device()) == min(kept + 3, 16)
    for g in sent:
        np.testing.assert_array_equal(g.get(), pages[:MiB])


def test_threads_meeting_shared_and_own_buffers_under_a_tight_limit(limit, rng):
    """Four threads move their own and shared buffers up and down while the
    limit (two buffers) makes registrations come and go: every result is
    NumPy's, nothing a copy uses is let go under it, and the bookkeeping
    ends within the limit with every buffer accounted for."""
    import threading
    pygpu.transfer_config(register_limit=2 * BIG + 2 * MiB)
    shared = [np.full(BIG, k + 1, np.uint8) for k in range(2)]
    errors = []

    def work(seed):
        r = np.random.default_rng(seed)
        own = np.full(BIG, 10 + seed, np.uint8)
        try:
            for _ in range(6):
                a = shared[r.integers(2)] if r.random() < 0.5 else own
                g = pygpu.to_gpu(a)
                back = np.empty_like(a)
                g.get(ary=back)
                if not np.array_equal(back, a):
                    errors.append(("round trip", seed))
                if a is own:                    # (met again, downwards)
                    g.get(ary=own)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    s = stats()
    assert s["bytes"] <= s["limit"] and s["buffers"] <= 2
    assert s["registered"] - s["released"] == s["buffers"]      # (each one made is held or was let go)
    pygpu.transfer_config(register_limit=0)
    assert stats()["buffers"] == 0 and stats()["bytes"] == 0


def test_views_running_past_the_registered_pages_copy_right(limit, rng):
    """Views that begin in the registered pages and end in the partial page
    after them (or begin before them), small and large, up and down,
    synchronous and not: NumPy's data, for the copy that begins in
    page-locked memory and runs past it is cut or staged, never handed to
    the runtime whole."""
    x = rng.integers(0, 255, BIG + 3 * PAGE // 2, dtype=np.uint8)   # (ends mid-page)
    pygpu.to_gpu(x)
    pygpu.to_gpu(x)
    assert stats()["buffers"] == 1
    pages = inside(x)
    first = pages.ctypes.data - x.ctypes.data
    last = first + pages.size                           # (x's bytes from here on are pageable)
    s = pygpu.Stream()
    for lo, hi in ((last - 100, x.size), (last - 5 * MiB, x.size), (first - 10, first + 4 * MiB),
                   (first + 8, last + 1), (0, x.size), (last - PAGE, last + 17)):
        v = x[lo:hi]
        np.testing.assert_array_equal(pygpu.to_gpu(v).get(), v)
        g = pygpu.to_gpu_async(v, stream=s)
        s.synchronize()
        np.testing.assert_array_equal(g.get(), v)
        out = np.zeros_like(x)
        pygpu.to_gpu(out)
        pygpu.to_gpu(out)                               # (out registered too)
        g.get(ary=out[lo:hi])
        np.testing.assert_array_equal(out[lo:hi], v)
        assert not out[:lo].any() and not out[hi:].any()
        out[lo:hi] = 0
        g.get_async(ary=out[lo:hi], stream=s)
        s.synchronize()
        np.testing.assert_array_equal(out[lo:hi], v)
    for view in (x[first + 1:last + 4000:7], x[last + 200:first:-3]):     # strided, across the end
        np.testing.assert_array_equal(pygpu.to_gpu(view).get(), view)


def test_neighbours_of_a_registered_buffer_are_left_alone(limit, rng):
    """A buffer's partial pages are not registered: the arrays malloc puts
    beside it on the heap (sharing those pages) copy as before, whatever
    their size, and the runtime is never handed a copy that begins in
    page-locked memory and runs past it (the host backend refuses those as
    CUDA does)."""
    gc.collect()
    held = []
    for _ in range(8):                                  # (8 MiB arrays: on the heap once glibc raised its threshold)
        a = rng.integers(0, 255, 8 * MiB + 100, dtype=np.uint8)
        small = [rng.integers(0, 255, n, dtype=np.uint8) for n in (7, 300, 5000, 70000)]
        for _ in range(8):                              # (64 MiB moved: registered)
            pygpu.to_gpu(a)
        held.append((a, small))
    assert stats()["buffers"] >= 1
    for a, small in held:
        for b in [a] + small:
            np.testing.assert_array_equal(pygpu.to_gpu(b).get(), b)
            assert not pygpu.is_pinned(b)


@pytest.mark.parametrize("beside", ["alone", "beside a capture"])
@pytest.mark.parametrize("let_go", ["limit lowered", "owner collected"])
def test_pages_an_asynchronous_copy_was_queued_on_are_let_go_after_it(limit, rng, let_go, beside):
    """An asynchronous copy of registered pages may still be running when
    the registration is let go (the limit lowered, the owner collected):
    the copies are waited for first, and the data are NumPy's.  They are
    waited for on their own stream, not by a device-wide synchronization,
    which the runtime refuses under any capture and breaks it: with
    another stream being captured meanwhile (begun by the backend's own
    call, in global mode), the capture ends valid."""
    lib = pygpu.backend_module
    x = rng.integers(0, 255, BIG, dtype=np.uint8)
    pygpu.to_gpu(x)
    pygpu.to_gpu(x)
    assert stats()["buffers"] == 1
    pages = inside(x)
    want = pages.copy()
    s = pygpu.Stream(non_blocking=True)
    g = pygpu.to_gpu_async(pages, stream=s)             # (the pages alone: page-locked, queued)
    back = pygpu.pagelocked_empty(pages.shape, np.uint8)
    g.get_async(ary=back, stream=s)
    captured = pygpu.Stream(non_blocking=True)
    released = stats()["released"]
    gc.collect()        # (not inside the capture: with JAX loaded, a global capture as long as a collection
    #                     there (160 ms) breaks now and then with no call of ours in it: capture-libs.py)
    if beside != "alone":
        assert lib._stream_begin_capture(captured.handle, 0) == 0
    try:                                                # let go while the copies may be queued
        if let_go == "limit lowered":
            pygpu.transfer_config(register_limit=0)
        else:
            del x, pages                                # (no cycle: collected at once)
    finally:
        if beside != "alone":
            assert lib._stream_end_capture(captured.handle) == 0    # (valid to its end)
    assert stats()["released"] == released + 1 and stats()["buffers"] == 0
    s.synchronize()
    np.testing.assert_array_equal(back, want)
    np.testing.assert_array_equal(g.get(), want)


def test_many_asynchronous_copies_of_registered_pages_on_several_streams(limit, rng):
    """More asynchronous copies of one registered buffer than it keeps
    events for (8), on three streams, each into its own device array and
    back into its own page-locked array: those done are given back, the
    oldest waited for when none is, and the registration let go after
    them; every copy has NumPy's data."""
    x = rng.integers(0, 255, BIG, dtype=np.uint8)
    pygpu.to_gpu(x)
    pygpu.to_gpu(x)
    assert stats()["buffers"] == 1
    pages = inside(x)
    part = pages[: 4 * MiB]
    streams = [pygpu.Stream(non_blocking=True) for _ in range(3)]
    sent, back = [], []
    for i in range(20):
        s = streams[i % 3]
        g = pygpu.to_gpu_async(part, stream=s)          # (page-locked in place: queued, an event kept)
        out = pygpu.pagelocked_empty(part.shape, np.uint8)
        g.get_async(ary=out, stream=s)
        sent.append(g)
        back.append(out)
    want = part.copy()
    pygpu.transfer_config(register_limit=0)             # let go while copies may be queued
    assert stats()["buffers"] == 0
    for s in streams:
        s.synchronize()
    for g, out in zip(sent, back):
        np.testing.assert_array_equal(out, want)
        np.testing.assert_array_equal(g.get(), want)


def test_registrations_the_system_refuses_are_staged_and_counted(run_python):
    """Memory pressure on page-locked memory: the host backend under
    PYGPU_HOST_LOCKED (a locked-memory limit of the operating system's,
    which refuses cudaHostRegister past it) holds one 34 MiB buffer but not
    two.  The second registration is refused and counted, that buffer's
    transfers stay staged and right, it is not page-locked, and once the
    first is let go the second registers at its next meetings; with
    registration off nothing is left page-locked that the counts do not
    know.  (A child process on the host backend, whatever the suite's.)"""
    code = """
        import gc, json, numpy as np, pygpu
        MiB = 1 << 20
        pygpu.transfer_config(register_limit=256 * MiB)
        rng = np.random.default_rng(5)
        a, b = (rng.integers(0, 255, 34 * MiB, dtype=np.uint8) for _ in range(2))
        inner = lambda x: x[8192:-8192]

        def meet(x, times=2):
            for _ in range(times):
                out = np.empty_like(x)
                pygpu.to_gpu(x).get(ary=out)
                assert (out == x).all()
        meet(a)
        meet(b)
        s = pygpu.registered_stats()
        report = {"first": [s["registered"], s["refused"], s["buffers"],
                            pygpu.is_pinned(inner(a)), pygpu.is_pinned(inner(b))]}
        del a
        gc.collect()
        meet(b)
        s = pygpu.registered_stats()
        report["after"] = [s["registered"], s["refused"], s["buffers"], s["bytes"] <= b.nbytes,
                           pygpu.is_pinned(inner(b))]
        pygpu.transfer_config(register_limit=0)
        s = pygpu.registered_stats()
        report["off"] = [s["buffers"], s["bytes"], pygpu.is_pinned(inner(b))]
        meet(b)
        print(json.dumps(report))
    """
    env = {"PYGPU_BACKEND": "host", "PYGPU_HOST_LOCKED": "40M", "PYGPU_REGISTER_LIMIT": ""}
    report = json.loads(run_python(code, env=env).stdout.splitlines()[-1])
    assert report["first"] == [1, 1, 1, True, False]
    assert report["after"] == [2, 1, 1, True, True]
    assert report["off"] == [0, 0, False]


def test_a_registered_buffer_copies_its_ends_beside_its_pages(run_python):
    """A buffer's own copy, whole, up and down: the registered pages by DMA
    and the partial pages at either end (pageable, under a page each)
    through one page-locked block, queued together and waited for once
    (the route says so); the data are NumPy's, the ends included, and
    the neighbours' bytes past the buffer are not touched."""
    code = f"""
        import numpy as np, pygpu
        pygpu.transfer_config(register_limit=256 << 20)
        rng = np.random.default_rng(5)
        for n in ({BIG} + 1000, {BIG} + 3 * {PAGE} // 2, {BIG}):
            x = rng.integers(0, 255, n, dtype=np.uint8)
            g = pygpu.to_gpu(x)
            g = pygpu.to_gpu(x)                             # (met again: registered, then copied)
            assert pygpu.registered_stats()["buffers"] >= 1
            np.testing.assert_array_equal(g.get(), x)
            out = np.zeros(n + 64, np.uint8)[32:-32]
            g.get(ary=out)
            g.get(ary=out)                                  # (out registered; its ends come back through the block)
            np.testing.assert_array_equal(out, x)
            assert not out.base[:32].any() and not out.base[-32:].any()
            x2 = x[::-1].copy()
            g.set(x2)
            g.set(x2)
            np.testing.assert_array_equal(g.get(), x2)
        print("ok")
    """
    proc = run_python(code, env={"PYGPU_STAGING_TRACE": "1", "PYGPU_BACKEND": pygpu.backend})
    assert proc.stdout.strip() == "ok", proc.stdout
    routes = [line for line in proc.stderr.splitlines() if "page-locked in place" in line]
    ups = [line for line in routes if " up " in line]
    downs = [line for line in routes if " down " in line]
    assert ups and downs, proc.stderr[-3000:]
    assert all("ends under a page through a page-locked block" in line for line in routes), routes


def test_asynchronous_copies_of_a_registered_buffer_stay_asynchronous(run_python):
    """A buffer that blocking transfers registered, copied whole with
    to_gpu_async and get_async: the copy runs past its pages (its ends are
    pageable), and rather than going apart synchronously it goes as its
    host side reads, pageable, in the background (the route says so; made
    synchronous, the call took all of the transfer's time), with only
    PyGPU's page-locked buffers meeting the runtime (which the host backend
    checks as CUDA does); the data are NumPy's."""
    code = f"""
        import sys, numpy as np, pygpu
        pygpu.transfer_config(register_limit=256 << 20, min_bytes=1 << 20)
        rng = np.random.default_rng(7)
        x = rng.integers(0, 255, {BIG} + 1000, dtype=np.uint8)
        out = np.zeros_like(x)
        for a in (x, x, out, out):
            pygpu.to_gpu(a)                                 # (both registered)
        assert pygpu.registered_stats()["buffers"] == 2
        s = pygpu.Stream()
        print("MARK", file=sys.stderr, flush=True)
        for _ in range(3):
            g = pygpu.to_gpu_async(x, stream=s)
            s.synchronize()
            np.testing.assert_array_equal(g.get(ary=pygpu.pagelocked_empty(x.size, np.uint8)), x)
            out[...] = 0
            g.get_async(ary=out, stream=s)
            s.synchronize()
            np.testing.assert_array_equal(out, x)
        print("ok")
    """
    proc = run_python(code, env={"PYGPU_STAGING_TRACE": "1", "PYGPU_BACKEND": pygpu.backend})
    assert proc.stdout.strip() == "ok", proc.stdout
    after = proc.stderr.split("MARK", 1)[1].splitlines()
    routes = [line for line in after if line.startswith("pygpu route:")]
    assert not [line for line in routes if "page-locked in place" in line], routes
    assert [line for line in routes if " up " in line and "in the background" in line], routes
    assert [line for line in routes if " down " in line and "in the background" in line], routes


@pytest.mark.gpu_only
@pytest.mark.timing
def test_a_big_registered_copy_leaves_its_stream_free_while_it_runs():
    """The pieces of a waited-for copy of page-locked pages go on a stream
    of their own, after what the caller's stream holds: while another
    thread's 256 MiB uploads run through registered memory on a blocking
    stream, that stream has nothing queued (its query says idle), so the
    legacy stream, which waits for a blocking stream's queued work, does not
    wait for the pieces; every byte arrives.  (With the pieces on the
    caller's stream, two were queued there at nearly every moment; now only
    the event each copy records there first, for a microsecond or so.)"""
    import threading
    saved = pygpu.transfer_config()
    pygpu.transfer_config(register_limit=1 << 30)
    try:
        x = np.random.default_rng(11).integers(0, 255, 256 * MiB, dtype=np.uint8)
        s = pygpu.Stream()                                  # (blocking)
        g = pygpu.to_gpu(x, stream=s)
        pygpu.to_gpu(x, stream=s)                           # (met again: page-locked in place from here)
        assert pygpu.registered_stats()["buffers"] >= 1
        stop, copies, errors = threading.Event(), [0], []

        def mover():
            try:
                while not stop.is_set():
                    g.set(x, stream=s)
                    copies[0] += 1
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        t = threading.Thread(target=mover, daemon=True)
        t.start()
        busy = asked = 0
        try:
            while copies[0] < 4 and not errors:
                busy += not s.query()
                asked += 1
        finally:
            stop.set()
            t.join(120)
        assert not errors, errors
        assert asked and busy < asked / 4, f"the mover's stream had work queued at {busy} of {asked} queries"
        np.testing.assert_array_equal(g.get(), x)
    finally:
        pygpu.transfer_config(**saved)


@pytest.mark.skipif(pygpu.backend != "host", reason="PYGPU_HOST_FAIL_COPY is the host backend's")
def test_a_big_registered_copy_goes_in_pieces(run_python):
    """A waited-for copy of 16 MiB or more of page-locked pages goes in
    pieces of 4 MiB, two queued at a time (one DMA of 1 GiB held a small
    transfer beside it for all of its time): the last piece, of the pages'
    length modulo 4 MiB, is a copy of its own, which PYGPU_HOST_FAIL_COPY
    fails here (the copy raises, naming the call); unfailed, every byte is
    NumPy's."""
    code = f"""
        import numpy as np, pygpu
        pygpu.transfer_config(register_limit=1 << 30)
        x = np.random.default_rng(3).integers(0, 255, 40 * {MiB} + 12345, dtype=np.uint8)
        lo = -x.ctypes.data % {PAGE}
        last = (x.size - lo) // {PAGE} * {PAGE} % (4 * {MiB})
        print(last, flush=True)
        g = pygpu.to_gpu(x)                             # (staged: its DMAs are the staging's chunks)
        try:
            pygpu.to_gpu(x)                             # (met again, 80 MiB moved: registered, in pieces)
        except pygpu.GPUError as e:
            print("raised", "MemcpyAsync" in str(e))
        assert pygpu.registered_stats()["buffers"] == 1
    """
    # (the same process up to there, so the same addresses: the last piece's size)
    probe = run_python(code.replace("g = pygpu.to_gpu(x)", "raise SystemExit"), env={"PYGPU_BACKEND": "host"},
                       check=False)
    last = int(probe.stdout.split()[0])
    assert last and last % PAGE == 0
    proc = run_python(code, env={"PYGPU_BACKEND": "host", "PYGPU_HOST_FAIL_COPY": f"{last}:0"})
    assert "raised True" in proc.stdout, proc.stdout + proc.stderr
    ok = run_python(code.replace("except pygpu.GPUError", "except ZeroDivisionError") + """
        np.testing.assert_array_equal(pygpu.to_gpu(x).get(), x)
        out = np.zeros_like(x)
        for _ in range(3):
            g.get(ary=out)
        np.testing.assert_array_equal(out, x)
        print("ok")
    """, env={"PYGPU_BACKEND": "host"})
    assert ok.stdout.split()[-1] == "ok", ok.stdout
