"""Copies, casts and fills of device data on the device (PyGPU's own
kernels, src/kernels/): copy() of any view in every order, assignment
between device arrays and views (broadcast, cast, overlapping), fill() of
strided views, and astype() for every pair of dtypes.  NumPy is the oracle:
random shapes, steps (negative ones too) and axis orders, the same values
and the same layouts as NumPy gives; NaN, infinities and out-of-range values
converted as NumPy converts them on this machine.

On the host backend the same argument blocks run on the CPU with the
kernels' own index arithmetic and conversions (src/backend/kernels_host.c),
so these tests check both there; on a GPU they check the kernels."""
import itertools
import os
import warnings

import numpy as np
import pytest

import pygpu
from gpuarray_helpers import (
    DTYPE_IDS, DTYPES, assert_same_array, assert_same_layout, quietly, random_array, small_values,
)

INTS = [d for d in DTYPES if d.kind in "iu"]


# ---- random views ----------------------------------------------------------------------

def random_view(rng, dtype, max_dims=4, max_side=6, values=random_array):
    """(a, g): a NumPy view and the same view of a GPUArray with the same
    values: a random parent, a random slice of each axis (steps up to 3,
    either sign), axes permuted, some axes of length 1 or 0."""
    nd = int(rng.integers(0, max_dims + 1))
    shape = [int(rng.integers(0, max_side + 1)) if rng.random() < 0.1 else int(rng.integers(1, max_side + 1))
             for _ in range(nd)]
    parent_shape = [n * 3 + 2 for n in shape]
    parent = values(rng, parent_shape, dtype)
    key = []
    for n, m in zip(shape, parent_shape):
        step = int(rng.choice([1, 1, 2, 3, -1, -2]))
        start = int(rng.integers(0, m - n * abs(step) + 1)) if step > 0 else m - 1 - int(rng.integers(0, 2))
        key.append(slice(start, start + n * step if start + n * step >= 0 else None, step))
    perm = rng.permutation(nd)
    key = tuple(key) + (Ellipsis,)          # (a 0-d view, not a scalar, when there are no axes)
    a = parent[key].transpose(perm)
    g = pygpu.to_gpu(parent)[key].transpose(perm)
    assert a.shape == g.shape and (a.strides == g.strides or a.size == 0)
    return a, g


def random_views(seed, count, dtypes=DTYPES, **kw):
    rng = np.random.default_rng(seed)
    for i in range(count):
        dtype = dtypes[i % len(dtypes)]
        yield (dtype,) + random_view(rng, dtype, **kw)


# ---- copy() ----------------------------------------------------------------------------

def test_copy_of_random_views_keeps_the_layout_as_numpy_k():
    for dtype, a, g in random_views(1, 280):
        c = g.copy()
        want = a.copy(order="K")
        assert_same_array(c.get(), want)
        assert_same_layout(c, want)
        assert c.base is None and c.ptr != g.ptr


@pytest.mark.parametrize("order", ["C", "F", "A", "K"])
def test_copy_in_each_order_as_numpy(order):
    for dtype, a, g in random_views(2, 60):
        c = g.copy(order=order)
        want = a.copy(order=order)
        assert_same_array(c.get(), want)
        assert_same_layout(c, want)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_the_five_copies_of_the_issue(dtype, rng):
    a = random_array(rng, (64, 48), dtype)
    g = pygpu.to_gpu(a)
    for key in [(slice(None, None, -1),), (slice(None), slice(None, None, -1)), (slice(None), slice(None, None, 2)),
                (slice(None, None, 2),)]:
        assert_same_array(g[key].copy().get(), a[key])
    t = g.T.copy(order="C")
    assert t.flags.c_contiguous
    assert_same_array(t.get(), a.T)


def test_transposes_of_every_element_size_and_shape_edge(rng):
    """Tiles of 32 x 32: shapes around the tile edge, batches of planes,
    reversed and stepped source axes."""
    for dtype in DTYPES:
        for shape in [(31, 33), (32, 32), (65, 8), (8, 65), (3, 40, 35), (33, 2, 17, 9)]:
            a = random_array(rng, shape, dtype)
            g = pygpu.to_gpu(a)
            for axes in itertools.islice(itertools.permutations(range(len(shape))), 1, 4):
                for view in (lambda x: x.transpose(axes), lambda x: x[::-1].transpose(axes)):
                    want = np.ascontiguousarray(view(a))
                    assert_same_array(view(g).copy(order="C").get(), want)


def test_copies_of_many_axes_that_do_not_merge(rng):
    """More axes than one kernel launch walks (the planner loops over the
    outer ones)."""
    a = random_array(rng, (2,) * 12, np.float32)
    g = pygpu.to_gpu(a)
    perm = rng.permutation(12)
    key = tuple(slice(None, None, -1) if i % 3 == 0 else slice(None) for i in range(12))
    assert_same_array(g[key].transpose(perm).copy(order="C").get(), np.ascontiguousarray(a[key].transpose(perm)))


def test_zero_d_and_empty_copies():
    g = pygpu.to_gpu(np.array(3.5))
    assert g.copy().get() == 3.5 and g.copy().shape == ()
    for shape in [(0,), (3, 0), (0, 4, 2)]:
        a = np.zeros(shape, np.int16)
        c = pygpu.to_gpu(a)[..., ::-1].copy()
        assert c.shape == shape and c.get().shape == shape


def test_unaligned_views_copy_and_convert(rng):
    """Views at odd byte offsets (a uint8 buffer seen as wider types): the
    kernels move them in smaller units, and casts go through an aligned
    buffer."""
    raw = rng.integers(0, 256, 4096 + 64, dtype=np.uint8)
    graw = pygpu.to_gpu(raw)
    for dtype in [np.int16, np.float32, np.float64, np.complex64, np.complex128]:
        size = np.dtype(dtype).itemsize
        for offset in [1, 2, 3, 5, 8]:
            n = (4096 // size) // 4 * 4
            a = raw[offset: offset + n * size].view(dtype).reshape(4, -1)
            g = graw[offset: offset + n * size].view(dtype).reshape(4, -1)
            for key in [(Ellipsis,), (slice(None, None, -1), slice(None, None, 2)), (slice(None), slice(None, None, -3))]:
                assert_same_array(g[key].copy().get(), a[key].copy(order="K"))
                assert_same_array(g[key].T.copy(order="C").get(), np.ascontiguousarray(a[key].T))
                got, want = quietly(lambda: g[key].astype(np.float64)), quietly(lambda: a[key].astype(np.float64))
                np.testing.assert_array_equal(got.get(), want)


def test_to_device_keeps_the_layout():
    a = np.asfortranarray(np.arange(12.0).reshape(3, 4))
    g = pygpu.to_gpu(a)
    assert g.to_device(0) is g
    assert g.copy(device=0).flags.f_contiguous


# ---- assignment between device arrays ----------------------------------------------------

def test_assignment_between_views_as_numpy(rng):
    for dtype, a, g in random_views(3, 150):
        if a.size == 0:
            continue
        b = random_array(rng, a.shape[::-1], dtype).T                    # another layout, same shape
        host = a.copy()
        host[...] = b
        g[...] = pygpu.to_gpu(np.ascontiguousarray(b.T)).T
        assert_same_array(g.get(), host)


@pytest.mark.parametrize("src_dtype", DTYPES, ids=DTYPE_IDS)
def test_assignment_broadcasts_and_casts_on_the_device(src_dtype, rng):
    dst = random_array(rng, (4, 6, 5), np.float32)[::-1, ::2]
    g = pygpu.to_gpu(random_array(rng, (4, 6, 5), np.float32))[::-1, ::2]
    g[...] = pygpu.to_gpu(dst)
    for src_shape in [(5,), (3, 1), (1, 3, 5), (4, 3, 5)]:
        src = small_values(rng, src_shape, src_dtype)
        want = dst.copy()
        quietly(lambda: want.__setitem__(Ellipsis, src))
        quietly(lambda: g.__setitem__(Ellipsis, pygpu.to_gpu(src)))
        assert_same_array(g.get(), want)
        dst = want


def test_assignment_of_complex_into_real_warns_as_numpy():
    g = pygpu.zeros(3, np.float64)
    with pytest.warns(np.exceptions.ComplexWarning):
        g[...] = pygpu.to_gpu(np.array([1 + 2j, 3, 4j]))
    assert list(g.get()) == [1, 3, 0]


def test_assignment_that_does_not_broadcast_raises_and_writes_nothing():
    g = pygpu.to_gpu(np.arange(12.0).reshape(3, 4))
    with pytest.raises(ValueError, match="could not broadcast"):
        g[...] = pygpu.to_gpu(np.zeros((2, 4), np.float32))
    assert_same_array(g.get(), np.arange(12.0).reshape(3, 4))


@pytest.mark.parametrize("case", ["shift right", "shift left", "reverse", "transpose", "interleave", "cast",
                                  "broadcast"])
def test_overlapping_assignment_as_if_copied_first(case):
    """NumPy gives the result as if the source were copied first."""
    a = np.arange(64, dtype=np.int32).reshape(8, 8)
    g = pygpu.to_gpu(a)
    pairs = {
        "shift right": (lambda x: x[1:], lambda x: x[:-1]),
        "shift left": (lambda x: x[:, :-1], lambda x: x[:, 1:]),
        "reverse": (lambda x: x, lambda x: x[::-1, ::-1]),
        "transpose": (lambda x: x, lambda x: x.T),
        "interleave": (lambda x: x[:, ::2], lambda x: x[:, 1::2]),
        "cast": (lambda x: x.view(np.float32)[:4], lambda x: x[2:6]),
        "broadcast": (lambda x: x, lambda x: x[3]),
    }
    dst, src = pairs[case]
    dst(a)[...] = src(a)
    dst(g)[...] = src(g)
    assert_same_array(g.get(), a)


# ---- fill ------------------------------------------------------------------------------------

FILL_VALUES = {"b": [True], "i": [-7, 0x5A], "u": [0xA5, 1], "f": [-0.0, 1.5, np.nan, -np.inf],
               "c": [complex(1.5, -2.25), complex(np.nan, 0)]}


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_fill_of_strided_views_as_numpy(dtype, rng):
    for value in FILL_VALUES[dtype.kind]:
        for _, a, g in random_views(int(rng.integers(1 << 30)), 12, dtypes=[dtype]):
            g.fill(value)
            a[...] = value
            assert_same_array(g.get(), a)


def test_fill_of_an_unaligned_view():
    raw = pygpu.zeros(64 + 8, np.uint8)
    v = raw[3:3 + 64].view(np.float64)[::2]
    v.fill(2.5)
    want = np.zeros(72, np.uint8)
    want[3:67].view(np.float64)[::2] = 2.5
    assert_same_array(raw.get(), want)


# ---- astype ------------------------------------------------------------------------------

def special_values(dtype):
    """Values that probe a conversion's edges, as `dtype` holds them: the
    integers' ends, fractions, halves (rounding), powers of two, NaN,
    infinities, float16's largest and smallest, out of every range."""
    ints = [0, 1, -1, 2, 127, 128, -128, -129, 255, 256, 32767, 32768, -32768, 65535, 65536, 2 ** 24 + 1,
            2 ** 31 - 1, 2 ** 31, -2 ** 31, 2 ** 32 - 1, 2 ** 32, 2 ** 53 + 1, 2 ** 63 - 1, -2 ** 63, 2 ** 64 - 1]
    floats = [0.5, -0.5, 1.5, 2.5, -2.5, 127.9, 255.5, -129.5, 65504.0, 65519.0, 65520.0, 1e-8, 6e-8, -0.0,
              3e9, -3e9, 1e10, -1e10, 2.0 ** 31, 2.0 ** 32 + 512, 2.0 ** 63, 2.0 ** 64, 1e20, -1e20, 1e300,
              float("inf"), float("-inf"), float("nan")]
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return np.array([True, False], dt)
    if dt.kind in "iu":
        return quietly(lambda: np.array([v % (1 << (8 * dt.itemsize)) for v in ints], np.uint64).astype(dt))
    re = quietly(lambda: np.array(ints + floats, np.float64).astype(dt))
    if dt.kind != "c":
        return re
    vals = np.empty(re.size, dt)
    vals.real = re.real
    vals.imag = quietly(lambda: np.array(floats[::-1] + ints, np.float64).astype(dt)).real
    return vals


@pytest.mark.parametrize("src", DTYPES, ids=DTYPE_IDS)
def test_astype_of_every_pair_as_numpy(src):
    """Each value at the start of a long contiguous array, where NumPy's
    vectorised loops convert it (see src/kernels/kernels.h for the one pair
    whose answer NumPy gives differently in its scalar tail)."""
    vals = special_values(src)
    a = np.zeros(256, src)
    a[: vals.size] = vals
    g = pygpu.to_gpu(a)
    for dst in DTYPES:
        want = quietly(lambda: a.astype(dst))
        got = quietly(lambda: g.astype(dst))
        assert got.dtype == dst
        out = got.get()
        if dst.kind in "fc":
            np.testing.assert_array_equal(out, want, err_msg=f"{src} -> {dst}")
            assert np.array_equal(np.signbit(out.real), np.signbit(want.real)) or src.kind != "f"
        else:
            assert_same_array(out, want)


def test_astype_of_random_views_in_each_order(rng):
    for dtype, a, g in random_views(4, 120, values=small_values):
        to = DTYPES[int(rng.integers(len(DTYPES)))]
        order = "KACF"[int(rng.integers(4))]
        want = quietly(lambda: a.astype(to, order=order))
        got = quietly(lambda: g.astype(to, order=order))
        assert_same_array(got.get(), want)
        assert_same_layout(got, want)


def test_astype_float64_to_float32_rounds_as_numpy(rng):
    a = rng.standard_normal(10000) * 10.0 ** rng.integers(-45, 45, 10000)
    g = pygpu.to_gpu(a)
    assert_same_array(quietly(lambda: g.astype(np.float32)).get(), quietly(lambda: a.astype(np.float32)))
    assert_same_array(quietly(lambda: g.astype(np.float16)).get(), quietly(lambda: a.astype(np.float16)))


def test_astype_copy_false_and_the_same_dtype():
    g = pygpu.to_gpu(np.arange(6.0).reshape(2, 3))
    assert g.astype(np.float64, copy=False) is g
    assert g.astype("f8", order="C", copy=False) is g
    assert g.T.astype(np.float64, order="C", copy=False) is not g.T
    c = g.astype(np.float64)
    assert c is not g and c.ptr != g.ptr
    assert_same_array(g.T.astype(np.float64, order="F", copy=False).get(), np.arange(6.0).reshape(2, 3).T)


def test_astype_pycuda_form_takes_a_stream():
    s = pygpu.Stream()
    g = pygpu.to_gpu(np.arange(5, dtype=np.int32))
    r = g.astype(np.float32, s)
    s.synchronize()
    assert_same_array(r.get(), np.arange(5, dtype=np.float32))
    with pytest.raises(TypeError, match="stream twice"):
        g.astype(np.float32, s, stream=s)


def test_astype_warns_complex_to_real_as_numpy():
    g = pygpu.to_gpu(np.array([1 + 1j, 2 - 3j], np.complex64))
    with pytest.warns(np.exceptions.ComplexWarning, match="discards the imaginary part"):
        r = g.astype(np.float32)
    assert list(r.get()) == [1, 2]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert list(g.astype(bool).get()) == [True, True]     # (NumPy does not warn for bool)
        g.astype(np.complex128)


@pytest.mark.parametrize("rule", ["no", "equiv", "safe", "same_kind", "unsafe"])
def test_astype_casting_rules_as_numpy(rule):
    for src, dst in itertools.product(DTYPES, DTYPES):
        a = np.ones(3, src)
        g = pygpu.to_gpu(a)
        try:
            quietly(lambda: a.astype(dst, casting=rule))
        except TypeError as e:
            with pytest.raises(TypeError) as got:
                g.astype(dst, casting=rule)
            assert str(got.value) == str(e)
        else:
            assert quietly(lambda: g.astype(dst, casting=rule)).dtype == dst


@pytest.mark.parametrize("bad, exc, match", [
    ({"dtype": object}, TypeError, "not supported by GPUArray"),
    ({"dtype": "U3"}, TypeError, "not supported by GPUArray"),
    ({"dtype": "V8"}, TypeError, "not supported by GPUArray"),
    ({"dtype": ">f4"}, TypeError, "not supported by GPUArray"),
    ({"dtype": np.float32, "casting": "bogus"}, ValueError, "casting must be one of"),
    ({"dtype": np.float32, "casting": None}, TypeError, "casting must be str"),
    ({"dtype": np.float32, "order": "Q"}, ValueError, "order must be"),
    ({"dtype": np.float32, "order": 3}, ValueError, "order must be"),
])
def test_astype_bad_input(bad, exc, match):
    g = pygpu.to_gpu(np.arange(4.0))
    before = g.get()
    with pytest.raises(exc, match=match):
        g.astype(**bad)
    assert_same_array(g.get(), before)


def test_astype_zero_d_and_empty():
    g = pygpu.to_gpu(np.array(-2.75))
    assert_same_array(g.astype(np.int8).get(), np.array(-2, np.int8))
    e = pygpu.to_gpu(np.zeros((0, 3), np.float32)).T.astype(np.int64)
    assert e.shape == (3, 0) and e.dtype == np.int64


def test_asarray_with_another_dtype_converts_on_the_device():
    g = pygpu.to_gpu(np.arange(6, dtype=np.int16))
    r = pygpu.asarray(g, dtype=np.float32)
    assert r.dtype == np.float32 and r.ptr != g.ptr
    assert_same_array(r.get(), np.arange(6, dtype=np.float32))


# ---- where the kernels come from ---------------------------------------------------------------

def test_copy_kernels_say_where_they_come_from():
    info = pygpu.copy_kernels()
    assert set(info) == {"origin", "ready", "why"}
    assert isinstance(info["origin"], str) and info["origin"]
    if os.environ.get("PYGPU_KERNELS") == "0":
        assert not info["ready"] and "PYGPU_KERNELS=0" in info["origin"] and info["why"].endswith("NotSupported")
    elif pygpu.backend == "host":
        assert info["ready"] and info["why"] is None


def test_no_launch_api_for_users():
    """PyGPU launches its own kernels only: nothing in the module launches
    code a user hands it."""
    names = [n for n in dir(pygpu) if "launch" in n.lower() or "kernel" in n.lower()]
    assert names == ["copy_kernels"], names


# ---- on a GPU only -------------------------------------------------------------------------------

@pytest.mark.gpu_only
def test_copies_of_more_than_2_to_the_31_elements_are_exact():
    n = (1 << 31) + 4099
    free, _ = pygpu.mem_get_info()
    if free < 3 * n + (1 << 30):
        pytest.skip(f"needs {3 * n >> 20} MiB of device memory, {free >> 20} free")
    x = (np.arange(n, dtype=np.uint64) % 251).astype(np.uint8)
    g = pygpu.to_gpu(x)
    r = g[::-1].copy()
    del g
    out = r.get()
    del r
    assert np.array_equal(out, x[::-1])
    del out
    v = pygpu.to_gpu(x)
    w = v[1::2].astype(np.int16)
    del v
    got = w.get()
    assert got.size == n // 2 and np.array_equal(got, x[1::2].astype(np.int16))


@pytest.mark.gpu_only
def test_kernels_run_on_the_given_stream(rng):
    """A copy and a cast queued on a stream, then a host copy on that stream:
    in order, whatever the other streams do."""
    a = random_array(rng, (512, 384), np.float64)
    g = pygpu.to_gpu(a)
    s = pygpu.Stream(non_blocking=True)
    with s:
        t = g.T.copy(order="C")
        f = t.astype(np.float32)
        out = f.get_async(stream=s)
    s.synchronize()
    assert_same_array(out, a.T.astype(np.float32))


@pytest.mark.gpu_only
def test_a_kernel_fault_is_reported_as_a_sticky_gpu_error(run_python):
    """A copy kernel pointed at memory that is not there: GPUError naming
    the runtime's error, and later calls say the context is gone."""
    if not pygpu.copy_kernels()["ready"]:
        pytest.skip("PyGPU's kernels do not run here: " + pygpu.copy_kernels()["origin"])
    proc = run_python("""
        import numpy as np, pygpu
        bad = pygpu.GPUArray((1024, 1024), np.float32, gpudata=1 << 47)
        try:
            bad.T.copy(order="C")
            pygpu.synchronize()
            print("no error")
        except pygpu.GPUError as e:
            print("first", e.name)
        try:
            pygpu.zeros(4).get()
            print("later ok")
        except pygpu.GPUError as e:
            print("later", e.name)
    """, check=False)
    assert "first cudaErrorIllegalAddress" in proc.stdout or "first cudaErrorLaunchFailure" in proc.stdout, proc
    assert "later ok" not in proc.stdout, proc
