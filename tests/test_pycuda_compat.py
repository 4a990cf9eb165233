"""Code written for PyCUDA runs on PyGPU with only its import lines changed
(docs/api.md, Compatibility): the tutorial's steps, the gpuarray calls with
PyCUDA's signatures, and an MPI script, minus kernel launches.  Where
PyCUDA and NumPy disagree, PyGPU follows NumPy.  NumPy is the oracle."""
import textwrap

import numpy as np
import pytest

import pygpu

# PyCUDA's import lines and what they become: nothing else in a script changes.
IMPORTS = {
    "import pycuda.gpuarray as gpuarray": "import PyGPU as gpuarray",
    "import pycuda.driver as cuda": "import PyGPU.driver as cuda",
    "import pycuda.driver as drv": "import PyGPU.driver as drv",
    "import pycuda.autoinit": "import PyGPU.autoinit",
}


def ported(script):
    """`script` (written for PyCUDA) with its import lines changed."""
    lines = textwrap.dedent(script).splitlines()
    out = [IMPORTS.get(line.strip(), line) for line in lines]
    changed = [a for a, b in zip(lines, out) if a != b]
    assert changed and all(line.strip().startswith("import pycuda") for line in changed)
    assert "pycuda" not in "\n".join(out)
    return "\n".join(out)


def run_ported(run_python, script, env=None):
    return run_python(ported(script), env=env)


# ---- PyCUDA's tutorial, minus the kernel ---------------------------------------

TUTORIAL = """
import pycuda.driver as cuda
import pycuda.autoinit
import numpy

a = numpy.random.randn(4, 4)
a = a.astype(numpy.float32)
a_gpu = cuda.mem_alloc(a.nbytes)
cuda.memcpy_htod(a_gpu, a)

# (the tutorial launches its doubling kernel on a_gpu here)

a_doubled = numpy.empty_like(a)
cuda.memcpy_dtoh(a_doubled, a_gpu)
assert (a_doubled == a).all()

import pycuda.gpuarray as gpuarray
a_gpu = gpuarray.to_gpu(numpy.random.randn(4, 4).astype(numpy.float32))
a_back = a_gpu.get()
print(a_gpu.shape, a_gpu.dtype, a_back.dtype)
print(repr(a_gpu)[:8])

free, total = cuda.mem_get_info()
print(cuda.Device.count() >= 1, free <= total)
"""


def test_tutorial(run_python):
    proc = run_ported(run_python, TUTORIAL)
    assert proc.stdout.split("\n")[:3] == ["(4, 4) float32 float32", "GPUArray", "True True"]


# ---- gpuarray with PyCUDA's signatures ---------------------------------------------

GPUARRAY_SCRIPT = """
import pycuda.autoinit
import pycuda.driver as cuda
import pycuda.gpuarray as gpuarray
import numpy as np

rng = np.random.default_rng(5)
a = rng.standard_normal((6, 8)).astype(np.float32)

a_gpu = gpuarray.to_gpu(a)
assert isinstance(a_gpu, gpuarray.GPUArray)
assert a_gpu.shape == a.shape and a_gpu.dtype == a.dtype and a_gpu.strides == a.strides
assert a_gpu.size == a.size and a_gpu.mem_size == a.size and a_gpu.nbytes == a.nbytes
assert int(a_gpu.gpudata) == a_gpu.ptr and a_gpu.flags.c_contiguous and a_gpu.flags.forc
assert (a_gpu.get() == a).all()

b = gpuarray.GPUArray((3, 5), np.float64)                  # shape, dtype
b.set(np.arange(15.0).reshape(3, 5))
assert (b.get() == np.arange(15.0).reshape(3, 5)).all()
c = gpuarray.GPUArray((3, 5), np.float64, cuda.mem_alloc)   # PyCUDA's allocator, positional
c.set(b.get())
f = gpuarray.GPUArray((3, 5), np.float64, order="F")
assert f.flags.f_contiguous and not f.flags.c_contiguous
view = gpuarray.GPUArray((5,), np.float64, gpudata=b.gpudata)    # first row's memory
assert (view.get() == np.arange(5.0)).all()

e = gpuarray.empty((4, 2), np.int32)
z = gpuarray.zeros((4, 2), np.int32)
assert (z.get() == 0).all()
el, zl, ol = gpuarray.empty_like(a_gpu), gpuarray.zeros_like(a_gpu), gpuarray.ones_like(a_gpu)
assert el.shape == zl.shape == ol.shape == a.shape and (zl.get() == 0).all() and (ol.get() == 1).all()
cat = gpuarray.concatenate((a_gpu, a_gpu), axis=1)
assert (cat.get() == np.concatenate((a, a), axis=1)).all()
st = gpuarray.stack((a_gpu, a_gpu))
assert (st.get() == np.stack((a, a))).all()

stream = cuda.Stream()
a_pin = cuda.pagelocked_empty(a.shape, a.dtype)
a_pin[...] = a
d_gpu = gpuarray.to_gpu_async(a_pin, stream=stream)
out = cuda.pagelocked_empty_like(a_pin)
d_gpu.get_async(stream, out)
stream.synchronize()
assert (out == a).all()
d_gpu.set_async(a_pin * 2, stream)
assert (d_gpu.get_async(stream) == a * 2).all()

cp = a_gpu.copy()
assert cp.ptr != a_gpu.ptr and (cp.get() == a).all()
assert (a_gpu.view(np.int32).get() == a.view(np.int32)).all()
assert (a_gpu.reshape(8, 6).get() == a.reshape(8, 6)).all()
assert (a_gpu.reshape((4, -1)).get() == a.reshape((4, -1))).all()
assert (a_gpu.ravel().get() == a.ravel()).all()
assert (a_gpu.T.get() == a.T).all() and (a_gpu.transpose().get() == a.transpose()).all()
assert (a_gpu.transpose((1, 0)).get() == a.transpose((1, 0))).all()
s = gpuarray.to_gpu(a.reshape(1, 6, 1, 8))
assert s.squeeze().shape == (6, 8)

assert (a_gpu[1:5, ::2].get() == a[1:5, ::2]).all()
assert (a_gpu[-1].get() == a[-1]).all()
assert (a_gpu[..., 3].get() == a[..., 3]).all()
a_gpu[2:4] = 0
a[2:4] = 0
assert (a_gpu.get() == a).all()
print("ok")
"""


def test_gpuarray_script(run_python):
    proc = run_ported(run_python, GPUARRAY_SCRIPT)
    assert proc.stdout.strip() == "ok"


def test_gpuarray_script_in_this_process():
    """The same, in-process, so that a failure points at its line."""
    ns = {}
    exec(compile(ported(GPUARRAY_SCRIPT), "GPUARRAY_SCRIPT", "exec"), ns)


class Pool:
    """A PyCUDA DeviceMemoryPool-like allocator: allocate(nbytes) returns an
    object that int() converts."""

    def __init__(self):
        self.held = []

    def allocate(self, nbytes):
        mem = pygpu.mem_alloc(nbytes)
        self.held.append(mem)
        return mem


def test_allocators_as_PyCUDA_passes_them(rng):
    import pygpu.driver as cuda
    a = rng.standard_normal((5, 3))
    pool = Pool()
    for make in (lambda: pygpu.to_gpu(a, pool.allocate), lambda: pygpu.to_gpu(a, allocator=pool.allocate),
                 lambda: pygpu.to_gpu_async(a, pool.allocate, cuda.Stream()),
                 lambda: pygpu.to_gpu_async(a, allocator=pool.allocate, stream=cuda.Stream())):
        g = make()
        assert int(g.gpudata) == int(pool.held[-1]) and np.array_equal(g.get(), a)
    g = pygpu.to_gpu_async(a, None, cuda.Stream())             # PyCUDA: (ary, allocator, stream)
    assert np.array_equal(g.get(), a) and len(pool.held) == 4
    g = pygpu.GPUArray(a.shape, a.dtype, pool.allocate)
    assert int(g.gpudata) == int(pool.held[-1])
    f = pygpu.to_gpu(np.asfortranarray(a), pool.allocate)
    assert f.flags.f_contiguous and np.array_equal(f.get(), a)
    e = pygpu.empty((3, 4), np.float32, pool.allocate, "F")      # PyCUDA: (shape, dtype, allocator, order)
    assert e.flags.f_contiguous and int(e.gpudata) == int(pool.held[-1])
    z = pygpu.zeros((3, 4), np.float32, pool.allocate)
    assert (z.get() == 0).all() and int(z.gpudata) == int(pool.held[-1])
    z2 = pygpu.zeros((3, 4), np.int8, allocator=pool.allocate, order="F")
    assert z2.flags.f_contiguous and int(z2.gpudata) == int(pool.held[-1])
    c = pygpu.concatenate([z, z], 0, pool.allocate)
    assert c.shape == (6, 4) and int(c.gpudata) == int(pool.held[-1])
    s = pygpu.stack([z, z], allocator=pool.allocate)
    assert s.shape == (2, 3, 4) and int(s.gpudata) == int(pool.held[-1])
    with pytest.raises(TypeError, match="allocator"):
        pygpu.empty(3, np.float32, "C", 5)


def test_get_and_set_take_PyCUDA_arguments(rng):
    import pygpu.driver as cuda
    a = rng.standard_normal((4, 4))
    g = pygpu.to_gpu(a)
    out = np.empty_like(a)
    assert g.get(out) is out and np.array_equal(out, a)
    assert np.array_equal(g.get(None, True), a)                # (ary, pagelocked)
    assert np.array_equal(g.get(pagelocked=True, async_=True, stream=cuda.Stream()), a)
    s = cuda.Stream()
    g.set(a * 2, True, s)                                      # (ary, async_, stream)
    s.synchronize()
    assert np.array_equal(g.get(), a * 2)
    g.set(a * 3, async_=True, stream=s)
    assert np.array_equal(g.get(stream=s), a * 3)
    g.set(a * 4, s)                                            # PyGPU's (ary, stream)
    assert np.array_equal(g.get(stream=s), a * 4)
    g.set(a, False)
    assert np.array_equal(g.get(), a)


# ---- where PyCUDA and NumPy disagree, PyGPU follows NumPy --------------------------

def test_empty_slices_follow_numpy():
    a = np.arange(10.0)
    g = pygpu.to_gpu(a)
    for key in (np.s_[5:2], np.s_[8:3:2], np.s_[-1:0], np.s_[3:3]):
        assert g[key].shape == a[key].shape
        assert len(g[key]) == len(a[key]) == 0


def test_squeeze_keeps_zero_length_axes_as_numpy():
    a = np.zeros((1, 0, 1, 3))
    assert pygpu.to_gpu(a).squeeze().shape == a.squeeze().shape == (0, 3)


def test_copies_keep_C_and_F_as_numpy(rng):
    """copy() keeps the layout, as PyCUDA's copy() does (order 'K'); an
    order named is NumPy's."""
    a = np.asfortranarray(rng.standard_normal((3, 4)))
    g = pygpu.to_gpu(a)
    assert g.flags.f_contiguous and g.strides == a.strides
    assert g.copy().flags.f_contiguous and g.copy().strides == a.strides and np.array_equal(g.copy().get(), a)
    assert g.copy(order="C").flags.c_contiguous and np.array_equal(g.copy(order="C").get(), a)
    assert g.copy(order="A").flags.f_contiguous and g.copy(order="K").flags.f_contiguous
    assert np.array_equal(g.reshape(4, 3).get(), a.reshape(4, 3))
    assert np.array_equal(g.reshape(4, 3, order="F").get(), a.reshape(4, 3, order="F"))
    assert np.array_equal(g.ravel().get(), a.ravel())


# ---- MPI, PyCUDA style (host-staged) ---------------------------------------------------

MPI_SCRIPT = """
import numpy as np
from mpi4py import MPI
import pycuda.driver as cuda
import pycuda.autoinit
import pycuda.gpuarray as gpuarray

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()

x = np.arange(16, dtype=np.float64) * (rank + 1)
x_gpu = gpuarray.to_gpu(x)
# (a kernel would work on x_gpu here)
total = np.empty_like(x)
comm.Allreduce(x_gpu.get(), total, op=MPI.SUM)
x_gpu.set(total)

mem = cuda.to_device(x)
back = cuda.from_device(mem, x.shape, x.dtype)
comm.Bcast(back, root=0)
assert (x_gpu.get() == np.arange(16) * sum(range(1, size + 1))).all()
print("rank", rank, "ok")
"""


def test_mpi_script_single_rank(run_python):
    pytest.importorskip("mpi4py")
    proc = run_ported(run_python, MPI_SCRIPT)
    assert proc.stdout.strip() == "rank 0 ok"
