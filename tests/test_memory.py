"""Raw memory: allocations, copies, fills, pinned host memory (docs/api.md, Raw memory)."""
import gc
import json
import sys

import numpy as np
import pytest

import pygpu

MiB = 1 << 20
SIZES = [0, 1, 1000, 1 << 20]


# ---- DeviceAllocation ------------------------------------------------------------

@pytest.mark.parametrize("n", SIZES)
def test_alloc_attributes(n):
    a = pygpu.mem_alloc(n)
    assert a.size == n and type(a.size) is int
    assert type(a.ptr) is int
    if n:
        assert a.ptr != 0
    assert int(a) == a.ptr
    assert int(a.device) == pygpu.get_device()
    a.free()


def test_alloc_pointers_are_distinct():
    allocs = [pygpu.mem_alloc(1000) for _ in range(16)]
    spans = sorted((a.ptr, a.ptr + a.size) for a in allocs)
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert end <= start, "allocations overlap"


@pytest.mark.parametrize("n", SIZES)
def test_round_trip_sync(n, random_bytes):
    src = random_bytes(n)
    a = pygpu.mem_alloc(n)
    dst = np.zeros_like(src) if n == 0 else ~src
    assert pygpu.memcpy_htod(a, src) is None
    assert pygpu.memcpy_dtoh(dst, a) is None
    np.testing.assert_array_equal(dst, src)


@pytest.mark.parametrize("n", SIZES)
def test_round_trip_via_int_address(n, random_bytes):
    src = random_bytes(n)
    a = pygpu.mem_alloc(n)
    dst = np.zeros_like(src) if n == 0 else ~src
    pygpu.memcpy_htod(a.ptr, src)
    pygpu.memcpy_dtoh(dst, int(a))
    np.testing.assert_array_equal(dst, src)


@pytest.mark.parametrize("n", SIZES)
def test_round_trip_async_explicit_stream(n, random_bytes, stream):
    src = random_bytes(n)
    a = pygpu.mem_alloc(n, stream=stream)
    dst = np.zeros_like(src) if n == 0 else ~src
    pygpu.memcpy_htod_async(a, src, stream=stream)
    pygpu.memcpy_dtoh_async(dst, a, stream=stream)
    stream.synchronize()
    np.testing.assert_array_equal(dst, src)


@pytest.mark.parametrize("n", SIZES)
def test_round_trip_async_current_stream(n, random_bytes):
    src = random_bytes(n)
    dst = np.zeros_like(src) if n == 0 else ~src
    s = pygpu.Stream()
    with s:
        a = pygpu.mem_alloc(n)
        pygpu.memcpy_htod_async(a, src)
        pygpu.memcpy_dtoh_async(dst, a)
    s.synchronize()
    np.testing.assert_array_equal(dst, src)


def test_round_trip_async_default_stream(random_bytes):
    src = random_bytes(1 << 16)
    dst = np.zeros_like(src)
    a = pygpu.mem_alloc(src.nbytes)
    pygpu.memcpy_htod_async(a, src)
    pygpu.memcpy_dtoh_async(dst, a)
    pygpu.current_stream().synchronize()
    np.testing.assert_array_equal(dst, src)


def test_sync_copies_inside_with_stream(random_bytes):
    src = random_bytes(1 << 16)
    dst = np.zeros_like(src)
    s = pygpu.Stream(non_blocking=True)
    with s:
        a = pygpu.mem_alloc(src.nbytes)
        pygpu.memcpy_htod(a, src)
        pygpu.memcpy_dtoh(dst, a)  # plain forms return when the copy is done
    np.testing.assert_array_equal(dst, src)


def test_other_dtypes_and_buffer_kinds(rng):
    src = rng.standard_normal(125)  # float64: 1000 bytes
    a = pygpu.mem_alloc(src.nbytes)
    pygpu.memcpy_htod(a, src)
    out = np.empty(250, np.float32)
    pygpu.memcpy_dtoh(out, a)
    np.testing.assert_array_equal(out.view(np.float64), src)
    out2 = np.empty((5, 25), np.float64)
    pygpu.memcpy_dtoh(out2, a)
    np.testing.assert_array_equal(out2.ravel(), src)
    raw = src.tobytes()
    for buf in (raw, bytearray(raw), memoryview(raw)):
        b = pygpu.mem_alloc(len(raw))
        pygpu.memcpy_htod(b, buf)
        back = bytearray(len(raw))
        pygpu.memcpy_dtoh(back, b)
        assert bytes(back) == raw


def test_dtoh_copies_len_dest_bytes(random_bytes):
    src = random_bytes(1000)
    a = pygpu.mem_alloc(1000)
    pygpu.memcpy_htod(a, src)
    part = np.zeros(100, np.uint8)
    pygpu.memcpy_dtoh(part, a)
    np.testing.assert_array_equal(part, src[:100])
    pygpu.memcpy_dtoh(part, a.ptr + 500)
    np.testing.assert_array_equal(part, src[500:600])


def test_htod_partial_into_larger_allocation(random_bytes):
    src = random_bytes(1000)
    a = pygpu.mem_alloc(1000)
    pygpu.memcpy_htod(a, src)
    patch = random_bytes(100)
    pygpu.memcpy_htod(a.ptr + 300, patch)
    expect = src.copy()
    expect[300:400] = patch
    out = np.empty_like(src)
    pygpu.memcpy_dtoh(out, a)
    np.testing.assert_array_equal(out, expect)


def test_memcpy_dtod(random_bytes, stream):
    src = random_bytes(1000)
    a, b = pygpu.mem_alloc(1000), pygpu.mem_alloc(1000)
    pygpu.memcpy_htod(a, src)
    old = random_bytes(1000)
    pygpu.memcpy_htod(b, old)
    pygpu.memcpy_dtod(b, a, 1000)
    out = np.empty_like(src)
    pygpu.memcpy_dtoh(out, b)
    np.testing.assert_array_equal(out, src)
    # part of it, at offsets, through int addresses
    pygpu.memcpy_htod(b, old)
    pygpu.memcpy_dtod(b.ptr + 100, a.ptr + 600, 200)
    expect = old.copy()
    expect[100:300] = src[600:800]
    pygpu.memcpy_dtoh(out, b)
    np.testing.assert_array_equal(out, expect)
    # async on a stream
    c = pygpu.mem_alloc(1000)
    pygpu.memcpy_dtod_async(c, a, 1000, stream=stream)
    pygpu.memcpy_dtoh_async(out, c, stream=stream)
    stream.synchronize()
    np.testing.assert_array_equal(out, src)
    pygpu.memcpy_dtod(c, a, 0)


def test_memset_d8(random_bytes, stream):
    a = pygpu.mem_alloc(1000)
    pygpu.memset_d8(a, 0xAB, 1000)
    out = np.zeros(1000, np.uint8)
    pygpu.memcpy_dtoh(out, a)
    np.testing.assert_array_equal(out, np.full(1000, 0xAB, np.uint8))
    pygpu.memset_d8(a.ptr + 10, 7, 20)
    expect = np.full(1000, 0xAB, np.uint8)
    expect[10:30] = 7
    pygpu.memcpy_dtoh(out, a)
    np.testing.assert_array_equal(out, expect)
    pygpu.memset_d8_async(a, 0, 1000, stream=stream)
    pygpu.memcpy_dtoh_async(out, a, stream=stream)
    stream.synchronize()
    np.testing.assert_array_equal(out, np.zeros(1000, np.uint8))
    pygpu.memset_d8(a, 1, 0)


# ---- argument checks -------------------------------------------------------------

def test_htod_too_large_for_allocation(random_bytes):
    a = pygpu.mem_alloc(64)
    with pytest.raises(ValueError):
        pygpu.memcpy_htod(a, random_bytes(100))
    with pytest.raises(ValueError):
        pygpu.memcpy_htod_async(a, random_bytes(65))
    pygpu.memcpy_htod(a, random_bytes(64))  # exactly fits


def test_dtod_too_large_for_destination():
    a, b = pygpu.mem_alloc(1000), pygpu.mem_alloc(64)
    with pytest.raises(ValueError):
        pygpu.memcpy_dtod(b, a, 100)
    with pytest.raises(ValueError):
        pygpu.memcpy_dtod_async(b, a, 100)


def test_memset_past_allocation():
    a = pygpu.mem_alloc(64)
    with pytest.raises(ValueError):
        pygpu.memset_d8(a, 0, 100)


def test_reads_past_source_allocation():
    """Not only the destination: a DeviceAllocation source knows its size too."""
    small, big = pygpu.mem_alloc(64), pygpu.mem_alloc(1000)
    with pytest.raises(ValueError):
        pygpu.memcpy_dtoh(np.empty(100, np.uint8), small)
    with pytest.raises(ValueError):
        pygpu.memcpy_dtod(big, small, 100)


def test_mem_alloc_bad_sizes():
    with pytest.raises(ValueError) as info:
        pygpu.mem_alloc(-1)
    assert "nbytes" in str(info.value)
    for bad in ("x", 1.5, None):
        with pytest.raises(TypeError):
            pygpu.mem_alloc(bad)
    with pytest.raises(pygpu.GPUMemoryError):
        pygpu.mem_alloc(2 ** 62)
    with pytest.raises((OverflowError, pygpu.GPUMemoryError)):
        pygpu.mem_alloc(2 ** 70)
    with pytest.raises(TypeError):
        pygpu.mem_alloc(10, stream="x")


@pytest.mark.parametrize("bad", [-1, 256, 1000])
def test_memset_value_out_of_byte_range(bad):
    a = pygpu.mem_alloc(16)
    with pytest.raises((ValueError, OverflowError)):
        pygpu.memset_d8(a, bad, 16)


def test_negative_nbytes_for_dtod_and_memset():
    a, b = pygpu.mem_alloc(64), pygpu.mem_alloc(64)
    with pytest.raises((ValueError, OverflowError)):
        pygpu.memcpy_dtod(b, a, -1)
    with pytest.raises((ValueError, OverflowError)):
        pygpu.memset_d8(a, 0, -1)


def test_bad_address_types(random_bytes):
    src = random_bytes(16)
    for bad in ("x", 1.5, None, src):
        with pytest.raises(TypeError):
            pygpu.memcpy_htod(bad, src)
        with pytest.raises(TypeError):
            pygpu.memcpy_dtoh(np.empty(16, np.uint8), bad)


def test_use_after_free(random_bytes):
    src = random_bytes(64)
    a = pygpu.mem_alloc(64)
    pygpu.memcpy_htod(a, src)
    assert a.free() is None
    with pytest.raises(ValueError):
        a.ptr
    with pytest.raises(ValueError):
        int(a)
    with pytest.raises(ValueError):
        pygpu.memcpy_htod(a, src)
    with pytest.raises(ValueError):
        pygpu.memcpy_htod_async(a, src)
    with pytest.raises(ValueError):
        pygpu.memcpy_dtoh(np.empty(64, np.uint8), a)
    b = pygpu.mem_alloc(64)
    with pytest.raises(ValueError):
        pygpu.memcpy_dtod(b, a, 64)
    with pytest.raises(ValueError):
        pygpu.memcpy_dtod(a, b, 64)
    with pytest.raises(ValueError):
        pygpu.memset_d8(a, 0, 64)
    a.free()  # twice is harmless
    a.free()
    del a
    gc.collect()


def test_dtoh_into_read_only_buffer(random_bytes):
    a = pygpu.mem_alloc(16)
    pygpu.memcpy_htod(a, random_bytes(16))
    with pytest.raises((TypeError, BufferError)):
        pygpu.memcpy_dtoh(bytes(16), a)
    ro = np.zeros(16, np.uint8)
    ro.flags.writeable = False
    with pytest.raises((TypeError, BufferError, ValueError)):
        pygpu.memcpy_dtoh(ro, a)
    assert not ro.any()


def test_non_contiguous_buffers_refused(random_bytes):
    a = pygpu.mem_alloc(100)
    strided = random_bytes(200)[::2]
    assert not strided.flags.contiguous
    with pytest.raises((ValueError, BufferError, TypeError)):
        pygpu.memcpy_htod(a, strided)
    with pytest.raises((ValueError, BufferError, TypeError)):
        pygpu.memcpy_htod_async(a, strided)
    dest = np.zeros(200, np.uint8)[::2]
    with pytest.raises((ValueError, BufferError, TypeError)):
        pygpu.memcpy_dtoh(dest, a)
    fortran = np.asfortranarray(np.zeros((10, 10), np.uint8))
    pygpu.memcpy_dtoh(np.ascontiguousarray(fortran), a)  # contiguous is fine


# ---- leaks -----------------------------------------------------------------------

def test_alloc_copy_free_loop_refcounts_flat(random_bytes):
    src = random_bytes(4096)
    dst = np.empty_like(src)
    s = pygpu.Stream()
    rc_src, rc_dst = sys.getrefcount(src), sys.getrefcount(dst)
    for i in range(2000):
        a = pygpu.mem_alloc(4096)
        pygpu.memcpy_htod(a, src)
        pygpu.memcpy_htod_async(a, src, stream=s)
        pygpu.memcpy_dtoh_async(dst, a, stream=s)
        s.synchronize()
        pygpu.memcpy_dtoh(dst, a)
        if i & 1:
            a.free()
        del a  # the other half is freed when collected
    assert sys.getrefcount(src) == rc_src
    assert sys.getrefcount(dst) == rc_dst
    np.testing.assert_array_equal(dst, src)


HOST_LEAK_SCRIPT = r"""
import gc, json, sys
import numpy as np
import pygpu

LIMIT = 64 << 20
assert pygpu.backend == "host"
free0, total = pygpu.mem_get_info()
assert total == LIMIT, total
assert pygpu.Device(0).total_memory == LIMIT
assert free0 == LIMIT, free0

src = np.random.default_rng(1).integers(0, 256, 4096, dtype=np.uint8)
dst = np.empty_like(src)
rc = sys.getrefcount(src)
s = pygpu.Stream()
for i in range(2000):
    a = pygpu.mem_alloc(4096 + i, stream=s if i % 3 == 0 else None)
    pygpu.memcpy_htod(a, src)
    pygpu.memcpy_htod_async(a, src, stream=s)
    pygpu.memcpy_dtoh_async(dst, a, stream=s)
    s.synchronize()
    pygpu.memcpy_dtoh(dst, a)
    if i & 1:
        a.free()
    del a
    if i == 1000:
        mid = pygpu.mem_get_info()[0]
        assert mid == free0, (mid, free0)
gc.collect()
leak = {"free_after_loop": pygpu.mem_get_info()[0], "free0": free0,
        "rc_delta": sys.getrefcount(src) - rc}

# past the limit: GPUMemoryError, and the process goes on
try:
    pygpu.mem_alloc(LIMIT + 1)
except pygpu.GPUMemoryError as e:
    leak["over"] = [e.name, e.code]
big = pygpu.mem_alloc(LIMIT)                   # exactly all of it
assert pygpu.mem_get_info()[0] == 0
try:
    pygpu.mem_alloc(1)
except pygpu.GPUMemoryError:
    leak["full"] = True
big.free()
leak["free_after_big"] = pygpu.mem_get_info()[0]
half = pygpu.mem_alloc(LIMIT // 2)
assert pygpu.mem_get_info()[0] == LIMIT - LIMIT // 2
del half
leak["free_after_del"] = pygpu.mem_get_info()[0]
a = pygpu.mem_alloc(4096)
pygpu.memcpy_htod(a, src)
pygpu.memcpy_dtoh(dst, a)
leak["round_trip"] = bool((dst == src).all())
print(json.dumps(leak))
"""


def test_alloc_loop_leaves_free_memory_exact_host(run_python):
    proc = run_python(HOST_LEAK_SCRIPT,
                      env={"PYGPU_BACKEND": "host", "PYGPU_HOST_MEMORY": "64M"})
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["free_after_loop"] == out["free0"], out
    assert out["rc_delta"] == 0, out
    assert out.get("over") == ["cudaErrorMemoryAllocation", 2], out
    assert out.get("full") is True, out
    assert out["free_after_big"] == out["free0"], out
    assert out["free_after_del"] == out["free0"], out
    assert out["round_trip"] is True, out


def test_host_memory_suffixes(run_python):
    proc = run_python(
        """
        import pygpu
        print(pygpu.mem_get_info()[1])
        """,
        env={"PYGPU_BACKEND": "host", "PYGPU_HOST_MEMORY": "3K"})
    assert int(proc.stdout.strip()) == 3 << 10
    proc = run_python(
        "import pygpu; print(pygpu.mem_get_info()[1])",
        env={"PYGPU_BACKEND": "host", "PYGPU_HOST_MEMORY": "1G"})
    assert int(proc.stdout.strip()) == 1 << 30


@pytest.mark.gpu_only
def test_alloc_loop_leaves_free_memory_gpu(random_bytes):
    src = random_bytes(4096)
    dst = np.empty_like(src)
    pygpu.synchronize()
    pygpu.trim_memory_pool()
    free0 = pygpu.mem_get_info()[0]
    for i in range(2000):
        a = pygpu.mem_alloc(4096)
        pygpu.memcpy_htod(a, src)
        pygpu.memcpy_dtoh(dst, a)
        a.free()
    pygpu.synchronize()
    pygpu.trim_memory_pool()
    free1 = pygpu.mem_get_info()[0]
    assert abs(free1 - free0) <= MiB, (free0, free1)


# ---- pinned host memory -----------------------------------------------------------

def test_host_allocation(random_bytes):
    h = pygpu.mem_alloc_host(4096)
    assert h.size == 4096
    assert type(h.ptr) is int and h.ptr != 0
    v = np.frombuffer(h, dtype=np.uint8)
    assert v.flags.writeable
    assert v.size == 4096
    assert v.ctypes.data == h.ptr
    data = random_bytes(4096)
    v[:] = data
    f = np.frombuffer(h, dtype=np.float32)
    assert f.size == 1024
    np.testing.assert_array_equal(f.view(np.uint8), data)
    # pinned memory as the source and destination of copies
    a = pygpu.mem_alloc(4096)
    pygpu.memcpy_htod(a, h)
    out = np.zeros(4096, np.uint8)
    pygpu.memcpy_dtoh(out, a)
    np.testing.assert_array_equal(out, data)
    pygpu.memset_d8(a, 0x5A, 4096)
    pygpu.memcpy_dtoh(h, a)
    np.testing.assert_array_equal(v, np.full(4096, 0x5A, np.uint8))
    del v, f
    h.free()


def test_host_allocation_free_refused_while_viewed():
    h = pygpu.mem_alloc_host(1024)
    v = np.frombuffer(h, dtype=np.uint8)
    rc = sys.getrefcount(h)
    with pytest.raises(BufferError):
        h.free()
    assert sys.getrefcount(h) == rc
    v[:] = 7  # still valid after the refusal
    assert (v == 7).all()
    del v
    gc.collect()
    h.free()


def test_host_allocation_memoryview_export():
    h = pygpu.mem_alloc_host(256)
    with memoryview(h) as m:
        assert m.nbytes == 256
        assert not m.readonly
        with pytest.raises(BufferError):
            h.free()
    h.free()


def test_host_allocation_bad_size():
    with pytest.raises(ValueError):
        pygpu.mem_alloc_host(-1)
    with pytest.raises(TypeError):
        pygpu.mem_alloc_host("x")


def test_many_host_allocations():
    for _ in range(500):
        h = pygpu.mem_alloc_host(4096)
        np.frombuffer(h, np.uint8)[:] = 1
        del h
    gc.collect()


# ---- pool ------------------------------------------------------------------------

def test_memory_pool_switch(random_bytes):
    src = random_bytes(1 << 16)
    try:
        assert pygpu.set_memory_pool(False) is None
        a = pygpu.mem_alloc(src.nbytes)
        out = np.zeros_like(src)
        pygpu.memcpy_htod(a, src)
        pygpu.memcpy_dtoh(out, a)
        np.testing.assert_array_equal(out, src)
        pygpu.set_memory_pool(True)
        b = pygpu.mem_alloc(src.nbytes)
        pygpu.memcpy_dtod(b, a, src.nbytes)  # one from each allocator
        a.free()                              # freed after the switch: still fine
        pygpu.memcpy_dtoh(out, b)
        np.testing.assert_array_equal(out, src)
        b.free()
    finally:
        pygpu.set_memory_pool(True)


def test_trim_memory_pool():
    a = pygpu.mem_alloc(MiB)
    a.free()
    pygpu.synchronize()
    assert pygpu.trim_memory_pool() is None
    pygpu.trim_memory_pool(MiB)
    pygpu.trim_memory_pool(keep_bytes=0, device=pygpu.get_device())
    pygpu.trim_memory_pool(0, None)
    with pytest.raises(ValueError):
        pygpu.trim_memory_pool(0, device=pygpu.device_count())
    with pytest.raises((ValueError, OverflowError)):
        pygpu.trim_memory_pool(-1)
