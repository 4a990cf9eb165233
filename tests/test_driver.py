"""pygpu.driver: PyCUDA's driver idioms (docs/api.md, Compatibility).
NumPy is the oracle for every copy."""
import gc

import numpy as np
import pytest

import pygpu
import pygpu.driver as cuda


def test_PyGPU_driver_is_pygpu_driver(run_python):
    proc = run_python("""
        import sys
        import pygpu
        assert "pygpu.driver" not in sys.modules      # not imported by `import pygpu`
        import PyGPU.driver as cuda
        import pygpu.driver
        from PyGPU import driver
        assert cuda is pygpu.driver is driver is sys.modules["PyGPU.driver"] is pygpu.driver
        assert cuda.__spec__.name == "pygpu.driver"
        import PyGPU.autoinit, pygpu.autoinit
        assert PyGPU.autoinit is pygpu.autoinit
        try:
            import PyGPU.nonesuch
        except ImportError:
            print("ok")
        """)
    assert proc.stdout.strip() == "ok"


def test_all_names_exist():
    for name in cuda.__all__:
        assert hasattr(cuda, name), name
    assert pygpu.driver is cuda


def test_exception_names():
    assert cuda.Error is pygpu.GPUError
    assert cuda.MemoryError is pygpu.GPUMemoryError
    for cls in (cuda.LogicError, cuda.LaunchError, cuda.RuntimeError, cuda.CompileError, cuda.MemoryError):
        assert issubclass(cls, cuda.Error)
    with pytest.raises(cuda.Error):
        cuda.mem_alloc(1 << 60)
    with pytest.raises(cuda.MemoryError):
        cuda.mem_alloc(1 << 60)


def test_init_and_versions():
    cuda.init()
    with pytest.raises(ValueError):
        cuda.init(1)
    v = cuda.get_version()
    assert isinstance(v, tuple) and len(v) == 3 and all(isinstance(x, int) for x in v)
    assert isinstance(cuda.get_driver_version(), int)
    if pygpu.backend == "host":
        assert v == (0, 0, 0)
    else:
        assert v[0] > 0


# ---- devices and contexts -------------------------------------------------------

def test_device_methods():
    assert cuda.Device.count() == pygpu.device_count()
    for i in range(cuda.Device.count()):
        d, p = cuda.Device(i), pygpu.Device(i)
        assert (d.name(), d.total_memory(), d.compute_capability(), d.pci_bus_id()) == \
            (p.name, p.total_memory, p.compute_capability, p.pci_bus_id)
        assert isinstance(d.compute_capability(), tuple)
        assert int(d) == i and pygpu.Device(d) is p
        assert cuda.Device(d.pci_bus_id()) == d == cuda.Device(p) == cuda.Device(np.int32(i))
        assert hash(d) == hash(cuda.Device(i))
        attrs = d.get_attributes()
        assert attrs[cuda.device_attribute.MULTIPROCESSOR_COUNT] == p.multiprocessor_count
        assert d.get_attribute(cuda.device_attribute.COMPUTE_CAPABILITY_MAJOR) == p.compute_capability[0]
        assert "Device" in repr(d)


def test_device_bad_arguments():
    with pytest.raises(ValueError):
        cuda.Device(cuda.Device.count())
    with pytest.raises(ValueError):
        cuda.Device("ffff:ff:1f.0")
    with pytest.raises(TypeError):
        cuda.Device(1.0)
    with pytest.raises(ValueError):
        cuda.Device(0).get_attribute(1)         # not one of device_attribute's


def test_contexts_raise_a_clear_LogicError():
    d = cuda.Device(0)
    for call in (d.make_context, d.retain_primary_context, cuda.Context, cuda.Context.push, cuda.Context.pop):
        with pytest.raises(cuda.LogicError, match="primary context"):
            call()
    cuda.Context.synchronize()
    assert cuda.Context.get_device() == cuda.Device(pygpu.get_device())
    assert cuda.ctx_flags.SCHED_AUTO == 0


# ---- streams and events ---------------------------------------------------------

def test_stream(random_bytes):
    s = cuda.Stream()
    assert isinstance(s, pygpu.Stream) and not s.non_blocking
    assert cuda.Stream(1).non_blocking and cuda.Stream(flags=1).non_blocking
    a = random_bytes(1 << 16)
    g = pygpu.to_gpu_async(a, stream=s)          # PyGPU takes it as a stream
    e = cuda.Event().record(s)
    s.wait_for_event(e)
    s.synchronize()
    assert s.is_done() is True
    assert np.array_equal(g.get(stream=s), a)
    with pytest.raises(ValueError):
        cuda.Stream(2)
    with pytest.raises(TypeError):
        cuda.Stream("1")


def test_event():
    start, end = cuda.Event(), cuda.Event(cuda.event_flags.BLOCKING_SYNC)
    assert isinstance(start, pygpu.Event) and start.timing
    assert start.record() is start
    assert end.record(cuda.Stream()) is end
    assert end.synchronize() is end
    assert end.query() is True
    assert end.time_since(start) >= 0 and start.time_till(end) >= 0
    assert not cuda.Event(cuda.event_flags.DISABLE_TIMING).timing
    cuda.Event(cuda.event_flags.DISABLE_TIMING | cuda.event_flags.INTERPROCESS)
    with pytest.raises(ValueError):
        cuda.Event(cuda.event_flags.INTERPROCESS)       # interprocess events cannot time
    with pytest.raises(ValueError):
        cuda.Event(8)
    with pytest.raises(ValueError, match="never recorded"):
        cuda.Event().time_since(cuda.Event())


# ---- memory and copies --------------------------------------------------------------

@pytest.mark.parametrize("nbytes", [0, 1, 4096, 3 << 20])
def test_memcpy_round_trips(random_bytes, nbytes):
    a = random_bytes(nbytes)
    g = cuda.mem_alloc(max(nbytes, 1))
    cuda.memcpy_htod(g, a)
    g2 = cuda.mem_alloc(max(nbytes, 1))
    cuda.memcpy_dtod(g2, g, nbytes)
    out = np.empty_like(a)
    cuda.memcpy_dtoh(out, g2)
    assert np.array_equal(out, a)
    s = cuda.Stream()
    h = cuda.pagelocked_empty(nbytes, np.uint8)
    cuda.memcpy_htod_async(int(g2), a[::-1].copy(), s)
    cuda.memcpy_dtod_async(g, g2, nbytes, stream=s)
    cuda.memcpy_dtoh_async(h, g, s)
    s.synchronize()
    assert np.array_equal(h, a[::-1])


def test_addresses_as_PyCUDA_takes_them(random_bytes):
    class Pooled:
        """PyCUDA's pooled allocations convert with int()."""
        def __init__(self, mem):
            self.mem = mem

        def __int__(self):
            return int(self.mem)

    a = random_bytes(64)
    mem = cuda.mem_alloc(64)
    cuda.memcpy_htod(Pooled(mem), a)
    out = np.empty_like(a)
    cuda.memcpy_dtoh(out, np.intp(int(mem)))
    assert np.array_equal(out, a)
    cuda.memset_d8(mem, 3, 64)
    cuda.memset_d8_async(Pooled(mem), 4, 32, cuda.Stream.null)
    cuda.memcpy_dtoh(out, mem)
    assert out.tolist() == [4] * 32 + [3] * 32
    for bad in (1.5, "0x10", True, None):
        with pytest.raises(TypeError):
            cuda.memcpy_htod(bad, a)


def test_to_device_and_from_device(rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    mem = cuda.to_device(a)
    assert isinstance(mem, cuda.DeviceAllocation) and mem.size == a.nbytes
    assert np.array_equal(cuda.from_device(mem, (3, 4), np.float32), a)
    assert np.array_equal(cuda.from_device_like(mem, a), a)
    f = cuda.from_device(mem, (4, 3), np.float32, order="F")
    assert f.flags.f_contiguous and np.array_equal(f.ravel(order="F"), a.ravel())
    assert cuda.mem_get_info() == pygpu.mem_get_info() or cuda.mem_get_info()[1] == pygpu.mem_get_info()[1]


@pytest.mark.parametrize("order", ["C", "F"])
def test_pagelocked_arrays(order):
    a = cuda.pagelocked_empty((3, 5), np.complex64, order)
    assert a.shape == (3, 5) and a.dtype == np.complex64 and a.flags.writeable
    assert a.flags["F_CONTIGUOUS" if order == "F" else "C_CONTIGUOUS"]
    z = cuda.pagelocked_zeros((2, 2), "i4", order, mem_flags=cuda.host_alloc_flags.PORTABLE)
    assert (z == 0).all()
    like = cuda.pagelocked_empty_like(np.asfortranarray(np.ones((2, 3))))
    assert like.flags.f_contiguous and like.shape == (2, 3)
    zl = cuda.pagelocked_zeros_like(np.ones((2, 3), np.int8))
    assert zl.dtype == np.int8 and (zl == 0).all()
    assert cuda.pagelocked_empty(0, np.float64).shape == (0,)
    assert cuda.pagelocked_empty(np.int64(4), np.float64).shape == (4,)
    g = pygpu.to_gpu(np.arange(15, dtype=np.complex64).reshape(3, 5))
    g.get(a)
    assert np.array_equal(a, np.arange(15).reshape(3, 5))


def test_pagelocked_bad_arguments():
    with pytest.raises(ValueError):
        cuda.pagelocked_empty((2, -1), np.float32)
    with pytest.raises(TypeError):
        cuda.pagelocked_empty(3, object)
    with pytest.raises(ValueError):
        cuda.pagelocked_empty(3, np.float32, mem_flags=64)
    with pytest.raises(TypeError):
        cuda.pagelocked_empty(1.5, np.float32)


def test_aligned_arrays():
    for alignment in (64, 4096):
        a = cuda.aligned_empty((5, 3), np.float64, alignment=alignment)
        assert a.ctypes.data % alignment == 0 and a.shape == (5, 3)
    z = cuda.aligned_zeros(7, np.int16, order="C")
    assert (z == 0).all() and z.ctypes.data % 4096 == 0
    like = cuda.aligned_empty_like(np.ones((2, 3), order="F"))
    assert like.flags.f_contiguous
    with pytest.raises(ValueError):
        cuda.aligned_empty(3, np.float32, alignment=3)


def test_register_host_memory(rng):
    a = cuda.aligned_empty((16, 256), np.float64)   # whole pages: no range shared with other memory
    a[...] = rng.standard_normal(a.shape)
    r = cuda.register_host_memory(a)
    assert isinstance(r.base, cuda.RegisteredHostMemory) and r.base.base is a
    assert np.shares_memory(r, a) and r.flags.writeable
    assert r.base.get_device_pointer() == a.ctypes.data
    g = pygpu.to_gpu(r)
    out = cuda.pagelocked_empty_like(r)
    g.get(out)
    assert np.array_equal(out, a)
    r.base.unregister()
    r.base.unregister()                     # twice is harmless
    del r
    gc.collect()
    a[0, 0] = 1                             # the array outlives the registration
    r2 = cuda.register_host_memory(np.empty(0), cuda.mem_host_register_flags.PORTABLE)
    assert r2.size == 0
    r3 = cuda.register_host_memory(np.asfortranarray(a))
    assert r3.flags.f_contiguous and np.array_equal(r3, a)


def test_register_host_memory_bad_arguments():
    with pytest.raises(TypeError):
        cuda.register_host_memory(bytearray(8))
    with pytest.raises(ValueError):
        cuda.register_host_memory(np.ones((4, 4))[:, ::2])
    with pytest.raises(ValueError):
        cuda.register_host_memory(np.ones(4), flags=16)


@pytest.mark.parametrize("code,cls", [(1, pygpu.GPUError), (2, pygpu.GPUMemoryError)])
def test_register_failure_raises_with_the_status(monkeypatch, code, cls):
    monkeypatch.setattr(pygpu.backend_module, "_host_register", lambda addr, n: code)
    with pytest.raises(cls) as info:
        cuda.register_host_memory(np.ones(8))
    e = info.value
    assert e.code == code and e.name == pygpu.cudaError_t(code).name and e.call.endswith("HostRegister")
    assert str(e).startswith(e.call + ": " + e.name)
