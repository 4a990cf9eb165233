"""Fuzzing, with a fixed budget: hostile indexing keys against NumPy as the
oracle, and DLPack capsules with random contents against a model of what
the import must accept.

test_array_indexing.py draws valid keys; here keys may be anything a
caller could write: integers of any size, slices with any bounds and steps
(0 too), several ellipses, floats, bools, strings, lists, arrays, nested
tuples.  Where NumPy gives a view, the GPUArray must give the same one;
where NumPy raises, the GPUArray raises the same kind of exception; where
NumPy does advanced indexing, the GPUArray refuses it with IndexError.

The DLPack fuzz writes random dimension counts, shapes, strides, dtype
codes, bits and lanes, device types, byte offsets, versions and flags into
a capsule over a NumPy buffer.  The model says whether the import must
refuse it (BufferError) or accept it; an accepted tensor whose elements lie
inside the buffer must read as NumPy reads it, and every capsule's deleter
runs exactly once.

The budgets are the settings below (derandomized, no example database):
CI runs the same examples every time.  PYGPU_TEST_EXAMPLES=N runs N fresh
random examples per test instead.
"""
import os
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import pygpu
from dlpack_helpers import FakeProducer
from gpuarray_helpers import expected_exceptions, quietly

HOST = pygpu.backend == "host"
_HUNT = int(os.environ.get("PYGPU_TEST_EXAMPLES", "0"))


def budget(n):
    return settings(max_examples=_HUNT or n, deadline=None, database=None, derandomize=not _HUNT,
                    suppress_health_check=list(HealthCheck))


KEY_EXAMPLES = 400
SETITEM_EXAMPLES = 200
DLPACK_EXAMPLES = 500
PTRDIFF_MAX = 2 ** 63 - 1

# ---- indexing keys --------------------------------------------------------------------------

HUGE = [2 ** 63, -(2 ** 63) - 1, 2 ** 62, -(2 ** 62), 10 ** 30, -(10 ** 30)]
ints = st.one_of(st.integers(-6, 6), st.sampled_from(HUGE),
                 st.integers(-6, 6).map(np.int64), st.integers(0, 6).map(np.uint8))
bounds = st.one_of(st.none(), ints)
basic_entry = st.one_of(ints, st.builds(slice, bounds, bounds, st.one_of(st.none(), ints)),
                        st.just(None), st.just(Ellipsis))
advanced_entry = st.one_of(st.lists(st.integers(-4, 4), max_size=3),
                           st.lists(st.integers(-4, 4), min_size=1, max_size=3).map(np.array),
                           st.lists(st.booleans(), min_size=1, max_size=4).map(np.array),
                           st.booleans(), st.just(np.True_))
junk_entry = st.one_of(st.floats(allow_nan=True), st.text(max_size=2), st.just(object()), st.just(1j),
                       st.just({}), st.just(np.float64(1.0)))


@st.composite
def keys(draw):
    """(key, kind): kind 'basic' when every entry is basic, 'advanced' when
    one is an array-like index, 'junk' when one is no index at all."""
    entries, kind = [], "basic"
    for _ in range(draw(st.integers(0, 5))):
        which = draw(st.sampled_from(["basic"] * 12 + ["advanced", "junk", "nested"]))
        if which == "basic":
            entries.append(draw(basic_entry))
        elif which == "advanced":
            entries.append(draw(advanced_entry))
            kind = "junk" if kind == "junk" else "advanced"
        elif which == "junk":
            entries.append(draw(junk_entry))
            kind = "junk"
        else:                                       # a tuple inside the tuple: a sequence index
            entries.append(tuple(draw(st.lists(st.integers(-3, 3), min_size=1, max_size=2))))
            kind = "junk" if kind == "junk" else "advanced"
    if len(entries) == 1 and not isinstance(entries[0], tuple) and draw(st.booleans()):
        return entries[0], kind                     # bare (a bare tuple would be the key itself)
    return tuple(entries), kind


def view_key(key):
    """The key NumPy must use to return a view (0-d for all-int keys)."""
    entries = key if isinstance(key, tuple) else (key,)
    if any(e is Ellipsis for e in entries):
        return key
    return entries + (Ellipsis,)


def allowed(error, key, kind):
    """The exceptions PyGPU may raise where NumPy raised `error`: the same
    kind; IndexError for keys NumPy would index by array; and for integers
    beyond int64, IndexError or OverflowError (NumPy itself raises either,
    by sign)."""
    ok = expected_exceptions(error) + ((IndexError,) if kind != "basic" else ())
    entries = key if isinstance(key, tuple) else (key,)
    for e in entries:
        bounds = [e.start, e.stop, e.step] if isinstance(e, slice) else [e]
        if any(isinstance(b, (int, np.integer)) and not isinstance(b, (bool, np.bool_))
               and not -2 ** 63 <= int(b) < 2 ** 63 for b in bounds):
            ok += (IndexError, OverflowError)
    return ok


def numpy_index(a, key):
    try:
        return quietly(lambda: a[view_key(key)]), None
    except Exception as e:  # noqa: BLE001 - the oracle's verdict
        return None, e


@given(shape=st.lists(st.integers(0, 4), max_size=4).map(tuple), key_kind=keys())
@budget(KEY_EXAMPLES)
def test_fuzz_indexing_keys(shape, key_kind):
    key, kind = key_kind
    a = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    g = pygpu.to_gpu(a)
    want, error = numpy_index(a, key)
    event(f"{kind} key, NumPy " + ("raised" if error else "indexed"))
    try:
        got = g[key]
    except Exception as e:  # noqa: BLE001 - compared below
        if error is not None:
            assert isinstance(e, allowed(error, key, kind)), f"NumPy raised {error!r}; PyGPU raised {e!r}"
        else:
            assert kind != "basic" and isinstance(e, IndexError), f"NumPy gave a view; PyGPU raised {e!r}"
        return
    assert error is None, f"NumPy raised {error!r}; PyGPU gave shape {got.shape}"
    assert kind == "basic" or want.size == 0 and not isinstance(got, np.ndarray), \
        f"{kind} key {key!r} gave a GPUArray"
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.get(), want)


@given(shape=st.lists(st.integers(0, 4), min_size=1, max_size=3).map(tuple), key_kind=keys(),
       value=st.one_of(st.integers(-5, 5), st.floats(-1e3, 1e3), st.integers(-3, 3).map(lambda v: np.full(2, v))))
@budget(SETITEM_EXAMPLES)
def test_fuzz_setitem_keys(shape, key_kind, value):
    key, kind = key_kind
    a = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    g = pygpu.to_gpu(a)
    try:
        quietly(lambda: a.__setitem__(view_key(key), value))
        error = None
    except Exception as e:  # noqa: BLE001 - the oracle's verdict
        error = e
    try:
        quietly(lambda: g.__setitem__(key, value))
    except Exception as e:  # noqa: BLE001 - compared below
        if error is None:
            assert kind != "basic" and isinstance(e, IndexError), f"NumPy assigned; PyGPU raised {e!r}"
        else:
            assert isinstance(e, allowed(error, key, kind)), f"NumPy raised {error!r}; PyGPU raised {e!r}"
        np.testing.assert_array_equal(g.get(), np.arange(a.size, dtype=np.float64).reshape(shape),
                                      err_msg="a refused assignment wrote something")
        return
    assert error is None, f"NumPy raised {error!r}; PyGPU assigned"
    np.testing.assert_array_equal(g.get(), a)


# ---- DLPack capsules with random contents -------------------------------------------------------

# (code, bits) -> numpy dtype for what GPUArray holds
DTYPES = {(0, 8): "i1", (0, 16): "i2", (0, 32): "i4", (0, 64): "i8", (1, 8): "u1", (1, 16): "u2", (1, 32): "u4",
          (1, 64): "u8", (2, 16): "f2", (2, 32): "f4", (2, 64): "f8", (5, 64): "c8", (5, 128): "c16",
          (6, 8): "?"}
REACHABLE = {1, 3, 11}                              # kDLCPU, kDLCUDAHost, kDLROCMHost: the host backend's
BUFFER_BYTES = 4096


def model(t):
    """None if the import must accept tensor description `t`, else why not."""
    if t["versioned"] and t["version"][0] != 1:
        return "version"
    if t["device"] not in REACHABLE:
        return "device"
    nd = t["ndim"]
    if nd < 0 or nd > 64:                   # (NumPy 2's NPY_MAXDIMS, as PyGPU's)
        return "ndim"
    if nd > 0 and t["null_shape"]:
        return "shape pointer"
    if t["lanes"] != 1 or (t["code"], t["bits"]) not in DTYPES:
        return "dtype"
    itemsize = t["bits"] // 8
    shape, strides = t["shape"], t["strides"]
    for i in range(nd):
        if shape[i] < 0:
            return "negative dimension"
        if strides is not None and abs(strides[i]) > PTRDIFF_MAX // itemsize:
            return "stride range"
    size, nonzero = 1, 1
    for n in shape:
        size *= n
        nonzero *= max(n, 1)
    if nonzero > PTRDIFF_MAX or (strides is None and nonzero * itemsize > PTRDIFF_MAX):
        return "size"
    if size == 0:
        return None if t["byte_offset"] <= PTRDIFF_MAX else "byte_offset"
    span = itemsize + sum(abs(s) * itemsize * (n - 1) for n, s in zip(shape, strides or [0] * nd) if n > 1)
    if span > PTRDIFF_MAX:
        return "span"
    if t["null_data"]:
        return "null data"
    if t["byte_offset"] > PTRDIFF_MAX:
        return "byte_offset"
    return None


def in_buffer(t, offset):
    """The byte strides, if every element of accepted tensor `t` lies
    inside the buffer (element 0 at `offset`), else None."""
    itemsize = t["bits"] // 8
    shape = t["shape"]
    if t["strides"] is None:
        strides, step = [], itemsize
        for n in reversed(shape):
            strides.insert(0, step)
            step *= max(n, 1)
    else:
        strides = [s * itemsize for s in t["strides"]]
    if 0 in shape:
        return strides
    lo = offset + sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
    hi = offset + itemsize + sum((n - 1) * s for n, s in zip(shape, strides) if s > 0)
    return strides if 0 <= lo and hi <= BUFFER_BYTES else None


dim = st.one_of(st.integers(0, 5), st.integers(0, 5), st.sampled_from([-1, -7, 2 ** 31, 2 ** 40, 2 ** 62]))
stride = st.one_of(st.integers(-6, 6), st.integers(-6, 6),
                   st.sampled_from([2 ** 40, -(2 ** 40), 2 ** 61, 2 ** 62, -(2 ** 63), 2 ** 63 - 1]))

# Fields a hostile producer may get wrong, and the values it may write.
CORRUPTIONS = {
    "version": st.sampled_from([(0, 8), (2, 0), (255, 255)]),
    "device": st.sampled_from([2, 4, 7, 10, 13, 99, -1, 0]),
    "ndim": st.sampled_from([-1, 65, 1000, -2 ** 31]),
    "null_shape": st.just(True),
    "dtype": st.tuples(st.sampled_from([0, 1, 2, 5, 6, 3, 4, 7, 200]),
                       st.sampled_from([8, 16, 32, 64, 128, 0, 1, 24, 255])),
    "lanes": st.sampled_from([0, 2, 4, 65535]),
    "byte_offset": st.sampled_from([2 ** 63, 2 ** 64 - 1]),
    "null_data": st.just(True),
}


@st.composite
def tensors(draw):
    """A tensor description: sizes and strides from the whole range (huge
    and negative too), and none, one or two fields a producer got wrong."""
    nd = draw(st.integers(0, 4))
    code, bits = draw(st.sampled_from(sorted(DTYPES)))
    t = {
        "versioned": draw(st.booleans()), "version": draw(st.sampled_from([(1, 0), (1, 1), (1, 3)])),
        "device": draw(st.sampled_from([1, 1, 1, 3, 11])), "ndim": nd,
        "shape": draw(st.lists(dim, min_size=nd, max_size=nd)), "null_shape": False,
        "strides": draw(st.one_of(st.none(), st.lists(stride, min_size=nd, max_size=nd))),
        "code": code, "bits": bits, "lanes": 1, "byte_offset": draw(st.integers(0, 64)), "null_data": False,
        "flags": draw(st.sampled_from([0, 1, 2, 3, 4, 2 ** 63])), "at": draw(st.integers(0, 1024)),
    }
    for field in draw(st.lists(st.sampled_from(sorted(CORRUPTIONS)), max_size=2)):
        value = draw(CORRUPTIONS[field])
        if field == "dtype":
            t["code"], t["bits"] = value
        else:
            t[field] = value
    return t


BUFFER = np.arange(BUFFER_BYTES, dtype=np.uint8) * 37 % 251


@pytest.mark.skipif(not HOST, reason="imports host memory in place: the host backend")
@given(t=tensors())
@budget(DLPACK_EXAMPLES)
def test_fuzz_dlpack_import(t):
    itemsize = max(t["bits"] // 8, 1)
    base = BUFFER.ctypes.data + t["at"] // itemsize * itemsize     # (aligned)
    p = FakeProducer(BUFFER, versioned=t["versioned"], version=t["version"], device=(t["device"], 0),
                     code=t["code"], bits=t["bits"], lanes=t["lanes"], ndim=t["ndim"], shape=t["shape"],
                     strides=t["strides"], null_shape=t["null_shape"], data=0 if t["null_data"] else base,
                     byte_offset=t["byte_offset"], flags=t["flags"])
    why = model(t)
    event(f"refused: {why}" if why else "accepted")
    if why is not None:
        with pytest.raises(BufferError):
            pygpu.from_dlpack(p)
        assert p.deleted == 1, f"refused ({why}): deleted {p.deleted} times"
        return
    g = pygpu.from_dlpack(p)
    assert g.shape == tuple(t["shape"])
    assert g.dtype == np.dtype(DTYPES[t["code"], t["bits"]])
    assert g.flags.writeable == (not (t["versioned"] and t["flags"] & 1))
    offset = base - BUFFER.ctypes.data + t["byte_offset"]
    strides = in_buffer(t, offset)
    event("read and compared" if strides is not None else "outside the buffer: not read")
    if strides is not None:                         # never read outside the buffer
        assert g.strides == tuple(strides)
        if 0 < g.size <= 1 << 20:                   # (a broadcast tensor may be huge)
            want = np.ndarray(g.shape, g.dtype, buffer=BUFFER, offset=offset, strides=strides)
            np.testing.assert_array_equal(g.get(), want)
    assert p.deleted == 0
    del g                                           # (no cycle: the deleter runs at once)
    assert p.deleted == 1


def test_fuzz_budgets():
    """The budgets the closing note quotes."""
    print(f"\nfuzz budgets: {KEY_EXAMPLES} keys, {SETITEM_EXAMPLES} assignments, {DLPACK_EXAMPLES} DLPack "
          f"capsules" + (f" (hunting: {_HUNT} each)" if _HUNT else ""), file=sys.stderr)
