"""The bad-input catalogue: every public entry point given what it must
refuse (wrong types, negative, huge and overflowing shapes and byte counts,
unsupported dtypes, out-of-range indices and axes, mismatched shapes,
read-only sources and destinations, freed allocations, streams and events
misused, hostile DLPack producers, capsules consumed twice).

Each case is (id, call, exception type, regex): the call must raise exactly
that kind of exception, with a message that names the problem, and the
library must work normally afterwards (a round trip through the device).
None may crash or hang.  test_catalogue_size reports how many there are.

Cases whose outcome depends on the backend (what a stream handle or a
device type means) are marked and run only where they apply.
"""
import ctypes
import gc
import re

import numpy as np
import pytest

import pygpu
import pygpu.driver as drv
from dlpack_helpers import (READ_ONLY, USED_LEGACY, FakeProducer, consume, kDLBfloat, kDLBool, kDLCPU, kDLCUDA,
                            kDLFloat, kDLOpenCL, kDLROCM, kDLVulkan)

HOST = pygpu.backend == "host"
AxisError = np.exceptions.AxisError
MiB = 1 << 20


# ---- things the cases act on (made fresh for each call) ------------------------------------------

def g34():
    return pygpu.to_gpu(np.arange(12.0).reshape(3, 4))


def read_only():
    """A read-only GPUArray: an import of a producer that flags its memory
    read-only (a host DLPack tensor on the host backend; on a GPU, where such
    a tensor would be copied, a __cuda_array_interface__ saying so)."""
    if HOST:
        return pygpu.from_dlpack(_keep(FakeProducer(np.arange(4.0), flags=READ_ONLY)))
    src = _keep(pygpu.to_gpu(np.arange(4.0)))
    cai = dict(src.__cuda_array_interface__, data=(src.ptr, True))
    return pygpu.asarray(_keep(type("ReadOnlyCAI", (), {"__cuda_array_interface__": cai})()))


_kept = []


def _keep(obj):
    """Keep producers alive for the session (their tensors must outlive the views)."""
    _kept.append(obj)
    return obj


def freed(nbytes=64):
    a = pygpu.mem_alloc(nbytes)
    a.free()
    return a


def freed_view():
    """A GPUArray whose DeviceAllocation was freed under it."""
    a = pygpu.mem_alloc(96)
    v = pygpu.GPUArray((12,), np.float64, gpudata=a)
    a.free()
    return v


def odd_strides():
    """A float32 view whose stride is not a multiple of its itemsize."""
    a = pygpu.mem_alloc(64)
    return pygpu.GPUArray((3,), np.float32, gpudata=a, base=a, strides=(6,))


def sample(shape=(3, 4), dtype=np.float32):
    return (np.arange(int(np.prod(shape))) % 7).astype(dtype).reshape(shape)


def producer(**kw):
    """from_dlpack of a FakeProducer saying `kw` (kept alive)."""
    p = _keep(FakeProducer(sample(), **kw))
    return lambda: pygpu.from_dlpack(p)


def capsule_of(**kw):
    """from_dlpack of a capsule of a FakeProducer saying `kw`.  The capsule
    dies before the exception is raised on: its destructor is Python code
    (ctypes), which must run neither with an exception pending nor at
    interpreter exit."""
    p = _keep(FakeProducer(sample(), **kw))

    def call():
        cap = p.capsule()
        try:
            pygpu.from_dlpack(cap)
            error = None
        except Exception as e:  # noqa: BLE001 - raised again below
            error = e
        del cap
        if error is not None:
            raise error
    return call


def consumed_twice():
    cap = pygpu.zeros(3).__dlpack__(max_version=(1, 0))
    pygpu.from_dlpack(cap)
    pygpu.from_dlpack(cap)


def consumed_by_another():
    cap = pygpu.zeros(3).__dlpack__()
    m, delete = consume(cap)        # another consumer took it (and deletes it when done)
    try:
        pygpu.from_dlpack(cap)
    finally:
        delete()


class Producer:
    """A DLPack producer whose two methods return what they are given."""

    def __init__(self, capsule, device):
        self.capsule, self.device = capsule, device

    def __dlpack__(self, **kw):
        if isinstance(self.capsule, BaseException):
            raise self.capsule
        return self.capsule

    def __dlpack_device__(self):
        return self.device


class CAI:
    def __init__(self, iface):
        self.__cuda_array_interface__ = iface


def streams_out_of_order():
    a, b = pygpu.Stream(), pygpu.Stream()
    a.__enter__()
    b.__enter__()
    try:
        a.__exit__(None, None, None)
    finally:        # leave the context as it was
        b.__exit__(None, None, None)
        a.__exit__(None, None, None)


def host_free_with_view():
    h = pygpu.mem_alloc_host(16)
    view = memoryview(h)
    try:
        h.free()
    finally:
        view.release()


def drv_attribute():
    drv.Device(0).get_attribute(12345)


# ---- the catalogue -----------------------------------------------------------------------------

C = []          # (id, call, exception, regex, marks)


def case(id_, call, exc, match, *marks):
    C.append(pytest.param(call, exc, match, id=id_, marks=list(marks)))


host_only = pytest.mark.skipif(not HOST, reason="what this value means depends on the backend: host only")

# shapes and constructors
case("empty-negative", lambda: pygpu.empty(-1), ValueError, "negative dimensions")
case("empty-negative-2d", lambda: pygpu.empty((2, -3)), ValueError, "negative dimensions")
case("zeros-negative", lambda: pygpu.zeros(-1), ValueError, "negative dimensions")
case("ones-negative", lambda: pygpu.ones((-5,)), ValueError, "negative dimensions")
case("full-negative", lambda: pygpu.full(-1, 1.0), ValueError, "negative dimensions")
case("GPUArray-negative", lambda: pygpu.GPUArray(-2), ValueError, "negative dimensions")
case("empty-huge-bytes", lambda: pygpu.empty(2 ** 62), ValueError, "too big")
case("empty-huge-product", lambda: pygpu.empty((2 ** 40, 2 ** 40)), ValueError, "too big")
case("empty-size-overflow", lambda: pygpu.empty((2 ** 31,) * 3), ValueError, "too big")
case("empty-size-overflow-with-zero", lambda: pygpu.empty((2 ** 40, 0, 2 ** 40)), ValueError, "too big")
case("empty-dim-beyond-ssize", lambda: pygpu.empty(2 ** 64), ValueError, "index-sized|too large")
case("empty-float-shape", lambda: pygpu.empty(3.0), TypeError, "shape must be an int or a sequence")
case("empty-str-shape", lambda: pygpu.empty("abc"), TypeError, "shape entries must be ints")
case("empty-float-entry", lambda: pygpu.empty([1.5]), TypeError, "shape entries must be ints")
case("empty-None-entry", lambda: pygpu.empty((2, None)), TypeError, "shape entries must be ints")
case("empty-65-dims", lambda: pygpu.empty((1,) * 65), ValueError, r"too many dimensions: 65 \(at most 64\)")
case("GPUArray-65-dims", lambda: pygpu.GPUArray((1,) * 65), ValueError, r"too many dimensions: 65 \(at most 64\)")
case("reshape-65-dims", lambda: pygpu.zeros((1,) * 64).reshape((1,) * 65), ValueError,
     r"too many dimensions: 65 \(at most 64\)")
case("empty-object-dtype", lambda: pygpu.empty(3, object), TypeError, "not supported by GPUArray")
case("empty-str-dtype", lambda: pygpu.empty(3, "U4"), TypeError, "not supported by GPUArray")
case("empty-big-endian", lambda: pygpu.empty(3, ">f8"), TypeError, "native byte order")
case("empty-unknown-dtype", lambda: pygpu.empty(3, "nope"), TypeError, "not understood")
case("empty-datetime", lambda: pygpu.empty(3, "M8[s]"), TypeError, "not supported by GPUArray")
case("empty-structured", lambda: pygpu.empty(3, "i4,f4"), TypeError, "not supported by GPUArray")
case("empty-longdouble", lambda: pygpu.empty(3, np.longdouble), TypeError, "not supported by GPUArray")
case("empty-bad-order", lambda: pygpu.empty(3, order="X"), ValueError, "order must be 'C' or 'F'")
case("empty-allocator-not-callable", lambda: pygpu.empty(3, np.float64, "C", 5), TypeError,
     "allocator must be callable")
case("zeros-bad-order", lambda: pygpu.zeros(3, np.float64, order="Q"), ValueError, "order must be")
case("GPUArray-order-int", lambda: pygpu.GPUArray((2,), np.float64, order=5), ValueError, "order must be")
case("GPUArray-strides-without-gpudata", lambda: pygpu.GPUArray(3, strides=(8,)), ValueError,
     "strides= needs gpudata=")
case("GPUArray-strides-count", lambda: pygpu.GPUArray(3, gpudata=pygpu.mem_alloc(24), strides=(8, 8)),
     ValueError, "strides has 2 entries but the shape has 1")
case("GPUArray-strides-overflow", lambda: pygpu.GPUArray((4,), np.float64, gpudata=pygpu.mem_alloc(32),
                                                         strides=(2 ** 62,)), ValueError, "address space")
case("GPUArray-strides-overflow-int-address",
     lambda: pygpu.GPUArray((4,), np.float64, gpudata=pygpu.mem_alloc(32).ptr, strides=(-2 ** 62,)),
     ValueError, "address space")
case("GPUArray-strides-str", lambda: pygpu.GPUArray(3, gpudata=pygpu.mem_alloc(24), strides="a"), TypeError,
     "must be ints")
case("GPUArray-past-allocation", lambda: pygpu.GPUArray((3,), gpudata=pygpu.mem_alloc(8)), ValueError,
     "does not fit in the 8-byte allocation")
case("GPUArray-negative-stride-before-allocation",
     lambda: pygpu.GPUArray((3,), gpudata=pygpu.mem_alloc(24), strides=(-8,)), ValueError,
     "does not fit in the 24-byte allocation")
case("GPUArray-gpudata-float", lambda: pygpu.GPUArray(3, gpudata=1.5), TypeError, "gpudata must be")
case("GPUArray-gpudata-str", lambda: pygpu.GPUArray(3, gpudata="4096"), TypeError, "gpudata must be")
case("GPUArray-gpudata-bool", lambda: pygpu.GPUArray(3, gpudata=True), TypeError, "gpudata must be")
case("GPUArray-gpudata-negative", lambda: pygpu.GPUArray(3, gpudata=-8), ValueError, "negative")
case("GPUArray-gpudata-huge", lambda: pygpu.GPUArray(3, gpudata=2 ** 70), OverflowError,
     "does not fit in a pointer")
case("GPUArray-gpudata-null", lambda: pygpu.GPUArray(3, gpudata=0), ValueError, "null address")
case("GPUArray-gpudata-freed", lambda: pygpu.GPUArray(3, gpudata=freed()), ValueError, "was freed")
case("GPUArray-base-freed", lambda: (lambda a: pygpu.GPUArray(3, gpudata=a.ptr, base=(a.free(), a)[1]))(
    pygpu.mem_alloc(24)), ValueError, "freed")
case("GPUArray-allocator-returns-str", lambda: pygpu.GPUArray(3, allocator=lambda n: "x"), TypeError,
     "gpudata must be")
case("GPUArray-allocator-too-small", lambda: pygpu.GPUArray(3, allocator=lambda n: pygpu.mem_alloc(1)),
     ValueError, "does not fit")
case("GPUArray-allocator-raises", lambda: pygpu.GPUArray(3, allocator=lambda n: 1 / 0), ZeroDivisionError,
     "division")
case("GPUArray-stream-str", lambda: pygpu.GPUArray(3, stream="x"), TypeError, "stream must be")
case("GPUArray-stream-negative", lambda: pygpu.GPUArray(3, stream=-1), ValueError, "stream handle -1 is negative")
case("to_gpu-object", lambda: pygpu.to_gpu(np.array([object()])), TypeError, "dtype\\('O'\\) is not supported")
case("to_gpu-unicode", lambda: pygpu.to_gpu(np.array(["a"])), TypeError, "is not supported")
case("to_gpu-structured", lambda: pygpu.to_gpu(np.zeros(2, "i4,f4")), TypeError, "is not supported")
case("to_gpu-datetime", lambda: pygpu.to_gpu(np.array([1], "M8[s]")), TypeError, "is not supported")
case("to_gpu-ragged", lambda: pygpu.to_gpu([[1], [1, 2]]), ValueError, "inhomogeneous")
case("to_gpu-dtype-object", lambda: pygpu.to_gpu(np.ones(3), dtype=object), TypeError, "is not supported")
case("to_gpu-allocator-not-callable", lambda: pygpu.to_gpu(np.ones(3), 5, 6), TypeError,
     "allocator must be callable")
case("to_gpu-stream-str", lambda: pygpu.to_gpu(np.ones(3), stream="x"), TypeError, "stream must be")
case("to_gpu-stream-bool", lambda: pygpu.to_gpu(np.ones(3), stream=True), TypeError, "stream must be")
case("to_gpu_async-stream-huge", lambda: pygpu.to_gpu_async(np.ones(3), stream=2 ** 70), OverflowError,
     "stream handle .* does not fit")
case("arange-str-dtype", lambda: pygpu.arange(3, dtype="U1"), TypeError, "not supported")
case("arange-step-zero", lambda: pygpu.arange(0, 10, 0), ZeroDivisionError, "division")
case("full-unconvertible", lambda: pygpu.full(3, "x", np.float32), ValueError, "could not convert")
case("full_like-object", lambda: pygpu.full_like(pygpu.zeros(3), object()), TypeError, "object")
case("zeros_like-int", lambda: pygpu.zeros_like(3), TypeError, "take a GPUArray or a NumPy array")
case("empty_like-negative-shape", lambda: pygpu.empty_like(pygpu.zeros(3), shape=-1), ValueError,
     "negative dimensions")
case("empty_like-object-dtype", lambda: pygpu.empty_like(pygpu.zeros(3), dtype=object), TypeError,
     "not supported")
case("ones_like-bad-order", lambda: pygpu.ones_like(np.zeros(3), order="X"), ValueError, "order must be")
case("concatenate-empty", lambda: pygpu.concatenate([]), ValueError, "at least one array")
case("concatenate-axis", lambda: pygpu.concatenate([pygpu.zeros(3)], axis=1), AxisError, "out of bounds")
case("concatenate-axis-str", lambda: pygpu.concatenate([pygpu.zeros(3)], axis="x"), TypeError, "integer")
case("concatenate-0d", lambda: pygpu.concatenate([pygpu.zeros(())]), ValueError, "zero-dimensional")
case("concatenate-ndim", lambda: pygpu.concatenate([pygpu.zeros(3), pygpu.zeros((3, 1))]), ValueError,
     "same number of dimensions")
case("concatenate-shapes", lambda: pygpu.concatenate([pygpu.zeros((2, 3)), pygpu.zeros((2, 4))]), ValueError,
     "must match exactly")
case("stack-shapes", lambda: pygpu.stack([pygpu.zeros(2), pygpu.zeros(3)]), ValueError, "same shape")
case("stack-empty", lambda: pygpu.stack([]), ValueError, "at least one array")
case("stack-axis", lambda: pygpu.stack([pygpu.zeros(3)], axis=5), AxisError, "out of bounds")

# indexing
case("index-too-many", lambda: g34()[1, 2, 3], IndexError, "too many indices")
case("index-two-ellipses", lambda: g34()[..., ...], IndexError, "single ellipsis")
case("index-out-of-range", lambda: g34()[3], IndexError, "index 3 is out of bounds for axis 0 with size 3")
case("index-negative-out-of-range", lambda: g34()[-4], IndexError, "index -4 is out of bounds")
case("index-axis-1-out-of-range", lambda: g34()[0, 4], IndexError, "out of bounds for axis 1")
case("index-list", lambda: g34()[[0, 1]], IndexError, "integer-array and boolean-mask indexing")
case("index-bool", lambda: g34()[True], IndexError, "integer-array and boolean-mask indexing")
case("index-int-array", lambda: g34()[np.array([0])], IndexError, "integer-array and boolean-mask")
case("index-mask", lambda: g34()[np.array([True, False, True])], IndexError, "boolean-mask")
case("index-gpuarray", lambda: (lambda g: g[g])(g34()), IndexError, "integer-array and boolean-mask")
case("index-str", lambda: g34()["a"], IndexError, "valid indices, not str")
case("index-float", lambda: g34()[1.5], IndexError, "valid indices, not float")
case("index-dict", lambda: g34()[{}], IndexError, "valid indices, not dict")
case("index-object", lambda: g34()[object()], IndexError, "valid indices, not object")
case("index-129-entries", lambda: g34()[(None,) * 129], IndexError, "too many indices")
case("index-too-many-new-axes", lambda: g34()[(None,) * 63], IndexError,
     r"too many dimensions: the index gives 65 \(at most 64\)")
case("index-huge", lambda: g34()[2 ** 70], IndexError, "cannot fit 'int' into an index-sized integer")
case("index-step-zero", lambda: g34()[::0], ValueError, "slice step cannot be zero")
case("index-float-slice", lambda: g34()[1.5:], TypeError, "slice indices must be integers")
case("index-0d", lambda: pygpu.zeros(())[0], IndexError, "too many indices")
case("len-0d", lambda: len(pygpu.zeros(())), TypeError, "len\\(\\) of unsized object")
case("iter-0d", lambda: iter(pygpu.zeros(())), TypeError, "iteration over a 0-d array")
case("bool-many", lambda: bool(pygpu.zeros(3)), ValueError, "more than one element is ambiguous")
case("bool-empty", lambda: bool(pygpu.zeros(0)), ValueError, "empty array is ambiguous")

# assignment and set
case("setitem-broadcast", lambda: g34().__setitem__(slice(None), np.ones(5)), ValueError,
     "could not broadcast input array from shape \\(5,\\) into shape \\(3, 4\\)")
case("delitem", lambda: g34().__delitem__(0), ValueError, "cannot delete array elements")
case("setitem-read-only", lambda: read_only().__setitem__(0, 1.0), ValueError, "read-only")
case("set-read-only", lambda: read_only().set(np.ones(4)), ValueError, "read-only")
case("set_async-read-only", lambda: read_only().set_async(np.ones(4)), ValueError, "read-only")
case("fill-read-only", lambda: read_only().fill(1.0), ValueError, "read-only")
case("setitem-read-only-from-gpu", lambda: read_only().__setitem__(Ellipsis, pygpu.zeros(4)), ValueError,
     "read-only")
case("setitem-int8-overflow", lambda: pygpu.zeros(3, np.int8).__setitem__(0, 300), OverflowError,
     "out of bounds for int8")
case("setitem-complex-to-float", lambda: pygpu.zeros(3).__setitem__(0, 1j), TypeError, "complex")
case("setitem-str-to-float", lambda: pygpu.zeros(3).__setitem__(0, "x"), ValueError, "could not convert")
case("setitem-gpuarray-shape", lambda: pygpu.zeros(3).__setitem__(slice(None), pygpu.zeros(4)), ValueError,
     "could not broadcast")
case("set-object", lambda: pygpu.zeros(3).set(object()), TypeError, "object")
case("set-shape", lambda: pygpu.zeros(3).set(np.ones(4)), ValueError, "could not broadcast")
case("set_async-shape", lambda: pygpu.zeros(3).set_async(np.ones(4)), ValueError, "could not broadcast")
case("set-stream-list", lambda: pygpu.zeros(3).set(np.ones(3), stream=[]), TypeError, "stream must be")
case("fill-many-values", lambda: pygpu.zeros(3).fill([1, 2]), ValueError, "fill\\(\\) takes one value")
case("fill-stream-list", lambda: pygpu.zeros(3).fill(1, stream=[]), TypeError, "stream must be")

# get
case("get-shape", lambda: pygpu.zeros(3).get(ary=np.empty(4)), ValueError,
     "ary has shape \\(4,\\) but the array has \\(3,\\)")
case("get-dtype", lambda: pygpu.zeros(3).get(ary=np.empty(3, np.float32)), TypeError, "ary has dtype")
case("get-read-only", lambda: pygpu.zeros(3).get(ary=np.frombuffer(bytes(24))), ValueError, "ary is read-only")
case("get-not-ndarray", lambda: pygpu.zeros(3).get(ary=[0, 0, 0]), TypeError, "takes a numpy.ndarray")
case("get-stream-str", lambda: pygpu.zeros(3).get(stream="x"), TypeError, "stream must be")
case("get_async-not-ndarray", lambda: pygpu.zeros(3).get_async(ary=3), TypeError, "takes a numpy.ndarray")
case("asarray-copy-false", lambda: np.asarray(pygpu.zeros(3), copy=False), ValueError, "without a copy")
case("__array__-bad-dtype", lambda: pygpu.zeros(3).__array__(dtype="nope"), TypeError, "not understood")

# views and shape methods
case("view-object", lambda: pygpu.zeros(3).view(object), TypeError, "not supported by GPUArray")
case("view-indivisible", lambda: pygpu.zeros(3, np.int8).view(np.int16), ValueError, "must divide")
case("view-not-contiguous", lambda: pygpu.zeros((3, 4))[:, ::2].view(np.int8), ValueError,
     "last axis must be contiguous")
case("view-0d-itemsize", lambda: pygpu.zeros(()).view(np.int32), ValueError, "0-d array")
case("reshape-size", lambda: pygpu.zeros(12).reshape(5, 3), ValueError,
     "cannot reshape array of size 12 into shape \\(5, 3\\)")
case("reshape-two-unknown", lambda: pygpu.zeros(12).reshape(-1, -1), ValueError, "only specify one unknown dimension")
case("reshape-negative", lambda: pygpu.zeros(12).reshape(-2, -6), ValueError, "negative dimensions")
case("reshape-keyword", lambda: pygpu.zeros(12).reshape(3, 4, foo=1), TypeError, "only the keyword")
case("reshape-order-K", lambda: pygpu.zeros(12).reshape(3, 4, order="K"), ValueError, "not permitted")
case("reshape-nothing", lambda: pygpu.zeros(12).reshape(), TypeError, "needs a shape")
case("reshape-size-overflow", lambda: pygpu.empty(0).reshape(2 ** 33, 2 ** 31), ValueError, "overflows")
case("reshape-size-overflow-with-zero", lambda: pygpu.empty(0).reshape(2 ** 62, 4, 0), ValueError, "overflows")
case("reshape-str", lambda: pygpu.zeros(12).reshape("a"), TypeError, "must be ints")
case("ravel-order", lambda: pygpu.zeros(12).ravel("X"), ValueError, "order must be")
case("flatten-order", lambda: pygpu.zeros(12).flatten("X"), ValueError, "order must be")
case("copy-order", lambda: pygpu.zeros(12).copy("X"), ValueError, "order must be")
case("copy-stream-list", lambda: pygpu.zeros(3).copy(stream=[]), TypeError, "stream must be")
case("transpose-repeated", lambda: pygpu.zeros((2, 3)).transpose(0, 0), ValueError, "repeated axis")
case("transpose-count", lambda: pygpu.zeros((2, 3)).transpose(0,), ValueError, "axes don't match")
case("transpose-axis", lambda: pygpu.zeros((2, 3)).transpose(0, 5), AxisError, "axis 5 is out of bounds")
case("transpose-huge-axis", lambda: pygpu.zeros((2, 3)).transpose(0, 2 ** 70), IndexError, "cannot fit")
case("transpose-str", lambda: pygpu.zeros((2, 3)).transpose("ab"), TypeError, "str")
case("swapaxes-axis", lambda: pygpu.zeros((2, 3)).swapaxes(0, 2), AxisError, "out of bounds")
case("swapaxes-one-arg", lambda: pygpu.zeros((2, 3)).swapaxes(0), TypeError, "swapaxes")
case("squeeze-not-one", lambda: pygpu.zeros((2, 3)).squeeze(0), ValueError, "size not equal to one")
case("squeeze-duplicate", lambda: pygpu.zeros((1, 3)).squeeze((0, 0)), ValueError, "duplicate value")
case("squeeze-axis", lambda: pygpu.zeros((2, 3)).squeeze(7), AxisError, "axis 7 is out of bounds")
case("squeeze-0d-axis", lambda: pygpu.zeros(()).squeeze(1), AxisError, "out of bounds")
case("flags-unknown", lambda: pygpu.zeros(3).flags["X"], KeyError, "unknown flag")

# freed allocations under arrays
case("freed-get", lambda: freed_view().get(), ValueError, "was freed")
case("freed-setitem", lambda: freed_view().__setitem__(Ellipsis, 1.0), ValueError, "was freed")
case("freed-set", lambda: freed_view().set(np.ones(12)), ValueError, "was freed")
case("freed-fill", lambda: freed_view().fill(1.0), ValueError, "was freed")
case("freed-copy", lambda: freed_view().copy(), ValueError, "was freed")
case("freed-as-source", lambda: pygpu.zeros(12).__setitem__(Ellipsis, freed_view()), ValueError, "was freed")
case("freed-reshape-copy", lambda: freed_view().reshape(3, 4)[:, :2].reshape(-1), ValueError, "was freed")
case("freed-dlpack", lambda: freed_view().__dlpack__(), ValueError, "was freed")
case("freed-numpy-from_dlpack", lambda: np.from_dlpack(freed_view()), ValueError, "was freed", host_only)
case("freed-gpudata", lambda: (lambda x: (x.gpudata.free(), x.get()))(pygpu.zeros(4)), ValueError,
     "was freed")


def test_repr_of_an_array_whose_memory_was_freed_says_so():
    """repr() and str() never raise for a freed array (a debugger, a log
    line, an exception message show it): they say what it was."""
    v = freed_view()
    for text in (repr(v), str(v)):
        assert text.startswith("<GPUArray of freed memory: shape ") and f"dtype({v.dtype.name!r})" in text, text
    with pytest.raises(ValueError, match="was freed"):
        v.get()

# raw memory
case("mem_alloc-negative", lambda: pygpu.mem_alloc(-1), ValueError, "nbytes must be >= 0")
case("mem_alloc-float", lambda: pygpu.mem_alloc(1.0), TypeError, "nbytes must be an int")
case("mem_alloc-bool", lambda: pygpu.mem_alloc(True), TypeError, "nbytes must be an int")
case("mem_alloc-huge", lambda: pygpu.mem_alloc(2 ** 63), OverflowError, "nbytes is too large")
case("mem_alloc-beyond-64-bits", lambda: pygpu.mem_alloc(2 ** 64), OverflowError, "nbytes is too large")
case("mem_alloc-stream-float", lambda: pygpu.mem_alloc(8, stream=1.5), TypeError, "stream must be")
case("mem_alloc_host-negative", lambda: pygpu.mem_alloc_host(-1), ValueError, "must be >= 0")
case("mem_alloc_host-str", lambda: pygpu.mem_alloc_host("1"), TypeError, "must be an int")
case("mem_alloc_host-huge", lambda: pygpu.mem_alloc_host(2 ** 62), pygpu.GPUMemoryError, "out of memory")
case("DeviceAllocation-direct", lambda: pygpu.DeviceAllocation(), TypeError, "cannot create")
case("HostAllocation-direct", lambda: pygpu.HostAllocation(), TypeError, "cannot create")
case("freed-ptr", lambda: freed().ptr, ValueError, "was freed")
case("freed-int", lambda: int(freed()), ValueError, "was freed")
case("memcpy_htod-freed", lambda: pygpu.memcpy_htod(freed(), b"12345678"), ValueError, "was freed")
case("memcpy_dtoh-freed", lambda: pygpu.memcpy_dtoh(bytearray(8), freed()), ValueError, "was freed")
case("memcpy_dtod-freed", lambda: pygpu.memcpy_dtod(pygpu.mem_alloc(8), freed(), 8), ValueError, "was freed")
case("memset_d8-freed", lambda: pygpu.memset_d8(freed(), 1, 8), ValueError, "was freed")
case("memcpy_htod-too-big", lambda: pygpu.memcpy_htod(pygpu.mem_alloc(8), np.empty(4)), ValueError,
     "32 bytes do not fit in the 8-byte destination")
case("memcpy_dtoh-too-big", lambda: pygpu.memcpy_dtoh(np.empty(4), pygpu.mem_alloc(8)), ValueError,
     "do not fit in the 8-byte source")
case("memcpy_dtod-too-big", lambda: pygpu.memcpy_dtod(pygpu.mem_alloc(8), pygpu.mem_alloc(8), 16), ValueError,
     "do not fit")
case("memset_d8-too-big", lambda: pygpu.memset_d8(pygpu.mem_alloc(8), 1, 9), ValueError, "do not fit")
case("memcpy_htod-strided", lambda: pygpu.memcpy_htod(pygpu.mem_alloc(64), np.empty((4, 4))[:, ::2]),
     ValueError, "not contiguous")
case("memcpy_htod-str", lambda: pygpu.memcpy_htod(pygpu.mem_alloc(64), "abc"), TypeError, "bytes-like")
case("memcpy_htod-bool-address", lambda: pygpu.memcpy_htod(True, b"x"), TypeError, "device address must be")
case("memcpy_htod-float-address", lambda: pygpu.memcpy_htod(1.5, b"x"), TypeError, "device address must be")
case("memcpy_htod-negative-address", lambda: pygpu.memcpy_htod(-8, b"x"), ValueError,
     "device address -8 is negative")
case("memcpy_dtoh-huge-address", lambda: pygpu.memcpy_dtoh(bytearray(1), 2 ** 70), OverflowError,
     "does not fit in a pointer")
case("memcpy_dtoh-read-only", lambda: pygpu.memcpy_dtoh(b"1234", pygpu.mem_alloc(8)), BufferError,
     "not writable")
case("memcpy_htod-null", lambda: pygpu.memcpy_htod(0, b"1234"), ValueError, "device address 0 is null: 4 bytes")
case("memset_d8-null", lambda: pygpu.memset_d8(0, 1, 8), ValueError, "device address 0 is null")
case("memset_d8-value-big", lambda: pygpu.memset_d8(pygpu.mem_alloc(8), 300, 8), OverflowError,
     "greater than maximum")
case("memset_d8-value-negative", lambda: pygpu.memset_d8(pygpu.mem_alloc(8), -1, 8), OverflowError,
     "less than minimum")
case("memset_d8-negative-count", lambda: pygpu.memset_d8(pygpu.mem_alloc(8), 1, -8), ValueError, ">= 0")
case("memcpy_dtod-negative-count", lambda: pygpu.memcpy_dtod(pygpu.mem_alloc(8), pygpu.mem_alloc(8), -1),
     ValueError, "nbytes must be >= 0")
case("memcpy_dtod-huge-count", lambda: pygpu.memcpy_dtod(pygpu.mem_alloc(8), pygpu.mem_alloc(8), 2 ** 64),
     OverflowError, "too large")
case("memcpy_htod-stream-negative", lambda: pygpu.memcpy_htod(pygpu.mem_alloc(8), b"x", stream=-3), ValueError,
     "negative")
case("memcpy_htod_async-stream-str", lambda: pygpu.memcpy_htod_async(pygpu.mem_alloc(8), b"x", stream="s"),
     TypeError, "stream must be")
case("HostAllocation-free-with-view", host_free_with_view, BufferError, "while 1 view")
case("set_memory_pool-ambiguous", lambda: pygpu.set_memory_pool(np.array([1, 2])), ValueError, "ambiguous")
case("trim_memory_pool-negative", lambda: pygpu.trim_memory_pool(-1), ValueError, "keep_bytes must be >= 0")
case("trim_memory_pool-device-str", lambda: pygpu.trim_memory_pool(0, "x"), TypeError, "device must be")
case("trim_memory_pool-device-huge", lambda: pygpu.trim_memory_pool(0, 2 ** 70), ValueError, "out of range")
case("trim_memory_pool-device-absent", lambda: pygpu.trim_memory_pool(0, 64), ValueError, "out of range")

# devices
case("set_device-negative", lambda: pygpu.set_device(-1), ValueError, "device -1 out of range")
case("set_device-huge", lambda: pygpu.set_device(2 ** 70), ValueError, "out of range")
case("set_device-str", lambda: pygpu.set_device("0"), TypeError, "device ordinal")
case("set_device-float", lambda: pygpu.set_device(1.0), TypeError, "device ordinal")
case("Device-absent", lambda: pygpu.Device(64), ValueError, "device 64 out of range")
case("Device-str", lambda: pygpu.Device("0"), TypeError, "device ordinal")
case("Device-float", lambda: pygpu.Device(1.5), TypeError, "device ordinal")
case("Device-exit-without-enter", lambda: pygpu.Device(0).__exit__(None, None, None), RuntimeError,
     "without a matching __enter__")
case("cudaError_t-str", lambda: pygpu.cudaError_t("x"), TypeError, "made from an int")
case("cudaError_t-huge", lambda: pygpu.cudaError_t(2 ** 40), OverflowError, "out of range")

# streams and events
case("Stream-priority-str", lambda: pygpu.Stream(priority="1"), TypeError, "priority must be an int")
case("Stream-priority-float", lambda: pygpu.Stream(priority=1.5), TypeError, "priority must be an int")
case("Stream-non_blocking-array", lambda: pygpu.Stream(non_blocking=np.array([1, 2])), TypeError,
     "non_blocking must be a bool")
case("Stream-wait_event-int", lambda: pygpu.Stream().wait_event(3), TypeError, "takes a pygpu.Event")
case("Stream-record-int", lambda: pygpu.Stream().record(3), TypeError, "takes a pygpu.Event or None")
case("Stream-exit-without-enter", lambda: pygpu.Stream().__exit__(None, None, None), RuntimeError,
     "without a matching __enter__")
case("Stream-exits-out-of-order", streams_out_of_order, RuntimeError, "out of order")
case("Event-interprocess-timing", lambda: pygpu.Event(interprocess=True), ValueError, "cannot record timing")
case("Event-never-recorded", lambda: pygpu.Event().elapsed_time(pygpu.Event()), ValueError, "never recorded")
case("Event-no-timing", lambda: pygpu.Event(timing=False).record().elapsed_time(pygpu.Event().record()),
     ValueError, "timing=False")
case("Event-elapsed-str", lambda: pygpu.Event().record().elapsed_time("x"), TypeError, "expected a pygpu.Event")
case("Event-time_since-int", lambda: pygpu.Event().time_since(3), TypeError, "expected a pygpu.Event")
case("Event-record-stream-str", lambda: pygpu.Event().record(stream="x"), TypeError, "stream must be")
case("Event-record-stream-negative", lambda: pygpu.Event().record(stream=-1), ValueError, "negative")
case("Event-record-stream-huge", lambda: pygpu.Event().record(stream=2 ** 70), OverflowError,
     "does not fit")

# transfer settings and page-locked memory
case("transfer_config-chunk-small", lambda: pygpu.transfer_config(chunk=10), ValueError, "at least 4096")
case("transfer_config-depth-1", lambda: pygpu.transfer_config(depth=1), ValueError, "depth must be 2..16")
case("transfer_config-depth-17", lambda: pygpu.transfer_config(depth=17), ValueError, "depth must be 2..16")
case("transfer_config-threads-0", lambda: pygpu.transfer_config(threads=0), ValueError, "threads must be 1..64")
case("transfer_config-threads-65", lambda: pygpu.transfer_config(threads=65), ValueError, "threads must be")
case("transfer_config-threads-str", lambda: pygpu.transfer_config(threads="4"), TypeError, "must be an int")
case("transfer_config-min-negative", lambda: pygpu.transfer_config(min_bytes=-1), ValueError, ">= 0")
case("transfer_config-chunk-huge", lambda: pygpu.transfer_config(chunk=2 ** 70), OverflowError, "too large")
case("transfer_config-crowd-up-small", lambda: pygpu.transfer_config(crowd_up=1), ValueError, "crowd_up must be 0")
case("transfer_config-crowd-down-negative", lambda: pygpu.transfer_config(crowd_down=-1), ValueError, ">= 0")
case("transfer_config-crowd-down-float", lambda: pygpu.transfer_config(crowd_down=1.5), TypeError, "must be an int")
case("transfer_config-threads-alone-65", lambda: pygpu.transfer_config(threads_alone=65), ValueError,
     "threads_alone must be 0 .as threads. or 1..64, not 65")
case("transfer_config-threads-alone-negative", lambda: pygpu.transfer_config(threads_alone=-1), ValueError, ">= 0")
case("transfer_config-crowd-threads-65", lambda: pygpu.transfer_config(crowd_threads=65), ValueError,
     "crowd_threads must be 0 .as threads. or 1..64, not 65")
case("transfer_config-crowd-threads-negative", lambda: pygpu.transfer_config(crowd_threads=-1), ValueError, ">= 0")
case("transfer_config-positional", lambda: pygpu.transfer_config(8), TypeError, "positional")
case("set_pinned_pool_limit-negative", lambda: pygpu.set_pinned_pool_limit(-1), ValueError, "limit must be >= 0")
case("set_pinned_pool_limit-str", lambda: pygpu.set_pinned_pool_limit("x"), TypeError, "must be an int")
case("is_pinned-int", lambda: pygpu.is_pinned(3), TypeError, "bytes-like")
case("is_pinned-None", lambda: pygpu.is_pinned(None), TypeError, "bytes-like")
case("pagelocked_empty-negative", lambda: pygpu.pagelocked_empty(-1, np.float32), ValueError, "negative")
case("pagelocked_empty-huge", lambda: pygpu.pagelocked_empty(2 ** 62, np.float32), ValueError, "too big")  # (as NumPy)
case("pagelocked_empty-object", lambda: pygpu.pagelocked_empty(3, object), TypeError, "plain data")
case("register_host_memory-str", lambda: pygpu.register_host_memory("abc"), TypeError, "takes a NumPy array")
case("register_host_memory-strided", lambda: pygpu.register_host_memory(np.ones((4, 4))[:, ::2]), ValueError,
     "contiguous")

# DLPack export
case("dlpack-stream-handle-on-cpu", lambda: pygpu.zeros(3).__dlpack__(stream=5), ValueError,
     "kDLCPU array takes stream=None", host_only)
case("dlpack-max_version-int", lambda: pygpu.zeros(3).__dlpack__(max_version=3), TypeError,
     "max_version must be None or a tuple of two ints")
case("dlpack-max_version-huge", lambda: pygpu.zeros(3).__dlpack__(max_version=(2 ** 70, 0)), OverflowError,
     "max_version: .* is out of range")
case("dlpack-dl_device-huge", lambda: pygpu.zeros(3).__dlpack__(dl_device=(2 ** 70, 0)), OverflowError,
     "dl_device: .* is out of range")
case("dlpack-dl_device-elsewhere", lambda: pygpu.zeros(3).__dlpack__(dl_device=(kDLVulkan, 0)), BufferError,
     "cannot export this array")
case("dlpack-copy-int", lambda: pygpu.zeros(3).__dlpack__(copy=1), TypeError, "copy must be True, False or None")
case("dlpack-positional", lambda: pygpu.zeros(3).__dlpack__(1), TypeError, "no positional arguments")
case("dlpack-unknown-keyword", lambda: pygpu.zeros(3).__dlpack__(foo=1), TypeError, "unexpected keyword")
case("dlpack-read-only-legacy", lambda: read_only().__dlpack__(), BufferError, "read-only")
case("dlpack-stride-not-multiple", lambda: odd_strides().__dlpack__(), BufferError,
     "not a multiple of the itemsize")

# DLPack import: hostile producers
case("dlpack-lanes-4", producer(lanes=4), BufferError, "4 lanes")
case("dlpack-lanes-0", producer(lanes=0), BufferError, "0 lanes")
case("dlpack-bfloat16", producer(code=kDLBfloat, bits=16), BufferError, "bfloat16")
case("dlpack-float24", producer(code=kDLFloat, bits=24), BufferError, "float24")
case("dlpack-float0", producer(code=kDLFloat, bits=0), BufferError, "float0")
case("dlpack-bool16", producer(code=kDLBool, bits=16), BufferError, "bool16")
case("dlpack-opaque", producer(code=3, bits=64), BufferError, "opaque handle")
case("dlpack-type-code-200", producer(code=200, bits=8), BufferError, "type code 200")
case("dlpack-ndim-65", producer(ndim=65), BufferError, "65 dimensions: a GPUArray has 0 to 64")
case("dlpack-ndim-negative", producer(ndim=-1), BufferError, "-1 dimensions")
case("dlpack-null-shape", producer(null_shape=True), BufferError, "no shape")
case("dlpack-negative-dim", producer(shape=(-2, 4), strides=None), BufferError, "negative dimension")
case("dlpack-stride-huge", producer(strides=(2 ** 62, 1)), BufferError, "stride .* is out of range")
case("dlpack-stride-min", producer(strides=(-2 ** 63, 1)), BufferError, "stride .* is out of range")
case("dlpack-bytes-overflow", producer(shape=(2 ** 40, 2 ** 40), strides=None), BufferError,
     "byte count overflows")
case("dlpack-size-overflow", producer(shape=(2 ** 31, 2 ** 31, 2 ** 31), strides=(1, 1, 1)), BufferError,
     "size overflows")
case("dlpack-span-overflow", producer(shape=(2 ** 62,), strides=(1,)), BufferError, "address space")
case("dlpack-negative-span-overflow", producer(shape=(3, 4), strides=(-2 ** 60, 2 ** 60)), BufferError,
     "address space")
case("dlpack-null-data", producer(data=0), BufferError, "null data pointer")
case("dlpack-byte_offset", producer(byte_offset=2 ** 63 + 5), BufferError, "byte_offset is out of range")
case("dlpack-opencl", producer(device=(kDLOpenCL, 0)), BufferError, "kDLOpenCL .* cannot reach")
case("dlpack-vulkan", producer(device=(kDLVulkan, 3)), BufferError, "kDLVulkan .* cannot reach")
case("dlpack-cuda-on-host", producer(device=(kDLCUDA, 0)), BufferError, "kDLCUDA .* cannot reach", host_only)
case("dlpack-rocm-on-host", producer(device=(kDLROCM, 0)), BufferError, "kDLROCM .* cannot reach", host_only)
case("dlpack-device-type-99", producer(device=(99, 0)), BufferError, "device_type 99")
case("dlpack-device-type-negative", producer(device=(-3, 0)), BufferError, "device_type -3")
case("dlpack-version-2", capsule_of(version=(2, 0)), BufferError, "DLPack 2.0 capsule")
case("dlpack-version-0", capsule_of(version=(0, 5)), BufferError, "DLPack 0.5 capsule")
case("dlpack-capsule-name", capsule_of(name=b"not_a_tensor"), ValueError, "not a DLPack capsule")
case("dlpack-capsule-used-name", capsule_of(name=USED_LEGACY), BufferError, "already consumed")
case("dlpack-consumed-twice", consumed_twice, BufferError, "already consumed")
case("dlpack-consumed-by-another", consumed_by_another, BufferError, "already consumed")
case("dlpack-producer-returns-int", lambda: pygpu.from_dlpack(Producer(3, (kDLCPU, 0))), TypeError,
     "must return a DLPack capsule")
case("dlpack-producer-raises", lambda: pygpu.from_dlpack(Producer(KeyError("boom"), (kDLCPU, 0))), KeyError,
     "boom")
case("dlpack-device-str", lambda: pygpu.from_dlpack(Producer(3, "cpu")), TypeError, "tuple of two ints")
case("dlpack-device-3-tuple", lambda: pygpu.from_dlpack(Producer(3, (1, 0, 0))), TypeError,
     "tuple of two ints")
case("dlpack-device-huge", lambda: pygpu.from_dlpack(Producer(3, (2 ** 70, 0))), OverflowError,
     "__dlpack_device__\\(\\): .* is out of range")
case("from_dlpack-int", lambda: pygpu.from_dlpack(3), TypeError, "__dlpack__ and __dlpack_device__")
case("from_dlpack-nothing", lambda: pygpu.from_dlpack(), TypeError, "missing required argument 'x'")
case("from_dlpack-device-str", lambda: pygpu.from_dlpack(np.zeros(3), device="x"), TypeError,
     "device must be a pygpu.Device")
case("from_dlpack-device-other-type", lambda: pygpu.from_dlpack(np.zeros(3), device=(kDLCUDA, 0)), BufferError,
     "cannot be on kDLCUDA", host_only)
case("from_dlpack-device-absent", lambda: pygpu.from_dlpack(np.zeros(3), device=64), ValueError,
     "device 64 out of range")
case("from_dlpack-copy-str", lambda: pygpu.from_dlpack(np.zeros(3), copy="yes"), TypeError, "copy must be")
case("from_dlpack-stream-keyword", lambda: pygpu.from_dlpack(np.zeros(3), stream=1), TypeError,
     "unexpected keyword argument 'stream'")
case("asarray-object", lambda: pygpu.asarray(object()), TypeError, "is not supported")
case("asarray-str-dtype", lambda: pygpu.asarray([1, 2], dtype="U3"), TypeError, "is not supported")
case("asarray-nothing", lambda: pygpu.asarray(), TypeError, "missing required argument 'obj'")
case("asarray-cai-not-dict", lambda: pygpu.asarray(CAI(3)), TypeError, "must be a dict")
case("asarray-cai-no-shape", lambda: pygpu.asarray(CAI({"typestr": "<f8", "data": (0, False), "version": 3})),
     ValueError, "no 'shape' entry")
case("asarray-cai-on-host", lambda: pygpu.asarray(CAI({"shape": (3,), "typestr": "<f8", "data": (4096, False),
                                                        "version": 3})), BufferError, "describes CUDA memory",
     host_only)

# the original PyGPU (pygpu.lowlevel) and PyCUDA's driver (pygpu.driver)
case("DeviceArray-float", lambda: pygpu.DeviceArray_int64(1.5), TypeError, "takes a size, a shape or a buffer")
case("DeviceArray-negative", lambda: pygpu.DeviceArray_int64(-1), ValueError, "negative dimensions")
case("DeviceArray-dtype", lambda: pygpu.DeviceArray_int64(np.zeros(3)), TypeError, "holds int64 data, not float64")
case("DeviceArray-order", lambda: pygpu.DeviceArray_int64([2, 2], "X"), TypeError, "order must be")
case("DeviceArray-arguments", lambda: pygpu.DeviceArray_int64(1, 2, 3, 4, 5), TypeError, "takes a size")
case("DeviceArray-negative-device-address", lambda: pygpu.DeviceArray_int64(0, -5, (3,)), ValueError, "negative")
case("pointer_wrapper-negative", lambda: pygpu.pointer_wrapper_int64(-1), ValueError, "cannot be negative")
case("pointer_wrapper-str", lambda: pygpu.pointer_wrapper_int64("1"), TypeError, "address must be an int")
case("pointer_wrapper-unknown-memory", lambda: pygpu.pointer_wrapper_int64(1234).get(), ValueError,
     "not known to be host memory")
case("pointer_wrapper-device-memory", lambda: (lambda d: (d.allocate(), d.device_data().get()))(
    pygpu.DeviceArray_int64(3)), ValueError, "points to device memory")
case("pointer_wrapper-create-negative", lambda: pygpu.pointer_wrapper_int64().create(-1), ValueError,
     "cannot be negative")
case("cudaSetDevice-str", lambda: pygpu.cudaSetDevice("0"), TypeError, "device must be an int")
case("cudaEventRecord-int", lambda: pygpu.cudaEventRecord(3), TypeError, "expected a cudaEvent_t")
case("cudaStreamSynchronize-int", lambda: pygpu.cudaStreamSynchronize(3), TypeError, "expected a cudaStream_t")
case("cudaGetErrorName-str", lambda: pygpu.cudaGetErrorName("x"), TypeError, "made from an int")
case("driver-init-flags", lambda: drv.init(3), ValueError, "flags=0 only")
case("driver-Device-bus-id", lambda: drv.Device("zz:00.0"), ValueError, "not a PCI bus id")
case("driver-Device-absent", lambda: drv.Device(64), ValueError, "out of range")
case("driver-Stream-flags", lambda: drv.Stream(4), ValueError, "unknown stream flags")
case("driver-Event-flags", lambda: drv.Event(64), ValueError, "unknown event flags")
case("driver-memcpy_htod-float", lambda: drv.memcpy_htod(1.5, b"x"), TypeError, "device address must be")
case("driver-from_device-too-big", lambda: drv.from_device(pygpu.mem_alloc(8), (4,), np.float64), ValueError,
     "do not fit")
case("driver-aligned_empty-alignment", lambda: drv.aligned_empty(3, np.float64, alignment=3), ValueError,
     "power of two")
case("driver-Context", lambda: drv.Context(), drv.LogicError, "no context objects")
case("driver-attribute", drv_attribute, ValueError, "not a valid device_attribute")
case("driver-to_device-int", lambda: drv.to_device(3), TypeError, "bytes-like")
case("driver-pagelocked-object", lambda: drv.pagelocked_empty(3, object), TypeError, "plain data")


def round_trip():
    a = np.arange(7.0) * 3
    g = pygpu.to_gpu(a)
    np.testing.assert_array_equal(g.get(), a)
    np.testing.assert_array_equal(g[::-2].copy().get(), a[::-2])


@pytest.mark.parametrize("call, exc, match", C)
def test_bad_input(call, exc, match):
    with pytest.raises(exc) as info:
        call()
    assert type(info.value) is exc or (exc is AxisError and isinstance(info.value, AxisError)), \
        f"{type(info.value).__name__} is not {exc.__name__} itself"
    assert re.search(match, str(info.value)), f"message {str(info.value)!r} does not say {match!r}"
    round_trip()


def test_catalogue_size():
    ids = [p.id for p in C]
    assert len(set(ids)) == len(ids), "case ids repeat"
    print(f"\nbad-input catalogue: {len(C)} cases")
    assert len(C) >= 150


@pytest.fixture(autouse=True, scope="module")
def _release_kept():
    """The catalogue's producers and capsules go when the module's tests are
    done, while the interpreter is whole: a capsule whose destructor is
    Python code (the ctypes producer's) must not be freed at exit."""
    yield
    _kept.clear()
    gc.collect()


def test_refused_producers_are_deleted_once():
    """Every producer of the catalogue that PyGPU refused has been deleted
    exactly once (refused capsules free themselves)."""
    gc.collect()
    for p in _kept:
        if isinstance(p, FakeProducer):
            assert p.deleted <= 1, p.deleted


# ---- statuses of the original PyGPU interface (no exception by design) -----------------

def never_made_stream():
    s = pygpu.cudaStream_t(5)           # unknown flags: never made (status 1)
    return s


STATUS = [
    ("cudaSetDevice-absent", lambda: pygpu.cudaSetDevice(99), 101),
    ("cudaDeviceProp-absent", lambda: pygpu.cudaDeviceProp(99).last_status(), 101),
    ("cudaEvent_t-flags", lambda: pygpu.cudaEvent_t(64).last_status(), 1),
    ("cudaStream_t-flags", lambda: never_made_stream().last_status(), 1),
    ("cudaStreamSynchronize-never-made", lambda: pygpu.cudaStreamSynchronize(never_made_stream()), 400),
    ("cudaStreamQuery-never-made", lambda: pygpu.cudaStreamQuery(never_made_stream()), 400),
    ("cudaEventRecord-never-made-stream", lambda: pygpu.cudaEventRecord(pygpu.cudaEvent_t(), never_made_stream()),
     400),
    ("cudaEventSynchronize-never-made", lambda: pygpu.cudaEventSynchronize(pygpu.cudaEvent_t(64)), 400),
    ("cudaEventElapsedTime-never-recorded",
     lambda: pygpu.cudaEventElapsedTime(pygpu.cudaEvent_t(), pygpu.cudaEvent_t())[1], 400),
    ("cudaStreamWaitEvent-flags", lambda: pygpu.cudaStreamWaitEvent(None, pygpu.cudaEvent_t(), 3), 1),
    ("DeviceArray-to_device-unallocated", lambda: pygpu.DeviceArray_int64(3).to_device(), 1),
    ("DeviceArray-to_host-unallocated", lambda: pygpu.DeviceArray_int64(3).to_host(), 1),
    ("DeviceArray-set-unallocated", lambda: pygpu.DeviceArray_int64(3).set(np.zeros(3, np.int64)), 1),
    ("DeviceArray-set-index-out-of-range",
     lambda: (lambda d: (d.allocate(), d.set(5, 1))[1])(pygpu.DeviceArray_int64(3)), 1),
    ("DeviceArray-device_data-unallocated",
     lambda: (lambda d: (d.device_data(), d.last_status())[1])(pygpu.DeviceArray_int64(3)), 1),
]


@pytest.mark.parametrize("call, code", [pytest.param(c, k, id=i) for i, c, k in STATUS])
def test_bad_input_statuses(call, code):
    """The original interface reports a status instead of raising: the
    right one, and nothing is touched."""
    assert call() == code
    round_trip()


# ---- several devices (host backend with PYGPU_HOST_DEVICES=2) ------------------------------------

TWO_DEVICES = r"""
import numpy as np, pygpu, re
assert pygpu.device_count() == 2
with pygpu.Device(1):
    s1 = pygpu.Stream()
e0 = pygpu.Event()
bad = [
    (lambda: e0.record(s1), ValueError, "stream is on device 1 but the event is on device 0"),
    (lambda: pygpu.Device(2), ValueError, "device 2 out of range: the .* backend has 2 devices \\(0..1\\)"),
    (lambda: pygpu.set_device(2), ValueError, "out of range"),
    (lambda: pygpu.from_dlpack(pygpu.zeros(3), device=2), ValueError, "out of range"),
    (lambda: pygpu.trim_memory_pool(0, 2), ValueError, "out of range"),
]
for call, exc, match in bad:
    try:
        call()
    except exc as e:
        assert re.search(match, str(e)), (match, str(e))
    else:
        raise AssertionError(match)
s1.wait_event(e0.record())          # waiting on another device's event is allowed
with pygpu.Device(1):
    pygpu.Event().record(s1)
    g = pygpu.to_gpu(np.arange(5.0))
assert g.device.id == 1 and (g.get() == np.arange(5.0)).all()
print("ok", len(bad))
"""


def test_bad_input_two_devices(run_python):
    if not HOST:
        pytest.skip("PYGPU_HOST_DEVICES fakes devices on the host backend only")
    proc = run_python(TWO_DEVICES, env={"PYGPU_BACKEND": "host", "PYGPU_HOST_DEVICES": "2"})
    assert proc.stdout.split()[-2:] == ["ok", "5"]
