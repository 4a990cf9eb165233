"""Interop costs against CuPy, same run (issue 5 targets, on the GPU machine):
reading __cuda_array_interface__ <= 0.5 x CuPy's; torch.from_dlpack(pygpu
array) <= 0.7 x torch.from_dlpack(cupy array); pygpu.from_dlpack(torch
tensor) <= 0.5 x cupy.from_dlpack(torch tensor).  Compare the means of a
group: `python3 -m pytest benchmarks/test_interop.py --benchmark-group-by=group`."""
import numpy as np
import pytest

import pygpu
from conftest import peer

READS = range(10)       # reads per benchmark call, so that the call's own cost does not swamp them


def _x_pygpu():
    return pygpu.to_gpu(np.zeros((64, 64), np.float32))


def _read_cai(x):
    for _ in READS:
        x.__cuda_array_interface__


@pytest.mark.benchmark(group="read __cuda_array_interface__ x10")
def test_cai_pygpu(benchmark):
    if pygpu.backend != "cuda":
        pytest.skip("__cuda_array_interface__ is exported by CUDA arrays only")
    benchmark(_read_cai, _x_pygpu())


@pytest.mark.benchmark(group="read __cuda_array_interface__ x10")
def test_cai_cupy(benchmark):
    cp = peer("cupy")
    benchmark(_read_cai, cp.zeros((64, 64), np.float32))


@pytest.mark.benchmark(group="read __cuda_array_interface__ x10")
def test_cai_torch(benchmark):
    torch = peer("torch")
    benchmark(_read_cai, torch.zeros((64, 64), dtype=torch.float32, device="cuda"))


@pytest.mark.benchmark(group="torch.from_dlpack(x)")
def test_torch_from_pygpu(benchmark):
    torch = peer("torch")
    benchmark(torch.from_dlpack, _x_pygpu())


@pytest.mark.benchmark(group="torch.from_dlpack(x)")
def test_torch_from_cupy(benchmark):
    torch, cp = peer("torch"), peer("cupy")
    benchmark(torch.from_dlpack, cp.zeros((64, 64), np.float32))


@pytest.mark.benchmark(group="from_dlpack(torch tensor)")
def test_pygpu_from_torch(benchmark):
    torch = peer("torch")
    benchmark(pygpu.from_dlpack, torch.zeros((64, 64), dtype=torch.float32, device="cuda"))


@pytest.mark.benchmark(group="from_dlpack(torch tensor)")
def test_cupy_from_torch(benchmark):
    torch, cp = peer("torch"), peer("cupy")
    benchmark(cp.from_dlpack, torch.zeros((64, 64), dtype=torch.float32, device="cuda"))


@pytest.mark.benchmark(group="from_dlpack(own array)")
def test_pygpu_from_pygpu(benchmark):
    benchmark(pygpu.from_dlpack, _x_pygpu())


@pytest.mark.benchmark(group="import a foreign CAI array")
def test_pygpu_asarray_cupy(benchmark):
    cp = peer("cupy")
    benchmark(pygpu.asarray, cp.zeros((64, 64), np.float32))


@pytest.mark.benchmark(group="import a foreign CAI array")
def test_cupy_asarray_cupy(benchmark):
    """CuPy's own asarray of a foreign CAI object, for scale."""
    cp = peer("cupy")
    if pygpu.backend != "cuda":
        pytest.skip("needs a CUDA GPUArray")
    benchmark(cp.asarray, _x_pygpu())
