"""64 dimensions, as NumPy 2 (NPY_MAXDIMS): arrays of 64 axes are made,
indexed, transposed, copied (by PyGPU's kernels, which walk 8 axes a launch
and loop over the rest, and by the staging pipeline), and handed through
NumPy, DLPack and __cuda_array_interface__, with NumPy as the oracle; a
65th axis is refused as NumPy refuses it."""
import re

import numpy as np
import pytest

import pygpu
from dlpack_helpers import FakeProducer

HOST = pygpu.backend == "host"
CUDA = pygpu.backend == "cuda"
MAX = 64


def shape64(rng, big=12, sizes=(2, 3)):
    """64 axes: ones, but `big` of them 2 or 3 long (some 4000 elements)."""
    shape = [1] * MAX
    for axis in rng.choice(MAX, big, replace=False):
        shape[axis] = int(rng.choice(sizes))
    return tuple(shape)


def data(rng, shape, dtype=np.float32):
    return (rng.standard_normal(shape) * 100).astype(dtype)


def same(g, h):
    """g (a GPUArray) is h (a NumPy array): shape, dtype, values."""
    assert g.ndim == h.ndim and g.shape == h.shape and g.dtype == h.dtype
    np.testing.assert_array_equal(g.get(), h)


def layout(a):
    """The strides that matter: those of the axes longer than 1."""
    return tuple(s for n, s in zip(a.shape, a.strides) if n > 1)


def key64(rng, shape):
    """A basic index of every axis: slices with steps of both signs, a few ints."""
    key = []
    for n in shape:
        r = rng.random()
        if n > 1 and r < 0.15:
            key.append(int(rng.integers(-n, n)))
        elif r < 0.6:
            key.append(slice(None, None, -1 if rng.random() < 0.5 else 1))
        else:
            start = int(rng.integers(0, n))
            key.append(slice(start, None, int(rng.choice([1, 2, -1]))))
    return tuple(key)


def test_numpy_and_pygpu_allow_64():
    assert np.empty((1,) * MAX).ndim == MAX
    with pytest.raises(ValueError):
        np.empty((1,) * (MAX + 1))


@pytest.mark.parametrize("order", ["C", "F"])
def test_created_like_numpy(order):
    shape = shape64(np.random.default_rng(1))
    h = np.zeros(shape, np.complex64, order=order)
    for g in (pygpu.empty(shape, np.complex64, order=order), pygpu.zeros(shape, np.complex64, order=order),
              pygpu.GPUArray(shape, np.complex64, order=order), pygpu.full(shape, 0, np.complex64, order=order)):
        assert g.ndim == MAX and g.shape == shape and g.strides == h.strides
        assert g.flags.c_contiguous == h.flags.c_contiguous and g.flags.f_contiguous == h.flags.f_contiguous
    same(pygpu.zeros(shape, np.complex64, order=order), h)
    assert pygpu.zeros((1,) * MAX).get().shape == (1,) * MAX


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.float32, np.complex128])
def test_round_trip_through_numpy(dtype):
    rng = np.random.default_rng(2)
    h = data(rng, shape64(rng), dtype)
    for layout in (h, np.asfortranarray(h), h.transpose(rng.permutation(MAX)), h[(slice(None, None, -1),) * MAX]):
        g = pygpu.to_gpu(layout)
        same(g, layout)
        out = np.empty_like(layout)
        g.get(out)
        np.testing.assert_array_equal(out, layout)


def test_indexing_like_numpy():
    rng = np.random.default_rng(3)
    h = data(rng, shape64(rng))
    g = pygpu.to_gpu(h)
    for _ in range(40):
        key = key64(rng, h.shape)
        v, w = g[key], h[key]
        assert v.shape == w.shape and (v.size == 0 or layout(v) == layout(w))
        same(v, w)
    same(g[..., 0, None], h[..., 0, None])                         # (63 axes, and a new one)
    assert g[(0,) * 2 + (Ellipsis,)].ndim == MAX - 2


def test_transposes_and_copies_like_numpy():
    rng = np.random.default_rng(4)
    h = data(rng, shape64(rng, big=16, sizes=(2,)))         # 16 axes of 2: no copy merges them all
    g = pygpu.to_gpu(h)
    same(g.T, h.T)
    same(g.swapaxes(3, 60), h.swapaxes(3, 60))
    for _ in range(6):
        perm = rng.permutation(MAX)
        key = key64(rng, h.shape)
        key = tuple(k if isinstance(k, slice) else slice(k % n, k % n + 1)         # (keep 64 axes)
                    for k, n in zip(key, h.shape))
        v, w = g[key].transpose(perm), h[key].transpose(perm)
        same(v, w)
        for order in ("C", "F", "K", "A"):
            c, d = v.copy(order=order), w.copy(order=order)
            assert layout(c) == layout(d), order
            same(c, d)
        same(v.astype(np.float64), w.astype(np.float64))
        same(v.reshape(-1), w.reshape(-1))
        same(v.flatten(), w.flatten())


def test_assignment_into_views():
    rng = np.random.default_rng(5)
    shape = shape64(rng, big=16, sizes=(2,))
    h = data(rng, shape)
    perm = rng.permutation(MAX)
    g = pygpu.zeros(shape, np.float32)
    g.transpose(perm)[...] = h.transpose(perm)                     # from the host, into a transposed view
    same(g, h)
    z = pygpu.zeros(shape, np.float32)
    z[(slice(None, None, -1),) * MAX] = g                          # device to device, reversed
    same(z, h[(slice(None, None, -1),) * MAX])
    z.transpose(perm)[...] = 7
    same(z, np.full(shape, 7, np.float32))


def test_staged_transfers():
    """The staging pipeline (small chunks, every copy staged) with 64 axes."""
    saved = pygpu.transfer_config()
    pygpu.transfer_config(min_bytes=0, chunk=16 << 10, depth=3)
    try:
        rng = np.random.default_rng(6)
        shape = shape64(rng, big=16, sizes=(2,))       # 256 KiB of float32
        h = data(rng, shape)
        perm = rng.permutation(MAX)
        same(pygpu.to_gpu(h.transpose(perm)), h.transpose(perm))
        g = pygpu.to_gpu(h)
        same(g.transpose(perm), h.transpose(perm))
        g[(slice(None, None, -1),) * MAX] = h
        same(g, h[(slice(None, None, -1),) * MAX])
    finally:
        pygpu.transfer_config(**saved)


@pytest.mark.skipif(pygpu.device_count() < 2, reason="two devices")
def test_copy_between_devices():
    rng = np.random.default_rng(7)
    h = data(rng, shape64(rng, big=16, sizes=(2,)))
    perm = rng.permutation(MAX)
    with pygpu.Device(0):
        g = pygpu.to_gpu(h)
    c = g.transpose(perm).copy(device=1)
    assert c.device == pygpu.Device(1)
    same(c, h.transpose(perm))


def test_dlpack_both_ways():
    rng = np.random.default_rng(8)
    h = data(rng, shape64(rng))
    w = h.transpose(rng.permutation(MAX))[(slice(None, None, -1),) * MAX]
    same(pygpu.from_dlpack(w), w)                                  # NumPy -> PyGPU (a copy on a GPU)
    g = pygpu.to_gpu(h).transpose(rng.permutation(MAX))
    v = pygpu.from_dlpack(g)                                       # PyGPU -> PyGPU: the same memory
    assert v.shape == g.shape and v.strides == g.strides and v.ptr == g.ptr
    if HOST:                                                       # PyGPU -> NumPy: host memory only
        n = np.from_dlpack(g)
        assert n.shape == g.shape and layout(n) == layout(g)
        np.testing.assert_array_equal(n, g.get())


def test_dlpack_65_dims_refused():
    a = np.zeros(1, np.float32)
    p = FakeProducer(a, shape=(1,) * (MAX + 1), strides=(1,) * (MAX + 1))
    with pytest.raises(BufferError, match="65"):
        pygpu.from_dlpack(p)
    assert p.deleted == 1
    ok = FakeProducer(a, shape=(1,) * MAX, strides=(1,) * MAX)
    if HOST:
        assert pygpu.from_dlpack(ok).shape == (1,) * MAX


def iface(arr):
    return dict(shape=arr.shape, typestr=arr.dtype.str, data=(arr.ctypes.data, False), version=3,
                strides=arr.strides)


class Producer:
    def __init__(self, d):
        self.__cuda_array_interface__ = d


def test_cuda_array_interface_64_dims():
    rng = np.random.default_rng(9)
    h = data(rng, shape64(rng))
    if CUDA:                                # both ways, zero-copy
        g = pygpu.to_gpu(h).transpose(rng.permutation(MAX))
        d = g.__cuda_array_interface__
        assert len(d["shape"]) == MAX
        v = pygpu.asarray(Producer(d))
        assert v.shape == g.shape and v.strides == g.strides and v.ptr == g.ptr
    else:                                   # its 64 axes are read; then the memory is what it refuses
        with pytest.raises(BufferError, match="CUDA memory"):
            pygpu.asarray(Producer(iface(h)))
    d = dict(iface(h), shape=(1,) * (MAX + 1), strides=(4,) * (MAX + 1))
    with pytest.raises(ValueError, match=r"too many dimensions: 65 \(at most 64\)"):
        pygpu.asarray(Producer(d))


def test_65_dims_refused_as_numpy_refuses():
    g = pygpu.zeros((1,) * MAX)
    for make in (lambda: pygpu.empty((1,) * (MAX + 1)), lambda: pygpu.zeros((1,) * (MAX + 1)),
                 lambda: pygpu.GPUArray((1,) * (MAX + 1)), lambda: g.reshape((1,) * (MAX + 1))):
        with pytest.raises(ValueError, match=r"too many dimensions: 65 \(at most 64\)"):
            make()
    for key in ((None,), (Ellipsis, None), (0, None, None)):
        with pytest.raises(IndexError) as np_info:
            np.zeros((1,) * MAX)[key]
        with pytest.raises(IndexError, match=r"too many dimensions: the index gives (\d+) \(at most 64\)") as info:
            g[key]
        gives = re.search(r"gives (\d+)", str(info.value)).group(1)
        assert str(np_info.value).endswith("would have " + gives), (str(info.value), str(np_info.value))
