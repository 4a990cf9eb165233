"""NumPy's scalar protocol on GPUArray: float(), int(), complex(), bool(),
operator.index(), item(*args) and tolist(), with NumPy as the oracle: for
every dtype, shapes of size 1 and of other sizes, views, and item()'s
argument forms, the GPUArray gives what the NumPy array gives (the same
value of the same type, or the same exception with the same message)."""
import math
import operator
import sys
import warnings

import numpy as np
import pytest

import pygpu

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128"]
SHAPES = [(), (1,), (1, 1), (1, 1, 1), (3,), (2, 3), (0,), (2, 0), (4, 1, 2)]
CONVERSIONS = {
    "float": float, "int": int, "complex": complex, "bool": bool, "index": operator.index,
    "item()": lambda x: x.item(), "tolist": lambda x: x.tolist(),
}


def values(dtype, shape, rng):
    """Host data of `dtype`: random values, and NaN / infinities / -0.0
    among floating ones, where int() of them is an error."""
    n = math.prod(shape)
    if dtype == "bool":
        return rng.integers(0, 2, n).astype(bool).reshape(shape)
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, n, dtype=dt, endpoint=True).reshape(shape)
    a = (rng.standard_normal(n) * 100).astype(dt)
    if dt.kind == "c":
        a += 1j * (rng.standard_normal(n) * 100).astype(dt)
    if n and rng.random() < 0.5:                # the first element special, half the time
        a[0] = rng.choice(np.array([np.nan, np.inf, -np.inf, -0.0])).astype(dt)
    return a.reshape(shape)


def outcome(fn, x):
    """('ok', value, type) or ('raises', exception type, message), and the
    warnings' categories."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            r = fn(x)
            got = ("ok", r, type(r))
        except Exception as e:  # noqa: BLE001 - the exception is what is compared
            got = ("raises", type(e), str(e))
    return got, sorted({c.category.__name__ for c in w})


def same(a, b):
    """Outcomes equal, NaN equal to NaN (also inside lists and complex)."""
    if a[0] != b[0] or a[2] != b[2]:
        return False
    if a[0] == "raises":
        return a[1] == b[1]
    return np.array_equal(np.asarray(a[1], dtype=object), np.asarray(b[1], dtype=object)) or \
        repr(a[1]) == repr(b[1])


def check(fn, host, dev):
    want, want_w = outcome(fn, host)
    got, got_w = outcome(fn, dev)
    assert same(want, got), f"NumPy: {want}, GPUArray: {got}"
    assert want_w == got_w, f"warnings: NumPy {want_w}, GPUArray {got_w}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_conversions_match_numpy(dtype, shape, rng):
    host = values(dtype, shape, rng)
    dev = pygpu.to_gpu(host)
    for name, fn in CONVERSIONS.items():
        check(fn, host, dev)


@pytest.mark.parametrize("dtype", ["int64", "float32", "complex128", "bool", "uint8"])
def test_views_and_elements(dtype, rng):
    """Elements of strided and reversed views, g[i] (0-d views) included."""
    host = values(dtype, (4, 6), rng)
    dev = pygpu.to_gpu(host)
    for key in [(1, 2), (-1, -1), (slice(None, None, 2), slice(None, None, -3)), (slice(1, 2), 3),
                (slice(None), slice(4, 5)), (0,)]:
        h = np.asarray(host[key])               # g[1, 2] is a 0-d array, as NumPy's a[1, 2, ...]
        for fn in CONVERSIONS.values():
            check(fn, h, dev[key])


ITEM_ARGS = [(), (0,), (5,), (-1,), (-24,), (23,), (24,), (-25,), ((1, 2, 3),), ((0, 0),), (1, 2, 3), (1, -1, -4),
             (2, 0, 0), (1, 2), (1, 2, 3, 4), (1.0,), ("1",), ((1, 2, 3.0),), (np.int8(3),), (True,), (None,),
             ([1, 2, 3],)]


@pytest.mark.parametrize("shape", [(2, 3, 4), (24,), (1,), (), (0,), (1, 1, 1)], ids=str)
@pytest.mark.parametrize("args", ITEM_ARGS, ids=repr)
def test_item_arguments_match_numpy(shape, args, rng):
    host = values("int32", shape, rng)
    dev = pygpu.to_gpu(host)
    check(lambda x: x.item(*args), host, dev)
    if len(shape) == 3 and shape[0] > 1:        # and on a view that is not contiguous
        check(lambda x: x.item(*args), host[:, ::-1, 1:], dev[:, ::-1, 1:])


def test_only_size_one_is_read():
    """Arrays of other sizes raise before anything is read: a freed
    allocation under them is not touched (it would raise ValueError)."""
    mem = pygpu.mem_alloc(64)
    g = pygpu.GPUArray((8,), np.float64, gpudata=mem)
    mem.free()
    with pytest.raises(TypeError, match="0-dimensional"):
        float(g)
    with pytest.raises(ValueError, match="freed"):
        g[0].item()


def test_gpuarray_is_not_taken_as_an_integer():
    """A 0-d integer GPUArray has __index__, as NumPy's does, but where PyGPU
    wants one integer, a GPUArray stays an array."""
    i = pygpu.to_gpu(np.array(2))
    assert operator.index(i) == 2 and [10, 20, 30][i] == 30
    g = pygpu.to_gpu(np.arange(6))
    with pytest.raises(IndexError, match="integer-array"):
        g[i]
    with pytest.raises(TypeError, match="gpudata must be"):
        pygpu.GPUArray((1,), np.int64, gpudata=i)
    c = pygpu.GPUArray(i)                        # host data: a copy of it, not an array of shape 2
    assert c.shape == () and c.item() == 2


def test_no_references_leak():
    g = pygpu.to_gpu(np.arange(6.0))
    v = g[2]
    before = sys.getrefcount(g), sys.getrefcount(v)
    for _ in range(200):
        float(v), int(v), complex(v), bool(v), v.item(), g.item(3), g.tolist()
        with pytest.raises(TypeError):
            float(g)
        with pytest.raises(IndexError):
            g.item(10)
    assert (sys.getrefcount(g), sys.getrefcount(v)) == before
