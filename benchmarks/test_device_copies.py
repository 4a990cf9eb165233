"""Copies on the device (issue targets, in the same run): the issue's
layout copies, a cast and a fill of a 4096 x 2048 float64 array (64 MiB),
and a 1 KiB strided view, for PyGPU beside CuPy and PyTorch, with the
contiguous device-to-device copy as the ceiling.  Each round is one copy
and a synchronize; extra_info has GB/s (bytes read and written).

    python -m pytest benchmarks/test_device_copies.py --benchmark-columns=median
"""
import pytest

import pygpu
from conftest import median_seconds
from pygpu import bench

LIBS = ["pygpu", "cupy", "torch"]
_libs = {}


def library(name):
    """(x, synchronize) for `name`, or skip where it is not usable here."""
    if name not in _libs:
        _libs.update(bench.copy_libraries([n for n in LIBS if n != "pygpu"]))
        for n in LIBS:
            _libs.setdefault(n, None)
    if _libs[name] is None:
        pytest.skip(f"{name} is not usable here (it needs the CUDA backend and the library)")
    return _libs[name]


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("case", list(bench.COPY_CASES))
def test_copy(benchmark, case, lib):
    x, sync = library(lib)
    kind, spellings = bench.COPY_CASES[case]
    fn = spellings[lib]

    def once():
        fn(x)
        sync()
    benchmark.group = case
    benchmark.pedantic(once, rounds=200 if kind == "latency" else 30, iterations=1, warmup_rounds=2)
    if kind != "latency" and median_seconds(benchmark):
        moved = {"view": 2, "half": 1, "cast": 1.5, "fill": 0.5}[kind] * x.nbytes
        benchmark.extra_info["GB/s"] = round(moved / median_seconds(benchmark) / 1e9, 1)


def test_contiguous_copy_ceiling(benchmark):
    x, sync = library("pygpu")
    dst = pygpu.empty_like(x)

    def once():
        pygpu.memcpy_dtod_async(dst.ptr, x.ptr, x.nbytes)
        sync()
    benchmark.group = "contiguous memcpy (ceiling)"
    benchmark.pedantic(once, rounds=30, iterations=1, warmup_rounds=2)
    if median_seconds(benchmark):
        benchmark.extra_info["GB/s"] = round(2 * x.nbytes / median_seconds(benchmark) / 1e9, 1)
