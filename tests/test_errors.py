"""Exceptions and the cudaError_t error object (docs/api.md, Errors)."""
import json
import re

import numpy as np
import pytest

import pygpu

VENDOR_PREFIX = "hip" if pygpu.backend == "hip" else "cuda"  # host uses CUDA's names


# ---- exception types --------------------------------------------------------

def test_GPUError_is_RuntimeError():
    assert issubclass(pygpu.GPUError, RuntimeError)


def test_GPUMemoryError_is_GPUError_and_MemoryError():
    assert issubclass(pygpu.GPUMemoryError, pygpu.GPUError)
    assert issubclass(pygpu.GPUMemoryError, MemoryError)


# ---- cudaError_t -------------------------------------------------------------

def test_cudaError_repr():
    assert repr(pygpu.cudaError_t()) == "<cudaError: code=0>"
    assert repr(pygpu.cudaError_t(0)) == "<cudaError: code=0>"
    assert repr(pygpu.cudaError_t(2)) == "<cudaError: code=2>"
    assert repr(pygpu.cudaError_t(code=1)) == "<cudaError: code=1>"


def test_cudaError_accessors():
    for code in (0, 1, 2):
        e = pygpu.cudaError_t(code)
        assert e.code == code and type(e.code) is int
        assert e.as_int() == code and type(e.as_int()) is int
        assert int(e) == code
        assert isinstance(e.name, str) and e.name
        assert isinstance(e.string, str) and e.string


def test_cudaError_success_name():
    e = pygpu.cudaError_t(0)
    if pygpu.backend == "hip":
        assert e.name == "hipSuccess"
    else:  # host and cuda
        assert e.name == "cudaSuccess"


def test_cudaError_out_of_memory_name():
    e = pygpu.cudaError_t(2)
    if pygpu.backend == "hip":
        assert e.name.startswith("hip")
    else:
        assert e.name == "cudaErrorMemoryAllocation"
        assert "memory" in e.string


def test_cudaError_equality():
    e0, e1 = pygpu.cudaError_t(0), pygpu.cudaError_t(1)
    assert e0 == 0 and 0 == e0
    assert e1 == 1 and 1 == e1
    assert e0 != 1 and 1 != e0
    assert not (e0 != 0)
    assert not (e0 == 1)
    assert e0 == pygpu.cudaError_t(0)
    assert e0 != e1
    assert not (e0 == e1)
    # Unrelated types compare unequal instead of raising.
    assert e0 != "0"
    assert not (e0 == None)  # noqa: E711


def test_cudaError_hash():
    for code in (0, 1, 2, 700):
        assert hash(pygpu.cudaError_t(code)) == hash(code)
    table = {pygpu.cudaError_t(2): "oom"}
    assert table[2] == "oom"
    assert {pygpu.cudaError_t(1), pygpu.cudaError_t(1), 1} == {1}


def test_cudaError_truthiness():
    assert not pygpu.cudaError_t(0)
    assert bool(pygpu.cudaError_t(0)) is False
    assert bool(pygpu.cudaError_t(1)) is True
    assert bool(pygpu.cudaError_t(2)) is True


def test_cudaError_bad_code_type():
    with pytest.raises(TypeError):
        pygpu.cudaError_t("x")


# ---- errors raised by the library --------------------------------------------

def check_round_trip(random_bytes, n=4096):
    src = random_bytes(n)
    dst = np.zeros_like(src)
    a = pygpu.mem_alloc(n)
    pygpu.memcpy_htod(a, src)
    pygpu.memcpy_dtoh(dst, a)
    np.testing.assert_array_equal(dst, src)
    a.free()


def test_out_of_memory_carries_status_and_library_goes_on(random_bytes):
    with pytest.raises(pygpu.GPUMemoryError) as info:
        pygpu.mem_alloc(2 ** 62)
    e = info.value
    assert isinstance(e, pygpu.GPUError)
    assert isinstance(e, MemoryError)
    assert isinstance(e.code, int) and e.code != 0
    assert isinstance(e.name, str) and e.name.startswith(VENDOR_PREFIX)
    assert isinstance(e.message, str) and e.message
    assert isinstance(e.call, str) and e.call
    s = str(e)
    assert e.name in s and str(e.code) in s
    # The documented layout: what was asked for and where, then the runtime's
    # words: "Unable to allocate 4.00 EiB on device 0 (...): cudaMalloc:
    # cudaErrorMemoryAllocation (2): out of memory"
    assert s.startswith("Unable to allocate 4.00 EiB on device 0"), s
    assert s.endswith(": %s: %s (%d): %s" % (e.call, e.name, e.code, e.message)), s
    if pygpu.backend in ("host", "cuda"):
        assert e.code == 2 and e.name == "cudaErrorMemoryAllocation"
    # The error is not sticky: the library still works, repeatedly.
    for _ in range(3):
        check_round_trip(random_bytes)
    assert pygpu.device_count() >= 1
    pygpu.synchronize()


def test_out_of_memory_twice_in_a_row(random_bytes):
    for _ in range(2):
        with pytest.raises(pygpu.GPUMemoryError):
            pygpu.mem_alloc(2 ** 62)
    check_round_trip(random_bytes)


# ---- out of memory: what was asked for, in NumPy's words ----------------------

try:            # NumPy's own formatting of a byte count, the oracle of PyGPU's
    from numpy._core._exceptions import _ArrayMemoryError
except ImportError:                 # (NumPy 1)
    from numpy.core._exceptions import _ArrayMemoryError
numpy_size = _ArrayMemoryError._size_to_string

# Shapes no machine has memory for (1 EiB and more: past any address space),
# whose byte counts still fit in ssize_t; NumPy's empty() says what it asked.
HUGE = [((2 ** 60,), np.uint8), ((3, 2 ** 56), np.complex128), ((5, 7, 2 ** 55), np.float32),
        ((2 ** 30, 2 ** 31), np.float16), ((1,) * 63 + (2 ** 61,), np.bool_)]


def numpy_refusal(shape, dtype, order="C"):
    with pytest.raises(MemoryError) as info:
        np.empty(shape, dtype, order=order)
    return str(info.value)


def device_part(free_total):
    free, total = free_total
    return r" on device 0 \((\d+ bytes|\d[0-9.]* [KMGTPE]iB) free of %s\): " % re.escape(numpy_size(total))


CREATE = {
    "empty": lambda shape, dtype: pygpu.empty(shape, dtype),
    "empty F": lambda shape, dtype: pygpu.empty(shape, dtype, order="F"),
    "zeros": lambda shape, dtype: pygpu.zeros(shape, dtype),
    "full": lambda shape, dtype: pygpu.full(shape, 1, dtype),
    "GPUArray": lambda shape, dtype: pygpu.GPUArray(shape, dtype),
}


@pytest.mark.parametrize("how", sorted(CREATE))
@pytest.mark.parametrize("shape,dtype", HUGE, ids=lambda v: str(v) if not isinstance(v, tuple) else f"{len(v)}d")
def test_out_of_memory_names_size_shape_dtype_and_device(how, shape, dtype, random_bytes):
    with pytest.raises(pygpu.GPUMemoryError) as info:
        CREATE[how](shape, dtype)
    e, said = info.value, str(info.value)
    assert isinstance(e, MemoryError) and e.code != 0 and "Malloc" in e.call
    numpy_said = numpy_refusal(shape, dtype)      # "Unable to allocate 1.00 EiB for an array with shape ..."
    assert said.startswith(numpy_said), (said, numpy_said)
    assert re.match(device_part(pygpu.mem_get_info()), said[len(numpy_said):]), said
    assert said.endswith("%s: %s (%d): %s" % (e.call, e.name, e.code, e.message)), said
    check_round_trip(random_bytes)      # (and the library goes on)


def test_out_of_memory_of_page_locked_memory_names_the_array():
    shape = (2, 2 ** 59)
    with pytest.raises(pygpu.GPUMemoryError) as info:
        pygpu.pagelocked_empty(shape, np.uint8)
    said = str(info.value)
    want = numpy_refusal(shape, np.uint8).replace(" for an array", " of page-locked host memory for an array", 1)
    assert said.startswith(want + ": "), (said, want)
    assert said.endswith(info.value.message)
    with pytest.raises(pygpu.GPUMemoryError, match=r"^Unable to allocate 1\.00 EiB of page-locked host memory: "):
        pygpu.mem_alloc_host(2 ** 60)


# As NumPy: a shape whose byte count does not fit in ssize_t is a ValueError,
# in NumPy's words, before anything is allocated.
TOO_BIG = [((2 ** 62,), np.float64), ((2 ** 40, 2 ** 40), np.uint8), ((2 ** 31,) * 3, np.int8),
           ((2 ** 40, 0, 2 ** 40), np.float32), ((2 ** 61, 3), np.complex64)]
TOO_BIG_CALLS = dict(CREATE, pagelocked_empty=lambda shape, dtype: pygpu.pagelocked_empty(shape, dtype))


@pytest.mark.parametrize("how", sorted(TOO_BIG_CALLS))
@pytest.mark.parametrize("shape,dtype", TOO_BIG, ids=lambda v: str(v) if not isinstance(v, tuple) else f"{len(v)}d")
def test_byte_count_overflow_is_numpys_valueerror(how, shape, dtype):
    with pytest.raises(ValueError) as np_info:
        np.empty(shape, dtype)
    with pytest.raises(ValueError) as info:
        TOO_BIG_CALLS[how](shape, dtype)
    assert str(info.value) == str(np_info.value)


SIZES = r"""
import json, random
import pygpu
random.seed(7)
sizes = [2, 3, 999, 1000, 1023, 1024, 1025, 1536, 10 ** 6, 2 ** 63 - 1, 2 ** 62]
for k in range(6):                  # each unit's edges: 999.5, 1023.5 (Python's round(), ties to even)
    unit = 1 << (10 * k)
    sizes += [int(v * unit) + d for v in (999.4, 999.5, 999.6, 1023.4, 1023.5, 1023.6, 1.0, 9.995, 99.95)
              for d in (-1, 0, 1)]
sizes += [random.randrange(2, 2 ** 63) >> random.randrange(62) for _ in range(2000)]
out = {}
for n in sorted({n for n in sizes if 2 <= n < 2 ** 63}):
    try:
        pygpu.mem_alloc(n)
    except pygpu.GPUMemoryError as e:
        out[n] = str(e)
print(json.dumps(out))
"""


@pytest.mark.skipif(pygpu.backend != "host", reason="a 1-byte device (PYGPU_HOST_MEMORY)")
def test_out_of_memory_sizes_are_numpys_words(run_python):
    said = json.loads(run_python(SIZES, env={"PYGPU_BACKEND": "host", "PYGPU_HOST_MEMORY": "1"}).stdout.splitlines()[-1])
    assert len(said) > 1500
    bad = {n: s for n, s in said.items()
           if not s.startswith("Unable to allocate %s on device 0 (1 bytes free of 1 bytes): " % numpy_size(int(n)))}
    assert not bad, json.dumps(dict(list(bad.items())[:10]), indent=1)
