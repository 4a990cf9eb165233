"""Copies beside a bulk copy (src/transfer/bus.c): while one thread's
synchronous copy of 16 MiB or more between host and a device is in flight,
the other threads' smaller copies in that direction, of page-locked host
memory, go by PyGPU's copy kernel over the bus instead of queuing behind
it at the copy engine.  backend_module._bus_hold counts a bulk copy in
flight as if another thread had one, so that the route is forced without a
race; _bus_kernel_copies says how many copies the kernel carried.  The
data are NumPy's whichever way a copy goes."""
import threading

import numpy as np
import pytest

import pygpu
from conftest import clean_env

MiB = 1 << 20
lib = pygpu.backend_module


class held:
    """A bulk copy in flight on `device` in one direction, as another
    thread's, while the block runs."""

    def __init__(self, up, device=0):
        self.up, self.device = up, device

    def __enter__(self):
        assert lib._bus_hold(self.device, self.up, 1) >= 1
        return self

    def __exit__(self, *exc):
        lib._bus_hold(self.device, self.up, -1)


@pytest.fixture(params=["registered", "pagelocked"])
def locked(request):
    """make(n, rng): page-locked host bytes, random: NumPy memory registered
    in place (page-locked on every backend), or PyGPU's page-locked
    allocation (the host backend's reads as pageable: there the engine
    copies it, so `counts` is False)."""
    kept = []

    def make(n, rng):
        if request.param == "pagelocked":
            h = pygpu.pagelocked_empty(n, np.uint8)
        else:
            h = np.empty(n, np.uint8)
            assert lib._host_register(h.ctypes.data, n) == 0
            kept.append(h)
        h[:] = rng.integers(0, 256, n, dtype=np.uint8)
        return h

    make.counts = request.param == "registered" or pygpu.backend != "host"
    yield make
    for h in kept:
        assert lib._host_unregister(h.ctypes.data) == 0


def pinned(n, rng):
    h = pygpu.pagelocked_empty(n, np.uint8)
    h[:] = rng.integers(0, 256, n, dtype=np.uint8)
    return h


def carried():
    return lib._bus_kernel_copies()


@pytest.mark.parametrize("n", [1, 15, 16, 4096 + 7, MiB, 3 * MiB + 5])
def test_uploads_beside_a_bulk_copy_go_by_kernel(n, rng, locked):
    """Page-locked host memory up while a bulk upload holds the engine: by
    kernel (the body in 16-byte units, the last bytes apart), bit for bit."""
    h = locked(n, rng)
    before = carried()
    with held(up=True):
        g = pygpu.to_gpu(h)
    assert carried() > before or not locked.counts
    assert np.array_equal(g.get(), h)


@pytest.mark.parametrize("n", [1, 33, MiB, 2 * MiB + 3])
def test_downloads_beside_a_bulk_copy_go_by_kernel(n, rng, locked):
    """The same down (small ones through a block of PyGPU's page-locked
    pool, which the host backend's reads as pageable)."""
    src = rng.integers(0, 256, n, dtype=np.uint8)
    g = pygpu.to_gpu(src)
    out = locked(n, rng)
    before = carried()
    with held(up=False):
        g.get(ary=out)
    assert carried() > before or not locked.counts or (pygpu.backend == "host" and n < MiB)
    assert np.array_equal(out, src)


def test_alone_or_in_the_other_direction_the_engine_copies(rng, locked):
    """No bulk copy in flight, or one in the other direction only: the
    copy engine, as always."""
    h, out = locked(MiB, rng), locked(MiB, rng)
    before = carried()
    g = pygpu.to_gpu(h)
    with held(up=False):
        g2 = pygpu.to_gpu(h)
    with held(up=True):
        g.get(ary=out)
    assert carried() == before
    assert np.array_equal(g2.get(), h) and np.array_equal(out, h)


def test_bulk_copies_and_misaligned_memory_keep_the_engine(rng, locked):
    """A copy of 16 MiB or more is bulk itself; host memory not at the
    device buffer's place in a 16-byte unit would move bytewise by kernel:
    both go by the engine beside a bulk copy, and land."""
    big = locked(16 * MiB, rng)
    odd = locked(MiB + 1, rng)[1:]
    before = carried()
    with held(up=True):
        g_big, g_odd = pygpu.to_gpu(big), pygpu.to_gpu(odd)
    assert carried() == before
    assert np.array_equal(g_big.get(), big) and np.array_equal(g_odd.get(), odd)


def test_a_bulk_copys_own_pieces_keep_the_engine(rng, locked):
    """A thread moving a bulk copy of its own sends its pieces and its
    staging chunks (page-locked buffers) by the engine even while others
    move bulk copies too: threads moving big copies at once share the
    engine at its speed."""
    big = locked(16 * MiB, rng)
    pageable = rng.integers(0, 256, 24 * MiB, dtype=np.uint8)
    before_limit = pygpu.transfer_config()["register_limit"]
    pygpu.transfer_config(register_limit=0)         # (staged, whatever it met before)
    try:
        before = carried()
        with held(up=True), held(up=False):
            g, g2 = pygpu.to_gpu(big), pygpu.to_gpu(pageable)
            back = np.empty_like(pageable)
            g2.get(ary=back)
        assert carried() == before
    finally:
        pygpu.transfer_config(register_limit=before_limit)
    assert np.array_equal(g.get(), big) and np.array_equal(back, pageable)


def test_strided_and_staged_copies_beside_a_bulk_copy(rng):
    """Views and pageable memory beside bulk copies both ways: through the
    page-locked buffers (staging blocks, temporaries), whichever carries
    them, NumPy's data, on random shapes and steps."""
    with held(up=True), held(up=False):
        for _ in range(20):
            shape = tuple(int(k) for k in rng.integers(1, 90, size=rng.integers(1, 4)))
            a = rng.standard_normal(shape).astype(rng.choice([np.float32, np.int16, np.complex128]))
            key = tuple(slice(None, None, int(rng.choice([1, 2, -1, -3]))) for _ in shape)
            g = pygpu.to_gpu(a[key])
            assert np.array_equal(g.get(), a[key])
            out = np.empty_like(a)
            g2 = pygpu.to_gpu(a)
            g2.get(ary=out)
            assert np.array_equal(out, a)
            back = np.zeros_like(a)
            back[key] = g.get()
            assert np.array_equal(back[key], a[key])


def test_another_devices_bulk_copy_does_not_count(rng, locked):
    if pygpu.device_count() < 2:
        pytest.skip("one device")
    h = locked(MiB, rng)
    before = carried()
    with held(up=True, device=1):
        g = pygpu.to_gpu(h)
    assert carried() == before
    assert np.array_equal(g.get(), h)


def test_the_hold_refuses_a_device_it_has_no_slot_for():
    with pytest.raises(ValueError, match="no slot"):
        lib._bus_hold(1 << 20, True, 1)
    with pytest.raises(ValueError, match="no slot"):
        lib._bus_hold(-1, True, 1)
    with pytest.raises(ValueError, match="below 0"):
        lib._bus_hold(0, True, -1)
    assert lib._bus_hold(0, True, 0) == 0       # (the refused step taken back)


def test_without_kernels_the_engine_copies(run_python):
    """PYGPU_KERNELS=0: nothing to carry a copy but the engine."""
    code = ("import numpy as np, pygpu\n"
            "lib = pygpu.backend_module\n"
            "h = np.full(1 << 20, 7, np.uint8)\n"
            "assert lib._host_register(h.ctypes.data, h.nbytes) == 0\n"
            "lib._bus_hold(0, True, 1)\n"
            "g = pygpu.to_gpu(h)\n"
            "print(lib._bus_kernel_copies(), int(g.get().sum()))\n")
    out = run_python(code, env={"PYGPU_KERNELS": "0"}).stdout.split()
    assert out[-2:] == ["0", str(7 << 20)]


@pytest.mark.parametrize("captured", [False, True])
def test_a_stream_being_captured_keeps_the_engine(run_python, captured):
    """A page-locked copy joining a graph capture beside a bulk copy stays
    the engine's copy node (PYGPU_HOST_CAPTURE=1: the host backend's
    streams report a capture); the same copy on a stream not captured goes
    by kernel."""
    if pygpu.backend != "host":
        pytest.skip("PYGPU_HOST_CAPTURE is the host backend's")
    code = ("import numpy as np, pygpu\n"
            "lib = pygpu.backend_module\n"
            "h = np.full(1 << 20, 3, np.uint8)\n"
            "assert lib._host_register(h.ctypes.data, h.nbytes) == 0\n"
            "a, s = pygpu.empty(1 << 20, np.uint8), pygpu.Stream()\n"
            "lib._bus_hold(0, True, 1)\n"
            "a.set_async(h, stream=s)\n"
            "print(lib._bus_kernel_copies())\n")
    env = {"PYGPU_HOST_CAPTURE": "1"} if captured else {}
    out = run_python(code, env=env).stdout.split()
    assert out[-1] == ("0" if captured else "1")


def test_small_copies_land_while_another_thread_moves_bulk(rng):
    """A thread moving 16 MiB up and down in a loop, another moving small
    page-locked and pageable arrays both ways: every byte NumPy's."""
    big = pinned(16 * MiB, rng)
    g_big = pygpu.to_gpu(big)
    stop, errors = threading.Event(), []

    def mover():
        try:
            back = pygpu.pagelocked_empty(big.size, np.uint8)
            while not stop.is_set():
                g_big.set(big)
                g_big.get(ary=back)
                if not np.array_equal(back, big):
                    errors.append("bulk")
        except Exception as e:      # (reported below)
            errors.append(repr(e))

    t = threading.Thread(target=mover)
    t.start()
    try:
        for i in range(60):
            n = int(rng.integers(1, 2 * MiB))
            h = pinned(n, rng) if i % 2 else rng.integers(0, 256, n, dtype=np.uint8)
            g = pygpu.to_gpu(h)
            out = pygpu.pagelocked_zeros(n, np.uint8) if i % 3 else np.zeros(n, np.uint8)
            g.get(ary=out)
            assert np.array_equal(out, h)
    finally:
        stop.set()
        t.join()
    assert not errors
