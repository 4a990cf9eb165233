"""`python -m pygpu`, the main job: it runs, reports the backend and devices
(and with two or more, how each pair reaches the other), passes its round
trip, and prints the throughput table; and python -m pygpu.bench's tables
(its ceiling, --scale's threads, --devices)."""
import importlib
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import pygpu


def test_main_job(run_python):
    r = run_python("import runpy, sys; sys.argv = ['pygpu', '--repeats', '1']; "
                   "runpy.run_module('pygpu', run_name='__main__')",
                   env={"PYGPU_BACKEND": __import__("pygpu").backend})
    out = r.stdout
    assert r.returncode == 0, r.stderr + out
    assert re.search(r"^backend: \w+ \(built: .*host", out, re.M)
    assert re.search(r"^devices: [1-9]", out, re.M)
    # What the build did with each backend (pip shows it only with -v);
    # a build by hand (tools/asan.sh's) has no report, and the job says so.
    if os.path.exists(os.path.join(os.path.dirname(os.path.abspath(pygpu.__file__)), "_build_report.json")):
        assert re.search(r"^build report \(.*\):$", out, re.M), out
        for name in pygpu.backends():
            assert re.search(rf"^  {name}: built", out, re.M), out
        for name in {"cuda", "hip"} - set(pygpu.backends()):
            assert re.search(rf"^  {name}: skipped: \S", out, re.M), out
    else:
        assert re.search(r"^build report: none beside the package \(", out, re.M), out
    assert "round trip host -> device -> device -> host, 8 MiB: ok" in out
    rows = re.findall(r"^\s+\d+ MiB((?:\s+\d+\.\d)+)$", out, re.M)
    assert len(rows) == 3 and all(len(r.split()) == 4 for r in rows)
    assert all(float(x) > 0 for r in rows for x in r.split())


PEER_LINE = re.compile(r"^  (\d+) -> (\d+): (can|cannot) access, rank (\d+|-), (peer|staged): (\S.*)$", re.M)


def test_main_peers_section(capsys):
    """With two or more devices the job has a line for each ordered pair:
    whether they reach each other, the link's rank, how copies go and why,
    as the API says it."""
    from pygpu import __main__ as job
    n = pygpu.device_count()
    if n < 2:
        pytest.skip("needs two devices (the host backend presents two in the suite)")
    assert job.main(["--no-bench"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^peers \(src -> dst: .*\):$", out, re.M), out
    pairs = PEER_LINE.findall(out)
    assert [(int(s), int(d)) for s, d, *_ in pairs] == [(s, d) for s in range(n) for d in range(n) if s != d]
    for src, dst, can, rank, route, why in pairs:
        src, dst = int(src), int(dst)
        assert (can == "can") == pygpu.can_access_peer(src, dst)
        assert (route, why) == pygpu.Device(dst).peer_route(src)
        if rank != "-":
            assert int(rank) == pygpu.Device(src).p2p_rank(dst)
    if pygpu.backend == "host" and os.environ.get("PYGPU_HOST_PEER", "1").strip() == "1":
        assert all(p[2:5] == ("can", "0", "peer") for p in pairs), out


@pytest.mark.skipif(pygpu.backend != "host", reason="the host backend's settings make these machines")
@pytest.mark.parametrize("devices, peer", [(2, "0"), (3, "2"), (1, "1")])
def test_main_peers_section_says_staged_and_why(run_python, devices, peer):
    """Devices that refuse peer access show as staged, with the reason; a
    driver that loses peer copies too (PYGPU_HOST_PEER=2: access granted,
    the check copy lands nothing); one device prints no peers section."""
    r = run_python("import sys; from pygpu.__main__ import main; sys.exit(main(['--no-bench']))",
                   env={"PYGPU_BACKEND": "host", "PYGPU_HOST_DEVICES": devices, "PYGPU_HOST_PEER": peer})
    out = r.stdout
    pairs = PEER_LINE.findall(out)
    if devices == 1:
        assert "peers" not in out and not pairs, out
        return
    assert len(pairs) == devices * (devices - 1), out
    for _, _, can, rank, route, why in pairs:
        assert route == "staged", out
        if peer == "0":
            assert (can, rank, why) == ("cannot", "-", "the runtime refuses peer access between the two devices")
        else:
            assert (can, rank) == ("can", "0") and "wrote nothing" in why, out


@pytest.mark.parametrize("module", ["pygpu", "pygpu.bench"])
def test_help_is_whole(module):
    """--help shows the module's whole docstring (it once stopped at the end
    of its first line, mid-sentence), and every option it names exists."""
    doc = importlib.import_module(module if module != "pygpu" else "pygpu.__main__").__doc__
    r = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    missing = [line.strip() for line in doc.splitlines() if line.strip() and line.strip() not in r.stdout]
    assert not missing, f"python -m {module} --help leaves out: {missing}"
    options = set(re.findall(r"^\s+(--[\w-]+)", r.stdout.split("options:")[1], re.M))
    assert set(re.findall(r"(--[a-z][\w-]*)", doc)) <= options


def test_bench_ceiling_keeps_the_faster_of_two_measurements(monkeypatch):
    """python -m pygpu.bench measures the raw pinned ceiling before and after
    PyGPU's cases at each size and keeps the faster: a dip in one measurement
    must not flatter the ratios."""
    from pygpu import bench
    script = iter([2.0, 3.0, 4.0, 1.0, 6.0])     # raw H2D, raw D2H, pygpu, raw H2D again, raw D2H again
    monkeypatch.setattr(bench.RawCuda, "available", lambda self: True)
    monkeypatch.setattr(bench.RawCuda, "case", lambda self, d, n: (lambda: None, None))
    monkeypatch.setattr(bench, "pygpu_cases", lambda n: {"H2D pageable": lambda: (lambda: None, None)})
    monkeypatch.setattr(bench, "time_case", lambda fn, n, budget: next(script))
    res = bench.measure([1 << 20], peers=())
    assert res["raw cudaMemcpy", "H2D pinned"][1 << 20][0] == 1.0
    assert res["raw cudaMemcpy", "D2H pinned"][1 << 20][0] == 3.0
    assert res["pygpu", "H2D pageable"][1 << 20][0] == 4.0
    assert bench.ceiling(res, "H2D pageable", 1 << 20) == (1 << 20) / 1.0 / 1e9


def test_bench_reused_cases_meet_their_buffer_until_it_is_registered():
    """The "reused" cases move 64 MiB through their buffer before the timed
    copies (registration waits for that), so that they time the DMA alone;
    the staged ones register nothing."""
    from pygpu import bench
    before = pygpu.transfer_config()["register_limit"]
    pygpu.transfer_config(register_limit=64 << 20)
    try:
        for name, more in (("H2D pageable", 0), ("H2D pageable reused", 1), ("D2H pageable reused", 1)):
            made = pygpu.registered_stats()["registered"]
            fn, keep = bench.pygpu_cases(1 << 20)[name]()
            assert pygpu.registered_stats()["registered"] == made + more, name
            fn()
            del fn, keep
    finally:
        pygpu.transfer_config(register_limit=before)


def test_bench_times_the_staged_cases_with_registration_off(monkeypatch):
    """The bench's pageable cases that show the staging path run with
    register_limit=0 (a buffer met again would be page-locked in place and
    the case would time the DMA alone); the "reused" ones, and the rest,
    with the settings as they are; the limit is restored after each."""
    from pygpu import bench
    seen, current = {}, []

    def time_case(fn, n, budget):
        seen[current[-1]] = pygpu.transfer_config()["register_limit"]
        return 1.0

    def case(name):
        def setup():
            current.append(name)
            return (lambda: None), None
        return setup
    names = ("H2D pageable", "H2D pageable reused", "D2H pageable", "D2H pageable reused", "H2D pinned")
    monkeypatch.setattr(bench.RawCuda, "available", lambda self: False)     # (no raw ceilings: PyGPU's cases only)
    monkeypatch.setattr(bench, "time_case", time_case)
    monkeypatch.setattr(bench, "pygpu_cases", lambda n: {name: case(name) for name in names})
    before = pygpu.transfer_config()["register_limit"]
    pygpu.transfer_config(register_limit=64 << 20)
    try:
        bench.measure([1 << 20], peers=())
        assert seen == {"H2D pageable": 0, "D2H pageable": 0, "H2D pageable reused": 64 << 20,
                        "D2H pageable reused": 64 << 20, "H2D pinned": 64 << 20}
        assert pygpu.transfer_config()["register_limit"] == 64 << 20
    finally:
        pygpu.transfer_config(register_limit=before)


def test_scale_report_times_threads_and_beside_with_registration_off(monkeypatch):
    """--scale's thread table runs with register_limit=0 (its buffers, met
    again and again, would be page-locked in place after the first round),
    then PyGPU's rows again with the defaults,
    the small-beside-big latency with it off and with the defaults; the
    limit is as it was after, and the async section runs with it."""
    from pygpu import bench_scale
    seen = {}

    def limit():
        return pygpu.transfer_config()["register_limit"]

    def threads(*args, **kwargs):
        seen.setdefault("threads", []).append(limit())
        return {}, {}

    def beside(**kwargs):
        seen.setdefault("beside", []).append(limit())
        return 1e-3, 2e-3

    def overlap(n, budget, down=False):
        seen["async"] = limit()
        return 1e-4, 1e-3, 1e-3
    monkeypatch.setattr(bench_scale, "measure_threads", threads)
    monkeypatch.setattr(bench_scale, "latency_beside", beside)
    monkeypatch.setattr(bench_scale, "async_overlap", overlap)
    monkeypatch.setattr(bench_scale.pygpu, "device_count", lambda: 1)
    monkeypatch.setattr(bench_scale, "host_floors", lambda *a, **k: {})
    monkeypatch.setattr(bench_scale, "floors_lines", lambda *a, **k: [])
    monkeypatch.setattr(bench_scale, "fresh_downloads", lambda *a, **k: {1 << 20: (2.0, 4.0, None)})
    monkeypatch.setattr(bench_scale, "mid_size", lambda *a, **k: {("H2D", 1 << 20): (3.0, 4.0, 6.0)})
    before = limit()
    pygpu.transfer_config(register_limit=32 << 20)
    try:
        text = bench_scale.scale_report(async_sizes=(1 << 20,))
        assert seen == {"threads": [0, 32 << 20], "beside": [0, 32 << 20] * 3, "async": 32 << 20}, seen
        assert limit() == 32 << 20 and "registration off" in text and text.count(", the defaults") == 3
        assert text.count("the runtime's own copies there") == 3, text
        assert "Fresh destinations" in text and "    1 MiB      2.0      4.0        -      0.50" in text, text
        assert "Mid-size" in text and "set           1 MiB      3.0      4.0      6.0      0.75     0.50" in text, text
    finally:
        pygpu.transfer_config(register_limit=before)


class _FakeClock:
    """perf_counter for bench_scale: time moves only when a transfer runs."""

    def __init__(self):
        import threading
        self.now, self.lock = 100.0, threading.Lock()

    def perf_counter(self):
        with self.lock:
            return self.now

    def advance(self, dt):
        with self.lock:
            self.now += dt


def _script_threads(clock, warm_calls, warm_dt, dt, fail_at=None):
    """setup() for bench_scale.aggregate whose fn takes warm_dt of the fake
    clock for its first warm_calls calls and dt after, and raises at call
    number fail_at."""
    def setup():
        n = [0]

        def fn():
            n[0] += 1
            if n[0] == fail_at:
                raise RuntimeError("failed in the warm-up")
            clock.advance(warm_dt if n[0] <= warm_calls else dt)
        return fn, None
    return setup


@pytest.mark.timing
@pytest.mark.parametrize("nthreads", [1, 4])
def test_scale_aggregate_times_only_the_timed_rounds(monkeypatch, nthreads):
    """The threads' warm-up rounds (alone, then together) are not in the
    time the aggregate divides by: with warm-ups of 1 s and transfers of 10
    ms on a clock that only transfers move, the aggregate is exactly one
    transfer's bytes per 10 ms, however many threads (they take turns on
    the one clock)."""
    from pygpu import bench_scale
    clock = _FakeClock()
    monkeypatch.setattr(bench_scale, "time", clock)
    gbs = bench_scale.aggregate(_script_threads(clock, 3, 1.0, 0.01), nthreads, 10**9, budget=0.2)
    assert gbs == pytest.approx(100.0, rel=1e-6)


@pytest.mark.timing
def test_scale_aggregate_failure_in_warm_up_raises_without_hanging(monkeypatch):
    """A transfer that fails in the threads' shared warm-up ends the
    aggregate with its error; the other threads and the timer do not wait
    for it at a barrier forever."""
    import threading
    from pygpu import bench_scale
    clock = _FakeClock()
    monkeypatch.setattr(bench_scale, "time", clock)
    seen = []

    def run():
        try:
            bench_scale.aggregate(_script_threads(clock, 3, 0.0, 0.01, fail_at=2), 4, 1, budget=0.1)
        except BaseException as e:  # noqa: BLE001 - checked below
            seen.append(e)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(120)
    assert not t.is_alive(), "bench_scale.aggregate hung after a failed warm-up"
    assert len(seen) == 1 and isinstance(seen[0], RuntimeError) and "warm-up" in str(seen[0])


def test_scale_devices_at_once_runs_each_thread_on_its_own_device():
    """bench_scale's devices case: each thread's setup and transfers run
    with its own device current, aggregate(each=True) gives one rate per
    thread, and the table has a row per device and direction."""
    from pygpu import bench_scale
    if pygpu.device_count() < 2:
        pytest.skip("needs two devices (the host backend presents two in the suite)")
    seen = []

    def setup():
        made_on = pygpu.get_device()

        def fn():
            seen.append((made_on, pygpu.get_device()))
        return fn, None
    rates = bench_scale.aggregate([bench_scale.on_device(k, setup) for k in (1, 0)], 2, 1, budget=0.05, each=True)
    assert len(rates) == 2 and all(r > 0 for r in rates)
    assert set(seen) == {(1, 1), (0, 0)}
    assert pygpu.get_device() == 0
    res, _ = bench_scale.devices_at_once_with(0, 1 << 16, budget=0.02)
    assert set(res) == {"H2D", "D2H"}
    for rows in res.values():
        assert len(rows) == pygpu.device_count()
        assert all(r[2] > 0 and r[3] > 0 for r in rows)
    text = bench_scale.at_once_table(res, 1 << 16)
    assert text.count("to_gpu ") == pygpu.device_count() and text.count("get(ary) ") == pygpu.device_count()
    # and with the host buffers page-locked in place: registered (32 MiB buffers, met again), then off as before
    made = pygpu.registered_stats()["registered"]
    before = pygpu.transfer_config()["register_limit"]
    text = bench_scale.registered_at_once(32 << 20, budget=0.02, limit=1 << 30)
    assert "page-locked in place (register_limit=1 GiB" in text and text.count("to_gpu ") == pygpu.device_count()
    assert pygpu.registered_stats()["registered"] >= made + 2 * pygpu.device_count()
    assert pygpu.transfer_config()["register_limit"] == before
    text = bench_scale.registered_at_once(32 << 20, budget=0.02, limit=0)
    assert "registration off" in text and pygpu.registered_stats()["registered"] >= made + 2 * pygpu.device_count()


def test_scale_fresh_downloads_stand_beside_the_hosts_fill_of_new_arrays():
    """--scale's fresh section: get(ary=np.empty(n)) against the host
    filling new arrays (in parts on several threads, the same bytes as one
    copy), each size measured, the ratios printed."""
    from concurrent.futures import ThreadPoolExecutor
    from pygpu import bench_scale
    with ThreadPoolExecutor(3) as pool:
        fill, src = bench_scale.fill_fresh((1 << 16) + 5, 3, pool)()
        np.testing.assert_array_equal(fill(), src)
    fill, src = bench_scale.fill_fresh(1000, 1)()
    np.testing.assert_array_equal(fill(), src)
    res = bench_scale.fresh_downloads((1 << 16, 1 << 20), budget=0.01, nthreads=3)
    assert list(res) == [1 << 16, 1 << 20]
    for mine, floor, raw in res.values():
        assert mine > 0 and floor > 0 and (raw is None) == (pygpu.backend != "cuda")
    lines = bench_scale.fresh_table(res, 3).splitlines()
    assert "on 1 to 3 threads" in lines[0] and lines[1].split() == ["size", "pygpu", "floor", "raw", "of", "floor",
                                                                   "of", "raw"]
    assert lines[3].split()[:2] == ["64", "KiB"] and lines[4].split()[:2] == ["1", "MiB"]
    assert float(lines[4].split()[5]) == pytest.approx(res[1 << 20][0] / res[1 << 20][1], abs=0.01)


def test_scale_mid_size_stands_beside_the_bare_loop(monkeypatch):
    """--scale's mid-size section: set and get(ary) of each size, staged
    (registration off while it runs), against the bare loop of the same
    host copies and DMAs in C (the best of its windows), the ratios
    printed; the bare loop refuses what it cannot run."""
    from pygpu import bench_scale
    lib = pygpu.backend_module
    for args in ((1, 0, 1, 5), (1, 4096, 0, 5), (1, 4096, 9, 5), (0, 4096, 1, 0)):
        with pytest.raises(ValueError, match="_bare_loop"):
            lib._bare_loop(*args)
    assert lib._bare_loop(True, (1 << 16) + 3, 3, 5) > 0 and lib._bare_loop(False, (1 << 16) + 3, 8, 5) > 0
    assert lib._bare_loop(True, 1 << 16, 1, 5, True) > 0 and lib._bare_loop(False, 1 << 16, 2, 5, True) > 0
    real, seen = lib._bare_loop, []

    def bare(up, n, windows, reps):
        seen.append((up, n, windows, pygpu.transfer_config()["register_limit"]))
        return real(up, n, windows, reps)
    monkeypatch.setattr(lib, "_bare_loop", bare)
    sizes = (1 << 16, 1 << 18)
    res = bench_scale.mid_size(sizes, budget=0.01)
    assert list(res) == [(d, n) for d in ("H2D", "D2H") for n in sizes]
    assert seen == [(up, n, w, 0) for up in (True, False) for n in sizes for w in bench_scale.BARE_WINDOWS]
    for mine, floor, raw in res.values():
        assert mine > 0 and floor > 0 and (raw is None) == (pygpu.backend != "cuda")
    lines = bench_scale.mid_size_table(res).splitlines()
    assert lines[0].startswith("Mid-size") and lines[1].split()[:5] == ["case", "size", "pygpu", "floor", "raw"]
    assert lines[3].split()[:3] == ["set", "64", "KiB"] and lines[6].split()[:3] == ["get(ary)", "256", "KiB"]
    assert float(lines[6].split()[6]) == pytest.approx(res[("D2H", 1 << 18)][0] / res[("D2H", 1 << 18)][1], abs=0.01)


def test_scale_host_floors_measure_each_floor_on_one_and_many_threads(monkeypatch):
    """bench_scale's host floors: both floors on 1 thread and on the
    staging's (transfer_config's threads for each device), the copies into
    fresh memory landing in new pages each time (an anonymous mapping, so
    that a heap that keeps freed memory cannot hide the page faults), and
    the lines name every floor and, with the devices' results, their sum."""
    import mmap as mmap_mod
    from pygpu import bench_scale
    mapped = []

    class Counted(mmap_mod.mmap):
        def __init__(self, *args, **kw):
            mapped.append(args[1])
    monkeypatch.setattr(bench_scale.mmap, "mmap", Counted)
    floors = bench_scale.host_floors(1 << 16, nthreads=3, budget=0.02)
    assert set(floors) == {("into page-locked", 1), ("into page-locked", 3), ("into fresh", 1), ("into fresh", 3)}
    assert all(v > 0 for v in floors.values())
    assert len(mapped) >= 4 and set(mapped) == {1 << 16}        # (a new mapping for every copy into fresh memory)
    threads = pygpu.transfer_config()["threads"] * pygpu.device_count()
    assert ("into fresh", max(1, threads)) in bench_scale.host_floors(1 << 12, budget=0.01)
    at_once = {"H2D": [(50.0, 40.0, 45.0, 30.0), (50.0, 41.0, 44.0, 31.0)], "D2H": [(None, None, 45.0, 20.0)] * 2}
    lines = bench_scale.floors_lines(floors, 2, at_once)
    assert sum(line.startswith("  into ") for line in lines) == 4
    assert lines[1].startswith("  the devices' NUMA nodes 0:") and "placed on them: on" in lines[1]
    nodes = lines[1].split("NUMA nodes ")[1].split(" (")[0].split()     # every device this process sees, on 1 GPU too
    assert [n.split(":")[0] for n in nodes] == [str(i) for i in range(pygpu.device_count())]
    assert "up: pygpu 61.0 GB/s, raw pinned 81.0" in lines[-2] and "down: pygpu 40.0 GB/s, raw pinned -" in lines[-1]


def _devices_rows(text):
    """{row: [cells]} of the table of python -m pygpu.bench --devices."""
    from pygpu import bench
    rows = {}
    for line in text.splitlines():
        name = next((r for r in bench.DEVICE_ROWS if line.startswith(r + " ")), None)
        if name:
            rows[name] = re.findall(r"\d+\.\d(?: \(\d\.\d\d\)|  WRONG)?|n/a", line[len(name):])
    return rows


def test_bench_devices_table(capsys):
    """python -m pygpu.bench --devices: every row PyGPU runs here, at every
    size, checked bit for bit (no WRONG), with its ratio: dense copies and
    strided views to the peer ceiling, staged to the slower host link."""
    from pygpu import bench
    if pygpu.device_count() < 2:
        pytest.skip("needs two devices (the host backend presents two in the suite)")
    sizes = ["64K", "1M"] if pygpu.backend == "host" else ["1M", "16M"]
    assert bench.main(["--devices", "--budget", "0.01", "--sizes", *sizes]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^device 0 -> device 1 \(.*\): copies go (peer|staged) \(.+\); the runtime's rank", out, re.M)
    rows = _devices_rows(out)
    ours = [r for r in bench.DEVICE_ROWS if not r.startswith(("cupy", "torch"))]
    assert set(ours) <= set(rows), out
    for name in ours:
        cells = rows[name]
        assert len(cells) == len(sizes) and not any("WRONG" in c for c in cells), (name, out)
        kind = bench.DEVICE_ROWS[name]
        assert all(("(" in c) == (kind not in ("ceiling", "link")) for c in cells), (name, out)
    assert "WRONG" not in out
    # then every ordered pair at the largest size, PyGPU's ratio to the ceiling
    pairs = re.findall(r"^  (\d) -> (\d) \( *(peer|staged)\): memcpy_peer +\d+\.\d +copy\(device=(\d)\) +\d+\.\d "
                       r"\(\d\.\d\d\)$", out, re.M)
    n = pygpu.device_count()
    assert sorted((int(a), int(b)) for a, b, _, _ in pairs) == [(a, b) for a in range(n) for b in range(n) if a != b]
    assert all(b == d for _, b, _, d in pairs), out


@pytest.mark.skipif(pygpu.backend != "host", reason="the host backend's settings make the machine")
def test_bench_devices_measures_every_pair_of_three(run_python):
    """With three devices, --devices ends with the six ordered pairs, each
    copy checked (exit 0: none WRONG)."""
    r = run_python("import sys; from pygpu import bench; "
                   "sys.exit(bench.main(['--devices', '--budget', '0.01', '--sizes', '256K']))",
                   env={"PYGPU_BACKEND": "host", "PYGPU_HOST_DEVICES": 3})
    lines = [line for line in r.stdout.splitlines() if re.match(r"^  \d -> \d ", line)]
    assert len(lines) == 6 and "WRONG" not in r.stdout, r.stdout


@pytest.mark.skipif(pygpu.backend != "host", reason="the host backend's settings make these machines")
@pytest.mark.parametrize("peer", ["0", "2"])
def test_bench_devices_where_peers_fail(run_python, peer):
    """Devices that refuse peer access (0), or whose peer copies of pool
    memory land nothing (2): PyGPU's rows stage and land (exit 0); the raw
    MemcpyPeer rows on pool memory that lose their bytes read WRONG."""
    r = run_python("import sys; from pygpu import bench; "
                   "sys.exit(bench.main(['--devices', '--budget', '0.01', '--sizes', '256K']))",
                   env={"PYGPU_BACKEND": "host", "PYGPU_HOST_DEVICES": 2, "PYGPU_HOST_PEER": peer})
    out = r.stdout
    assert "copies go staged" in out, out
    rows = _devices_rows(out)
    wrong = {name for name, cells in rows.items() if any("WRONG" in c for c in cells)}
    assert wrong == ({"MemcpyPeer, peer on", "memcpy_peer(b.ptr, a.ptr)"} if peer == "2" else set()), out
    assert all(len(cells) == 1 for cells in rows.values()) and "pygpu staged" in rows, out


def test_bench_devices_wrong_copy_fails(monkeypatch, capsys):
    """A PyGPU copy that does not land bit for bit reads WRONG in its cells,
    is named below the table, and python -m pygpu.bench --devices exits 1."""
    from pygpu import bench
    if pygpu.device_count() < 2:
        pytest.skip("needs two devices (the host backend presents two in the suite)")
    real = bench._same
    monkeypatch.setattr(bench, "_same", lambda got, want: real(got, want) and got.shape != (8192,))
    assert bench.main(["--devices", "--budget", "0.005", "--sizes", "64K"]) == 1
    out = capsys.readouterr().out
    rows = _devices_rows(out)
    assert rows["pygpu x[::2] (1-d)"][0].endswith("  WRONG"), out
    assert not any("WRONG" in c for name, cells in rows.items() if name != "pygpu x[::2] (1-d)" for c in cells), out
    assert re.search(r"^WRONG, the copy did not land bit for bit: pygpu x\[::2\] \(1-d\) at 64 KiB$", out, re.M), out


class _FakeCuda:
    """cupy.cuda / torch.cuda for the peers' rows of bench --devices on the
    host backend: devices as context managers that synchronize."""

    class Device:
        def __init__(self, k):
            self.k = k

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def synchronize(self):
            pass

    @staticmethod
    def synchronize(device=None):
        pass


class _RefusingArray(np.ndarray):
    """A NumPy array that, as CuPy between devices, refuses to copy a view
    that is neither C- nor F-contiguous."""

    def copy(self, order="C"):
        if not (self.flags.c_contiguous or self.flags.f_contiguous):
            raise NotImplementedError("cannot copy a non-contiguous array between devices")
        return super().copy(order)


def test_bench_devices_peer_rows(monkeypatch, capsys):
    """The rows of CuPy and PyTorch (faked here with NumPy): measured where
    the library copies, n/a with its reason below the table where it
    refuses, never checked; PyGPU's rows are unchanged by them."""
    import types
    from pygpu import bench
    if pygpu.device_count() < 2:
        pytest.skip("needs two devices (the host backend presents two in the suite)")
    fake_cp = types.SimpleNamespace(cuda=_FakeCuda)
    fake_torch = types.SimpleNamespace(cuda=_FakeCuda)
    monkeypatch.setattr(bench.DeviceSource, "cupy", lambda self: (fake_cp, self.host.copy().view(_RefusingArray)))
    monkeypatch.setattr(bench.DeviceSource, "torch",
                        lambda self: (fake_torch, types.SimpleNamespace(to=lambda dev: self.host.copy())))
    results = bench.measure_devices([64 << 10], budget=0.005)
    text = bench.devices_table(results, [64 << 10])
    rows = _devices_rows(text)
    assert set(bench.DEVICE_ROWS) == set(rows), text
    assert rows["cupy x[::2] (1-d)"] == ["n/a"] and rows["cupy x[:, ::-1]"] == ["n/a"], text
    assert re.match(r"\d+\.\d \(\d\.\d\d\)$", rows["cupy x.T (to C)"][0]), text
    assert re.match(r"\d+\.\d \(\d\.\d\d\)$", rows["torch t.to('cuda:1')"][0]), text
    assert re.search(r"^n/a: the library refuses the copy:\n  cupy x\[::2\] \(1-d\): NotImplementedError: cannot",
                     text, re.M), text
    assert all(results[r][64 << 10][2] is None for r in rows if bench.other_library(r) and rows[r] != ["n/a"])
    assert not bench.devices_wrong(results)


def test_the_benchs_registration_constants_are_tunings(monkeypatch):
    """bench.py's REGISTER_MOVED and REGISTER_MIN are src/tuning.h's: the
    "reused" rows move a buffer as often as registration waits for before
    they are timed, and not at all where no buffer is registered (the
    8-byte row once made 8 million calls first)."""
    from pygpu import bench
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))     # (the checkout's, not the package's)
    text = open(os.path.join(root, "src", "tuning.h")).read()
    for name in ("MOVED", "MIN"):
        m = re.search(rf"#define PYGPU_REGISTER_{name} \(\(size_t\)(\d+) << (\d+)\)", text)
        assert m and getattr(bench, f"REGISTER_{name}") == int(m.group(1)) << int(m.group(2)), name
    calls = []
    real = pygpu.to_gpu
    monkeypatch.setattr(bench.pygpu, "to_gpu", lambda h: calls.append(h.nbytes) or real(h))
    for nbytes, before in ((8, 0), (bench.REGISTER_MIN, bench.REGISTER_MOVED // bench.REGISTER_MIN)):
        calls.clear()
        fn, keep = bench.pygpu_cases(nbytes)["H2D pageable reused"]()
        assert len(calls) == before, (nbytes, len(calls))
        fn()
        assert calls[-1] == nbytes


def test_the_bare_loop_names_a_failed_copy(run_python):
    """A DMA of the bare loop that fails raises GPUError naming the copy
    (the host backend fails every copy of 65536 bytes), both ways, and the
    next loop runs (nothing left held)."""
    proc = run_python("""
        import pygpu
        lib = pygpu.backend_module
        for up in (True, False):
            try:
                lib._bare_loop(up, 1 << 16, 1, 20)
            except pygpu.GPUError as e:
                print(e.call)
        print(lib._bare_loop(True, 1 << 17, 4, 5) > 0, lib._bare_loop(False, 1 << 17, 4, 5) > 0)
        """, env={"PYGPU_BACKEND": "host", "PYGPU_HOST_FAIL_COPY": "65536:0"})
    assert proc.stdout.split() == ["hostMemcpyAsync", "hostMemcpyAsync", "True", "True"], proc.stdout
