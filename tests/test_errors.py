"""Exceptions and the cudaError_t error object (docs/api.md, Errors)."""
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
    # The documented layout: "cudaMalloc: cudaErrorMemoryAllocation (2): out of memory"
    assert s == "%s: %s (%d): %s" % (e.call, e.name, e.code, e.message)
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
