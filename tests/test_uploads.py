"""The one upload door: to_gpu, to_gpu(allocator=), to_gpu_async, asarray
and from_dlpack of host data all convert host data by the same rules
(NumPy's FORCECAST to a dtype if given; non-native byte order made native;
dtypes PyGPU does not hold refused) and give the same array."""
import numpy as np
import pytest

import pygpu

DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
          "float16", "float32", "float64", "complex64", "complex128"]


def _alloc(nbytes):
    return pygpu.mem_alloc(max(nbytes, 1))


def _inputs(rng):
    """Host data of many kinds: arrays of each dtype in C, F and strided
    layouts, other byte order, lists, scalars, 0-d, empty."""
    out = []
    for name in DTYPES:
        a = (rng.standard_normal((5, 7)) * 50).astype(name)
        out += [a, np.asfortranarray(a), a[::2, ::-3], a.astype(a.dtype.newbyteorder()), a[0, 0], a[:0]]
    out += [[1, 2, 3], [[1.5, 2.5], [3.5, 4.5]], 7, 2.5, True, 1 + 2j, np.array(3.0)]
    return out


def _same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    np.testing.assert_array_equal(a.get(), b.get())


def _routes(host, dtype):
    """Each upload route's result (or the exception it raised), by name."""
    kw = {"dtype": dtype} if dtype else {}
    routes = {
        "to_gpu": lambda: pygpu.to_gpu(host, **kw),
        "to_gpu(allocator)": lambda: pygpu.to_gpu(host, _alloc, **kw),
        "to_gpu_async": lambda: pygpu.to_gpu_async(host, **kw),
        "asarray": lambda: pygpu.asarray(host, **kw),
    }
    out = {}
    for name, call in routes.items():
        try:
            out[name] = call()
        except Exception as e:          # noqa: BLE001  (compared below)
            out[name] = e
    pygpu.synchronize()
    return out


@pytest.mark.parametrize("dtype", [None, "float32", "int16", "complex128", "bool", "uint64"])
def test_every_upload_route_converts_alike(rng, dtype):
    import warnings
    for host in _inputs(rng):
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")     # (ComplexWarning of the cast, as NumPy gives it)
            try:
                want = np.asarray(host, dtype=dtype) if dtype else np.asarray(host)
                want = want.astype(want.dtype.newbyteorder("="))
            except Exception as e:      # noqa: BLE001  (NumPy refuses: so must every route)
                want = e
            got = _routes(host, dtype)
        if isinstance(want, Exception):
            assert all(type(g) is type(want) for g in got.values()), (host, dtype, want, got)
            continue
        for name, g in got.items():
            assert not isinstance(g, Exception), (name, host, dtype, g)
            assert g.dtype == want.dtype and g.shape == want.shape, (name, host, dtype, g.dtype, g.shape)
            np.testing.assert_array_equal(g.get(), want)
        assert got["to_gpu(allocator)"].flags.f_contiguous == got["to_gpu"].flags.f_contiguous


@pytest.mark.parametrize("bad", [np.array(["a", "b"]), np.array([object(), 1], dtype=object),
                                 np.zeros(3, dtype="M8[s]")])
def test_every_upload_route_refuses_alike(bad):
    errors = []
    for call in (lambda: pygpu.to_gpu(bad), lambda: pygpu.to_gpu(bad, _alloc), lambda: pygpu.asarray(bad)):
        with pytest.raises((TypeError, ValueError)) as e:
            call()
        errors.append(type(e.value))
    assert len(set(errors)) == 1, errors
