"""pygpu.mpi as built against other versions of its module, in one run.

    mpirun -np 2 python tools/research/mpi-ab.py [--rounds R] [--sizes SIZE ...] NAME=PATH ...

Each PATH is a version of pygpu/mpi.py (an earlier commit's, written out by
`git show REV:pygpu/mpi.py > PATH`), loaded beside pygpu.mpi as a module of
its own (its own mailboxes and communicator attributes) on both ranks.
The ping-pong of Comm.Send/Recv between 2 ranks (median round trip of 8,
bytes moved both ways, every result checked bit for bit) of each version
in turn, for R rounds (default 3), sizes 16, 64, 256 MiB unless given;
rank 0 prints each with its ratio to memcpy_peer between the two devices
in its own process, measured in the same run.
"""
import importlib.util
import sys
import time

import numpy as np

import pygpu
import pygpu.mpi

MiB = 1 << 20


def median(xs):
    return sorted(xs)[len(xs) // 2]


def load(name, path):
    spec = importlib.util.spec_from_file_location(f"pygpu._mpi_ab_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main(argv):
    from mpi4py import MPI
    from pygpu.bench import parse_size
    world = MPI.COMM_WORLD
    if world.size != 2:
        raise SystemExit("mpi-ab: run it with 2 ranks")
    rank, other = world.rank, 1 - world.rank
    rounds, sizes, others = 3, [16 * MiB, 64 * MiB, 256 * MiB], []
    i = 0
    while i < len(argv):
        if argv[i] == "--rounds":
            rounds, i = int(argv[i + 1]), i + 2
        elif argv[i] == "--sizes":
            i += 1
            sizes = []
            while i < len(argv) and not argv[i].startswith("--") and "=" not in argv[i]:
                sizes.append(parse_size(argv[i]))
                i += 1
        else:
            others.append(argv[i].split("=", 1))
            i += 1
    dev = pygpu.mpi.select_device(world)
    versions = {"as built": pygpu.mpi}
    versions.update((name, load(name, path)) for name, path in others)
    comms = {name: mod.Comm(world, cuda_aware=False) for name, mod in versions.items()}
    times = {(v, n): [] for v in versions for n in sizes}
    for _ in range(rounds):
        for n in sizes:
            count = n // 8
            mine = np.random.default_rng([n, rank]).integers(0, 2**62, count, dtype=np.int64)
            theirs = np.random.default_rng([n, other]).integers(0, 2**62, count, dtype=np.int64)
            a, b = pygpu.to_gpu(mine), pygpu.empty(count, np.int64)
            for v, comm in comms.items():
                b.fill(0)
                for k in range(10):
                    world.Barrier()
                    t0 = time.perf_counter()
                    if rank == 0:
                        comm.Send(a, 1)
                        comm.Recv(b, 1)
                    else:
                        comm.Recv(b, 0)
                        comm.Send(a, 0)
                    if k >= 2:
                        times[(v, n)].append(time.perf_counter() - t0)
                if not np.array_equal(b.get(), theirs):
                    raise SystemExit(f"mpi-ab: rank {rank} received wrong data ({v}, {n} bytes)")
    peer = {}
    if rank == 0 and pygpu.device_count() > 1:
        other_dev = 1 if int(dev) == 0 else 0
        pygpu.enable_peer_access(int(dev), other_dev)
        for n in sizes:
            x = pygpu.empty(n, np.uint8)
            with pygpu.Device(other_dev):
                y = pygpu.empty(n, np.uint8)
            t = []
            for _ in range(12):
                t0 = time.perf_counter()
                pygpu.memcpy_peer(y.ptr, x.ptr, n, other_dev, int(dev))
                t.append(time.perf_counter() - t0)
            peer[n] = n / median(t[2:]) / 1e9
    world.Barrier()
    if rank != 0:
        return 0
    print(f"Ping-pong of Comm.Send/Recv, 2 ranks ({pygpu.backend}), GB/s both ways over the round trip "
          f"(ratio to memcpy_peer in one process), {rounds} rounds taking turns, checked bit for bit")
    print(f"{'size':>9}" + "".join(f"{v:>20}" for v in versions) + f"{'peer copy':>11}")
    for n in sizes:
        cells = ""
        for v in versions:
            rate = 2 * n / median(times[(v, n)]) / 1e9
            cells += f"{rate:12.1f}" + (f" ({rate / peer[n]:.2f})" if n in peer else "       ")
        print(f"{n >> 20:>5} MiB{cells}" + (f"{peer[n]:11.1f}" if n in peer else f"{'-':>11}"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
