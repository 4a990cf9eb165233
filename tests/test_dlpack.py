"""DLPack both ways (Array API standard 2023.12): GPUArray.__dlpack__ and
__dlpack_device__, pygpu.from_dlpack and pygpu.asarray.

On the host backend the arrays are exported as kDLCPU, so NumPy is the
consumer and the producer here: zero-copy both ways, writes seen on the
other side.  The library tests against PyTorch, CuPy, Numba and JAX are in
test_interop_libs.py (GPU only).
"""
import gc
import sys
import threading
import weakref

import numpy as np
import pytest

import pygpu
from dlpack_helpers import (IS_COPIED, LEGACY, READ_ONLY, USED_LEGACY, USED_VERSIONED, VERSIONED, FakeProducer,
                            capsule_name, consume, kDLBfloat, kDLCPU, kDLCUDA, kDLFloat, kDLOpenCL, kDLROCM,
                            kDLVulkan, managed, shape_strides)

HOST = pygpu.backend == "host"
OWN = {"cuda": kDLCUDA, "hip": kDLROCM, "host": kDLCPU}[pygpu.backend]
host_only = pytest.mark.skipif(not HOST, reason="kDLCPU exports and zero-copy host imports: host backend")
DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128"]


def sample(shape=(3, 4), dtype=np.float32):
    return (np.arange(int(np.prod(shape))) % 7).astype(dtype).reshape(shape)


def export(g, **kwargs):
    """g.__dlpack__(**kwargs) and its managed tensor (which lives as long
    as the capsule: keep both)."""
    cap = g.__dlpack__(**kwargs)
    return cap, managed(cap)


# ---- export: the capsule -------------------------------------------------------

def test_dlpack_device():
    g = pygpu.to_gpu(sample())
    assert g.__dlpack_device__() == (OWN, 0 if HOST else g.device.id)


@pytest.mark.parametrize("max_version, name, version", [
    (None, LEGACY, None), ((0, 8), LEGACY, None), ((1, 0), VERSIONED, (1, 0)), ((1, 1), VERSIONED, (1, 1)),
    ((1, 9), VERSIONED, (1, 1)), ((2, 0), VERSIONED, (1, 1))])
def test_capsule_kind_follows_max_version(max_version, name, version):
    g = pygpu.to_gpu(sample())
    cap = g.__dlpack__(max_version=max_version)
    assert capsule_name(cap) == name
    m = managed(cap)
    if version:
        assert (m.version.major, m.version.minor) == version
        assert m.flags == 0
    t = m.dl_tensor
    assert t.data == g.ptr and t.byte_offset == 0
    assert (t.device.device_type, t.dtype.code, t.dtype.bits, t.dtype.lanes) == (OWN, kDLFloat, 32, 1)
    assert shape_strides(m) == ((3, 4), (4, 1))     # strides always written, in elements


@pytest.mark.parametrize("dtype", DTYPES)
def test_dtype_codes(dtype):
    g = pygpu.to_gpu(sample((5,), dtype))
    cap, m = export(g, max_version=(1, 0))
    t = m.dl_tensor
    kind = np.dtype(dtype).kind
    assert t.dtype.code == {"b": 6, "i": 0, "u": 1, "f": 2, "c": 5}[kind]
    assert t.dtype.bits == np.dtype(dtype).itemsize * 8


def test_strides_of_views_in_elements():
    g = pygpu.to_gpu(sample((4, 6), np.int16))
    v = g[::-1, 1::2]
    cap, m = export(v)
    assert shape_strides(m) == ((4, 3), (-6, 2))
    assert m.dl_tensor.data == v.ptr


def test_strides_not_multiple_of_itemsize_refused():
    base = pygpu.to_gpu(np.zeros(16, np.int32))
    odd = pygpu.GPUArray((3,), np.int32, gpudata=base.ptr, strides=(6,), base=base)
    with pytest.raises(BufferError, match="not a multiple of the itemsize"):
        odd.__dlpack__()


def test_read_only_flag_and_legacy_refusal():
    ro = np.arange(4.0)
    ro.flags.writeable = False
    g = pygpu.from_dlpack(ro) if HOST else pygpu.to_gpu(ro)
    if not HOST:
        pytest.skip("read-only GPUArrays come from read-only producers")
    assert not g.flags.writeable
    cap, m = export(g, max_version=(1, 0))
    assert m.flags == READ_ONLY
    with pytest.raises(BufferError, match="read-only"):
        g.__dlpack__()
    # a copy is writeable: the legacy form can carry it
    assert capsule_name(g.__dlpack__(copy=True)) == LEGACY


def test_copy_true_is_flagged_and_independent():
    g = pygpu.to_gpu(sample())
    cap = g.__dlpack__(max_version=(1, 0), copy=True)
    m = managed(cap)
    assert m.flags == IS_COPIED and m.dl_tensor.data != g.ptr
    if HOST:
        c = np.from_dlpack(g, copy=True)
        c[0, 0] = 100
        assert g.get()[0, 0] == 0


def test_copy_false_and_none_share():
    g = pygpu.to_gpu(sample())
    for copy in (False, None):
        cap, m = export(g, max_version=(1, 0), copy=copy)
        assert m.dl_tensor.data == g.ptr


def test_dl_device_own_device_is_no_copy():
    g = pygpu.to_gpu(sample())
    cap, m = export(g, max_version=(1, 0), dl_device=g.__dlpack_device__())
    assert m.dl_tensor.data == g.ptr and m.flags == 0


@pytest.mark.gpu_only
def test_dl_device_cpu_gives_flagged_host_copy():
    g = pygpu.to_gpu(sample())
    cap, m = export(g, max_version=(1, 0), dl_device=(kDLCPU, 0))
    assert m.flags == IS_COPIED and m.dl_tensor.device.device_type == kDLCPU
    n = np.from_dlpack(g, device="cpu")
    assert np.array_equal(n, g.get())
    n[0, 0] = 50
    assert g.get()[0, 0] == 0
    with pytest.raises(BufferError, match="copy=False"):
        g.__dlpack__(max_version=(1, 0), dl_device=(kDLCPU, 0), copy=False)


def test_dl_device_elsewhere_refused():
    g = pygpu.to_gpu(sample())
    with pytest.raises(BufferError, match="cannot export"):
        g.__dlpack__(dl_device=(kDLOpenCL, 0))
    with pytest.raises(BufferError):
        g.__dlpack__(dl_device=(OWN, 7))


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"max_version": 3}, TypeError, "max_version"),
    ({"max_version": (1,)}, TypeError, "max_version"),
    ({"dl_device": "cpu"}, TypeError, "dl_device"),
    ({"copy": 1}, TypeError, "copy must be"),
    ({"stream": "x"}, TypeError, "stream must be"),
    ({"stream": True}, TypeError, "stream must be"),
    ({"bogus": 1}, TypeError, "unexpected keyword"),
])
def test_bad_arguments(kwargs, exc, match):
    g = pygpu.to_gpu(sample())
    with pytest.raises(exc, match=match):
        g.__dlpack__(**kwargs)


def test_positional_arguments_refused():
    with pytest.raises(TypeError, match="positional"):
        pygpu.to_gpu(sample()).__dlpack__(None)


@host_only
@pytest.mark.parametrize("stream", [None, -1])
def test_host_streams(stream):
    g = pygpu.to_gpu(sample())
    assert capsule_name(g.__dlpack__(stream=stream)) == LEGACY


@host_only
@pytest.mark.parametrize("stream", [0, 1, 2, 12345])
def test_host_refuses_stream_handles(stream):
    with pytest.raises(ValueError, match="stream=None"):
        pygpu.to_gpu(sample()).__dlpack__(stream=stream)


@pytest.mark.gpu_only
def test_gpu_stream_rules():
    g = pygpu.to_gpu(sample())
    s = pygpu.Stream(non_blocking=True)
    good, bad = ((None, 1, 2, -1, s.ptr), (0, -2)) if pygpu.backend == "cuda" else ((None, 0, -1, s.ptr), (1, 2, -2))
    for stream in good:
        g.__dlpack__(stream=stream)
    for stream in bad:
        with pytest.raises(ValueError, match="not allowed"):
            g.__dlpack__(stream=stream)


# ---- NumPy consumes host-backend arrays ----------------------------------------

@host_only
@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_reads_every_dtype_in_place(dtype):
    g = pygpu.to_gpu(sample((3, 5), dtype))
    n = np.from_dlpack(g)
    assert n.dtype == np.dtype(dtype) and np.array_equal(n, g.get())
    assert n.ctypes.data == g.ptr
    back = pygpu.from_dlpack(n)
    assert back.dtype == np.dtype(dtype) and back.ptr == g.ptr


@host_only
def test_numpy_writes_visible_both_ways():
    g = pygpu.to_gpu(sample())
    n = np.from_dlpack(g)
    n[1, 2] = 99
    assert g.get()[1, 2] == 99
    g[0] = -1
    assert np.all(n[0] == -1)


@host_only
@pytest.mark.parametrize("key", [np.s_[::-1], np.s_[:, ::-2], np.s_[1:, 1::2], np.s_[::-1, ::-1], np.s_[2, ::3],
                                 np.s_[None, :, 1], np.s_[1:1]])
def test_numpy_reads_views(key):
    h = sample((4, 6), np.float64)
    g = pygpu.to_gpu(h)
    v = g[key]
    n = np.from_dlpack(v)
    assert n.shape == h[key].shape and np.array_equal(n, h[key])
    if n.size:
        n[...] = -7
        assert np.all(g.get()[key] == -7)


@host_only
def test_numpy_transposed_and_0d():
    g = pygpu.to_gpu(sample((3, 4)))
    assert np.array_equal(np.from_dlpack(g.T), g.get().T)
    z = g[1, 2]
    assert np.from_dlpack(z).shape == () and np.from_dlpack(z) == g.get()[1, 2]


# ---- pygpu.from_dlpack ---------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_from_numpy_every_dtype(dtype):
    n = sample((2, 3), dtype)
    g = pygpu.from_dlpack(n)
    assert isinstance(g, pygpu.GPUArray) and g.dtype == n.dtype and np.array_equal(g.get(), n)


@host_only
def test_from_numpy_zero_copy_and_writes():
    n = sample((3, 4), np.int32)
    g = pygpu.from_dlpack(n)
    assert g.ptr == n.ctypes.data and g.flags.writeable
    g[0, 0] = 41
    assert n[0, 0] == 41
    n[2, 3] = -3
    assert g.get()[2, 3] == -3


@pytest.mark.parametrize("key", [np.s_[::-1], np.s_[:, ::2], np.s_[1:, ::-3], np.s_[::2, 1]])
def test_from_numpy_views(key):
    n = sample((5, 6), np.float32)[key]
    g = pygpu.from_dlpack(n)
    assert g.shape == n.shape and np.array_equal(g.get(), n)
    if HOST:
        assert g.ptr == n.ctypes.data and g.strides == n.strides


@host_only
def test_from_numpy_read_only_honoured():
    n = sample()
    n.flags.writeable = False
    g = pygpu.from_dlpack(n)
    assert not g.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        g[0] = 1


def test_from_numpy_copy_true_copies():
    n = sample()
    g = pygpu.from_dlpack(n, copy=True)
    g[0, 0] = 77
    assert n[0, 0] == 0


def test_from_numpy_copy_false():
    n = sample()
    if HOST:
        assert pygpu.from_dlpack(n, copy=False).ptr == n.ctypes.data
    else:
        with pytest.raises(BufferError, match="copy=False"):
            pygpu.from_dlpack(n, copy=False)


def test_from_own_array_is_a_view():
    g = pygpu.to_gpu(sample())
    v = pygpu.from_dlpack(g)
    assert v is not g and v.ptr == g.ptr and v.base is g
    c = pygpu.from_dlpack(g, copy=True)
    assert c.ptr != g.ptr and np.array_equal(c.get(), g.get())


def test_from_dlpack_device_argument():
    g = pygpu.to_gpu(sample())
    assert pygpu.from_dlpack(g, device=pygpu.Device(0)).ptr == g.ptr
    assert pygpu.from_dlpack(g, device=0).ptr == g.ptr
    assert pygpu.from_dlpack(g, device=g.__dlpack_device__()).ptr == g.ptr
    with pytest.raises(TypeError, match="device must be"):
        pygpu.from_dlpack(g, device="gpu")
    with pytest.raises(ValueError, match="out of range"):
        pygpu.from_dlpack(g, device=99)
    with pytest.raises(BufferError, match="cannot be on"):
        pygpu.from_dlpack(g, device=(kDLVulkan, 0))


def test_from_dlpack_to_another_device(run_python):
    """device= another device: a copy there (two host devices stand in for GPUs)."""
    run_python("""
        import numpy as np, pygpu
        g = pygpu.to_gpu(np.arange(6.0))
        c = pygpu.from_dlpack(g, device=1)
        assert c.device.id == 1 and c.ptr != g.ptr and np.array_equal(c.get(), g.get())
        with pygpu.Device(1):
            h = pygpu.to_gpu(np.arange(3.0))
        assert pygpu.from_dlpack(h).device.id == 1 and pygpu.from_dlpack(h, device=0).device.id == 0
        assert pygpu.from_dlpack(np.arange(4.0), device=pygpu.Device(1)).device.id == 1
        try:
            pygpu.from_dlpack(g, device=1, copy=False)
            raise AssertionError("copy=False across devices must raise")
        except BufferError as e:
            assert "needs a copy" in str(e)
    """, env={"PYGPU_BACKEND": "host", "PYGPU_HOST_DEVICES": 2})


def test_from_dlpack_bad_inputs():
    with pytest.raises(TypeError, match="__dlpack__ and __dlpack_device__"):
        pygpu.from_dlpack(object())
    with pytest.raises(TypeError, match="__dlpack__ and __dlpack_device__"):
        pygpu.from_dlpack([1, 2, 3])
    with pytest.raises(TypeError, match="copy must be"):
        pygpu.from_dlpack(np.zeros(3), copy="yes")
    with pytest.raises(TypeError, match="missing required"):
        pygpu.from_dlpack()
    with pytest.raises(TypeError, match="unexpected keyword"):
        pygpu.from_dlpack(np.zeros(3), stream=1)

    class NotACapsule:
        def __dlpack__(self, **kw):
            return 42

        def __dlpack_device__(self):
            return (kDLCPU, 0)

    class BadDevice(NotACapsule):
        def __dlpack_device__(self):
            return "cpu"

    with pytest.raises(TypeError, match="must return a DLPack capsule"):
        pygpu.from_dlpack(NotACapsule())
    with pytest.raises(TypeError, match="tuple of two ints"):
        pygpu.from_dlpack(BadDevice())


def test_numpy_refuses_what_dlpack_cannot_say():
    with pytest.raises(BufferError):
        pygpu.from_dlpack(np.arange(3).astype(">i4"))
    with pytest.raises(BufferError):
        pygpu.from_dlpack(np.array(["a"]))


def test_producer_without_max_version_is_asked_again():
    calls = []

    class Old:
        """A producer from before DLPack 1.0: __dlpack__ takes stream= only."""
        def __init__(self):
            self.a = sample((4,), np.int64)

        def __dlpack__(self, stream=None):
            calls.append(stream)
            return self.a.__dlpack__()

        def __dlpack_device__(self):
            return (kDLCPU, 0)

    for _ in range(3):
        assert np.array_equal(pygpu.from_dlpack(Old()).get(), sample((4,), np.int64))
    assert len(calls) == 3      # one refused call, then remembered: stream= only
    g = pygpu.from_dlpack(Old(), copy=True)     # the copy is then made here
    assert np.array_equal(g.get(), sample((4,), np.int64))


class Spy:
    """Forwards DLPack to a GPUArray and records what the consumer asked."""

    def __init__(self, g):
        self.g, self.seen = g, []

    def __dlpack_device__(self):
        return self.g.__dlpack_device__()

    def __dlpack__(self, **kwargs):
        self.seen.append(kwargs)
        return self.g.__dlpack__(**kwargs)


def test_from_dlpack_asks_with_the_current_stream():
    g = pygpu.to_gpu(sample())
    spy = Spy(g)
    assert np.array_equal(pygpu.from_dlpack(spy).get(), g.get())
    assert spy.seen[-1] == {"stream": {"host": None, "cuda": 1, "hip": 0}[pygpu.backend], "max_version": (1, 1)}
    pygpu.from_dlpack(spy, copy=False)
    assert spy.seen[-1]["copy"] is False
    c = pygpu.from_dlpack(spy, copy=True)
    assert spy.seen[-1]["copy"] is True and c.ptr != g.ptr
    if not HOST:
        s = pygpu.Stream(non_blocking=True)
        with s:
            pygpu.from_dlpack(spy)
        assert spy.seen[-1]["stream"] == s.ptr


def test_unreachable_device_asks_for_a_host_copy():
    n = sample((5,), np.int32)

    class Elsewhere:
        """Data on a device no backend reaches, copied to the host on request."""
        seen = []

        def __dlpack_device__(self):
            return (kDLVulkan, 0)

        def __dlpack__(self, **kwargs):
            self.seen.append(kwargs)
            if kwargs.get("dl_device") != (kDLCPU, 0):
                raise BufferError("only a host copy")
            return n.__dlpack__(**{k: v for k, v in kwargs.items() if k != "stream"})

    g = pygpu.from_dlpack(Elsewhere())
    assert np.array_equal(g.get(), n)
    assert Elsewhere.seen[-1]["dl_device"] == (kDLCPU, 0) and Elsewhere.seen[-1]["stream"] is None
    with pytest.raises(BufferError, match="cannot reach without a copy"):
        pygpu.from_dlpack(Elsewhere(), copy=False)

    class Refuses(Elsewhere):
        def __dlpack__(self, **kwargs):
            raise RuntimeError("no")

    with pytest.raises(BufferError, match="would not copy it to the host") as info:
        pygpu.from_dlpack(Refuses())
    assert isinstance(info.value.__cause__, RuntimeError)


# ---- capsules: consumed, wrong, refused ----------------------------------------

def test_raw_capsule_imports_once():
    g = pygpu.to_gpu(sample())
    cap = g.__dlpack__(max_version=(1, 0))
    v = pygpu.from_dlpack(cap)
    assert np.array_equal(v.get(), g.get()) and capsule_name(cap) == USED_VERSIONED
    with pytest.raises(BufferError, match="already consumed"):
        pygpu.from_dlpack(cap)
    legacy = g.__dlpack__()
    pygpu.from_dlpack(legacy)
    with pytest.raises(BufferError, match="already consumed"):
        pygpu.asarray(legacy)
    assert capsule_name(legacy) == USED_LEGACY


def test_wrong_capsule_name():
    p = FakeProducer(sample(), name=b"not_a_tensor")
    with pytest.raises(ValueError, match="not a DLPack capsule"):
        pygpu.from_dlpack(p)


@pytest.mark.parametrize("versioned", [False, True])
def test_fake_producer_imports(versioned):
    n = sample((3, 4), np.float64)
    p = FakeProducer(n, versioned=versioned)
    g = pygpu.from_dlpack(p)
    assert np.array_equal(g.get(), n)
    if HOST:
        assert g.ptr == n.ctypes.data and p.deleted == 0
    del g
    gc.collect()
    assert p.deleted == 1


@pytest.mark.parametrize("overrides, match", [
    (dict(lanes=4), "lanes"),
    (dict(code=kDLBfloat, bits=16), "bfloat16"),
    (dict(code=kDLFloat, bits=24), "float24"),
    (dict(code=3, bits=64), "opaque handle"),
    (dict(code=200, bits=8), "type code 200"),
    (dict(ndim=65), "65 dimensions"),
    (dict(ndim=-1), "-1 dimensions"),
    (dict(null_shape=True), "no shape"),
    (dict(shape=(-2, 4), strides=None), "negative dimension"),
    (dict(strides=(2 ** 62, 1)), "out of range|address space"),
    (dict(data=0), "null data pointer"),
    (dict(byte_offset=2 ** 63 + 5), "byte_offset"),
    (dict(device=(kDLOpenCL, 0)), "cannot reach"),
    (dict(device=(kDLVulkan, 3)), "cannot reach"),
])
@pytest.mark.parametrize("versioned", [False, True])
def test_refused_tensors_free_themselves(overrides, match, versioned):
    p = FakeProducer(sample((3, 4), np.float32), versioned=versioned, **overrides)
    with pytest.raises(BufferError, match=match):
        pygpu.from_dlpack(p)
    assert p.deleted == 1       # the refused capsule was left whole and freed itself


def test_unknown_major_version_is_deleted_at_once():
    p = FakeProducer(sample(), version=(2, 0))
    cap = p.capsule()
    with pytest.raises(BufferError, match="DLPack 2.0"):
        pygpu.from_dlpack(cap)
    assert p.deleted == 1 and capsule_name(cap) == USED_VERSIONED
    del cap
    gc.collect()
    assert p.deleted == 1


def test_fake_strides_null_and_offsets():
    n = sample((3, 4), np.int32)
    p = FakeProducer(n, strides=None)
    assert np.array_equal(pygpu.from_dlpack(p).get(), n)
    flat = np.arange(10, dtype=np.int32)
    p = FakeProducer(flat, shape=(4,), strides=(-2,), byte_offset=8 * 4)
    assert np.array_equal(pygpu.from_dlpack(p).get(), flat[8::-2][:4])


@host_only
def test_fake_flags():
    n = sample()
    g = pygpu.from_dlpack(FakeProducer(n, flags=READ_ONLY))
    assert not g.flags.writeable
    p = FakeProducer(n, flags=IS_COPIED)
    g = pygpu.from_dlpack(p, copy=True)      # the producer copied: no second copy
    assert g.ptr == n.ctypes.data
    g = pygpu.from_dlpack(FakeProducer(n), copy=True)
    assert g.ptr != n.ctypes.data


# ---- lifetimes -----------------------------------------------------------------

def test_unconsumed_capsule_releases_the_array():
    g = pygpu.to_gpu(sample())
    w = weakref.ref(g)
    before = sys.getrefcount(g)
    cap = g.__dlpack__()
    assert sys.getrefcount(g) == before + 1
    del cap
    assert sys.getrefcount(g) == before
    del g
    gc.collect()
    assert w() is None


@host_only
def test_producer_lives_as_long_as_numpy_consumer():
    g = pygpu.to_gpu(sample())
    w = weakref.ref(g)
    n = np.from_dlpack(g)
    del g
    gc.collect()
    assert w() is not None and n[2, 3] == sample()[2, 3]
    del n
    gc.collect()
    assert w() is None


def test_numpy_producer_lives_as_long_as_gpuarray():
    class Holder:
        pass
    n = sample((50,), np.float64)
    h = Holder()
    h.arr = n
    base_refs = sys.getrefcount(n)
    g = pygpu.from_dlpack(n)
    if HOST:
        assert sys.getrefcount(n) > base_refs
    del g
    gc.collect()
    assert sys.getrefcount(n) == base_refs


def test_refcounts_flat_over_loops():
    g = pygpu.to_gpu(sample())
    n = sample((8,), np.int16)
    gc.collect()
    rg, rn = sys.getrefcount(g), sys.getrefcount(n)
    for _ in range(300):
        g.__dlpack__()
        g.__dlpack__(max_version=(1, 0), copy=True)
        pygpu.from_dlpack(g)
        pygpu.from_dlpack(g.__dlpack__(max_version=(1, 0)))
        pygpu.from_dlpack(n)
        pygpu.asarray(n)
        if HOST:
            np.from_dlpack(g)
        try:
            pygpu.from_dlpack(FakeProducer(n, lanes=2))
        except BufferError:
            pass
    gc.collect()
    assert (sys.getrefcount(g), sys.getrefcount(n)) == (rg, rn)


def test_deleter_without_the_gil_and_from_threads():
    g = pygpu.to_gpu(sample())
    before = sys.getrefcount(g)
    caps = [g.__dlpack__(max_version=mv) for mv in (None, (1, 0), None, (1, 0))]
    deleters = [consume(c)[1] for c in caps]
    assert sys.getrefcount(g) == before + 4
    deleters[0](gil=False)                       # this thread, GIL released around the call
    t = threading.Thread(target=lambda: [d(gil=False) for d in deleters[1:3]])
    t.start()
    t.join()
    deleters[3](gil=True)
    assert sys.getrefcount(g) == before
    del caps                                      # consumed: their destructors do nothing
    assert sys.getrefcount(g) == before


def test_deleters_at_interpreter_exit(run_python):
    """Capsules alive at exit, consumed or not, and a consumer that calls
    the deleter after finalization began: no crash, clean exit."""
    code = """
        import atexit, threading, numpy as np, pygpu
        from dlpack_helpers import consume
        g = pygpu.to_gpu(np.arange(10.0))
        unconsumed = g.__dlpack__()
        versioned = g.__dlpack__(max_version=(1, 0))
        taken, late = consume(g.__dlpack__(max_version=(1, 0)))   # never deleted: a leak, not a crash
        held = pygpu.from_dlpack(np.arange(5))
        cycle = [pygpu.from_dlpack(g)]
        cycle.append(cycle)
        if pygpu.backend == "host":
            n = np.from_dlpack(g)
        _, at_exit = consume(g.__dlpack__())
        atexit.register(lambda: at_exit(gil=False))
        _, in_thread = consume(g.__dlpack__())
        threading.Thread(target=lambda: in_thread(gil=False), daemon=True).start()
        print("ok")
    """
    import os
    tests = os.path.dirname(os.path.abspath(__file__))
    # (leaks on purpose: LeakSanitizer, under tools/asan.sh, looks away)
    proc = run_python(code, env={"PYTHONPATH": tests + os.pathsep + os.path.dirname(tests),
                                 "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0"})
    assert proc.stdout.strip() == "ok"


# ---- pygpu.asarray -------------------------------------------------------------

def test_asarray_returns_gpuarrays_as_they_are():
    g = pygpu.to_gpu(sample())
    assert pygpu.asarray(g) is g
    assert pygpu.asarray(g, dtype=np.float32) is g


def test_asarray_casts_through_the_host():
    g = pygpu.to_gpu(sample())
    c = pygpu.asarray(g, np.int64)
    assert c.dtype == np.int64 and np.array_equal(c.get(), sample().astype(np.int64))


@pytest.mark.parametrize("obj", [[1, 2, 3], 5.0, ((1, 2), (3, 4)), np.float32(2), bytearray(b"ab")])
def test_asarray_copies_host_data(obj):
    g = pygpu.asarray(obj)
    assert np.array_equal(g.get(), np.asarray(obj))


def test_asarray_copies_numpy_on_every_backend():
    n = sample()
    g = pygpu.asarray(n)
    g[0, 0] = 5
    assert n[0, 0] == 0
    assert pygpu.asarray(n, "float64").dtype == np.float64


def test_asarray_copies_host_dlpack_producers():
    n = sample((6,), np.float64)
    p = FakeProducer(n)
    g = pygpu.asarray(p)
    assert np.array_equal(g.get(), n) and g.ptr != n.ctypes.data


def test_asarray_capsule_and_dtype():
    g = pygpu.to_gpu(sample())
    v = pygpu.asarray(g.__dlpack__(), dtype="int16")
    assert v.dtype == np.int16 and np.array_equal(v.get(), sample().astype(np.int16))


def test_asarray_bad_input():
    with pytest.raises(TypeError):
        pygpu.asarray(object())
    with pytest.raises(TypeError, match="not supported"):
        pygpu.asarray([1, 2], dtype="U3")
    with pytest.raises(TypeError, match="missing required"):
        pygpu.asarray()
