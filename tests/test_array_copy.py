"""GPUArray copies and shape methods: get/set with any host layout, copy,
fill, reshape, ravel, flatten, squeeze, transpose, swapaxes, view,
concatenate, stack (docs/api.md, GPUArray: Methods).  NumPy is the oracle:
values, which results are views (sharing memory: the same element [0,...,0]
and writes that land in the parent) and which are copies, and errors."""
import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pygpu
from gpuarray_helpers import (
    DTYPE_IDS, DTYPES, LAYOUTS, PROPERTY, Raised, address, as_view_key, assert_matches,
    assert_same_array,
    assert_same_layout, device_layout, dtypes, host_layout, numpy_outcome, quietly,
    random_array, seeds, shapes, small_values, strides_without_unit_axes,
)

SHAPES = [(), (0,), (1,), (6,), (3, 4), (2, 0, 3), (2, 3, 4), (2, 1, 3, 2)]

# Host slicings that give every kind of layout for an `out` or a source:
# (parent shape, key) -> parent[key] has shape (3, 4).
HOST_VIEWS = {
    "C": ((3, 4), (Ellipsis,)),
    "rows stepped": ((6, 4), (slice(None, None, 2), Ellipsis)),
    "both stepped": ((9, 9), (slice(1, None, 3), slice(None, 8, 2))),
    "negative": ((3, 4), (slice(None, None, -1), slice(None, None, -1))),
    "negative stepped": ((9, 12), (slice(None, None, -3), slice(10, None, -3))),
    "column of wider": ((3, 10), (slice(None), slice(2, 6))),
}


def host_view(rng, layout, dtype):
    """(parent, key, view): parent[key] is a (3, 4) view with `layout`
    (HOST_VIEWS) or, for 'F' and 'transposed', an F-ordered array."""
    if layout == "F":
        parent = np.array(random_array(rng, (3, 4), dtype), order="F")
        return parent, (Ellipsis,), parent[...]
    if layout == "transposed":
        parent = random_array(rng, (4, 3), dtype).T
        return parent, (Ellipsis,), parent[...]
    shape, key = HOST_VIEWS[layout]
    parent = random_array(rng, shape, dtype)
    assert parent[key].shape == (3, 4)
    return parent, key, parent[key]


OUT_LAYOUTS = list(HOST_VIEWS) + ["F", "transposed"]


# ---- get(ary=) -----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("out_layout", OUT_LAYOUTS)
@pytest.mark.parametrize("src_layout", ["C", "strided", "negative", "transposed"])
def test_get_into_any_layout(dtype, out_layout, src_layout, rng):
    a, g = device_layout(rng, (3, 4), dtype, src_layout)
    parent, key, out = host_view(rng, out_layout, dtype)
    expect = parent.copy()
    expect[key] = a
    assert g.get(ary=out) is out
    assert_same_array(parent, expect)  # the view filled, the rest of its parent untouched
    out = np.empty((3, 4), dtype)
    assert g.get(out) is out
    assert_same_array(out, a)


@pytest.mark.parametrize("shape", SHAPES, ids=repr)
def test_get_into_out_of_every_shape(shape, rng):
    for layout in LAYOUTS:
        a, g = device_layout(rng, shape, np.int32, layout)
        out = host_layout(rng, shape, np.int32, layout)
        assert g.get(ary=out) is out
        assert_same_array(out, a)


def test_get_into_wrong_dtype_or_shape(rng):
    a = random_array(rng, (3, 4), np.float32)
    g = pygpu.to_gpu(a)
    for out in (np.zeros((3, 4), np.float64), np.zeros((3, 4), np.int32),
                np.zeros((4, 3), np.float32), np.zeros(12, np.float32),
                np.zeros((3, 4, 1), np.float32), np.zeros((1, 3, 4), np.float32),
                np.zeros((), np.float32), np.zeros((3, 1), np.float32),
                np.zeros((3, 4), np.complex64), np.zeros((3, 4), np.uint32)):
        before = out.copy()
        with pytest.raises((ValueError, TypeError)):
            g.get(ary=out)
        assert_same_array(out, before)
    for not_an_array in (bytearray(48), [0.0] * 12, "x"):
        with pytest.raises((ValueError, TypeError)):
            g.get(ary=not_an_array)


def test_get_into_read_only_out(rng):
    g = pygpu.to_gpu(random_array(rng, (3, 4), np.float64))
    out = np.zeros((3, 4))
    out.flags.writeable = False
    with pytest.raises(ValueError):
        g.get(ary=out)
    assert not out.any()
    ro_view = np.broadcast_to(np.zeros(4), (3, 4))  # read-only and overlapping
    with pytest.raises(ValueError):
        g.get(ary=ro_view)
    with pytest.raises(ValueError):
        g.get_async(ary=out)


# ---- set -----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("src_layout", OUT_LAYOUTS)
def test_set_from_any_host_layout(dtype, src_layout, rng):
    _, _, src = host_view(rng, src_layout, dtype)
    for dst_layout in ("C", "negative", "transposed"):
        a, g = device_layout(rng, (3, 4), dtype, dst_layout)
        assert g.set(src) is None
        a[...] = src
        assert_matches(g, a)


@pytest.mark.parametrize("vshape", [(), (1,), (4,), (1, 4), (3, 1), (1, 1), (2, 3, 4)],
                         ids=repr)
def test_set_broadcasts(vshape, rng):
    a = random_array(rng, (2, 3, 4), np.float32)
    g = pygpu.to_gpu(a)
    value = random_array(rng, vshape, np.float32)
    g.set(value)
    a[...] = value
    assert_same_array(g.get(), a)
    # through a (3, 4) view: only the view changes
    part = value if len(vshape) <= 2 else value[0]
    g[1, ::-1].set(part)
    a[1, ::-1] = part
    assert_same_array(g.get(), a)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_set_casts_like_assignment(dtype, rng):
    for src_dtype in DTYPES:
        value = small_values(rng, (3, 4), src_dtype)
        a = random_array(rng, (3, 4), dtype)
        g = pygpu.to_gpu(a)
        want = numpy_outcome(lambda: a.__setitem__(Ellipsis, value))
        if isinstance(want, Raised):
            want.check(lambda: g.set(value))
            continue
        quietly(lambda: g.set(value))
        assert_same_array(g.get(), a)


def test_set_shape_mismatch(rng):
    g = pygpu.to_gpu(random_array(rng, (3, 4), np.float64))
    before = g.get()
    for bad in ((3,), (5,), (4, 3), (2, 3, 4), (3, 4, 1)):
        with pytest.raises(ValueError):
            g.set(np.zeros(bad))
        with pytest.raises(ValueError):
            g.set_async(np.zeros(bad))
    assert_same_array(g.get(), before)


def test_set_async(rng, stream):
    a = random_array(rng, (30, 40), np.complex128)
    g = pygpu.empty((30, 40), np.complex128)
    src = a[::-1]
    g[::-1].set_async(src, stream=stream)
    stream.synchronize()
    assert_same_array(g.get(), a)
    src2 = random_array(rng, (40,), np.complex128)
    assert g.set_async(src2, stream) is None
    stream.synchronize()
    assert_same_array(g.get(), np.broadcast_to(src2, (30, 40)))


# ---- copy and fill ----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shape", SHAPES, ids=repr)
def test_copy(shape, dtype, rng):
    for layout in LAYOUTS:
        a, g = device_layout(rng, shape, dtype, layout)
        for order, flag in (("C", "c_contiguous"), ("F", "f_contiguous")):
            c = g.copy(order=order)
            want = a.copy(order=order)
            assert_matches(c, want)
            assert_same_layout(c, want)
            assert getattr(c.flags, flag)
            assert c.base is None
            if a.size:
                assert c.ptr != g.ptr
                c[...] = random_array(rng, shape, dtype)  # writing the copy ...
                assert_same_array(g.get(), a)  # ... leaves the original alone


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_copy_keeps_the_layout_by_default(shape, dtype, rng):
    """copy() with no order is order 'K', as PyCUDA's copy() keeps layout."""
    for layout in LAYOUTS:
        a, g = device_layout(rng, shape, dtype, layout)
        c, want = g.copy(), a.copy(order="K")
        assert_matches(c, want)
        assert_same_layout(c, want)


FILL_VALUES = [0, 1.5, -3, True, False, 1 + 2j, 255, -0.0, float("nan"), 2 ** 40,
               np.float16(0.1), np.complex64(-1j), np.uint8(200)]


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_fill(dtype, rng):
    for value in FILL_VALUES:
        for layout in ("C", "F", "negative"):
            a, g = device_layout(rng, (3, 5), dtype, layout)
            want = numpy_outcome(lambda: a.fill(value))
            if isinstance(want, Raised):
                want.check(lambda: g.fill(value))
                continue
            assert quietly(lambda: g.fill(value)) is g
            assert_same_array(g.get(), a)
        # a view: only its elements change
        parent = random_array(rng, (4, 6), dtype)
        gp = pygpu.to_gpu(parent)
        if isinstance(numpy_outcome(lambda: parent[1::2, ::-3].fill(value)), Raised):
            continue
        quietly(lambda: gp[1::2, ::-3].fill(value))
        assert_same_array(gp.get(), parent)


BAD_FILL_VALUES = ["x", b"ab", object(), {}, 10 ** 30, -(10 ** 30), [], [1, 2, 3],
                   np.arange(2.0), [[1, 2], [3]], None, "1.5", 1e300]


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_fill_and_set_odd_values_like_numpy(dtype):
    """Values NumPy refuses raise the same exception type (never SystemError);
    values it converts are converted the same way."""
    for value in BAD_FILL_VALUES:
        for target in ("whole", "0-d view", "strided view"):
            a = np.zeros((3, 4), dtype)
            g = pygpu.to_gpu(a)
            key = {"whole": (Ellipsis,), "0-d view": (1, 2), "strided view": (slice(None, None, 2),
                                                                              Ellipsis)}[target]
            for op in ("fill", "set", "setitem"):
                if op == "fill" and isinstance(value, (list, np.ndarray)):
                    continue  # NumPy's fill with a sequence differs by dtype (bool: truthiness)
                if op == "fill":
                    want = numpy_outcome(lambda: a[as_view_key(key)].fill(value))
                    got = lambda: g[key].fill(value)
                elif op == "set":  # (a[1, 2, ...]: NumPy's 0-d view, as g[1, 2] is)
                    want = numpy_outcome(lambda: a.__setitem__(as_view_key(key), value))
                    got = lambda: g[key].set(value)
                else:
                    want = numpy_outcome(lambda: a.__setitem__(as_view_key(key), value))
                    got = lambda: g.__setitem__(key, value)
                if isinstance(want, Raised):
                    want.check(got)
                else:
                    quietly(got)
                assert_same_array(g.get(), a)


@pytest.mark.parametrize("shape,value", [
    ((2, 3), [1, 2, 3]), ((2, 3), [[1], [2]]), (3, np.arange(3.0)), ((2, 2), np.array([[1 + 1j]])),
    ((4, 3), np.arange(3, dtype=np.int8)), ((2, 3), [1, 2]),
], ids=repr)
def test_full_broadcasts_array_values_like_numpy(shape, value):
    for dtype in (None, np.float32, np.int16):
        want = numpy_outcome(lambda: np.full(shape, value, dtype))
        if isinstance(want, Raised):
            want.check(lambda: pygpu.full(shape, value, dtype))
            continue
        assert_matches(quietly(lambda: pygpu.full(shape, value, dtype)), want)
    like = np.zeros(shape, np.float64)
    want = numpy_outcome(lambda: np.full_like(like, value))
    if isinstance(want, Raised):
        want.check(lambda: pygpu.full_like(pygpu.to_gpu(like), value))
    else:
        assert_matches(quietly(lambda: pygpu.full_like(pygpu.to_gpu(like), value)), want)


@pytest.mark.parametrize("shape", [(), (0,), (2, 0), (1,)], ids=repr)
def test_fill_tiny(shape):
    for dtype in DTYPES:
        a = np.zeros(shape, dtype)
        g = pygpu.to_gpu(a)
        assert g.fill(True) is g
        a.fill(True)
        assert_matches(g, a)


# ---- views: reshape, ravel, flatten, squeeze, transpose, swapaxes, view ------------------

def check_result(r, ar, g, a, rng):
    """`r` is what NumPy's `ar` is: values, and a view sharing g's memory
    exactly when NumPy's result shares a's (else an independent copy)."""
    assert_matches(r, ar)
    if not a.size:
        return
    is_view = np.shares_memory(ar, a)
    new = random_array(rng, ar.shape, ar.dtype)
    if is_view:
        assert r.ptr - g.ptr == address(ar) - address(a), "not the view NumPy makes"
        assert strides_without_unit_axes(r) == strides_without_unit_axes(ar)
        assert r.flags.c_contiguous == ar.flags.c_contiguous
        assert r.flags.f_contiguous == ar.flags.f_contiguous
    r[...] = new
    ar_before = a.copy()
    if is_view:
        ar[...] = new  # lands in a
    assert_same_array(g.get(), a)
    if not is_view:
        assert_same_array(a, ar_before)


@st.composite
def new_shapes(draw, size):
    """A shape of `size` elements, maybe with one -1."""
    if size == 0:
        dims = draw(st.lists(st.integers(0, 4), min_size=1, max_size=5))
        if 0 not in dims:
            dims[draw(st.integers(0, len(dims) - 1))] = 0
    else:
        factors, n, p = [], size, 2
        while n > 1:
            while n % p == 0:
                factors.append(p)
                n //= p
            p += 1
        dims = [1] * draw(st.integers(1 if factors else 0, 6))
        for f in factors:
            dims[draw(st.integers(0, len(dims) - 1))] *= f
    if dims and draw(st.booleans()):
        dims[draw(st.integers(0, len(dims) - 1))] = -1
    return tuple(dims)


@given(data=st.data(), shape=shapes(max_dims=4, max_side=4), dtype=dtypes,
       layout=st.sampled_from(LAYOUTS), order=st.sampled_from(["C", "F"]), seed=seeds)
@PROPERTY
def test_reshape_matches_numpy(data, shape, dtype, layout, order, seed):
    rng = np.random.default_rng(seed)
    a, g = device_layout(rng, shape, dtype, layout)
    size = int(np.prod(shape))
    new = data.draw(new_shapes(size), label="new shape")
    ar = numpy_outcome(lambda: a.reshape(new, order=order))
    if isinstance(ar, Raised):
        ar.check(lambda: g.reshape(new, order=order))
        return
    spelled = data.draw(st.sampled_from(["tuple", "args", "list"]), label="spelled")
    if spelled == "args" and new:
        r = g.reshape(*new, order=order) if order == "F" else g.reshape(*new)
    else:
        r = g.reshape(list(new) if spelled == "list" else new, order=order)
    check_result(r, ar, g, a, rng)


@pytest.mark.parametrize("shape,new", [
    ((3, 4), (5,)), ((3, 4), (-1, -1)), ((3, 4), (13,)), ((0,), (1,)),
    ((3, 4), (5, -1)), ((2, 0), (0, -1)), ((), (2,)), ((3, 4), (3, 4, 2)),
], ids=repr)
def test_reshape_bad_shapes(shape, new):
    a = np.zeros(shape)
    g = pygpu.to_gpu(a)
    with pytest.raises(ValueError):
        a.reshape(new)  # NumPy agrees
    with pytest.raises(ValueError):
        g.reshape(new)
    with pytest.raises(ValueError):
        g.reshape(*new)
    with pytest.raises((TypeError, ValueError)):
        g.reshape((3.0, 4))


def test_reshape_views_and_copies_by_hand(rng):
    a = random_array(rng, (4, 6), np.float64)
    g = pygpu.to_gpu(a)
    r = g.reshape(2, 12)
    assert r.ptr == g.ptr and r.base is g and r.shape == (2, 12)
    f = g.reshape((6, 4), order="F")
    assert not np.shares_memory(a.reshape((6, 4), order="F"), a)
    check_result(f, a.reshape((6, 4), order="F"), g, a, rng)
    t = g.T  # F-contiguous: an F reshape is a view
    assert np.shares_memory(a.T.reshape((3, 8), order="F"), a)
    check_result(t.reshape((3, 8), order="F"), a.T.reshape((3, 8), order="F"), g, a, rng)
    check_result(g[:, ::2].reshape(-1), a[:, ::2].reshape(-1), g, a, rng)  # a copy
    check_result(g[::2].reshape(2, 2, 3), a[::2].reshape(2, 2, 3), g, a, rng)  # a view


@given(shape=shapes(max_dims=4, max_side=4), dtype=dtypes, layout=st.sampled_from(LAYOUTS),
       order=st.sampled_from(["C", "F"]), seed=seeds)
@PROPERTY
def test_ravel_and_flatten(shape, dtype, layout, order, seed):
    rng = np.random.default_rng(seed)
    a, g = device_layout(rng, shape, dtype, layout)
    check_result(g.ravel(order) if order == "F" else g.ravel(), a.ravel(order), g, a, rng)
    f = g.flatten(order=order)
    assert_matches(f, a.flatten(order))
    assert f.base is None
    if a.size:
        assert f.ptr != g.ptr
        f.fill(0)
        assert_same_array(g.get(), a)  # always a copy


@pytest.mark.parametrize("shape", [(1,), (1, 3, 1), (2, 1, 1, 3), (3, 4), (), (1, 0, 1),
                                   (1, 1, 1, 1, 1, 1)], ids=repr)
def test_squeeze(shape, rng):
    for layout in ("C", "negative", "transposed"):
        a, g = device_layout(rng, shape, np.int16, layout)
        axes = [None] + list(range(-len(shape) - 1, len(shape) + 1)) + [
            tuple(i for i, n in enumerate(shape) if n == 1), (0, 0), (0, -len(shape) or 0)]
        for axis in axes:
            ar = numpy_outcome(lambda: a.squeeze(axis))
            if isinstance(ar, Raised):
                ar.check(lambda: g.squeeze(axis))
                ar.check(lambda: g.squeeze(axis=axis))
                continue
            r = g.squeeze() if axis is None else g.squeeze(axis=axis)
            check_result(r, ar, g, a, rng)


def test_squeeze_bad_axis():
    g = pygpu.zeros((2, 1, 3))
    for axis in (0, 2, (0, 1), -1):
        with pytest.raises(ValueError):
            g.squeeze(axis)
    for axis in (3, -4, (1, 5)):
        with pytest.raises((ValueError, IndexError)):  # NumPy: AxisError, both
            g.squeeze(axis)
    with pytest.raises(TypeError):
        g.squeeze(1.0)


@pytest.mark.parametrize("shape", [(), (5,), (3, 4), (2, 3, 4), (2, 1, 0, 3), (2, 3, 1, 2, 2)],
                         ids=repr)
def test_transpose(shape, rng):
    a, g = device_layout(rng, shape, np.complex64, "strided")
    check_result(g.transpose(), a.transpose(), g, a, rng)
    check_result(g.T, a.T, g, a, rng)
    for perm in itertools.islice(itertools.permutations(range(len(shape))), 30):
        ar = a.transpose(perm)
        check_result(g.transpose(perm), ar, g, a, rng)
        check_result(g.transpose(*perm), ar, g, a, rng)
        check_result(g.transpose([p - len(shape) for p in perm]), ar, g, a, rng)
        assert_same_layout(g.transpose(perm), ar)


@pytest.mark.parametrize("axes", [(0, 0), (0,), (0, 1, 2), (0, 2), (-3, 1), (1, 1)], ids=repr)
def test_transpose_bad_axes(axes):
    a = np.zeros((2, 3))
    g = pygpu.to_gpu(a)
    want = numpy_outcome(lambda: a.transpose(axes))
    assert isinstance(want, Raised)
    want.check(lambda: g.transpose(axes))
    want.check(lambda: g.transpose(*axes))


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4), (2, 0, 3), (1, 2, 1, 3)], ids=repr)
def test_swapaxes(shape, rng):
    a, g = device_layout(rng, shape, np.uint16, "negative")
    n = len(shape)
    for i in range(-n - 1, n + 1):
        for j in range(-n - 1, n + 1):
            ar = numpy_outcome(lambda: a.swapaxes(i, j))
            if isinstance(ar, Raised):
                ar.check(lambda: g.swapaxes(i, j))
                continue
            check_result(g.swapaxes(i, j), ar, g, a, rng)


@pytest.mark.parametrize("shape", [(), (0,), (8,), (3, 8), (2, 3, 4), (5, 6), (2, 2, 16),
                                   (4, 0), (7,)], ids=repr)
def test_view_dtype(shape, rng):
    for layout in ("C", "F", "strided"):
        for src in DTYPES:
            a, g = device_layout(rng, shape, src, layout)
            for dst in [None] + DTYPES:
                ar = numpy_outcome(lambda: a.view(dst) if dst is not None else a.view())
                if isinstance(ar, Raised):
                    ar.check(lambda: g.view(dst))
                    continue
                r = g.view(dst) if dst is not None else g.view()
                assert r.base is (g if g.base is None else g.base)  # NumPy: the owner
                check_result(r, ar, g, a, rng)  # compares bits: any byte may be a bool


def test_view_dtype_not_dividing_last_axis():
    a = np.zeros((2, 3), np.int8)
    g = pygpu.to_gpu(a)
    for dst in (np.int16, np.int32, np.float64, np.complex128):
        with pytest.raises(ValueError):
            a.view(dst)  # NumPy agrees
        with pytest.raises(ValueError):
            g.view(dst)
    s = pygpu.to_gpu(np.zeros((4, 6), np.float32))[:, ::2]  # last axis not contiguous
    with pytest.raises(ValueError):
        s.view(np.float64)
    with pytest.raises(ValueError):
        pygpu.to_gpu(np.zeros((), np.int32)).view(np.int64)
    with pytest.raises(TypeError):
        g.view(object)
    with pytest.raises(TypeError):
        g.view("U1")


# ---- concatenate and stack --------------------------------------------------------------

@given(data=st.data(), shape=shapes(min_dims=1, max_dims=4, max_side=4), dtype=dtypes,
       n=st.integers(1, 4), seed=seeds)
@PROPERTY
def test_concatenate_matches_numpy(data, shape, dtype, n, seed):
    rng = np.random.default_rng(seed)
    ndim = len(shape)
    axis = data.draw(st.integers(-ndim - 1, ndim), label="axis")
    hosts, gpus = [], []
    for i in range(n):
        s = list(shape)
        if -ndim <= axis < ndim:
            s[axis] = data.draw(st.integers(0, 4), label="length %d" % i)
        layout = data.draw(st.sampled_from(LAYOUTS), label="layout %d" % i)
        a, g = device_layout(rng, s, dtype, layout)
        hosts.append(a)
        gpus.append(g)
    want = numpy_outcome(lambda: np.concatenate(hosts, axis=axis))
    if isinstance(want, Raised):
        want.check(lambda: pygpu.concatenate(gpus, axis=axis))
        return
    got = pygpu.concatenate(gpus, axis=axis)
    assert_matches(got, want)
    assert got.flags.c_contiguous and got.base is None
    if axis == 0:
        assert_matches(pygpu.concatenate(tuple(gpus)), want)
    for h, g in zip(hosts, gpus):
        assert_matches(g, h)  # inputs untouched


@given(data=st.data(), shape=shapes(max_dims=4, max_side=4), dtype=dtypes,
       n=st.integers(1, 4), seed=seeds)
@PROPERTY
def test_stack_matches_numpy(data, shape, dtype, n, seed):
    rng = np.random.default_rng(seed)
    axis = data.draw(st.integers(-len(shape) - 2, len(shape) + 1), label="axis")
    pairs = [device_layout(rng, shape, dtype, data.draw(st.sampled_from(LAYOUTS),
                                                        label="layout"))
             for _ in range(n)]
    hosts, gpus = [p[0] for p in pairs], [p[1] for p in pairs]
    want = numpy_outcome(lambda: np.stack(hosts, axis=axis))
    if isinstance(want, Raised):
        want.check(lambda: pygpu.stack(gpus, axis=axis))
        return
    got = pygpu.stack(gpus, axis=axis)
    assert_matches(got, want)
    if axis == 0:
        assert_matches(pygpu.stack(gpus), want)


def test_concatenate_and_stack_errors():
    a, b = pygpu.zeros((2, 3)), pygpu.zeros((2, 4))
    with pytest.raises(ValueError):
        pygpu.concatenate([a, b], axis=0)
    with pytest.raises(ValueError):
        pygpu.stack([a, b])
    with pytest.raises(ValueError):
        pygpu.concatenate([])
    with pytest.raises(ValueError):
        pygpu.stack([])
    with pytest.raises(ValueError):
        pygpu.concatenate([pygpu.zeros(()), pygpu.zeros(())])  # 0-d cannot be joined
    with pytest.raises((ValueError, IndexError)):
        pygpu.concatenate([a, a], axis=2)
    with pytest.raises((ValueError, IndexError)):
        pygpu.stack([a, a], axis=3)


# ---- many strided axes; zero-size and 0-d -------------------------------------------------

STEPS_5D = (slice(None, None, 2), slice(None, None, -3), slice(1, None, 2),
            slice(None, 1, -2), slice(4, None, 3))


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_five_strided_axes_round_trip(dtype, rng):
    parent = random_array(rng, (5, 7, 6, 5, 8), dtype)
    gp = pygpu.to_gpu(parent)
    a, g = parent[STEPS_5D], gp[STEPS_5D]
    assert not g.flags.c_contiguous and not g.flags.f_contiguous
    check_result(g, a, gp, parent, rng)
    # get into a strided out, copy, set from a host array of another layout
    out = np.empty(tuple(2 * n for n in a.shape), dtype)[(slice(None, None, -2),) * 5]
    assert_same_array(g.get(ary=out), a)
    c = g.copy()
    assert c.flags.c_contiguous
    assert_matches(c, a)
    src = np.array(random_array(rng, a.shape, dtype), order="F")
    g.set(src)
    a[...] = src
    assert_same_array(gp.get(), parent)
    # device to device between two strided views
    other = random_array(rng, (8, 5, 6, 7, 5), dtype).transpose(4, 3, 2, 1, 0)[STEPS_5D]
    g[...] = pygpu.to_gpu(np.array(other.T, order="C")).T
    a[...] = other
    assert_same_array(gp.get(), parent)
    value = 1.5 if dtype.kind != "b" else True
    quietly(lambda: g.fill(value))
    quietly(lambda: a.fill(value))
    assert_same_array(gp.get(), parent)


@pytest.mark.parametrize("shape", [(), (0,), (3, 0), (0, 0, 2)], ids=repr)
def test_zero_size_and_0d_everywhere(shape, rng):
    for dtype in DTYPES:
        a = random_array(rng, shape, dtype)
        g = pygpu.to_gpu(a)
        assert_matches(g.copy(), a)
        assert_matches(g.copy(order="F"), a)
        assert_same_array(g.get(ary=np.empty(shape, dtype)), a)
        g.set(a)
        assert_matches(g, a)
        assert_matches(g.ravel(), a.ravel())
        assert_matches(g.flatten(), a.flatten())
        assert_matches(g.reshape(a.shape), a)
        assert_matches(g.T, a.T)
        assert_matches(g.squeeze(), a.squeeze())
        assert_matches(g.view(), a.view())
        assert_matches(g[...], a[...])
        if a.ndim:
            assert_matches(pygpu.concatenate([g, g]), np.concatenate([a, a]))
        assert_matches(pygpu.stack([g, g]), np.stack([a, a]))
