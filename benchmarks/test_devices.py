"""Copies between devices (issue 39), device 0 -> device 1 at 256 MiB: the
rows of `python -m pygpu.bench --devices` -- the runtime's MemcpyPeer with
peer access (the ceiling) and without, PyGPU's copy(device=1), b[...] = a,
memcpy_peer on its arrays' pointers, the staged copy, the strided views
x[::2], x[:, ::-1] and x.T, CuPy's and PyTorch's copies, the two pinned host
links -- each round one whole copy, all of one size in one group.
extra_info has GB/s (of the bytes written), the ratio the table gives (to
the ceiling, or for the staged copy to the slower host link, measured once
per size in the same run) and, for PyGPU's copies, whether one more of new
bytes landed bit for bit (checked outside the timing; a PyGPU copy that
does not land fails).  Skips with fewer than two devices.

    python -m pytest benchmarks/test_devices.py --benchmark-columns=median
    PYGPU_BENCH_DEVICE_SIZES="16M 1G" ... to choose the sizes
"""
import os

import pytest

import pygpu
from conftest import median_seconds
from pygpu import bench

SIZES = [bench.parse_size(s) for s in os.environ.get("PYGPU_BENCH_DEVICE_SIZES", "256M").split()]
_source = {}
_reference = {}


def devices():
    try:
        return pygpu.device_count()
    except pygpu.GPUError:
        return 0


def source(n):
    """The DeviceSource of size n (one size's data kept at a time)."""
    if n not in _source:
        _source.clear()
        _reference.clear()
        _source[n] = bench.DeviceSource(n)
    return _source[n]


def reference(n, row):
    """GB/s of `row` (the ceiling, a host link) at size n, measured once."""
    if (n, row) not in _reference:
        src = source(n)
        cell = bench.measure_device_case(row, bench.device_cases(src, ())[row], n, 0.3, None)
        _reference[n, row] = cell[1]
    return _reference[n, row]


@pytest.mark.parametrize("n", SIZES, ids=bench.size_name)
@pytest.mark.parametrize("row", list(bench.DEVICE_ROWS))
def test_devices(benchmark, row, n):
    if devices() < 2:
        pytest.skip(f"needs two devices, the {pygpu.backend} backend has {devices()}")
    src = source(n)
    cases = bench.device_cases(src)
    if row not in cases:
        pytest.skip(f"{row.split()[0]} is not usable here (it needs the CUDA backend and the library)")
    with bench.device_case_scope():
        fn, keep, verify = cases[row]()
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - another library's refusal skips, PyGPU's fails
            if not bench.other_library(row):
                raise
            pytest.skip(f"{row}: {type(e).__name__}: {e}")
        benchmark.group = f"device 0 -> 1, {bench.size_name(n)}"
        rounds = 3 if pygpu.backend == "host" else 20 if n <= 256 << 20 else 5
        benchmark.pedantic(fn, rounds=rounds, iterations=1, warmup_rounds=1)
        landed = verify() if verify else None
        del keep
    if landed is not None:
        benchmark.extra_info["landed"] = landed
        assert landed or not row.startswith("pygpu"), f"{row}: the copy did not land bit for bit"
    if not median_seconds(benchmark):
        return
    gbs = bench.device_moved(src, row) / median_seconds(benchmark) / 1e9
    benchmark.extra_info["GB/s"] = round(gbs, 1)
    kind = bench.DEVICE_ROWS[row]
    if kind in ("dense", "strided"):
        benchmark.extra_info["ratio to MemcpyPeer, peer on"] = round(gbs / reference(n, "MemcpyPeer, peer on"), 3)
    elif kind == "staged":
        slower = min(reference(n, "H2D pinned to 1"), reference(n, "D2H pinned from 0"))
        benchmark.extra_info["ratio to the slower host link"] = round(gbs / slower, 3)
