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


# ---- where the time goes: each producer's export alone ---------------------------------
# torch.from_dlpack(x) calls x.__dlpack_device__() and x.__dlpack__(stream=1,
# max_version=(1, 0)) and builds a tensor; cupy/pygpu.from_dlpack(t) call the
# same on a torch tensor.  The consumer's share of a from_dlpack is its time
# less the producer's export measured here.

def _export(x):
    x.__dlpack_device__()
    x.__dlpack__(stream=1, max_version=(1, 0))


@pytest.mark.benchmark(group="export alone: __dlpack_device__ + __dlpack__")
def test_export_pygpu(benchmark):
    if pygpu.backend != "cuda":
        pytest.skip("stream=1 names CUDA's legacy stream (host arrays take stream=None)")
    benchmark(_export, _x_pygpu())


@pytest.mark.benchmark(group="export alone: __dlpack_device__ + __dlpack__")
def test_export_cupy(benchmark):
    cp = peer("cupy")
    benchmark(_export, cp.zeros((64, 64), np.float32))


@pytest.mark.benchmark(group="export alone: __dlpack_device__ + __dlpack__")
def test_export_torch(benchmark):
    torch = peer("torch")
    benchmark(_export, torch.zeros((64, 64), dtype=torch.float32, device="cuda"))


# ---- issue 22: the hand-off table, and the DLPack C exchange timed in C ----------------------
# `python -m pygpu.bench --handoff` prints the same rows in one table.

from pygpu.bench import c_exchange_cases, handoff_cases  # noqa: E402

HANDOFFS = sorted(handoff_cases(()).keys() | {
    "pygpu.from_dlpack(torch tensor)", "pygpu.asarray(torch tensor)", "torch.from_dlpack(pygpu array)",
    "torch.as_tensor(pygpu array, device='cuda')", "cupy.from_dlpack(torch tensor)", "cupy.asarray(torch tensor)",
    "torch.from_dlpack(cupy array)", "torch.as_tensor(cupy array, device='cuda')"})


@pytest.mark.benchmark(group="hand-off")
@pytest.mark.parametrize("name", HANDOFFS)
def test_handoff(benchmark, name):
    cases = handoff_cases(("cupy", "torch"))
    if name not in cases:
        pytest.skip(f"{name}: a peer does not import here, or no CUDA")
    benchmark(cases[name])


@pytest.mark.parametrize("name", ["pygpu managed", "pygpu view", "torch managed"])
def test_c_exchange(benchmark, name):
    """ns per exchange measured in C (target: <= 100 ns for ours), in
    extra_info; the benchmark itself times a batch of 10,000."""
    who, what = name.split()
    cases = {n: v for n, v in c_exchange_cases(("torch",)).items() if who in n and what in n}
    if not cases:
        pytest.skip("torch has no __dlpack_c_exchange_api__ here")
    x, kind = next(iter(cases.values()))
    benchmark.extra_info["ns_per_exchange"] = min(pygpu._exchange_timing(x, 1_000_000, kind) for _ in range(3))
    benchmark(pygpu._exchange_timing, x, 10_000, kind)
