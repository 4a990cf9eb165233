"""The ping-pong that mpi-ab.py and mpi-pieces.py share: Comm.Send/Recv
between 2 ranks, each way of sending in turn for some rounds, every result
checked bit for bit; rank 0 prints each way's rate beside memcpy_peer
between the two devices in its own process, measured in the same run."""
import time

import numpy as np

import pygpu

MiB = 1 << 20


def median(xs):
    return sorted(xs)[len(xs) // 2]


def parse(argv):
    """(rounds, sizes, the other arguments) of `argv`: --rounds R (default
    3), --sizes SIZE ... (default 16, 64, 256 MiB)."""
    from pygpu.bench import parse_size
    rounds, sizes, rest, i = 3, [16 * MiB, 64 * MiB, 256 * MiB], [], 0
    while i < len(argv):
        if argv[i] == "--rounds":
            rounds, i = int(argv[i + 1]), i + 2
        elif argv[i] == "--sizes":
            i, sizes = i + 1, []
            while i < len(argv) and not argv[i].startswith("--") and "=" not in argv[i]:
                sizes.append(parse_size(argv[i]))
                i += 1
        else:
            rest.append(argv[i])
            i += 1
    return rounds, sizes, rest


def _peer_rates(dev, sizes):
    """memcpy_peer from `dev` to another device, GB/s for each size (none with one device)."""
    peer = {}
    if pygpu.device_count() < 2:
        return peer
    other = 1 if dev == 0 else 0
    pygpu.enable_peer_access(dev, other)
    for n in sizes:
        x = pygpu.empty(n, np.uint8)
        with pygpu.Device(other):
            y = pygpu.empty(n, np.uint8)
        t = []
        for _ in range(12):
            t0 = time.perf_counter()
            pygpu.memcpy_peer(y.ptr, x.ptr, n, other, dev)
            t.append(time.perf_counter() - t0)
        peer[n] = n / median(t[2:]) / 1e9
    return peer


def run(world, dev, ways, sizes, rounds, tool, notes=None):
    """Each of `ways` (name -> (Comm, a function called before it runs))
    in turn; rank 0 prints the table (and `notes(n)`, a line under each size)."""
    rank, other = world.rank, 1 - world.rank
    times = {(w, n): [] for w in ways for n in sizes}
    for _ in range(rounds):
        for n in sizes:
            count = n // 8
            mine = np.random.default_rng([n, rank]).integers(0, 2**62, count, dtype=np.int64)
            theirs = np.random.default_rng([n, other]).integers(0, 2**62, count, dtype=np.int64)
            a, b = pygpu.to_gpu(mine), pygpu.empty(count, np.int64)
            for w, (comm, before) in ways.items():
                before()
                b.fill(0)
                for i in range(10):
                    world.Barrier()
                    t0 = time.perf_counter()
                    if rank == 0:
                        comm.Send(a, 1)
                        comm.Recv(b, 1)
                    else:
                        comm.Recv(b, 0)
                        comm.Send(a, 0)
                    if i >= 2:
                        times[(w, n)].append(time.perf_counter() - t0)
                if not np.array_equal(b.get(), theirs):
                    raise SystemExit(f"{tool}: rank {rank} received wrong data ({w}, {n} bytes)")
    peer = _peer_rates(int(dev), sizes) if rank == 0 else {}
    world.Barrier()
    if rank != 0:
        return
    print(f"Ping-pong of Comm.Send/Recv, 2 ranks ({pygpu.backend}), GB/s both ways over the round trip "
          f"(ratio to memcpy_peer in one process), {rounds} rounds taking turns, checked bit for bit")
    print(f"{'size':>9}" + "".join(f"{w:>20}" for w in ways) + f"{'peer copy':>11}")
    for n in sizes:
        cells = ""
        for w in ways:
            rate = 2 * n / median(times[(w, n)]) / 1e9
            cells += f"{rate:12.1f}" + (f" ({rate / peer[n]:.2f})" if n in peer else "       ")
        print(f"{n >> 20:>5} MiB{cells}" + (f"{peer[n]:11.1f}" if n in peer else f"{'-':>11}"))
        if notes:
            print(notes(n))
