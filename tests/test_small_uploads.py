"""Uploads of a few bytes: a synchronous upload of 1, 2, 4, 8 or 16 dense
bytes of pageable memory into device memory aligned to their size goes in
the arguments of PyGPU's fill kernel (nothing waited for); every other
small upload goes as before.  NumPy is the oracle throughout."""
import numpy as np
import pytest

import pygpu

DTYPES = ["bool", "int8", "uint8", "int16", "float16", "int32", "float32", "int64", "float64", "complex64",
          "complex128"]


def _host(rng, dtype, n):
    return (rng.standard_normal(n) * 100).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_few_elements_land_as_numpy_has_them(rng, dtype):
    """to_gpu, set and slice assignment of 0-6 elements (so 0 to 96 bytes:
    the launch's sizes and the others), into fresh arrays and into views
    at every offset of a bigger array: the same as NumPy's."""
    for n in range(7):
        h = _host(rng, dtype, n)
        np.testing.assert_array_equal(pygpu.to_gpu(h).get(), h)
        g = pygpu.zeros(n, dtype)
        g.set(h)
        np.testing.assert_array_equal(g.get(), h)
        for off in range(4):
            want = _host(rng, dtype, n + 4)
            big = pygpu.to_gpu(want)
            big[off:off + n] = h
            want[off:off + n] = h
            np.testing.assert_array_equal(big.get(), want)


def test_bytes_at_every_alignment(rng):
    """1-16 bytes of uint8 into every byte offset of a device buffer, as a
    dense uint8 view: sizes and alignments that fit the launch and those
    that do not land alike."""
    base = rng.integers(0, 256, 64, dtype=np.uint8)
    for n in range(1, 17):
        for off in range(17):
            g = pygpu.to_gpu(base)
            h = rng.integers(0, 256, n, dtype=np.uint8)
            g[off:off + n].set(h)
            want = base.copy()
            want[off:off + n] = h
            np.testing.assert_array_equal(g.get(), want)


def test_the_host_bytes_may_change_at_once(rng):
    """The launch took the bytes: writing the host array right after each
    call (nothing synchronised between) changes none of the arrays made."""
    for dtype in ("uint8", "float32", "float64", "complex128"):
        h = _host(rng, dtype, 1)
        outs, wants = [], []
        for _ in range(50):
            wants.append(h.copy())
            outs.append(pygpu.to_gpu(h))
            h[...] = _host(rng, dtype, 1)
        for g, want in zip(outs, wants):
            np.testing.assert_array_equal(g.get(), want)


def test_the_stream_is_the_arrays(rng):
    """An upload on a stream of its own: the array's stream names it (the
    hand-offs order after it), and the data are there once it is passed."""
    s = pygpu.Stream(non_blocking=True)
    h = _host(rng, "float64", 1)
    g = pygpu.to_gpu(h, stream=s)
    s.synchronize()
    np.testing.assert_array_equal(g.get(stream=s), h)
    if pygpu.backend == "cuda":
        assert g.__cuda_array_interface__["stream"] == s.ptr


def _routes(run_python, code, env=None):
    p = run_python(code, env={"PYGPU_STAGING_TRACE": "1", **(env or {})})
    return [line for line in p.stderr.splitlines() if line.startswith("pygpu route: up ")]


def test_the_route_is_named(run_python):
    """With PYGPU_STAGING_TRACE=1: 8 and 16 bytes of pageable memory up,
    waited for, go with a launch; 12 bytes, an asynchronous upload, a bare
    address and memory registered in place (page-locked: its DMA is waited
    for, as the runtime's copy of it is) do not."""
    code = """
import numpy as np, pygpu
pygpu.to_gpu(np.arange(8, dtype=np.uint8))
pygpu.to_gpu(np.arange(2, dtype=np.float64))
pygpu.to_gpu(np.arange(3, dtype=np.float32))
s = pygpu.Stream(); pygpu.to_gpu_async(np.arange(2, dtype=np.float32), stream=s); s.synchronize()
g = pygpu.zeros(4, np.float32)
pygpu.memcpy_htod(g.ptr, np.arange(2, dtype=np.float32))
locked = pygpu.register_host_memory(np.ones(1 << 16, np.uint8))
pygpu.to_gpu(locked[4096:4104])
"""
    ups = _routes(run_python, code)
    assert len(ups) == 6, ups
    assert ": with a launch (" in ups[0] and "up 8 B" in ups[0], ups[0]
    assert ": with a launch (" in ups[1] and "up 16 B" in ups[1], ups[1]
    assert not [u for u in ups[2:] if ": with a launch" in u], ups[2:]


def test_without_kernels_the_bytes_go_by_dma(run_python):
    """PYGPU_KERNELS=0 (no kernels): the launch declines, the next route
    moves the bytes, and they land."""
    code = """
import numpy as np, pygpu
h = np.array([1.25, -3.5])
assert (pygpu.to_gpu(h).get() == h).all()
assert (pygpu.to_gpu(h[:1]).get() == h[:1]).all()
"""
    ups = _routes(run_python, code, {"PYGPU_KERNELS": "0"})
    assert len(ups) >= 2, ups
    assert ups[-1].endswith("one DMA (dense on the device)"), ups
