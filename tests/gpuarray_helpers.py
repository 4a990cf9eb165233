"""Helpers shared by the GPUArray tests (test_array_*.py): NumPy is the oracle.

Nothing here touches ``pygpu.GPUArray`` at import time, so the test modules
collect (and fail one by one, saying why) even before the type exists.
"""
import os
import warnings

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import pygpu

# Every dtype the spec names, in NumPy's canonical form.
DTYPES = [np.dtype(t) for t in (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128")]
DTYPE_IDS = [str(d) for d in DTYPES]

# Bounded, reproducible property tests: no example database, the same
# examples on every run, no time limits.  PYGPU_TEST_EXAMPLES=N runs N fresh
# random examples per property test instead (a longer hunt for bugs).
_HUNT = int(os.environ.get("PYGPU_TEST_EXAMPLES", "0"))
PROPERTY = settings(
    max_examples=_HUNT or 200, deadline=None, database=None, derandomize=not _HUNT,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.filter_too_much],
)


def GPUArray():
    """The type under test (looked up late: see the module docstring)."""
    return pygpu.GPUArray


# ---- host data -------------------------------------------------------------------

def random_array(rng, shape, dtype):
    """A C-ordered array of `shape` and `dtype` filled with varied values
    (full integer ranges, floats with fractions and signs)."""
    dt = np.dtype(dtype)
    shape = tuple(shape)
    if dt.kind == "b":
        values = rng.integers(0, 2, size=shape)
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        values = rng.integers(info.min, info.max, size=shape, dtype=dt, endpoint=True)
    elif dt.kind == "f":
        values = rng.standard_normal(shape) * 100
    else:
        values = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)) * 100
    out = np.empty(shape, dt)  # NumPy's own strides for a fresh array
    out[...] = values
    return out


def small_values(rng, shape, dtype):
    """Values 0..100 of `dtype`: exact in every dtype, so casts between dtypes
    are well defined."""
    out = np.empty(tuple(shape), dtype)
    out[...] = rng.integers(0, 101, size=tuple(shape))
    return out


LAYOUTS = ("C", "F", "strided", "negative", "transposed")


def host_layout(rng, shape, dtype, layout):
    """A NumPy array of `shape` whose memory has `layout`:
    C, F, strided (steps > 1 on every axis, inside a bigger array),
    negative (negative steps on every axis) or transposed (a C array's .T)."""
    shape = tuple(shape)
    if layout == "C":
        return random_array(rng, shape, dtype)
    if layout == "F":
        return np.array(random_array(rng, shape, dtype), order="F")
    if layout == "transposed":
        return random_array(rng, shape[::-1], dtype).T
    steps = [2 + i % 2 for i in range(len(shape))]
    if layout == "negative":
        steps = [-s for s in steps]
    big = random_array(rng, [max(n, 1) * abs(s) + 1 for n, s in zip(shape, steps)], dtype)
    key = tuple(slice(None, None, s) for s in steps) + (Ellipsis,)
    out = big[key][tuple(slice(0, n) for n in shape) + (Ellipsis,)]
    assert out.shape == shape
    return out


def device_layout(rng, shape, dtype, layout):
    """(a, g): a NumPy array with `layout` (see host_layout) and a GPUArray
    with the same values and the same layout, made by the same indexing on
    an uploaded parent."""
    shape = tuple(shape)
    if layout == "C":
        a = random_array(rng, shape, dtype)
        return a, pygpu.to_gpu(a)
    if layout == "F":
        a = np.array(random_array(rng, shape, dtype), order="F")
        g = pygpu.to_gpu(np.array(a.T, order="C")).T
        return a, g
    if layout == "transposed":
        parent = random_array(rng, shape[::-1], dtype)
        return parent.T, pygpu.to_gpu(parent).T
    sign = -1 if layout == "negative" else 1
    steps = [sign * (2 + i % 2) for i in range(len(shape))]
    parent = random_array(rng, [max(n, 1) * abs(s) + 1 for n, s in zip(shape, steps)], dtype)
    key = tuple(slice(None, None, s) for s in steps) + (Ellipsis,)
    trim = tuple(slice(0, n) for n in shape) + (Ellipsis,)
    return parent[key][trim], pygpu.to_gpu(parent)[key][trim]


# ---- comparisons -----------------------------------------------------------------

def assert_same_array(got, want):
    """`got` (a NumPy array) holds exactly `want`: shape, dtype and bits."""
    want = np.asarray(want)
    assert isinstance(got, np.ndarray), type(got)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    if got.tobytes() != want.tobytes():
        np.testing.assert_array_equal(got, want)
        raise AssertionError("equal values, different bits (e.g. -0.0 vs 0.0):\n%r\n%r"
                             % (got, want))


def assert_matches(g, a):
    """GPUArray `g` has NumPy array `a`'s shape, dtype and values."""
    assert isinstance(g, GPUArray()), type(g)
    assert g.shape == a.shape, (g.shape, a.shape)
    assert g.dtype == a.dtype, (g.dtype, a.dtype)
    assert g.ndim == a.ndim and g.size == a.size and g.nbytes == a.nbytes
    out = g.get()
    assert out.flags.c_contiguous, "get() returns a C-ordered array"
    assert_same_array(out, a)


def assert_same_layout(g, a):
    """`g` has NumPy view `a`'s strides and contiguity flags.  Strides of
    zero-size arrays locate nothing and differ between NumPy versions: only
    their flags are compared."""
    if a.size:
        assert g.strides == a.strides, (g.strides, a.strides)
    assert g.flags.c_contiguous == a.flags.c_contiguous, (g.strides, a.strides, g.shape)
    assert g.flags.f_contiguous == a.flags.f_contiguous, (g.strides, a.strides, g.shape)


def strides_without_unit_axes(x):
    """Strides of the axes longer than 1: the ones that locate elements."""
    return tuple(s for n, s in zip(x.shape, x.strides) if n > 1)


def address(a):
    """Address of NumPy array `a`'s element [0, ..., 0]."""
    return a.__array_interface__["data"][0]


def expected_exceptions(exc):
    """The builtin exception classes a GPUArray may raise where NumPy raised
    `exc`: NumPy's own class if builtin, else its builtin bases (AxisError
    gives ValueError and IndexError)."""
    skip = (BaseException, Exception, ArithmeticError, LookupError)
    found = tuple(c for c in type(exc).__mro__
                  if c.__module__ == "builtins" and issubclass(c, Exception) and c not in skip)
    return found or (type(exc),)


class Raised:
    """What numpy_outcome returns when NumPy raised."""
    def __init__(self, exc):
        self.exc = exc
        self.types = expected_exceptions(exc)

    def check(self, fn):
        """`fn()` must raise like NumPy did."""
        try:
            fn()
        except self.types:
            return
        except Exception as e:  # noqa: BLE001 - report the mismatch
            raise AssertionError("NumPy raised %s(%s); PyGPU raised %s(%s)"
                                 % (type(self.exc).__name__, self.exc, type(e).__name__, e))
        raise AssertionError("NumPy raised %s(%s); PyGPU did not raise"
                             % (type(self.exc).__name__, self.exc))


def numpy_outcome(fn):
    """fn()'s result, or a Raised when it raises; warnings are silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn()
        except Exception as e:  # noqa: BLE001
            return Raised(e)


def quietly(fn):
    """fn() with warnings silenced (casts NumPy warns about but performs)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn()


# ---- hypothesis strategies ---------------------------------------------------------

def shapes(min_dims=0, max_dims=6, min_side=0, max_side=5):
    return st.lists(st.integers(min_side, max_side), min_size=min_dims,
                    max_size=max_dims).map(tuple)


dtypes = st.sampled_from(DTYPES)
seeds = st.integers(0, 2 ** 32 - 1)

HUGE = [-(10 ** 30), -(2 ** 62), 2 ** 62, 10 ** 30]


def slice_bound(n):
    near = st.integers(-n - 3, n + 3)
    return st.one_of(st.none(), near, near, st.sampled_from(HUGE))


def slices(n):
    small = st.integers(-4, 4).filter(bool)
    step = st.one_of(st.none(), small, small, st.sampled_from(HUGE))
    return st.builds(slice, slice_bound(n), slice_bound(n), step)


def integer_index(n):
    """An in-range index for an axis of length n (n > 0), as a Python int or
    a NumPy integer."""
    kind = st.sampled_from([int, np.intp, np.int8, np.uint8, np.int64])
    return st.tuples(st.integers(-n, n - 1), kind).map(
        lambda t: int(t[0]) if t[1] is np.uint8 and t[0] < 0 else t[1](t[0]))


def axis_index(n):
    return st.one_of(integer_index(n), slices(n)) if n > 0 else slices(n)


@st.composite
def basic_keys(draw, shape):
    """A valid basic index for an array of `shape`: ints, slices, at most one
    Ellipsis, a few None, bare or in a tuple."""
    ndim = len(shape)
    k = draw(st.integers(0, ndim))
    ellipsis = draw(st.booleans())
    if ellipsis:
        p = draw(st.integers(0, k))
        axes = list(range(p)) + list(range(ndim - (k - p), ndim))
    else:
        axes = list(range(k))
    entries = [draw(axis_index(shape[ax])) for ax in axes]
    if ellipsis:
        entries.insert(p, Ellipsis)
    for _ in range(draw(st.integers(0, 2))):
        entries.insert(draw(st.integers(0, len(entries))), None)
    if len(entries) == 1 and draw(st.booleans()):
        return entries[0]
    return tuple(entries)


def as_view_key(key):
    """`key` with a trailing Ellipsis when it has none: the same selection,
    but NumPy then returns a 0-d view instead of a scalar for all-int keys."""
    entries = key if isinstance(key, tuple) else (key,)
    if any(e is Ellipsis for e in entries):
        return entries
    return entries + (Ellipsis,)


@st.composite
def broadcastable_shapes(draw, shape):
    """A shape that broadcasts to `shape`: some leading axes dropped, some
    others set to 1."""
    drop = draw(st.integers(0, len(shape)))
    out = []
    for n in shape[drop:]:
        out.append(1 if draw(st.booleans()) and draw(st.booleans()) else n)
    return tuple(out)

