"""Host <-> device throughput (issue targets, as ratios to raw pinned
cudaMemcpy in the same run): pytest-benchmark over the cases of pygpu.bench,
with GB/s and the ratio in each benchmark's extra_info.

    python -m pytest benchmarks/test_transfers.py --benchmark-columns=median
    PYGPU_BENCH_SIZES="16M 256M" ... to choose the sizes
"""
import os

import pytest

import pygpu
from conftest import median_seconds
from pygpu import bench

SIZES = [bench.parse_size(s) for s in os.environ.get("PYGPU_BENCH_SIZES", "8 1M 16M 256M 1G").split()]
PEER_SIZES = [n for n in SIZES if 1 << 20 <= n <= 256 << 20]
RAW = bench.RawCuda()
_ceilings = {}


def ceiling(direction, n):
    """Raw pinned cudaMemcpy seconds for `direction` at size n, measured once."""
    if (direction, n) not in _ceilings:
        fn, keep = RAW.case(direction, n)
        _ceilings[direction, n] = bench.time_case(fn, n, budget=0.3)
        del keep
    return _ceilings[direction, n]


def run(benchmark, setup, n, case):
    fn, keep = setup()
    rounds = 3 if n >= 256 << 20 else 10 if n >= 16 << 20 else 100
    benchmark.pedantic(fn, rounds=rounds, iterations=1, warmup_rounds=1)
    median = median_seconds(benchmark)
    if not median:
        del keep
        return
    benchmark.extra_info["GB/s"] = round(n / median / 1e9, 2)
    if RAW.available():
        raw = ceiling(case[:3], n)
        benchmark.extra_info["raw pinned GB/s"] = round(n / raw / 1e9, 2)
        benchmark.extra_info["ratio to raw"] = round(raw / median, 3)
    del keep


@pytest.mark.parametrize("n", SIZES, ids=bench.size_name)
@pytest.mark.parametrize("case", list(bench.pygpu_cases(8)))
def test_pygpu(benchmark, case, n):
    benchmark.group = f"{case} {bench.size_name(n)}"
    with bench.case_settings(case):
        run(benchmark, bench.pygpu_cases(n)[case], n, case)


@pytest.mark.parametrize("n", SIZES, ids=bench.size_name)
@pytest.mark.parametrize("direction", ["H2D", "D2H"])
def test_raw_cudamemcpy_pinned(benchmark, direction, n):
    if not RAW.available():
        pytest.skip("raw cudaMemcpy needs the CUDA backend and libcudart")
    benchmark.group = f"{direction} pinned {bench.size_name(n)}"
    run(benchmark, lambda: RAW.case(direction, n), n, direction)


@pytest.mark.parametrize("n", PEER_SIZES, ids=bench.size_name)
@pytest.mark.parametrize("case", ["H2D pageable", "D2H new array", "D2H pageable"])
@pytest.mark.parametrize("lib", ["cupy", "torch", "numba"])
def test_peer(benchmark, lib, case, n):
    cases = bench.peer_cases(lib, n)
    if case not in cases:
        pytest.skip(f"{lib} is not usable here")
    benchmark.group = f"{case} {bench.size_name(n)}"
    run(benchmark, cases[case], n, case)
