"""GPUArray per-call costs against CuPy and PyTorch, same run (issue targets:
view x[1:5, ::2] <= 0.2 x CuPy, empty(1000) <= 0.5 x CuPy, attribute reads
shape / ptr <= 0.2 x CuPy)."""
import numpy as np
import pytest

import pygpu
from conftest import peer


def _x_pygpu():
    return pygpu.to_gpu(np.zeros((64, 64), np.float32))


@pytest.mark.benchmark(group="view x[1:5, ::2]")
def test_view_pygpu(benchmark):
    x = _x_pygpu()
    benchmark(x.__getitem__, (slice(1, 5), slice(None, None, 2)))


@pytest.mark.benchmark(group="view x[1:5, ::2]")
def test_view_cupy(benchmark):
    cp = peer("cupy")
    x = cp.zeros((64, 64), np.float32)
    benchmark(x.__getitem__, (slice(1, 5), slice(None, None, 2)))


@pytest.mark.benchmark(group="view x[1:5, ::2]")
def test_view_torch(benchmark):
    torch = peer("torch")
    x = torch.zeros((64, 64), dtype=torch.float32, device="cuda")
    benchmark(x.__getitem__, (slice(1, 5), slice(None, None, 2)))


@pytest.mark.benchmark(group="empty(1000)")
def test_empty_pygpu(benchmark):
    benchmark(pygpu.empty, 1000)


@pytest.mark.benchmark(group="empty(1000)")
def test_empty_cupy(benchmark):
    cp = peer("cupy")
    benchmark(cp.empty, 1000)


@pytest.mark.benchmark(group="empty(1000)")
def test_empty_torch(benchmark):
    torch = peer("torch")
    benchmark(torch.empty, 1000, device="cuda")


# Attribute reads are a few tens of nanoseconds: each benchmark call reads
# 100 times in a loop, so the call's own cost does not swamp them.
READS = range(100)


def _read_shape(x):
    for _ in READS:
        x.shape


def _read_ptr(x):
    for _ in READS:
        x.ptr


def _empty_loop(x):
    for _ in READS:
        pass


@pytest.mark.benchmark(group="attribute ptr x100")
def test_loop_alone(benchmark):
    """The loop without reads: subtract it from both sides for the reads' own cost."""
    benchmark(_empty_loop, None)


@pytest.mark.benchmark(group="attribute shape x100")
def test_shape_pygpu(benchmark):
    benchmark(_read_shape, _x_pygpu())


@pytest.mark.benchmark(group="attribute shape x100")
def test_shape_cupy(benchmark):
    cp = peer("cupy")
    benchmark(_read_shape, cp.zeros((64, 64), np.float32))


@pytest.mark.benchmark(group="attribute shape x100")
def test_shape_torch(benchmark):
    torch = peer("torch")
    benchmark(_read_shape, torch.zeros((64, 64), dtype=torch.float32, device="cuda"))


@pytest.mark.benchmark(group="attribute ptr x100")
def test_ptr_pygpu(benchmark):
    benchmark(_read_ptr, _x_pygpu())


@pytest.mark.benchmark(group="attribute ptr x100")
def test_ptr_cupy(benchmark):
    cp = peer("cupy")
    x = cp.zeros((64, 64), np.float32)

    def read(x):
        for _ in READS:
            x.data.ptr
    benchmark(read, x)


@pytest.mark.benchmark(group="attribute ptr x100")
def test_ptr_torch(benchmark):
    torch = peer("torch")
    x = torch.zeros((64, 64), dtype=torch.float32, device="cuda")

    def read(x):
        for _ in READS:
            x.data_ptr()
    benchmark(read, x)
