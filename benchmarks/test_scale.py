"""Transfers at scale (issue targets, as ratios to raw pinned cudaMemcpy in
the same run): pytest-benchmark over pygpu/bench_scale.py's cases, with the
aggregate GB/s, the ratio and the async fraction in extra_info.

    python -m pytest benchmarks/test_scale.py --benchmark-columns=median
    PYGPU_BENCH_SCALE_SIZE=16M ... to choose each thread's size (default 64M)
"""
import os

import pytest

import pygpu
from pygpu import bench, bench_scale
from pygpu.bench import registration

SIZE = bench.parse_size(os.environ.get("PYGPU_BENCH_SCALE_SIZE", "64M"))
RAW = bench.RawCuda()
_ceilings = {}


def ceiling(direction):
    if direction not in _ceilings:
        fn, keep = RAW.case(direction, SIZE)
        _ceilings[direction] = SIZE / bench.time_case(fn, SIZE, budget=0.3) / 1e9
        del keep
    return _ceilings[direction]


@pytest.mark.parametrize("nthreads", bench_scale.THREADS)
@pytest.mark.parametrize("direction", ["H2D", "D2H"])
@pytest.mark.parametrize("lib", ["pygpu", "cupy", "torch"])
def test_threads(benchmark, lib, direction, nthreads):
    """N threads, each moving SIZE bytes of touched pageable memory on its
    own stream, in a loop: the aggregate GB/s (target: 0.80 of pinned)."""
    if lib != "pygpu" and pygpu.backend != "cuda":
        pytest.skip("peers are compared on the CUDA backend")
    setup = bench_scale.thread_case(lib, direction, SIZE)
    if setup is None:
        pytest.skip(f"{lib} does not import here")
    seen = []
    with registration(0):           # (every byte staged: as python -m pygpu.bench --scale measures it)
        benchmark.pedantic(lambda: seen.append(bench_scale.aggregate(setup, nthreads, SIZE, budget=0.3)),
                           rounds=3, iterations=1)
    gbs = sorted(seen)[len(seen) // 2]
    benchmark.extra_info["aggregate GB/s"] = round(gbs, 2)
    if RAW.available():
        benchmark.extra_info["ratio to raw"] = round(gbs / ceiling(direction), 3)


@pytest.mark.parametrize("registered", [False, True], ids=["staged", "defaults"])
@pytest.mark.parametrize("place", bench_scale.BESIDE_PLACES, ids=["default-stream", "default-beside-non-blocking",
                                                                  "own-streams"])
def test_small_beside_big(benchmark, place, registered):
    """A 1 MiB to_gpu while another thread uploads 1 GiB at a time, against
    the same alone (target: at most 2x), on the default stream beside a
    blocking or a non-blocking stream, and with each thread on a
    non-blocking stream of its own; registration off (every byte staged)
    and as the defaults have it; the runtime's own copies of page-locked
    memory in the same places beside (extra_info "raw ...")."""
    own, nb, _ = place
    seen = []
    with registration(pygpu.transfer_config()["register_limit"] if registered else 0):
        benchmark.pedantic(lambda: seen.append(bench_scale.latency_beside(budget=0.3, own_streams=own,
                                                                          mover_non_blocking=nb)),
                           rounds=1, iterations=1)
    alone, beside = seen[0]
    benchmark.extra_info["alone us"] = round(alone * 1e6, 1)
    benchmark.extra_info["beside us"] = round(beside * 1e6, 1)
    benchmark.extra_info["ratio"] = round(beside / alone, 2)
    raw = bench_scale.raw_beside(budget=0.3, own_streams=own, mover_non_blocking=nb) if not registered else None
    if raw:
        benchmark.extra_info["raw alone us"] = round(raw[0] * 1e6, 1)
        benchmark.extra_info["raw beside us"] = round(raw[1] * 1e6, 1)
        benchmark.extra_info["raw ratio"] = round(raw[1] / raw[0], 2)


@pytest.mark.parametrize("down", [False, True], ids=["to_gpu_async", "get_async"])
@pytest.mark.parametrize("nbytes", [16 << 20, 64 << 20, 256 << 20])
def test_async_gives_time_back(benchmark, nbytes, down):
    """to_gpu_async of (get_async into) pageable memory: the call's share
    of the time until the stream has the data (target: at most 0.05 from
    16 MiB), and that time against a blocking to_gpu's (get's) (target:
    unchanged)."""
    seen = []
    benchmark.pedantic(lambda: seen.append(bench_scale.async_overlap(nbytes, budget=0.3, down=down)), rounds=1,
                       iterations=1)
    call, total, blocking = seen[0]
    benchmark.extra_info["call ms"] = round(call * 1e3, 3)
    benchmark.extra_info["total ms"] = round(total * 1e3, 3)
    benchmark.extra_info["call share"] = round(call / total, 3)
    benchmark.extra_info["blocking ms"] = round(blocking * 1e3, 3)
    benchmark.extra_info["blocking over total"] = round(blocking / total, 3)


def test_devices_at_once(benchmark):
    """One thread per device, each moving SIZE bytes of touched pageable
    memory to (from) its own device, all at once: each device's GB/s
    against raw pinned copies to every device at once (target: each at least
    0.9 of them, none below 0.8 of the best), host buffers page-locked in
    place as by default."""
    if pygpu.device_count() < 2:
        pytest.skip("needs two devices")
    seen = []
    benchmark.pedantic(lambda: seen.append(bench_scale.devices_at_once(SIZE, budget=0.3)), rounds=1, iterations=1)
    for d, rows in seen[0].items():
        for k, (raw_alone, raw_together, _, together) in enumerate(rows):
            benchmark.extra_info[f"{d} device {k} at once GB/s"] = round(together, 2)
            if raw_alone:
                benchmark.extra_info[f"{d} device {k} ratio to its link"] = round(together / raw_alone, 3)
            if raw_together:
                benchmark.extra_info[f"{d} device {k} ratio to raw at once"] = round(together / raw_together, 3)


@pytest.mark.parametrize("direction", ["H2D", "D2H"])
@pytest.mark.parametrize("nbytes", bench_scale.MID_SIZES)
def test_mid_size_against_the_bare_loop(benchmark, nbytes, direction):
    """set (get(ary)) of touched pageable memory, staged, against the bare
    loop of the same host copies and DMAs in C, the best of its windows
    (target: at least 0.95 of it)."""
    seen = []
    benchmark.pedantic(lambda: seen.append(bench_scale.mid_size((nbytes,), 0.3, (direction,))), rounds=1, iterations=1)
    mine, floor, raw = seen[0][(direction, nbytes)]
    benchmark.extra_info["GB/s"] = round(mine, 2)
    benchmark.extra_info["floor GB/s"] = round(floor, 2)
    benchmark.extra_info["ratio to floor"] = round(mine / floor, 3)
    if raw:
        benchmark.extra_info["ratio to raw"] = round(mine / raw, 3)
