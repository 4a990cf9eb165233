"""PyGPU arrays with the libraries users' kernels live in (GPU machine only):
PyTorch, CuPy, Numba and JAX, each direction, through DLPack and
__cuda_array_interface__; a CuPy RawKernel and a Numba @cuda.jit kernel on
PyGPU arrays.  (A kernel of the user's own shared library, called through
ctypes: examples/ctypes_kernel/, run by tests/test_examples.py.)

Every exchange is checked for sharing (the same address), values (NumPy as
the oracle), a write on one side seen on the other, and, for the stream
rules, that work still pending on a non-blocking stream is what the
consumer reads.  A library that is not installed skips its tests.
"""
import gc
import os
import sys

import numpy as np
import pytest

import pygpu

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")   # JAX beside the others

pytestmark = [pytest.mark.gpu_only,
              pytest.mark.skipif(pygpu.backend != "cuda", reason="CUDA libraries need the cuda backend")]

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128"]
TORCH_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "float16", "float32", "float64",
                "complex64", "complex128"]
JAX_DTYPES = ["bool", "int8", "int16", "int32", "uint8", "uint32", "float16", "float32", "complex64"]
N_PENDING = 1 << 24     # elements filled 30 times on a side stream: work still queued when the consumer reads


def host(shape=(4, 6), dtype=np.float32):
    n = int(np.prod(shape))
    return ((np.arange(n) % 5) + 1).astype(dtype).reshape(shape)


def pending_on_side_stream():
    """A GPUArray whose last 30 fills are still queued on a non-blocking stream."""
    g = pygpu.zeros(N_PENDING, np.float32)
    pygpu.synchronize()
    s = pygpu.Stream(non_blocking=True)
    for value in range(1, 31):
        g.fill(value, stream=s)
    return g, s


@pytest.fixture(scope="module")
def torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA device")
    return torch


@pytest.fixture(scope="module")
def cp():
    cp = pytest.importorskip("cupy")
    try:
        cp.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001 (any failure: CuPy unusable here)
        pytest.skip(f"CuPy has no device: {e}")
    return cp


@pytest.fixture(scope="module")
def cuda():
    if not hasattr(np, "row_stack"):        # numba-cuda 0.30.4 on NumPy 2.5 still names it
        np.row_stack = np.vstack
    numba_cuda = pytest.importorskip("numba.cuda")
    if not numba_cuda.is_available():
        pytest.skip("Numba sees no CUDA device")
    return numba_cuda


@pytest.fixture(scope="module")
def jax():
    jax = pytest.importorskip("jax")
    try:
        jax.devices("gpu")
    except RuntimeError as e:
        pytest.skip(f"JAX has no GPU: {e}")
    return jax


# ---- PyTorch ---------------------------------------------------------------------

def test_torch_from_pygpu_shares_memory(torch):
    h = host()
    g = pygpu.to_gpu(h)
    t = torch.from_dlpack(g)
    assert t.is_cuda and t.data_ptr() == g.ptr and tuple(t.shape) == g.shape
    assert np.array_equal(t.cpu().numpy(), h)
    t[0, 0] = 100
    torch.cuda.synchronize()
    assert g.get()[0, 0] == 100
    g[1, 1] = -5                # queued on the legacy stream, which torch's default stream is
    assert t[1, 1].item() == -5


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
def test_torch_dtypes_both_ways(torch, dtype):
    h = host((3, 5), dtype)
    g = pygpu.to_gpu(h)
    t = torch.from_dlpack(g)
    assert np.array_equal(t.cpu().numpy(), h)
    back = pygpu.from_dlpack(t)
    assert back.ptr == g.ptr and back.dtype == h.dtype and np.array_equal(back.get(), h)


@pytest.mark.parametrize("key", [np.s_[::2], np.s_[:, 1::3], np.s_[1:3, ::2], np.s_[..., 2], np.s_[None, 1:]])
def test_torch_strided_views(torch, key):
    h = host((6, 8))
    g = pygpu.to_gpu(h)
    v = g[key]
    t = torch.from_dlpack(v)
    assert t.data_ptr() == v.ptr and np.array_equal(t.cpu().numpy(), h[key])
    t.fill_(7)
    torch.cuda.synchronize()
    expected = h.copy()
    expected[key] = 7
    assert np.array_equal(g.get(), expected)
    assert np.array_equal(torch.from_dlpack(g.T).cpu().numpy(), expected.T)


def test_torch_as_tensor_reads_cai(torch):
    h = host((3, 4), np.float64)
    g = pygpu.to_gpu(h)
    t = torch.as_tensor(g, device="cuda")
    assert t.data_ptr() == g.ptr and np.array_equal(t.cpu().numpy(), h)
    v = g[:, ::2]
    assert np.array_equal(torch.as_tensor(v, device="cuda").cpu().numpy(), h[:, ::2])


def test_pygpu_from_torch_shares_memory(torch):
    t = torch.arange(24, dtype=torch.float32, device="cuda").reshape(4, 6)
    g = pygpu.from_dlpack(t)
    assert g.ptr == t.data_ptr() and g.shape == (4, 6) and g.strides == (24, 4)
    g[0, 0] = 50
    assert t[0, 0].item() == 50
    t[3, 5] = -1
    torch.cuda.synchronize()
    assert g.get()[3, 5] == -1
    a = pygpu.asarray(t)                         # through __cuda_array_interface__
    assert a.ptr == t.data_ptr() and np.array_equal(a.get(), t.cpu().numpy())
    for view in (t[:, ::2], t.T, t[1:, 2:4]):
        assert np.array_equal(pygpu.from_dlpack(view).get(), view.cpu().numpy())
        assert np.array_equal(pygpu.asarray(view).get(), view.cpu().numpy())


def test_torch_lifetimes_and_refcounts(torch):
    g = pygpu.from_dlpack(torch.ones(1000, device="cuda"))     # the tensor's only owner is g
    gc.collect()
    assert np.all(g.get() == 1)
    t = torch.from_dlpack(pygpu.to_gpu(np.full(1000, 3.0)))     # the GPUArray's only owner is t
    gc.collect()
    assert t.sum().item() == 3000
    g = pygpu.to_gpu(host())
    before = sys.getrefcount(g)
    for _ in range(200):
        torch.from_dlpack(g)
    gc.collect()
    assert sys.getrefcount(g) == before


def test_torch_reads_after_pending_pygpu_work(torch):
    g, s = pending_on_side_stream()
    t = torch.from_dlpack(g)                     # torch's stream is made to wait for s
    assert t[-4:].cpu().numpy().tolist() == [30.0] * 4


def test_pygpu_reads_after_pending_torch_work(torch):
    t = torch.zeros(N_PENDING, device="cuda")
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        for value in range(1, 31):
            t.fill_(value)
        g = pygpu.from_dlpack(t)                 # torch makes our (legacy) stream wait for `side`
    assert np.all(g[N_PENDING - 4:].get() == 30)


# ---- CuPy ------------------------------------------------------------------------

def test_cupy_from_pygpu_shares_memory(cp):
    h = host()
    g = pygpu.to_gpu(h)
    c = cp.from_dlpack(g)
    assert c.data.ptr == g.ptr and np.array_equal(cp.asnumpy(c), h)
    c[0, 0] = 100
    cp.cuda.Device().synchronize()
    assert g.get()[0, 0] == 100
    g[1, 1] = -5
    assert c[1, 1].item() == -5
    a = cp.asarray(g)                            # through __cuda_array_interface__
    assert a.data.ptr == g.ptr


@pytest.mark.parametrize("dtype", DTYPES)
def test_cupy_dtypes_both_ways(cp, dtype):
    h = host((3, 5), dtype)
    g = pygpu.to_gpu(h)
    for c in (cp.from_dlpack(g), cp.asarray(g)):
        assert c.dtype == h.dtype and np.array_equal(cp.asnumpy(c), h)
    c = cp.asarray(h)
    for back in (pygpu.from_dlpack(c), pygpu.asarray(c)):
        assert back.ptr == c.data.ptr and back.dtype == h.dtype and np.array_equal(back.get(), h)


@pytest.mark.parametrize("key", [np.s_[::-1], np.s_[:, ::-2], np.s_[1:, 1::3], np.s_[::2, ::-1], np.s_[2]])
def test_cupy_strided_views_both_ways(cp, key):
    h = host((6, 8), np.int32)
    g = pygpu.to_gpu(h)
    v = g[key]
    for c in (cp.from_dlpack(v), cp.asarray(v)):
        assert c.data.ptr == v.ptr and c.strides == v.strides and np.array_equal(cp.asnumpy(c), h[key])
    c = cp.asarray(h)[key]
    imports = [pygpu.asarray(c)]            # through __cuda_array_interface__ (byte strides)
    try:
        imports.append(pygpu.from_dlpack(c))
    except BufferError as e:
        # Seen with CuPy 14.2: a negative-stride view is exported with its
        # element strides wrapped as unsigned (2**62 - 1 for -4 bytes);
        # PyGPU refuses the capsule instead of reading wild memory.
        from dlpack_helpers import managed, shape_strides
        _, strides = shape_strides(managed(c.__dlpack__()))
        assert any(s > 1 << 40 for s in strides) and "out of range" in str(e), (strides, e)
    for back in imports:
        assert back.ptr == c.data.ptr and back.strides == c.strides and np.array_equal(back.get(), h[key])
    back[...] = 0
    assert int(c.sum()) == 0


def test_cupy_reads_after_pending_pygpu_work(cp):
    g, s = pending_on_side_stream()
    assert cp.asnumpy(cp.from_dlpack(g)[-4:]).tolist() == [30.0] * 4
    g, s = pending_on_side_stream()
    assert cp.asnumpy(cp.asarray(g)[-4:]).tolist() == [30.0] * 4     # CAI names s; CuPy syncs on it


def test_cupy_rawkernel_on_pygpu_arrays(cp):
    kernel = cp.RawKernel(r"""
        extern "C" __global__ void twice(const float *x, float *y, int n)
        {
            int i = blockDim.x * blockIdx.x + threadIdx.x;
            if (i < n)
                y[i] = 2.0f * x[i];
        }""", "twice")
    n = 100000
    x = pygpu.to_gpu(np.arange(n, dtype=np.float32))
    y = pygpu.zeros(n, np.float32)
    s = pygpu.Stream(non_blocking=True)
    with cp.cuda.ExternalStream(s.ptr):         # launched on PyGPU's stream
        kernel(((n + 255) // 256,), (256,), (cp.asarray(x), cp.asarray(y), np.int32(n)))
    s.synchronize()
    assert np.array_equal(y.get(), 2 * np.arange(n, dtype=np.float32))


# ---- Numba -----------------------------------------------------------------------

def test_numba_as_cuda_array(cuda):
    h = host((6, 8))
    g = pygpu.to_gpu(h)
    d = cuda.as_cuda_array(g)
    assert d.device_ctypes_pointer.value == g.ptr and np.array_equal(d.copy_to_host(), h)
    v = g[::2, 1::2]
    dv = cuda.as_cuda_array(v)
    assert dv.device_ctypes_pointer.value == v.ptr and np.array_equal(dv.copy_to_host(), h[::2, 1::2])


def test_numba_kernels_take_gpuarrays(cuda):
    @cuda.jit
    def add(x, y, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[i] + y[i]

    @cuda.jit
    def scale(a, factor):
        i, j = cuda.grid(2)
        if i < a.shape[0] and j < a.shape[1]:
            a[i, j] *= factor

    n = 5000
    x, y = pygpu.to_gpu(np.arange(n, dtype=np.float32)), pygpu.to_gpu(np.ones(n, np.float32))
    out = pygpu.zeros(n, np.float32)
    add[(n + 127) // 128, 128](x, y, out)
    cuda.synchronize()
    assert np.array_equal(out.get(), np.arange(n, dtype=np.float32) + 1)
    h = host((16, 20))
    g = pygpu.to_gpu(h)
    v = g[::2, 1::3]
    scale[(4, 4), (8, 8)](v, 3.0)
    cuda.synchronize()
    expected = h.copy()
    expected[::2, 1::3] *= 3
    assert np.array_equal(g.get(), expected)


def test_pygpu_from_numba(cuda):
    h = host((4, 5), np.int64)
    d = cuda.to_device(h)
    g = pygpu.asarray(d)
    assert g.ptr == d.device_ctypes_pointer.value and np.array_equal(g.get(), h)
    g[0, 0] = 9
    assert d.copy_to_host()[0, 0] == 9


def test_numba_reads_after_pending_pygpu_work(cuda):
    g, s = pending_on_side_stream()
    assert cuda.as_cuda_array(g)[-4:].copy_to_host().tolist() == [30.0] * 4


# ---- JAX -------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", JAX_DTYPES)
def test_jax_from_pygpu(jax, dtype):
    import jax.numpy as jnp
    h = host((4, 6), dtype)
    g = pygpu.to_gpu(h)
    for x in (jnp.from_dlpack(g), jax.dlpack.from_dlpack(g)):
        assert np.array_equal(np.asarray(x), h)
    x = jnp.from_dlpack(g)
    if x.unsafe_buffer_pointer() == g.ptr:       # shared (JAX may copy): a write shows
        g[0, 0] = 0
        assert np.asarray(x)[0, 0] == 0


@pytest.mark.parametrize("dtype", JAX_DTYPES)
def test_pygpu_from_jax(jax, dtype):
    import jax.numpy as jnp
    h = host((4, 6), dtype)
    x = jnp.asarray(h)
    x.block_until_ready()
    g = pygpu.from_dlpack(x)
    assert g.ptr == x.unsafe_buffer_pointer() and np.array_equal(g.get(), h)


def test_jax_reads_after_pending_pygpu_work(jax):
    import jax.numpy as jnp
    g, s = pending_on_side_stream()
    assert np.asarray(jnp.from_dlpack(g)[-4:]).tolist() == [30.0] * 4
