"""Host buffers page-locked in place (transfer_config(register_limit=)):
a NumPy array's buffer that synchronous transfers of 4 MiB or more meet a
second time is registered with the runtime where it lies, until its owner
is collected, the limit needs the room, or registration is turned off.
The data are NumPy's either way; registered_stats() counts what is held.
(On the host backend registration is the bookkeeping alone: the DMA and
its route are the GPU machine's to show.)"""
import gc
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


def test_off_by_default():
    assert pygpu.transfer_config()["register_limit"] == 0
    x = np.ones(8 * MiB, np.uint8)
    for _ in range(3):
        pygpu.to_gpu(x)
    assert stats()["buffers"] == 0 and stats()["limit"] == 0


def test_a_buffer_met_twice_is_registered_and_its_views_share_it(limit, rng):
    made = stats()["registered"]
    x = rng.standard_normal((1024, BIG // 8192 + 7))   # (pages of its own; not a whole number of them)
    g = pygpu.to_gpu(x)
    assert stats()["buffers"] == 0                     # met once
    np.testing.assert_array_equal(pygpu.to_gpu(x).get(), x)
    s = stats()
    assert s["buffers"] == 1 and s["registered"] == made + 1 and s["bytes"] >= x.nbytes
    if pygpu.backend != "host":                         # (the runtime itself says so: copies DMA from it)
        assert pygpu.is_pinned(x) and pygpu.is_pinned(x[::2])
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


def test_the_owner_collected_lets_its_registration_go(limit):
    x = np.ones(BIG, np.uint8)
    pygpu.to_gpu(x)
    pygpu.to_gpu(x)
    assert stats()["buffers"] == 1
    released = stats()["released"]
    view = x[1:]
    if pygpu.backend != "host":
        assert pygpu.is_pinned(view)
    del x, view
    gc.collect()
    assert stats()["buffers"] == 0 and stats()["bytes"] == 0 and stats()["released"] == released + 1


def test_temporaries_small_and_asynchronous_transfers_are_not_registered(limit):
    made = stats()["registered"]
    x = np.ones(6 * MiB, np.uint8)
    for _ in range(4):
        pygpu.to_gpu(x + 0)                            # a new owner each time, perhaps at the same address
        pygpu.to_gpu(np.frombuffer(bytes(5 * MiB), np.uint8))   # memory a NumPy array does not own
    small = np.ones(MiB, np.uint8)
    for _ in range(3):
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
    if pygpu.backend != "host":                         # (the runtime agrees: 3 unregistered, 0 and 2 not)
        assert not pygpu.is_pinned(arrays[3]) and pygpu.is_pinned(arrays[2]) and pygpu.is_pinned(arrays[0])
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
