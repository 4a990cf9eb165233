"""GPUArray basic indexing: views, writes through views, errors
(docs/api.md, GPUArray: Indexing).  NumPy is the oracle: for random shapes
and keys, g[key] has a[key]'s shape, strides, flags, values and place in
memory, and g[key] = v changes exactly what a[key] = v changes."""
import gc
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pygpu
from gpuarray_helpers import (
    DTYPE_IDS, DTYPES, PROPERTY, Raised, address, as_view_key, assert_matches,
    assert_same_array, assert_same_layout, basic_keys, broadcastable_shapes, dtypes,
    numpy_outcome, quietly, random_array, seeds, shapes, small_values,
)


def check_view(gv, av, g, a):
    """GPUArray view `gv` of `g` is what NumPy view `av` is of `a`."""
    assert type(gv) is pygpu.GPUArray
    assert gv.shape == av.shape and gv.dtype == av.dtype
    assert_same_layout(gv, av)
    if av.size:
        # the same element [0, ..., 0], inside the parent's memory
        assert gv.ptr - g.ptr == address(av) - address(a)
    assert_matches(gv, av)


# ---- reading -------------------------------------------------------------------------

@given(data=st.data(), shape=shapes(max_dims=6, max_side=5), dtype=dtypes, seed=seeds)
@PROPERTY
def test_basic_index_matches_numpy(data, shape, dtype, seed):
    rng = np.random.default_rng(seed)
    a = random_array(rng, shape, dtype)
    g = pygpu.to_gpu(a)
    key = data.draw(basic_keys(shape), label="key")
    av = a[as_view_key(key)]
    gv = g[key]
    check_view(gv, av, g, a)
    assert gv.base is g
    if av.size:  # every byte of the view lies inside the parent's allocation
        first = gv.ptr + sum((n - 1) * s for n, s in zip(gv.shape, gv.strides) if s < 0)
        last = gv.ptr + sum((n - 1) * s for n, s in zip(gv.shape, gv.strides) if s > 0)
        assert g.ptr <= first and last + gv.itemsize <= g.ptr + g.nbytes


@given(data=st.data(), shape=shapes(min_dims=1, max_dims=5, max_side=5), dtype=dtypes,
       seed=seeds)
@PROPERTY
def test_chained_views_match_numpy(data, shape, dtype, seed):
    rng = np.random.default_rng(seed)
    a = random_array(rng, shape, dtype)
    g = pygpu.to_gpu(a)
    av, gv = a, g
    for depth in range(3):
        key = data.draw(basic_keys(av.shape), label="key%d" % depth)
        av, gv = av[as_view_key(key)], gv[key]
        check_view(gv, av, g, a)
        assert gv.base is g, "views of views have the memory owner's array as base"
    # a write through the last view lands in the root, exactly where NumPy's does
    v = random_array(rng, av.shape, dtype)
    gv[...] = v
    av[...] = v
    assert_same_array(g.get(), a)


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4), (2, 1, 3, 1, 2, 2)], ids=repr)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_integer_on_every_axis_gives_0d_array(shape, dtype, rng):
    a = random_array(rng, shape, dtype)
    g = pygpu.to_gpu(a)
    for _ in range(10):
        idx = tuple(int(rng.integers(-n, n)) for n in shape)
        gv = g[idx]
        assert type(gv) is pygpu.GPUArray
        assert gv.shape == () and gv.ndim == 0 and gv.size == 1
        assert gv.dtype == a.dtype
        assert gv.ptr - g.ptr == address(a[idx + (...,)]) - address(a)
        out = gv.get()
        assert type(out) is np.ndarray and out.shape == ()
        assert_same_array(out, a[idx + (...,)])
        assert out[()] == a[idx]
        # one integer at a time, too
        step = g
        for i in idx:
            step = step[i]
        assert step.shape == () and step.ptr == gv.ptr


def test_0d_array_indexing(rng):
    a = np.array(2.5)
    g = pygpu.to_gpu(a)
    for key in ((), Ellipsis, None, (None, Ellipsis), (Ellipsis, None, None)):
        check_view(g[key], a[as_view_key(key)], g, a)
    with pytest.raises(IndexError):
        g[0]
    g[()] = 7
    assert_same_array(g.get(), np.array(7.0))
    g[...] = np.array([[3]])  # NumPy drops leading unit axes of a value
    assert_same_array(g.get(), np.array(3.0))


def test_newaxis_is_None():
    a = np.arange(6.0).reshape(2, 3)
    g = pygpu.to_gpu(a)
    check_view(g[np.newaxis, :, np.newaxis], a[None, :, None], g, a)
    check_view(g[..., np.newaxis], a[..., None], g, a)


def test_zero_size_views(rng):
    a = random_array(rng, (4, 5), np.int32)
    g = pygpu.to_gpu(a)
    for key in (slice(3, 1), (slice(None), slice(5, None)), (slice(None, None, -1), slice(0, 0)),
                (Ellipsis, slice(-1, -5))):
        gv = g[key]
        assert gv.shape == a[key].shape and gv.size == 0
        assert_matches(gv, a[key])
        gv[...] = 5  # writes nothing
        assert_same_array(g.get(), a)
    z = pygpu.to_gpu(np.zeros((0, 3)))
    assert_matches(z[:, 1], np.zeros(0))
    assert_matches(z[::-1, None], np.zeros((0, 1, 3)))
    with pytest.raises(IndexError):
        z[0]


# ---- writing through views -----------------------------------------------------------

@given(data=st.data(), shape=shapes(max_dims=5, max_side=5), dtype=dtypes, seed=seeds,
       kind=st.sampled_from(["array", "scalar", "gpuarray", "gpuview", "castable"]))
@PROPERTY
def test_setitem_matches_numpy(data, shape, dtype, seed, kind):
    rng = np.random.default_rng(seed)
    a = random_array(rng, shape, dtype)
    g = pygpu.to_gpu(a)
    key = data.draw(basic_keys(shape), label="key")
    view_shape = a[as_view_key(key)].shape
    vshape = data.draw(broadcastable_shapes(view_shape), label="value shape")
    if kind == "scalar":
        value = random_array(rng, (), dtype)[()]
        if data.draw(st.booleans(), label="python scalar"):
            value = value.item()
    elif kind == "castable":  # another dtype, cast as NumPy's assignment casts
        value = small_values(rng, vshape, data.draw(dtypes, label="value dtype"))
    else:
        value = random_array(rng, vshape, dtype)
    host_value = value
    if kind == "gpuarray":
        value = pygpu.to_gpu(value)
    elif kind == "gpuview":  # a non-contiguous GPUArray as the source
        big = random_array(rng, tuple(2 * n for n in vshape), dtype)
        rev = (slice(None, None, -2),) * len(vshape) + (Ellipsis,)
        host_value = big[rev]
        value = pygpu.to_gpu(big)[rev]
        assert_matches(value, host_value)
    quietly(lambda: a.__setitem__(key, host_value))
    assert quietly(lambda: g.__setitem__(key, value)) is None
    assert_same_array(g.get(), a)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_setitem_scalars_of_every_kind(dtype, rng):
    for value in (0, 1, -1, 1.5, -3, True, False, 1 + 2j, 2 ** 40, np.float32(2.5),
                  np.int8(-7), np.uint64(2 ** 63), float("nan"), -0.0):
        a = random_array(rng, (3, 4), dtype)
        g = pygpu.to_gpu(a)
        want = numpy_outcome(lambda: a.__setitem__((slice(1, None), slice(None, None, -2)),
                                                   value))
        if isinstance(want, Raised):
            want.check(lambda: g.__setitem__((slice(1, None), slice(None, None, -2)), value))
            continue
        quietly(lambda: g.__setitem__((slice(1, None), slice(None, None, -2)), value))
        assert_same_array(g.get(), a)


def test_setitem_strips_leading_unit_axes_of_value(rng):
    """NumPy accepts a value with more axes than the view when the extra
    leading ones have length 1."""
    a = random_array(rng, (3, 4), np.float32)
    g = pygpu.to_gpu(a)
    v = random_array(rng, (1, 1, 4), np.float32)
    a[1] = v
    g[1] = v
    assert_same_array(g.get(), a)
    v = random_array(rng, (1, 3, 4), np.float32)
    a[...] = v
    g[...] = pygpu.to_gpu(v)
    assert_same_array(g.get(), a)


def test_setitem_buffers(rng):
    a = random_array(rng, (2, 8), np.uint8)
    g = pygpu.to_gpu(a)
    raw = bytearray(range(8))
    a[1] = np.frombuffer(raw, np.uint8)
    g[1] = raw
    g[0, ::2] = memoryview(raw)[:4]
    a[0, ::2] = np.frombuffer(raw, np.uint8)[:4]
    assert_same_array(g.get(), a)


def test_setitem_broadcast_gpuarray_sources(rng):
    a = random_array(rng, (4, 3, 5), np.complex64)
    g = pygpu.to_gpu(a)
    row = random_array(rng, (5,), np.complex64)
    col = random_array(rng, (3, 1), np.complex64)
    a[::2] = row
    g[::2] = pygpu.to_gpu(row)
    a[1, :, ::-1] = col
    g[1, :, ::-1] = pygpu.to_gpu(col)
    a[3] = a[0, 0, 2]
    g[3] = pygpu.to_gpu(a[0, 0, 2, ...])  # a 0-d GPUArray broadcast everywhere
    assert_same_array(g.get(), a)


@pytest.mark.parametrize("key,vshape", [
    ((slice(0, 2),), (3,)), ((slice(None),), (4, 5)), ((0,), (5,)),
    ((slice(None), 0), (3, 2)), ((Ellipsis,), (2, 4, 6)), ((slice(3, 1),), (2,)),
    ((0, 0), (2,)),
], ids=repr)
def test_setitem_shape_mismatch_is_ValueError(key, vshape, rng):
    a = random_array(rng, (4, 6), np.float64)
    g = pygpu.to_gpu(a)
    value = random_array(rng, vshape, np.float64)
    with pytest.raises(ValueError):
        a[key] = value  # NumPy agrees
    for v in (value, pygpu.to_gpu(value)):
        with pytest.raises(ValueError):
            g[key] = v
    assert_same_array(g.get(), a)  # nothing written


def test_iteration_like_numpy(rng):
    """Iterating yields the views g[0], g[1], ...; a 0-d array cannot be
    iterated (NumPy: TypeError 'iteration over a 0-d array')."""
    a = random_array(rng, (3, 4), np.int32)
    g = pygpu.to_gpu(a)
    items = list(g)
    assert len(items) == 3
    for got, want in zip(items, a):
        assert_matches(got, want)
    assert [x.shape for x in reversed(g)] == [(4,)] * 3
    assert list(pygpu.zeros((0, 2))) == []
    with pytest.raises(TypeError):
        list(np.array(1.0))
    with pytest.raises(TypeError):
        list(pygpu.to_gpu(np.array(1.0)))
    with pytest.raises(TypeError):
        iter(g[1, 2])


def test_errors_through_temporary_views_keep_their_exception():
    """An error raised while a temporary view is being freed must stay the
    error raised (not become SystemError)."""
    g = pygpu.to_gpu(np.arange(12.0).reshape(3, 4))
    with pytest.raises(ValueError):
        g[1, 2].fill("x")
    with pytest.raises(TypeError):
        g[0][::2].fill(object())
    with pytest.raises(ValueError):
        g[1][1:3] = "abc"
    with pytest.raises(ValueError):
        g[2, ::-1].set([[1, 2], [3]])
    with pytest.raises(IndexError):
        g[1][[0, 1]]
    with pytest.raises(IndexError):
        g[1, 1][0]
    with pytest.raises(ValueError):
        g[1:].reshape(5)
    assert_same_array(g.get(), np.arange(12.0).reshape(3, 4))


# ---- refused keys ------------------------------------------------------------------

NOT_SUPPORTED = [
    [0, 1], [[0, 1]], np.array([0, 2]), np.array([[1]]), (0, [1, 2]), (slice(None), np.array([1])),
    np.array([True, False, True]), [True, False, True], np.ones((3, 4), bool), True, False,
    np.True_, (0, np.array([True] * 4)), np.array([1]), (Ellipsis, [0]),
]


@pytest.mark.parametrize("key", NOT_SUPPORTED, ids=repr)
def test_integer_array_and_mask_keys_not_supported(key):
    g = pygpu.to_gpu(np.arange(12.0).reshape(3, 4))
    with pytest.raises(IndexError, match="not supported"):
        g[key]
    with pytest.raises(IndexError, match="not supported"):
        g[key] = 1.0
    assert_same_array(g.get(), np.arange(12.0).reshape(3, 4))


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4)], ids=repr)
def test_out_of_range_integers(shape):
    a = np.zeros(shape)
    g = pygpu.to_gpu(a)
    for axis, n in enumerate(shape):
        for i in (n, n + 1, -n - 1, 2 ** 40, -(2 ** 40), np.int64(n)):
            key = (slice(None),) * axis + (i,)
            with pytest.raises(IndexError):
                a[key]
            with pytest.raises(IndexError):
                g[key]
            with pytest.raises(IndexError):
                g[key] = 1
    with pytest.raises(IndexError):
        g[2 ** 70]


def test_too_many_indices():
    g = pygpu.to_gpu(np.zeros((3, 4)))
    for key in ((0, 0, 0), (0, slice(None), 0), (slice(None),) * 3, (Ellipsis, 0, 0, 0),
                (None, 0, 0, 0), (Ellipsis, Ellipsis), (0, Ellipsis, 0, Ellipsis)):
        with pytest.raises(IndexError):
            g[key]
        with pytest.raises(IndexError):
            g[key] = 1
    z = pygpu.to_gpu(np.array(1.0))
    with pytest.raises(IndexError):
        z[0]
    with pytest.raises(IndexError):
        z[:]


def test_step_zero_is_ValueError():
    g = pygpu.to_gpu(np.zeros((3, 4)))
    for key in (slice(None, None, 0), (0, slice(1, 3, 0)), (Ellipsis, slice(None, None, 0))):
        with pytest.raises(ValueError):
            g[key]
        with pytest.raises(ValueError):
            g[key] = 1


@pytest.mark.parametrize("key", [
    1.5, "a", (0, 1.5), (0, "a"), np.float64(1), (None, 2.0), {}, object(), b"x", 1j,
    (slice(None), object()),
], ids=repr)
def test_wrong_key_types_are_IndexError(key):
    a = np.zeros((3, 4))
    g = pygpu.to_gpu(a)
    with pytest.raises(IndexError):
        a[key]  # NumPy agrees
    with pytest.raises(IndexError):
        g[key]
    with pytest.raises(IndexError):
        g[key] = 1


# ---- reference counts ----------------------------------------------------------------

def test_indexing_leaves_refcounts_flat(rng):
    a = random_array(rng, (6, 7, 8), np.float32)
    g = pygpu.to_gpu(a)
    keys = [np.intp(2), slice(1, None, 2), (Ellipsis, np.int64(-1)), (None, slice(None, None, -3))]
    value = random_array(rng, (7, 8), np.float32)

    def work():
        for k in keys:
            v = g[k]
            w = v[...]
            del v, w
        g[3] = value
        g[:, 2] = pygpu.to_gpu(value[0])
        g[1:3] = 4.0
        with pytest.raises(IndexError):  # refused keys must not leak either
            g[keys[0], [1]]

    work()  # first-use caches (NumPy's casts, ...) are not leaks
    gc.collect()
    rc_g = sys.getrefcount(g)
    rc_keys = [sys.getrefcount(k) for k in keys]
    rc_value = sys.getrefcount(value)
    for _ in range(500):
        work()
    gc.collect()
    assert sys.getrefcount(g) == rc_g
    assert [sys.getrefcount(k) for k in keys] == rc_keys
    assert sys.getrefcount(value) == rc_value
