"""__cuda_array_interface__ (version 3): exported by CUDA arrays only, read
by pygpu.asarray.

On every backend the importer checks the dict and refuses what is wrong;
memory it cannot use (host memory on CUDA, anything on HIP and host) is a
BufferError.  The getter and zero-copy imports need a CUDA device.
"""
import gc
import sys
import weakref

import numpy as np
import pytest

import pygpu

CUDA = pygpu.backend == "cuda"
cuda_only = pytest.mark.skipif(not CUDA, reason="__cuda_array_interface__ is exported by CUDA arrays only")
DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128"]


class Producer:
    """An object that shows memory through __cuda_array_interface__ only."""

    def __init__(self, iface, keep=None):
        self.__cuda_array_interface__ = iface
        self.keep = keep


def host_iface(arr, **changes):
    d = dict(shape=arr.shape, typestr=arr.dtype.str, data=(arr.ctypes.data, not arr.flags.writeable),
             version=3, strides=arr.strides)
    d.update(changes)
    return d


def test_only_cuda_arrays_claim_it():
    g = pygpu.to_gpu(np.arange(4.0))
    assert hasattr(g, "__cuda_array_interface__") == CUDA
    assert hasattr(pygpu.GPUArray, "__cuda_array_interface__") == CUDA


@pytest.mark.parametrize("changes, exc, match", [
    (dict(version="3"), TypeError, "version must be an int"),
    (dict(shape="x"), TypeError, "shape entries must be ints"),
    (dict(shape=(-1, 5)), ValueError, "negative dimensions"),
    (dict(typestr=5), TypeError, "typestr must be a str"),
    (dict(typestr=">i2"), TypeError, "not a GPUArray dtype"),
    (dict(typestr="|V2"), TypeError, "not a GPUArray dtype"),
    (dict(typestr="<M8[ns]"), TypeError, "not a GPUArray dtype"),
    (dict(typestr="zz"), TypeError, "is not a dtype"),
    (dict(data=None), TypeError, "data must be a tuple"),
    (dict(data=(1.5, False)), TypeError, "data must be a tuple"),
    (dict(data=(0, False)), ValueError, "null data pointer"),
    (dict(strides=(2,)), ValueError, "strides has 1 entries"),
    (dict(shape=(4, 5), strides=(2 ** 62, 2)), BufferError, "address space"),
    (dict(shape=(2 ** 40, 2 ** 40), strides=None), BufferError, "overflows"),
    (dict(mask=object()), BufferError, "mask"),
    (dict(stream=0), ValueError, "0 is ambiguous"),
    (dict(stream=-5), ValueError, "not allowed"),
    (dict(stream=True), TypeError, "stream must be an int"),
    (dict(stream="s"), TypeError, "stream must be an int"),
])
def test_bad_dicts_refused(changes, exc, match):
    arr = np.arange(10, dtype=np.int16).reshape(2, 5)
    with pytest.raises(exc, match=match):
        pygpu.asarray(Producer(host_iface(arr, **changes)))


@pytest.mark.parametrize("missing", ["shape", "typestr", "data", "version"])
def test_missing_entries(missing):
    d = host_iface(np.zeros(3))
    del d[missing]
    with pytest.raises(ValueError, match=f"no '{missing}' entry"):
        pygpu.asarray(Producer(d))


def test_not_a_dict():
    with pytest.raises(TypeError, match="must be a dict"):
        pygpu.asarray(Producer([("shape", (3,))]))


def test_memory_the_backend_cannot_use():
    """Host memory described as CUDA memory: the CUDA backend sees that the
    runtime does not know the address; the others cannot use CAI at all."""
    arr = np.arange(6.0)
    with pytest.raises(BufferError, match="unregistered host memory" if CUDA else "cannot use"):
        pygpu.asarray(Producer(host_iface(arr)))


def test_producer_with_both_protocols_goes_through_dlpack_off_cuda():
    class Both(Producer):
        def __init__(self, arr):
            super().__init__(host_iface(arr))
            self.arr = arr

        def __dlpack__(self, **kw):
            return self.arr.__dlpack__(**{k: v for k, v in kw.items() if k != "stream"})

        def __dlpack_device__(self):
            return self.arr.__dlpack_device__()

    if CUDA:
        pytest.skip("the CUDA backend reads __cuda_array_interface__ first")
    arr = np.arange(6.0)
    assert np.array_equal(pygpu.asarray(Both(arr)).get(), arr)


# ---- the getter (CUDA) ---------------------------------------------------------

@cuda_only
@pytest.mark.parametrize("dtype", DTYPES)
def test_getter_contiguous(dtype):
    g = pygpu.to_gpu(np.zeros((3, 4), dtype))
    d = g.__cuda_array_interface__
    assert d == {"shape": (3, 4), "typestr": np.dtype(dtype).str, "data": (g.ptr, False), "version": 3,
                 "strides": None, "descr": [("", np.dtype(dtype).str)], "stream": 1}


@cuda_only
def test_getter_views_and_empty():
    g = pygpu.to_gpu(np.zeros((4, 6), np.float32))
    v = g[::-1, 1::2]
    d = v.__cuda_array_interface__
    assert d["strides"] == v.strides == (-24, 8) and d["data"] == (v.ptr, False) and d["shape"] == (4, 3)
    assert g.T.__cuda_array_interface__["strides"] == (4, 24)
    assert pygpu.zeros((0, 3)).__cuda_array_interface__["data"] == (0, False)
    assert g[1, 2].__cuda_array_interface__["shape"] == ()


@cuda_only
def test_getter_stream_of_pending_work():
    s = pygpu.Stream(non_blocking=True)
    g = pygpu.empty(1000, np.float32, stream=s)
    assert g.__cuda_array_interface__["stream"] == s.ptr
    h = pygpu.zeros(1000)
    assert h.__cuda_array_interface__["stream"] == 1
    h[10:20].fill(3, stream=s)                 # work through a view is the array's work
    assert h.__cuda_array_interface__["stream"] == s.ptr
    h.fill(1, stream=pygpu.Stream.per_thread)
    assert h.__cuda_array_interface__["stream"] == 2
    with s:
        c = h.copy()
    assert c.__cuda_array_interface__["stream"] == s.ptr
    refs = sys.getrefcount(s)
    del g, c, h                 # the arrays kept the stream they name alive
    gc.collect()
    assert sys.getrefcount(s) < refs


@cuda_only
def test_getter_read_only_import():
    g = pygpu.to_gpu(np.arange(5.0))
    d = dict(g.__cuda_array_interface__, data=(g.ptr, True))
    r = pygpu.asarray(Producer(d, keep=g))
    assert not r.flags.writeable and r.__cuda_array_interface__["data"] == (g.ptr, True)


# ---- zero-copy imports (CUDA) ---------------------------------------------------

@cuda_only
@pytest.mark.parametrize("key", [np.s_[:], np.s_[::-1], np.s_[1:, ::2], np.s_[::2, ::-3]])
def test_import_views_zero_copy(key):
    h = np.arange(48, dtype=np.float64).reshape(6, 8)
    g = pygpu.to_gpu(h)
    v = g[key]
    p = Producer(v.__cuda_array_interface__, keep=v)
    r = pygpu.asarray(p)
    assert r.ptr == v.ptr and r.strides == v.strides and r.base is p
    assert np.array_equal(r.get(), h[key])
    r[...] = -1
    assert np.all(g.get()[key] == -1)


@cuda_only
def test_import_keeps_producer_alive():
    g = pygpu.to_gpu(np.arange(8.0))
    p = Producer(g.__cuda_array_interface__, keep=g)
    w = weakref.ref(p)
    r = pygpu.asarray(p)
    del p
    gc.collect()
    assert w() is not None and np.array_equal(r.get(), np.arange(8.0))
    del r
    gc.collect()
    assert w() is None
    p = Producer(g.__cuda_array_interface__, keep=g)
    before = sys.getrefcount(p)
    for _ in range(200):
        pygpu.asarray(p)
    assert sys.getrefcount(p) == before


@cuda_only
def test_import_waits_for_the_producers_stream():
    n = 1 << 24
    g = pygpu.zeros(n, np.float32)
    pygpu.synchronize()
    s = pygpu.Stream(non_blocking=True)
    for value in range(1, 31):                  # a queue of pending work on s
        g.fill(value, stream=s)
    d = dict(g.__cuda_array_interface__)
    assert d["stream"] == s.ptr
    r = pygpu.asarray(Producer(d, keep=g))      # the current (legacy) stream waits for s
    out = r[n - 4:].get()                        # read on the legacy stream
    assert np.all(out == 30)


@cuda_only
def test_import_empty_and_0d():
    g = pygpu.zeros((0, 4))
    r = pygpu.asarray(Producer(g.__cuda_array_interface__, keep=g))
    assert r.shape == (0, 4)
    z = pygpu.to_gpu(np.float32(2.5))
    r = pygpu.asarray(Producer(z.__cuda_array_interface__, keep=z))
    assert r.shape == () and r.get() == 2.5
