"""GPUArray construction, attributes, host round trips, factories, printing
(docs/api.md, GPUArray: Construction, Attributes).  NumPy is the oracle."""
import array
import gc
import re
import sys
import weakref

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pygpu
from gpuarray_helpers import (
    DTYPE_IDS, DTYPES, LAYOUTS, PROPERTY, Raised, assert_matches, assert_same_array,
    assert_same_layout, dtypes, host_layout, numpy_outcome, quietly, random_array, seeds,
    shapes,
)

SHAPES = [(), (0,), (1,), (7,), (3, 4), (2, 0, 3), (2, 3, 4), (1, 2, 1, 3, 1, 2)]


# ---- construction: shapes ----------------------------------------------------------

@pytest.mark.parametrize("spelling", [
    5, (5,), [5], np.int64(5), np.int32(5), np.uint8(5), np.intp(0), 0,
    (), [], (0,), (2, 3), [2, 3], (np.int64(2), np.uint16(3)), [np.int8(2), 3],
    (3, 0, 2), (1,) * 6, (2, 1, 3, 1, 2, 1, 2),
], ids=repr)
def test_shape_spellings(spelling):
    want = np.empty(spelling)
    g = pygpu.GPUArray(spelling)
    assert type(g.shape) is tuple and all(type(n) is int for n in g.shape)
    assert g.shape == want.shape
    assert g.dtype == np.float64  # the default
    assert_same_layout(g, want)


@pytest.mark.parametrize("shape", [-1, (-1,), (2, -1), [3, -2], (np.int64(-5),), (0, -1)],
                         ids=repr)
def test_negative_shape_is_ValueError(shape):
    with pytest.raises(ValueError):
        pygpu.GPUArray(shape)
    with pytest.raises(ValueError):
        pygpu.empty(shape)
    with pytest.raises(ValueError):
        pygpu.zeros(shape)


@pytest.mark.parametrize("shape", [1.5, (2.0, 3), (2, "3"), "3", (2, None), object()],
                         ids=repr)
def test_non_integer_shape_is_TypeError(shape):
    with pytest.raises(TypeError):
        pygpu.GPUArray(shape)
    with pytest.raises(TypeError):
        pygpu.empty(shape)


CLEAR_SIZE_MESSAGE = re.compile(
    r"too (big|large)|overflow|exceed|maximum|shape|size|memory|nbytes", re.I)


@pytest.mark.parametrize("shape", [
    (2 ** 40, 2 ** 40), (2 ** 62, 4), (2 ** 31,) * 3, (2 ** 63 - 1,), (2 ** 63,), (2 ** 64,),
    (0, 2 ** 63), (2 ** 32, 2 ** 32, 0),
], ids=repr)
def test_overflowing_shape(shape):
    # NumPy: ValueError("array is too big; ..."), or "Maximum allowed
    # dimension exceeded".  A GPUMemoryError or OverflowError is fine too, as
    # long as it says what was too large.
    for make in (pygpu.GPUArray, pygpu.empty, pygpu.zeros):
        with pytest.raises((ValueError, OverflowError, pygpu.GPUMemoryError)) as info:
            make(shape)
        assert CLEAR_SIZE_MESSAGE.search(str(info.value)), str(info.value)
    # the process goes on
    assert_matches(pygpu.to_gpu(np.arange(4.0)), np.arange(4.0))


# ---- construction: dtypes ----------------------------------------------------------

DTYPE_SPELLINGS = [
    bool, "bool", "?", np.bool_, "b1",
    "i1", "int8", np.int8, "b", "i2", "int16", np.int16, "h", "i4", "int32", np.int32, "i",
    np.intc, "i8", "int64", np.int64, "q", "l", int, np.int_, np.intp, "int",
    "u1", "uint8", np.uint8, "B", "u2", "uint16", "H", "u4", "uint32", np.uint32, "I",
    "u8", "uint64", np.uint64, "Q", "L", np.uintp,
    "f2", "float16", np.float16, "e", np.half, "f4", "float32", np.float32, "f", np.single,
    "f8", "float64", np.float64, "d", float, "float", np.double, "<f8", "=f4",
    "c8", "complex64", np.complex64, "F", "c16", "complex128", np.complex128, "D", complex,
    "complex", np.dtype("f4"), np.dtype("c16"), np.dtype("u2"),
]


@pytest.mark.parametrize("spelling", DTYPE_SPELLINGS, ids=repr)
def test_dtype_spellings(spelling):
    want = np.dtype(spelling)
    for g in (pygpu.GPUArray((2, 3), spelling), pygpu.GPUArray((2, 3), dtype=spelling),
              pygpu.empty((2, 3), spelling), pygpu.zeros(3, dtype=spelling)):
        assert isinstance(g.dtype, np.dtype)
        assert g.dtype == want
        assert g.itemsize == want.itemsize


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("shape", SHAPES, ids=repr)
def test_attributes_match_numpy(shape, dtype, order):
    a = np.empty(shape, dtype, order=order)
    g = pygpu.GPUArray(shape, dtype, order=order)
    assert g.shape == a.shape and type(g.shape) is tuple
    assert g.dtype == a.dtype
    for name in ("ndim", "size", "itemsize", "nbytes"):
        assert getattr(g, name) == getattr(a, name), name
        assert type(getattr(g, name)) is int, name
    assert g.mem_size == a.size and type(g.mem_size) is int
    assert type(g.strides) is tuple and all(type(s) is int for s in g.strides)
    assert_same_layout(g, a)
    assert g.flags.forc == (a.flags.c_contiguous or a.flags.f_contiguous)
    assert g.flags["C_CONTIGUOUS"] == a.flags["C_CONTIGUOUS"]
    assert g.flags["F_CONTIGUOUS"] == a.flags["F_CONTIGUOUS"]
    if a.ndim:
        assert len(g) == len(a)
    else:
        with pytest.raises(TypeError):
            len(g)
    t = g.T
    assert isinstance(t, pygpu.GPUArray)
    assert t.shape == a.T.shape
    assert_same_layout(t, a.T)
    assert t.ptr == g.ptr


@pytest.mark.parametrize("dtype", [
    object, "U3", "S3", "V8", [("a", "i4"), ("b", "f8")], "M8[s]", "m8[ms]", "datetime64",
    np.longdouble, np.clongdouble, "i4,i4",
], ids=repr)
def test_unsupported_dtypes_are_TypeError(dtype):
    with pytest.raises(TypeError):
        pygpu.GPUArray(3, dtype)
    with pytest.raises(TypeError):
        pygpu.empty((2, 2), dtype=dtype)
    with pytest.raises(TypeError):
        pygpu.zeros(2, dtype)
    host = np.zeros(3, dtype)
    with pytest.raises(TypeError):
        pygpu.to_gpu(host)
    with pytest.raises(TypeError):
        pygpu.GPUArray(host)


def test_unknown_dtype_name_is_TypeError():
    with pytest.raises(TypeError):
        pygpu.GPUArray(3, "notadtype")
    with pytest.raises(TypeError):
        pygpu.GPUArray(3, dtype=3.5)


def test_stream_argument():
    s = pygpu.Stream()
    g = pygpu.GPUArray((4, 5), np.float32, stream=s)
    g.set(np.ones((4, 5), np.float32), stream=s)
    s.synchronize()
    assert_same_array(g.get(stream=s), np.ones((4, 5), np.float32))
    with pytest.raises(TypeError):
        pygpu.GPUArray(3, stream="x")


# ---- ptr, gpudata, base, device ----------------------------------------------------

@pytest.mark.parametrize("shape", SHAPES, ids=repr)
def test_ptr_and_gpudata_of_fresh_array(shape):
    g = pygpu.GPUArray(shape, np.int16)
    assert type(g.ptr) is int
    assert int(g.gpudata) == g.ptr
    assert g.base is None
    if g.size:
        assert g.ptr != 0
        assert isinstance(g.gpudata, pygpu.DeviceAllocation)
        assert g.gpudata.size >= g.nbytes
        h = pygpu.GPUArray(shape, np.int16)
        assert h.ptr + h.nbytes <= g.ptr or g.ptr + g.nbytes <= h.ptr, "live arrays overlap"


def test_gpudata_of_views():
    g = pygpu.to_gpu(np.arange(24.0).reshape(4, 6))
    v = g[0]  # starts where the allocation starts
    assert int(v.gpudata) == v.ptr == g.ptr
    assert isinstance(v.gpudata, pygpu.DeviceAllocation)
    w = g[1:, 2]  # does not
    assert w.ptr == g.ptr + 6 * 8 + 2 * 8
    assert int(w.gpudata) == w.ptr
    r = g[::-1, ::-1]
    assert r.ptr == g.ptr + 23 * 8
    assert int(r.gpudata) == r.ptr


def test_base_of_views_and_copies():
    a = np.arange(60.0).reshape(3, 4, 5)
    g = pygpu.to_gpu(a)
    assert g.base is None
    assert g[1:].base is g
    assert g[...].base is g
    assert g[1:][1:, ::2].base is g, "NumPy collapses chains of views onto the owner"
    assert g.T.base is g
    assert g.reshape(60).base is g
    assert g.view(np.int64).base is g
    assert g.copy().base is None
    assert pygpu.to_gpu(a[::2]).base is None


def test_device_attribute():
    g = pygpu.zeros(3)
    assert isinstance(g.device, pygpu.Device)
    assert g.device is pygpu.Device(pygpu.get_device())
    assert int(g.device) == pygpu.get_device()
    assert g[1:].device is g.device


# ---- views of memory the caller owns -----------------------------------------------

@pytest.fixture
def filled_alloc(random_bytes):
    """(alloc, host): a 96-byte DeviceAllocation holding the random bytes `host`."""
    host = random_bytes(96)
    alloc = pygpu.mem_alloc(96)
    pygpu.memcpy_htod(alloc, host)
    return alloc, host


@pytest.mark.parametrize("shape,dtype", [((3, 4), "f8"), ((12,), "u2"), ((2, 3, 4), "u1"),
                                         ((), "c16"), ((0,), "f4"), ((6, 2), "c8")], ids=repr)
def test_view_of_mem_alloc(filled_alloc, shape, dtype):
    alloc, host = filled_alloc
    want = np.ndarray(shape, dtype, buffer=host)
    g = pygpu.GPUArray(shape, dtype, gpudata=alloc)
    assert g.ptr == alloc.ptr
    assert int(g.gpudata) == alloc.ptr
    assert_same_layout(g, want)
    assert_matches(g, want)
    # an int address and an object with __int__ work the same
    assert_matches(pygpu.GPUArray(shape, dtype, gpudata=alloc.ptr), want)

    class Address:
        def __int__(self):
            return alloc.ptr

    assert_matches(pygpu.GPUArray(shape, dtype, gpudata=Address()), want)


def test_view_of_mem_alloc_at_offset_F_order_and_strides(filled_alloc):
    alloc, host = filled_alloc
    g = pygpu.GPUArray((4,), np.float64, gpudata=alloc.ptr + 16)
    assert g.ptr == alloc.ptr + 16
    assert_matches(g, np.ndarray((4,), np.float64, buffer=host, offset=16))
    want = np.ndarray((3, 4), np.float64, buffer=host, order="F")
    g = pygpu.GPUArray((3, 4), np.float64, order="F", gpudata=alloc)
    assert_same_layout(g, want)
    assert_matches(g, want)
    want = np.ndarray((3, 4), np.float32, buffer=host, strides=(8, 24))
    g = pygpu.GPUArray((3, 4), np.float32, strides=(8, 24), gpudata=alloc)
    assert g.strides == (8, 24)
    assert not g.flags.c_contiguous and not g.flags.f_contiguous
    assert_matches(g, want)


def test_view_of_mem_alloc_negative_strides(filled_alloc):
    alloc, host = filled_alloc
    # ptr is element [0, 0]: the last 8 bytes of the 96; rows go backwards
    want = np.ndarray((3, 4), np.float64, buffer=host, offset=88, strides=(-32, -8))
    g = pygpu.GPUArray((3, 4), np.float64, strides=(-32, -8), gpudata=alloc.ptr + 88)
    assert g.ptr == alloc.ptr + 88
    assert_matches(g, want)


def test_writes_through_a_mem_alloc_view(filled_alloc, rng):
    alloc, host = filled_alloc
    g = pygpu.GPUArray((3, 4), np.float64, gpudata=alloc)
    values = rng.standard_normal((3, 4))
    g[1:, ::2] = values[1:, ::2]
    want = np.ndarray((3, 4), np.float64, buffer=host.copy())
    want[1:, ::2] = values[1:, ::2]
    out = np.empty(96, np.uint8)
    pygpu.memcpy_dtoh(out, alloc)
    assert_same_array(out.view(np.float64).reshape(3, 4), want)


def test_base_keeps_gpudata_alive(random_bytes):
    host = random_bytes(96)
    alloc = pygpu.mem_alloc(96)
    pygpu.memcpy_htod(alloc, host)
    want = np.ndarray((12,), np.float64, buffer=host)
    rc = sys.getrefcount(alloc)
    g = pygpu.GPUArray((12,), np.float64, gpudata=alloc, base=alloc)
    assert g.base is alloc
    assert sys.getrefcount(alloc) > rc
    del alloc
    gc.collect()
    for _ in range(20):  # reuse freed memory, if it had been freed
        pygpu.memset_d8(pygpu.mem_alloc(96), 0xFF, 96)
    assert_matches(g, want)
    owner = g.base
    del g
    gc.collect()
    assert sys.getrefcount(owner) == rc


def test_allocator(rng):
    calls = []

    class Owner:
        def __init__(self, n):
            self.alloc = pygpu.mem_alloc(n)

        def __int__(self):
            return self.alloc.ptr

    def allocator(nbytes):
        calls.append(nbytes)
        owner = Owner(nbytes)
        calls.append(weakref.ref(owner))
        return owner

    g = pygpu.GPUArray((5, 6), np.float32, allocator=allocator)
    assert calls[0] == g.nbytes == 120
    owner_ref = calls[1]
    assert owner_ref() is not None and g.ptr == int(owner_ref())
    assert int(g.gpudata) == g.ptr
    a = random_array(rng, (5, 6), np.float32)
    g.set(a)
    gc.collect()
    assert owner_ref() is not None, "the allocation is kept alive by the array"
    assert_matches(g, a)
    v = g[2:]
    del g
    gc.collect()
    assert owner_ref() is not None, "and by its views"
    assert_matches(v, a[2:])
    del v
    gc.collect()
    assert owner_ref() is None, "and released with the last of them"


def test_allocator_errors_propagate():
    def failing(nbytes):
        raise MemoryError("no room for %d" % nbytes)

    with pytest.raises(MemoryError, match="no room for 24"):
        pygpu.GPUArray(3, allocator=failing)
    with pytest.raises(TypeError):
        pygpu.GPUArray(3, allocator=lambda n: object())


# ---- host round trips --------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", [(), (0,), (7,), (3, 4), (2, 3, 0), (2, 3, 4, 5)], ids=repr)
def test_to_gpu_get_round_trip(shape, dtype, layout, rng):
    a = host_layout(rng, shape, dtype, layout)
    before = a.copy()
    for g in (pygpu.to_gpu(a), pygpu.GPUArray(a)):
        assert_matches(g, a)
        assert g.flags.forc, "a copy of host data is contiguous"
        assert g.base is None
        out = g.get()
        assert out.flags.c_contiguous and out.flags.writeable
        assert_same_array(out, a)
    assert_same_array(a, before)  # the source is untouched


@given(shape=shapes(max_dims=5, max_side=4), dtype=dtypes,
       layout=st.sampled_from(LAYOUTS), seed=seeds)
@PROPERTY
def test_to_gpu_round_trip_property(shape, dtype, layout, seed):
    a = host_layout(np.random.default_rng(seed), shape, dtype, layout)
    g = pygpu.to_gpu(a)
    assert_matches(g, a)
    assert_same_array(np.asarray(g), a)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_to_gpu_async_and_get_async(dtype, rng, stream):
    a = host_layout(rng, (5, 7), dtype, "negative")
    g = pygpu.to_gpu_async(a, stream=stream)
    stream.synchronize()
    assert_matches(g, a)
    out = g.get_async(stream=stream)
    stream.synchronize()
    assert_same_array(out, a)
    out = np.empty((5, 7), dtype)
    assert g.get_async(stream, out) is out
    stream.synchronize()
    assert_same_array(out, a)


def test_get_pagelocked(rng):
    a = random_array(rng, (30, 40), np.float32)
    g = pygpu.to_gpu(a)
    out = g.get(pagelocked=True)
    assert_same_array(out, a)
    assert out.flags.writeable


def test_construct_from_buffers(rng):
    a = random_array(rng, (3, 4), np.float32)
    raw = bytearray(random_array(rng, (10,), np.uint8).tobytes())
    for src in (raw, memoryview(raw), memoryview(a), array.array("d", [1.5, -2, 3])):
        assert_matches(pygpu.GPUArray(src), np.asarray(src))
        assert_matches(pygpu.to_gpu(src), np.asarray(src))


# ---- factories ---------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shape", SHAPES, ids=repr)
def test_empty_zeros_ones(shape, dtype):
    for order in ("C", "F"):
        e = pygpu.empty(shape, dtype, order=order)
        want = np.empty(shape, dtype, order=order)
        assert e.shape == want.shape and e.dtype == want.dtype
        assert_same_layout(e, want)
        for ours, theirs in ((pygpu.zeros, np.zeros), (pygpu.ones, np.ones)):
            g = ours(shape, dtype, order=order)
            want = theirs(shape, dtype, order=order)
            assert_same_layout(g, want)
            assert_matches(g, want)
    assert pygpu.zeros(shape).dtype == np.float64
    assert pygpu.ones(shape).dtype == np.float64
    assert pygpu.empty(shape).dtype == np.float64


FILL_VALUES = [0, 1.5, -3, True, 1 + 2j, 7, 2 ** 40, np.float32(2.5), np.int8(-1),
               float("nan"), -0.0, float("inf")]


@pytest.mark.parametrize("value", FILL_VALUES, ids=repr)
def test_full(value):
    for dtype in [None] + DTYPES:
        want = numpy_outcome(lambda: np.full((2, 3), value, dtype))
        if isinstance(want, Raised):
            want.check(lambda: pygpu.full((2, 3), value, dtype))
            continue
        g = quietly(lambda: pygpu.full((2, 3), value, dtype))
        assert_matches(g, want)
        g = quietly(lambda: pygpu.full((2, 3), value, dtype=dtype))
        assert_matches(g, want)


@pytest.mark.parametrize("args", [
    (5,), (0,), (2, 10), (2, 10, 3), (10, 2, -1), (10, 2), (-3, 3, 0.5), (0, 1, 0.1),
    (1.5,), (2.5, 7), (0, 10, 0), (np.int16(3), np.int16(9)), (1, 2, 0.25),
], ids=repr)
@pytest.mark.parametrize("dtype", [None, "f4", "i2", "u1", "f8", "c8", "i8", "bool"])
def test_arange(args, dtype):
    want = numpy_outcome(lambda: np.arange(*args, dtype=dtype))
    if isinstance(want, Raised):
        want.check(lambda: pygpu.arange(*args, dtype=dtype))
        return
    assert_matches(pygpu.arange(*args, dtype=dtype), want)
    if dtype is None:
        assert_matches(pygpu.arange(*args), np.arange(*args))


def test_documented_keyword_arguments(rng, stream):
    """Every keyword docs/api.md names works as a keyword."""
    a = random_array(rng, (4, 6), np.float32)
    assert_matches(pygpu.arange(start=1, stop=9, step=2, dtype=np.int16),
                   np.arange(start=1, stop=9, step=2, dtype=np.int16))
    assert_matches(pygpu.arange(2, stop=8), np.arange(2, stop=8))
    assert_matches(pygpu.arange(0, 10, step=3), np.arange(0, 10, step=3))
    assert_matches(pygpu.to_gpu(a, stream=stream), a)
    g = pygpu.to_gpu_async(a, stream=stream)
    stream.synchronize()
    assert_matches(g, a)
    assert_matches(pygpu.empty(shape=(2, 3), dtype=np.int8, order="F").copy().fill(value=1),
                   np.ones((2, 3), np.int8))
    assert_matches(pygpu.zeros((2, 3), dtype=np.int8, order="F"), np.zeros((2, 3), np.int8))
    assert_matches(pygpu.ones((2, 3), dtype=np.int8, order="F"), np.ones((2, 3), np.int8))
    assert_matches(pygpu.full((2, 3), 5, dtype=np.uint8), np.full((2, 3), 5, np.uint8))
    assert_matches(pygpu.empty_like(g, dtype=np.int8).fill(3), np.full((4, 6), 3, np.int8))
    assert_matches(pygpu.zeros_like(a, dtype=np.int8), np.zeros((4, 6), np.int8))
    assert_matches(pygpu.ones_like(g, dtype=np.int8), np.ones((4, 6), np.int8))
    assert_matches(pygpu.concatenate(arrays=[g, g], axis=1), np.concatenate([a, a], axis=1))
    assert_matches(pygpu.stack(arrays=[g, g], axis=-1), np.stack([a, a], axis=-1))
    h = pygpu.GPUArray(shape=(4, 6), dtype=np.float32, order="C", strides=None, gpudata=None,
                       base=None, allocator=None, stream=None)
    assert h.set(ary=a, stream=stream) is None
    assert h.set_async(ary=a, stream=stream) is None
    stream.synchronize()
    out = np.empty((4, 6), np.float32)
    assert h.get(ary=out, stream=stream, pagelocked=False) is out
    assert h.get_async(stream=stream, ary=out) is out
    stream.synchronize()
    assert_same_array(out, a)
    assert_matches(h.copy(order="F"), a)
    assert_matches(h.view(dtype=np.int32), a.view(np.int32))
    assert_matches(h.reshape(3, 8, order="F"), a.reshape(3, 8, order="F"))
    assert_matches(h.ravel(order="F"), a.ravel(order="F"))
    assert_matches(h.flatten(order="F"), a.flatten(order="F"))
    assert_matches(h[None].squeeze(axis=0), a)
    assert_matches(h.swapaxes(0, 1), a.swapaxes(0, 1))


def like_sources(rng, shape, dtype):
    """(host, like): the same array as NumPy and GPUArray, C and F order."""
    for order in ("C", "F"):
        a = np.array(random_array(rng, shape, dtype), order=order)
        yield a, a
        yield a, pygpu.to_gpu(a) if order == "C" else pygpu.to_gpu(a.T).T


@pytest.mark.parametrize("shape", [(), (0,), (5,), (3, 4), (2, 3, 4), (2, 0, 3)], ids=repr)
def test_like_functions(shape, rng):
    for dtype in DTYPES:
        for host, src in like_sources(rng, shape, dtype):
            for new_dtype in (None, np.float32, np.uint16):
                for ours, theirs in ((pygpu.empty_like, np.empty_like),
                                     (pygpu.zeros_like, np.zeros_like),
                                     (pygpu.ones_like, np.ones_like)):
                    g = ours(src, dtype=new_dtype)
                    want = theirs(host, dtype=new_dtype)
                    assert isinstance(g, pygpu.GPUArray)
                    assert g.shape == want.shape and g.dtype == want.dtype
                    assert_same_layout(g, want)  # C stays C, F stays F
                    if ours is not pygpu.empty_like:
                        assert_matches(g, want)
            if host.size:
                assert g.ptr != getattr(src, "ptr", None)
            for value in (0, 1.5, -3, True, 1 + 2j):
                want = numpy_outcome(lambda: np.full_like(host, value))
                if isinstance(want, Raised):
                    want.check(lambda: pygpu.full_like(src, value))
                    continue
                g = quietly(lambda: pygpu.full_like(src, value))
                assert_same_layout(g, want)
                assert_matches(g, want)


# ---- numpy.asarray -----------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_numpy_asarray(dtype, rng):
    a = random_array(rng, (4, 5), dtype)
    g = pygpu.to_gpu(a)
    for h in (np.asarray(g), np.array(g), np.asarray(g, copy=True), np.asarray(g[1:, ::2])):
        assert type(h) is np.ndarray
    assert_same_array(np.asarray(g), a)
    assert_same_array(np.array(g), a)
    assert_same_array(np.asarray(g[1:, ::-2]), a[1:, ::-2])
    assert_same_array(np.asarray(g[2, 3]), a[2, 3, ...])
    assert_same_array(quietly(lambda: np.asarray(g, dtype=np.complex128)),
                      a.astype(np.complex128))
    with pytest.raises(ValueError):
        np.asarray(g, copy=False)
    with pytest.raises(ValueError):
        np.array(g, copy=False)


# ---- truth value -------------------------------------------------------------------

@pytest.mark.parametrize("value", [np.zeros(1), np.ones(1), np.array(0.0), np.array(2 + 0j),
                                   np.zeros((1, 1), bool), np.ones((1, 1, 1), np.uint8)],
                         ids=repr)
def test_truth_value_of_one_element_like_numpy(value):
    assert bool(pygpu.to_gpu(value)) == bool(value)


@pytest.mark.parametrize("shape", [(0,), (2,), (3, 4), (0, 3)], ids=repr)
def test_truth_value_of_other_sizes_is_ambiguous_like_numpy(shape):
    """NumPy: 'The truth value of an array with more than one element is
    ambiguous' and '... of an empty array is ambiguous' (ValueError)."""
    with pytest.raises(ValueError):
        bool(np.ones(shape))
    with pytest.raises(ValueError):
        bool(pygpu.ones(shape))
    with pytest.raises(ValueError):
        bool(pygpu.zeros(shape))


# ---- repr and str ------------------------------------------------------------------

def repr_body(text):
    """What follows the class name's '(', whitespace collapsed (the
    continuation indent depends on the name's length)."""
    match = re.match(r"[A-Za-z_][\w.]*\((.*)\)\Z", text, re.S)
    assert match, text
    return re.sub(r"\s+", " ", match.group(1))


@pytest.mark.parametrize("make", [
    lambda: np.arange(6.0) / 4,
    lambda: np.arange(12, dtype=np.int32).reshape(3, 4) - 5,
    lambda: np.array(1.5),
    lambda: np.array(7, np.uint8),
    lambda: np.zeros((0, 3)),
    lambda: np.zeros((2, 0), np.int16),
    lambda: np.arange(6, dtype=np.float32).reshape(2, 3),
    lambda: np.array([True, False, True]),
    lambda: np.array([1 + 2j, -3.5j], np.complex64),
    lambda: np.arange(2000),
    lambda: np.arange(3000.0).reshape(30, 100) / 7,
    lambda: np.arange(24, dtype=np.float16).reshape(2, 3, 4),
    lambda: np.array([np.nan, np.inf, -0.0]),
    lambda: np.arange(40, dtype=np.uint64)[::-3],
], ids=lambda f: "case")
def test_repr_and_str_show_values_like_numpy(make):
    a = make()
    g = pygpu.to_gpu(a)
    assert str(g) == str(a)
    assert repr_body(repr(g)) == repr_body(repr(a)), (repr(g), repr(a))
    assert not repr(g).startswith("array("), "the class name, not NumPy's"
    v = g[...] if a.ndim == 0 else g[::-1]
    av = a[...] if a.ndim == 0 else a[::-1]
    assert str(v) == str(av)
    assert repr_body(repr(v)) == repr_body(repr(av))


# ---- odd inputs ---------------------------------------------------------------------

@given(shape=shapes(max_dims=4, max_side=4), dtype=dtypes, seed=seeds)
@PROPERTY
def test_attributes_of_uploaded_arrays(shape, dtype, seed):
    a = random_array(np.random.default_rng(seed), shape, dtype)
    g = pygpu.to_gpu(a)
    want = np.empty(shape, dtype)
    assert g.shape == a.shape and g.dtype == a.dtype
    assert (g.ndim, g.size, g.itemsize, g.nbytes) == (a.ndim, a.size, a.itemsize, a.nbytes)
    assert_same_layout(g, want)
    assert_same_layout(g.T, want.T)
    assert_matches(g.T, a.T)
