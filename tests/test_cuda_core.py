"""NVIDIA's cuda.core with PyGPU: its streams taken wherever PyGPU takes a
stream (the __cuda_stream__ protocol), PyGPU's streams taken by cuda.core,
and GPUArrays viewed by its StridedMemoryView without a copy.  On the GPU
machine, where cuda.core is installed; skipped elsewhere."""
import numpy as np
import pytest

import pygpu

pytestmark = pytest.mark.skipif(pygpu.backend != "cuda", reason="cuda.core drives CUDA devices")


def _core():
    try:
        import cuda.core as core
        if not hasattr(core, "Device"):
            import cuda.core.experimental as core
    except ImportError:
        pytest.skip("cuda.core is not installed")
    return core


def _smv():
    try:
        from cuda.core.utils import StridedMemoryView
    except ImportError:
        from cuda.core.experimental.utils import StridedMemoryView
    return StridedMemoryView


@pytest.fixture
def device():
    core = _core()
    dev = core.Device(pygpu.get_device())
    dev.set_current()
    return dev


def test_a_cuda_core_stream_orders_pygpu_work(device, rng):
    cs = device.create_stream()
    a = rng.standard_normal((256, 129))
    g = pygpu.to_gpu_async(a, stream=cs)
    t = g.T.astype(np.float32, stream=cs)       # PyGPU's cast kernel, on cuda.core's stream
    out = pygpu.pagelocked_empty(t.shape, t.dtype)
    t.get_async(cs, out)
    cs.sync()
    np.testing.assert_array_equal(out, a.T.astype(np.float32))


def test_a_pygpu_stream_is_taken_by_cuda_core(device):
    s = pygpu.Stream(non_blocking=True)
    assert s.__cuda_stream__() == (0, s.ptr)
    cs = device.create_stream(s)
    assert cs.__cuda_stream__()[1] == s.ptr
    g = pygpu.to_gpu(np.arange(1000, dtype=np.int32))
    with s:
        h = g[::-1].copy()
    cs.sync()                               # waits for PyGPU's work on that stream
    np.testing.assert_array_equal(h.get(), np.arange(1000, dtype=np.int32)[::-1])


def test_strided_memory_view_of_a_gpuarray_view(device, rng):
    smv_type = _smv()
    g = pygpu.to_gpu(rng.standard_normal((64, 48)).astype(np.float32))
    v = g[3:40:2, ::-3]
    make = getattr(smv_type, "from_dlpack", smv_type)      # (newer cuda.core: from_dlpack)
    smv = make(v, stream_ptr=-1)
    assert smv.ptr == v.ptr
    assert tuple(smv.shape) == v.shape
    assert tuple(smv.strides) == tuple(s // v.itemsize for s in v.strides)
    assert np.dtype(smv.dtype) == v.dtype
    assert smv.device_id == int(v.device)
