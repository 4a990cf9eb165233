"""Transfers at scale, for python -m pygpu.bench --scale (and
benchmarks/test_scale.py): several threads moving data at once, a small
transfer beside a big one, and how much of a transfer's time an
asynchronous call gives back.

    threads   N threads (1, 2, 4, 8), each with its own stream and arrays,
              each doing to_gpu (or get(ary=...)) of touched pageable memory
              in a loop: the aggregate GB/s, and its ratio to raw pinned
              cudaMemcpy measured in the same run; CuPy and PyTorch beside.
    beside    a 1 MiB to_gpu's latency alone, and while another thread moves
              1 GiB at a time (the ratio: how long it waits behind it).
              The threads run with registration off (every byte staged): their
              buffers, met again and again, would otherwise be page-locked in
              place after the first round, and the figures the DMA's alone;
              beside runs both with it off and with the defaults.
    async     to_gpu_async of pageable memory on a stream: the call's time
              over the time until the stream has the data (1.0: the call
              gave nothing back; the rest is the caller's to use).
    devices   with two devices or more: one thread per device, each moving
              touched pageable memory to (from) its own device, alone and
              all at once: each device's GB/s against raw pinned
              cudaMemcpy to (from) that device alone (its own link); then
              the same with the host buffers page-locked in place
              (transfer_config(register_limit=)).
    fresh     get(ary=np.empty(n)), a new array each call, beside its floor:
              the host filling such a new array from touched memory on 1
              thread or on the staging's (the page-fault floor), and raw
              pinned cudaMemcpy down.
    floors    what the host itself allows (host_floors): copies of touched
              pageable memory into page-locked memory (the staging's extra
              pass) and into fresh memory (the page-fault floor), on 1
              thread and on as many as the staging uses on every device;
              with several devices, all of them at once beside it.
"""
import mmap
import statistics
import threading
import time

import numpy as np

import pygpu
from pygpu.bench import MiB, GiB, RawCuda, pageable_array, registration, size_name, time_case

THREADS = [1, 2, 4, 8]


def _streams(lib):
    """A new stream of library `lib` and how to wait for it."""
    if lib == "pygpu":
        s = pygpu.Stream()
        return s, s.synchronize
    if lib == "cupy":
        import cupy as cp
        s = cp.cuda.Stream(non_blocking=True)
        return s, s.synchronize
    import torch
    s = torch.cuda.Stream()
    return s, s.synchronize


def thread_case(lib, direction, nbytes):
    """setup() -> (fn, keepalive) for one thread's transfer of nbytes by
    `lib` in `direction` ("H2D": host to device; "D2H": into a touched
    pageable array), on a stream of its own; fn returns when the data is
    there.  None where `lib` does not import here."""
    try:
        if lib == "pygpu":
            def setup():
                s, _ = _streams(lib)
                host = pageable_array(nbytes)
                if direction == "H2D":
                    return (lambda: pygpu.to_gpu(host, stream=s)), (host, s)
                g = pygpu.to_gpu(host)
                return (lambda: g.get(ary=host, stream=s)), (g, host, s)
        elif lib == "cupy":
            import cupy as cp

            def setup():
                s, sync = _streams(lib)
                host = pageable_array(nbytes)
                with s:
                    x = cp.asarray(host)
                if direction == "H2D":
                    def up():
                        with s:
                            cp.asarray(host)
                        sync()
                    return up, (host, s, x)
                return (lambda: x.get(out=host, stream=s)), (host, s, x)
        elif lib == "torch":
            import torch

            def setup():
                s, sync = _streams(lib)
                host = torch.from_numpy(pageable_array(nbytes))
                x = host.to("cuda")

                def move():
                    with torch.cuda.stream(s):
                        if direction == "H2D":
                            host.to("cuda")
                        else:
                            host.copy_(x)
                    sync()
                return move, (host, s, x)
        else:
            return None
    except Exception:  # noqa: BLE001 - the peer does not import here
        return None
    return setup


def aggregate(setup, nthreads, nbytes, budget=0.5, each=False):
    """Aggregate GB/s of `nthreads` threads each calling its own setup()'s
    fn in a loop for about `budget` seconds, started together.  `setup` may
    be a list, one for each thread; with `each`, the list of every
    thread's GB/s instead of their sum."""
    setups = setup if isinstance(setup, (list, tuple)) else [setup] * nthreads
    made = [make() for make in setups]
    for fn, _ in made:
        fn()                                    # warm-up: pools, page faults
    # and together, as they will run: each thread's staging lane is made in
    # these rounds (page-locking its buffers), not in the timed ones.  The
    # clock starts once every thread is through them.
    clock = [0.0]

    def set_clock():
        clock[0] = time.perf_counter()

    ready, start = threading.Barrier(nthreads), threading.Barrier(nthreads, action=set_clock)
    counts, errors = [0] * nthreads, []

    def body(k):
        fn = made[k][0]
        try:
            ready.wait()
            for _ in range(2):
                fn()
            start.wait()
            deadline = clock[0] + budget
            while time.perf_counter() < deadline:
                fn()
                counts[k] += 1
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
            ready.abort()                       # (the others stop waiting for this one)
            start.abort()

    threads = [threading.Thread(target=body, args=(k,), daemon=True) for k in range(nthreads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - clock[0]
    if errors:
        raise errors[0]
    rates = [c * nbytes / elapsed / 1e9 for c in counts]
    return rates if each else sum(rates)


def measure_threads(nbytes=64 * MiB, counts=THREADS, peers=("cupy", "torch"), progress=None, budget=0.5,
                    ceilings=True):
    """{(library, direction): {threads: GB/s}}, and the raw pinned ceiling
    {direction: GB/s} measured in the same run (none: `ceilings` False)."""
    raw, measured, results = RawCuda(), {}, {}
    for d in ("H2D", "D2H"):
        if ceilings and raw.available():
            fn, keep = raw.case(d, nbytes)
            measured[d] = nbytes / time_case(fn, nbytes, budget) / 1e9
            del keep
        for lib in ("pygpu",) + tuple(peers if pygpu.backend == "cuda" else ()):
            setup = thread_case(lib, d, nbytes)
            if setup is None:
                continue
            for n in counts:
                if progress:
                    progress(f"{lib} {d} from {n} thread{'s' if n > 1 else ''}, {size_name(nbytes)} each")
                results.setdefault((lib, d), {})[n] = aggregate(setup, n, nbytes, budget)
    return results, measured


def threads_table(results, ceilings, nbytes, counts=THREADS):
    names = {"H2D": "to_gpu", "D2H": "get(ary)"}
    lines = [f"Threads: aggregate GB/s of N threads, each moving {size_name(nbytes)} of touched pageable memory "
             "on its own stream, registration off: every byte staged (ratio to raw pinned cudaMemcpy, same run); "
             "pygpu*: PyGPU with the defaults (each thread's buffer, met again, page-locked in place)"]
    head = f"{'library':<8} {'case':<10}" + "".join(f"{str(n) + ' thr':>16}" for n in counts)
    lines += [head, "-" * len(head)]
    for d in ("H2D", "D2H"):
        if d in ceilings:
            lines.append(f"{'raw':<8} {d + ' pinned':<10}" + f"{ceilings[d]:>16.1f}" * len(counts))
        for (lib, dd), row in results.items():
            if dd != d:
                continue
            cells = ""
            for n in counts:
                gbs = row.get(n)
                ratio = f" ({gbs / ceilings[d]:.2f})" if gbs and d in ceilings else ""
                cells += f"{(f'{gbs:.1f}' if gbs else '-') + ratio:>16}"
            lines.append(f"{lib:<8} {names[d]:<10}" + cells)
    return "\n".join(lines)


# Where latency_beside's two threads put their copies: (the small one on a
# non-blocking stream of its own, the mover's stream non-blocking, words).
# The legacy stream waits for a blocking stream's queued work, and that
# stream's next work for it (the CUDA runtime's rule); a non-blocking
# stream neither waits nor is waited for.
BESIDE_PLACES = ((False, False, "on the default stream, the mover on a blocking stream"),
                 (False, True, "on the default stream, the mover on a non-blocking stream"),
                 (True, True, "each thread on a non-blocking stream of its own"))


def latency_beside(small=1 * MiB, big=1 * GiB, budget=0.5, own_streams=False, small_host=None, big_host=None,
                   mover_non_blocking=None):
    """(median seconds of a `small` to_gpu alone, the same while another
    thread uploads `big` at a time), of touched pageable memory or of the
    host arrays given.  The small one goes on the current stream (the
    legacy default stream, which also waits for the mover's blocking
    stream), or with own_streams on a non-blocking stream of its own; the
    mover's stream is a non-blocking one where own_streams or
    mover_non_blocking says so, else a blocking one."""
    host = pageable_array(small) if small_host is None else small_host
    big_host = pageable_array(big) if big_host is None else big_host
    mine, theirs = beside_streams(own_streams, mover_non_blocking)
    return time_beside(lambda: pygpu.to_gpu(host, stream=mine), lambda: pygpu.to_gpu(big_host, stream=theirs),
                       host.nbytes, budget)


def raw_beside(small=1 * MiB, big=1 * GiB, budget=0.5, own_streams=False, mover_non_blocking=None):
    """latency_beside made by the runtime alone, for comparison: the same
    two threads and streams, each copy of page-locked memory one call of
    the runtime's, as a program without PyGPU would make it (cudaMemcpy on
    the legacy stream; cudaMemcpyAsync on a stream, then its synchronize).
    None where the runtime cannot be called (RawCuda)."""
    raw = RawCuda()
    if not raw.available():
        return None
    mine, theirs = beside_streams(own_streams, mover_non_blocking)
    small_fn, keep_small = raw.upload(small, mine)
    big_fn, keep_big = raw.upload(big, theirs)
    try:
        return time_beside(small_fn, big_fn, small, budget)
    finally:
        del keep_small, keep_big


def beside_streams(own_streams, mover_non_blocking):
    """(the small copy's stream: None for the current one, the mover's)
    as latency_beside says."""
    mine = pygpu.Stream(non_blocking=True) if own_streams else None
    return mine, pygpu.Stream(non_blocking=own_streams if mover_non_blocking is None else mover_non_blocking)


def time_beside(small_fn, big_fn, nbytes, budget):
    """(median seconds of small_fn() alone, the same while another thread
    calls big_fn() in a loop)."""
    alone = time_case(small_fn, nbytes, budget)
    stop = threading.Event()

    def mover():
        while not stop.is_set():
            big_fn()

    t = threading.Thread(target=mover, daemon=True)
    t.start()
    time.sleep(0.05)                            # the big transfer is under way
    times = []
    end = time.perf_counter() + max(budget, 1.0)
    while time.perf_counter() < end or len(times) < 5:
        t0 = time.perf_counter()
        small_fn()
        times.append(time.perf_counter() - t0)
    stop.set()
    t.join()
    return alone, statistics.median(times)


def async_overlap(nbytes, budget=0.5, down=False):
    """(seconds the to_gpu_async call took, seconds until its stream had
    the data, seconds a to_gpu of the same array takes), medians, for
    touched pageable memory; with `down`, the same of get_async into
    touched pageable memory against get(ary=...)."""
    host, s = pageable_array(nbytes), pygpu.Stream()
    if down:
        g = pygpu.to_gpu(host)
        start, blocking_call = (lambda: g.get_async(stream=s, ary=host)), (lambda: g.get(ary=host, stream=s))
    else:
        start, blocking_call = (lambda: pygpu.to_gpu_async(host, stream=s)), (lambda: pygpu.to_gpu(host, stream=s))
    start()                                     # (the first of a size makes a page-locked block for the next)
    s.synchronize()
    blocking = time_case(lambda: (blocking_call(), s.synchronize()), nbytes, budget / 2)
    calls, totals = [], []
    end = time.perf_counter() + budget
    while time.perf_counter() < end or len(calls) < 3:
        t0 = time.perf_counter()
        out = start()
        t1 = time.perf_counter()
        s.synchronize()
        t2 = time.perf_counter()
        calls.append(t1 - t0)
        totals.append(t2 - t0)
        del out
    return statistics.median(calls), statistics.median(totals), blocking


def on_device(dev, setup):
    """setup, made and run with device `dev` current (in whichever thread)."""
    def made():
        with pygpu.Device(dev):
            fn, keep = setup()

        def run():
            with pygpu.Device(dev):
                fn()
        return run, keep
    return made


def devices_at_once(nbytes=64 * MiB, budget=0.5):
    """{direction: [(raw alone, raw together, pygpu alone, pygpu together)
    GB/s for each device]}: one thread per device, each moving `nbytes`
    of touched pageable memory (pygpu) or page-locked memory (raw
    cudaMemcpy, where it can be called) to (from) its own device, first
    each device alone, then all at once."""
    ndev, raw, results = pygpu.device_count(), RawCuda(), {}
    for d in ("H2D", "D2H"):
        rows = [[] for _ in range(ndev)]
        for lib in ("raw", "pygpu"):
            if lib == "raw" and not raw.available():
                for row in rows:
                    row += [None, None]
                continue
            made = (lambda: raw.case(d, nbytes)) if lib == "raw" else thread_case("pygpu", d, nbytes)
            setups = [on_device(k, made) for k in range(ndev)]
            alone = [aggregate(setups[k], 1, nbytes, budget) for k in range(ndev)]
            together = aggregate(setups, ndev, nbytes, budget, each=True)
            for k in range(ndev):
                rows[k] += [alone[k], together[k]]
        results[d] = [tuple(row) for row in rows]
    return results


def host_floors(nbytes=64 * MiB, nthreads=None, budget=0.5):
    """{(floor, threads): GB/s}: what the host itself allows, measured
    with NumPy's copies (which release the GIL), each thread on buffers of
    its own of `nbytes`:

    - ``into page-locked``: copies of touched pageable memory into
      page-locked memory, the staging's extra pass over host memory (every
      staged byte is read from the user's memory and written to a staging
      buffer before the DMA reads it again);
    - ``into fresh``: copies into memory never touched (each call a new
      array), the page-fault floor under downloads into fresh arrays.

    On 1 thread and on `nthreads` (default: every device's staging
    threads, transfer_config()['threads'] each)."""
    if nthreads is None:
        nthreads = max(1, pygpu.transfer_config()["threads"] * max(1, pygpu.device_count()))
    def locked():
        src, dst = pageable_array(nbytes), pygpu.pagelocked_empty(nbytes, np.uint8)
        return (lambda: np.copyto(dst, src)), (src, dst)

    def fresh():
        src = pageable_array(nbytes)

        def into_new_pages():       # (an anonymous mapping: new pages every time, whatever malloc keeps)
            with mmap.mmap(-1, nbytes) as m:
                dst = np.frombuffer(m, np.uint8)
                np.copyto(dst, src)
                del dst
        return into_new_pages, src

    results = {}
    for name, setup in (("into page-locked", locked), ("into fresh", fresh)):
        for t in sorted({1, nthreads}):
            results[(name, t)] = aggregate(setup, t, nbytes, budget)
    return results


def floors_lines(floors, ndev, at_once=None):
    """The host floors as lines, with the NUMA node of each device this process
    sees; with `at_once` (devices_at_once's results for `ndev` devices), what
    all devices took together beside the copy floor on as many threads."""
    lines = ["Host floors (NumPy's copies, each thread its own buffers; GB/s on 1 thread and on the staging's)"]
    nodes = " ".join(f"{i}:{n if n >= 0 else 'none'}"
                     for i, n in ((i, pygpu.Device(i).numa_node) for i in range(pygpu.device_count())))
    placed = "on" if pygpu.transfer_config()["numa"] else "off"
    lines.append(f"  the devices' NUMA nodes {nodes} (staging blocks placed on them: {placed})")
    for (name, t), v in sorted(floors.items()):
        lines.append(f"  {name:<18} {t:>2} thread{'s' if t > 1 else ' '}: {v:6.1f}")
    if at_once:
        copy = max(v for (name, _), v in floors.items() if name == "into page-locked")
        for d, label in (("H2D", "up"), ("D2H", "down")):
            rows = at_once.get(d, [])
            raw = sum(r[1] or 0 for r in rows)
            mine = sum(r[3] or 0 for r in rows)
            raw = f"{raw:.1f}" if raw else "-"
            lines.append(f"  all {ndev} devices at once, {label}: pygpu {mine:.1f} GB/s, raw pinned {raw}; "
                         f"staging passes each byte once more through host memory, which copies {copy:.1f} GB/s "
                         f"into page-locked memory")
    return lines


FRESH_SIZES = (1 * MiB, 4 * MiB, 64 * MiB, 256 * MiB)


def fill_fresh(nbytes, nthreads, pool=None):
    """setup() -> (fn, keepalive) for the page-fault floor: each call a new
    NumPy array of `nbytes` (np.empty, as a fresh download's destination)
    filled from touched memory, in `nthreads` parts on the threads of
    `pool` (a ThreadPoolExecutor; none for one thread)."""
    def setup():
        src = pageable_array(nbytes)
        step = -(-nbytes // nthreads)

        def fill():
            dst = np.empty(nbytes, np.uint8)
            if nthreads == 1:
                np.copyto(dst, src)
            else:
                list(pool.map(lambda k: np.copyto(dst[k * step:(k + 1) * step], src[k * step:(k + 1) * step]),
                              range(nthreads)))
            return dst
        return fill, src
    return setup


def fresh_downloads(sizes=FRESH_SIZES, budget=0.5, nthreads=None):
    """{size: (pygpu, floor, raw)} GB/s: get(ary=np.empty(size)), a new
    array each call; the floor, the host filling such a new array from
    touched memory (fill_fresh) on 1, 2, 4, 8 or `nthreads` threads (at
    most `nthreads`; default: the staging's threads), the best; raw pinned cudaMemcpy down (None
    where it cannot be called)."""
    from concurrent.futures import ThreadPoolExecutor
    nthreads = nthreads or max(1, pygpu.transfer_config()["threads"])
    raw, results = RawCuda(), {}
    with ThreadPoolExecutor(nthreads) as pool:
        for n in sizes:
            g = pygpu.to_gpu(pageable_array(n))
            mine = n / time_case(lambda: g.get(ary=np.empty(n, np.uint8)), n, budget) / 1e9
            del g
            floor = 0.0
            for t in sorted({1, nthreads} | {k for k in (2, 4, 8) if k < nthreads}):
                fn, keep = fill_fresh(n, t, pool)()
                floor = max(floor, n / time_case(fn, n, budget) / 1e9)
                del keep
            ceiling = None
            if raw.available():
                fn, keep = raw.case("D2H", n)
                ceiling = n / time_case(fn, n, budget) / 1e9
                del keep
            results[n] = (mine, floor, ceiling)
    return results


def fresh_table(results, nthreads=None):
    nthreads = nthreads or max(1, pygpu.transfer_config()["threads"])
    lines = [f"Fresh destinations: get(ary=np.empty(n)), a new array each call; GB/s, ratio to the floor (the host "
             f"filling a new np.empty array from touched memory, on 1 to {nthreads} threads, the best) and to "
             "raw pinned cudaMemcpy down"]
    head = f"{'size':>9}{'pygpu':>9}{'floor':>9}{'raw':>9}{'of floor':>10}{'of raw':>9}"
    lines += [head, "-" * len(head)]
    for n, (mine, floor, raw) in results.items():
        lines.append(f"{size_name(n):>9}{mine:9.1f}{floor:9.1f}{(f'{raw:.1f}' if raw else '-'):>9}"
                     f"{mine / floor:10.2f}{(f'{mine / raw:.2f}' if raw else '-'):>9}")
    return "\n".join(lines)


MID_SIZES = (64 * 1024, 256 * 1024, 1 * MiB, 4 * MiB)
BARE_WINDOWS = (1, 2, 4)


def mid_size(sizes=MID_SIZES, budget=0.5, directions=("H2D", "D2H")):
    """{(direction, size): (pygpu, floor, raw)} GB/s: PyGPU's set(touched
    pageable) and get(ary=touched pageable) into (out of) an array of the
    size, registration off (staged); the floor, the same host copies and
    DMAs in a bare loop in C (backend_module._bare_loop: no lanes, no
    Python), in 1, 2 or 4 windows, the best; raw pinned cudaMemcpy (None
    where it cannot be called)."""
    lib, raw, results = pygpu.backend_module, RawCuda(), {}
    reps = max(20, min(200, int(budget * 2000)))
    with registration(0):
        for d in directions:
            for n in sizes:
                host, g = pageable_array(n), pygpu.to_gpu(pageable_array(n))
                fn = (lambda: g.set(host)) if d == "H2D" else (lambda: g.get(ary=host))
                # (twice, the faster kept, as the floor keeps the best of its windows; each the
                # median of up to 1000 calls: of the 50 of time_case's default, a few slow
                # bursts moved it by half, docs/performance.md#mid-size-windows)
                mine = n / min(time_case(fn, n, budget / 2, max_runs=1000) for _ in range(2)) / 1e9
                del g
                floor = max(n / lib._bare_loop(d == "H2D", n, w, reps) / 1e9 for w in BARE_WINDOWS)
                ceiling = None
                if raw.available():
                    rfn, keep = raw.case(d, n)
                    ceiling = n / time_case(rfn, n, budget) / 1e9
                    del keep
                results[(d, n)] = (mine, floor, ceiling)
    return results


def mid_size_table(results):
    names = {"H2D": "set", "D2H": "get(ary)"}
    lines = ["Mid-size: set(touched pageable) and get(ary=touched pageable), registration off (staged); GB/s, ratio "
             "to the floor (the same host copies and DMAs in a bare loop in C, in 1, 2 or 4 windows, the best) and "
             "to raw pinned cudaMemcpy"]
    head = f"{'case':<10}{'size':>9}{'pygpu':>9}{'floor':>9}{'raw':>9}{'of floor':>10}{'of raw':>9}"
    lines += [head, "-" * len(head)]
    for (d, n), (mine, floor, raw) in results.items():
        lines.append(f"{names[d]:<10}{size_name(n):>9}{mine:9.1f}{floor:9.1f}{(f'{raw:.1f}' if raw else '-'):>9}"
                     f"{mine / floor:10.2f}{(f'{mine / raw:.2f}' if raw else '-'):>9}")
    return "\n".join(lines)


def devices_at_once_with(limit, nbytes=64 * MiB, budget=0.5):
    """(devices_at_once's results, registered_stats() after) with
    transfer_config(register_limit=limit) for the run, then as it was."""
    with registration(limit):
        return devices_at_once(nbytes, budget), pygpu.registered_stats()


def registered_at_once(nbytes=64 * MiB, budget=0.5, limit=16 * GiB):
    """devices_at_once with the host buffers page-locked in place up to
    `limit` (0: none, every byte staged): its table, titled so, with what
    was registered."""
    return registered_table(*devices_at_once_with(limit, nbytes, budget), nbytes, limit)


def registered_table(res, held, nbytes, limit):
    """at_once_table of devices_at_once_with's results, titled with the
    limit and what was registered."""
    table = at_once_table(res, nbytes).split("\n", 1)
    if not limit:
        return f"{table[0]}; registration off (register_limit=0: every byte staged)\n{table[1]}"
    return (f"{table[0]}; with host buffers page-locked in place (register_limit={size_name(limit)}: "
            f"{held['registered']} registered, {held['refused']} refused)\n{table[1]}")


def at_once_table(results, nbytes):
    names = {"H2D": "to_gpu", "D2H": "get(ary)"}
    lines = [f"Devices at once: one thread per device, each moving {size_name(nbytes)} of touched pageable "
             "memory to (from) its own device; GB/s alone and all at once (ratio to raw pinned to that device "
             "alone: its own link)"]
    head = f"{'case':<10}{'device':>7}{'raw alone':>12}{'raw at once':>13}{'pygpu alone':>16}{'pygpu at once':>16}"
    lines += [head, "-" * len(head)]

    def cell(v, link, w):
        return f"{(f'{v:.1f}' if v else '-') + (f' ({v / link:.2f})' if v and link else ''):>{w}}"
    for d, rows in results.items():
        for k, (raw1, rawn, mine1, minen) in enumerate(rows):
            lines.append(f"{names[d]:<10}{k:>7}{cell(raw1, None, 12)}{cell(rawn, raw1, 13)}"
                         f"{cell(mine1, raw1, 16)}{cell(minen, raw1, 16)}")
    return "\n".join(lines)


def scale_report(nbytes=64 * MiB, counts=THREADS, peers=("cupy", "torch"), progress=None, budget=0.5,
                 async_sizes=(16 * MiB, 64 * MiB, 256 * MiB), fresh_sizes=FRESH_SIZES):
    """The --scale report, as text."""
    with registration(0):       # (the threads' buffers, met again and again, would be page-locked in place)
        results, ceilings = measure_threads(nbytes, counts, peers, progress, budget)
    if pygpu.transfer_config()["register_limit"]:       # (and as a user's program runs them by default)
        for (_, d), row in measure_threads(nbytes, counts, (), progress, budget, ceilings=False)[0].items():
            results[("pygpu*", d)] = row
    lines = [threads_table(results, ceilings, nbytes, counts), ""]
    if progress:
        progress("a 1 MiB to_gpu beside a 1 GiB one")
    for own, nb, where in BESIDE_PLACES:
        for limit, how in ((0, "registration off"), (pygpu.transfer_config()["register_limit"], "the defaults")):
            with registration(limit):
                alone, beside = latency_beside(budget=budget, own_streams=own, mover_non_blocking=nb)
            lines.append(f"Beside: a 1 MiB to_gpu takes {alone * 1e6:.0f} us alone and {beside * 1e6:.0f} us while "
                         f"another thread moves 1 GiB at a time ({beside / alone:.2f}x), {where}, {how}")
        raw = raw_beside(budget=budget, own_streams=own, mover_non_blocking=nb)
        call = "cudaMemcpyAsync" if own else "cudaMemcpy"
        lines.append(f"  the runtime's own copies there, page-locked, one call each ({call}): " +
                     (f"{raw[0] * 1e6:.0f} us alone, {raw[1] * 1e6:.0f} us beside ({raw[1] / raw[0]:.2f}x)"
                      if raw else "not measured (needs the CUDA backend, and CuPy or libcudart)"))
    lines.append("")
    for down, name, blocking_name in ((False, "to_gpu_async(touched pageable, stream)", "to_gpu"),
                                      (True, "get_async(stream, ary=touched pageable)", "get(ary)")):
        lines.append(f"Async: {name}: the call's time over the time until the stream has the data (lower "
                     f"gives the caller more back); that time against a blocking {blocking_name}'s (1.00: as fast)")
        for n in async_sizes:
            if progress:
                progress(f"{name.split('(')[0]} of {size_name(n)}")
            call, total, blocking = async_overlap(n, budget, down=down)
            lines.append(f"  {size_name(n):>8}: call {call * 1e3:.2f} ms of {total * 1e3:.2f} ms "
                         f"({call / total:.2f}); {blocking_name} {blocking * 1e3:.2f} ms ({blocking / total:.2f})")
    if progress:
        progress("downloads into fresh arrays, and the host's fill of them")
    lines += ["", fresh_table(fresh_downloads(fresh_sizes, budget))]
    if progress:
        progress("mid-size transfers, and the bare loop of the same steps")
    lines += ["", mid_size_table(mid_size(budget=budget))]
    at_once = None
    if pygpu.device_count() >= 2:
        if progress:
            progress(f"{pygpu.device_count()} devices at once")
        at_once, held = devices_at_once_with(0, nbytes, budget)
        lines += ["", registered_table(at_once, held, nbytes, 0)]
        if progress:
            progress(f"{pygpu.device_count()} devices at once, host buffers page-locked in place")
        lines += ["", registered_at_once(nbytes, budget, limit=pygpu.transfer_config()["register_limit"] or 16 * GiB)]
    if progress:
        progress("the host's floors")
    lines += [""] + floors_lines(host_floors(nbytes, budget=budget), pygpu.device_count(), at_once)
    return "\n".join(lines)
