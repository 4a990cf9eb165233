"""How the pieces of a device-to-device MPI message should be cut (pygpu.mpi's mailboxes).

    mpirun -np 2 python tools/research/mpi-pieces.py [--rounds R] [SIZE ...]

Each piece is copied into the sender's mailbox on its own device, then
pulled over the link by the receiver; each pull costs some microseconds
whatever its size (tools/research/mpi-timeline.py links), and the first
pull waits for the first piece's copy into the mailbox.  The ping-pong of
Comm.Send/Recv between 2 ranks (median round trip, bytes moved both ways,
every result checked bit for bit) with pygpu.mpi._schedule replaced on
both ranks by each way of cutting, taking turns for R rounds (default 3),
sizes 16, 64, 256 MiB unless given; rank 0 prints each with its ratio to
memcpy_peer between the two devices in its own process:

  as built      the library's own _schedule (as it stands in this checkout;
                since 2026-11-28 whole slots from the first)
  grow          the library's before: one piece up to 4 MiB, else 2 MiB
                first, each next four times the one before, at most a slot
  2M+slots      2 MiB first, then whole slots, the last what is left
  4M+slots      4 MiB first, then whole slots
"""
import sys
import time

import numpy as np

import pygpu
import pygpu.mpi

MiB = 1 << 20


def first_then_slots(first):
    def cut(n, slot):
        if n <= min(first, slot):
            return [n]
        sizes, left = [min(first, slot)], n - min(first, slot)
        while left > 0:
            sizes.append(min(slot, left))
            left -= sizes[-1]
        return sizes
    return cut


def grow(n, slot):
    if n <= min(4 * MiB, slot):
        return [n]
    sizes, size = [], min(2 * MiB, slot)
    while n > 0:
        sizes.append(min(size, n))
        n -= sizes[-1]
        size = min(slot, 4 * size)
    return sizes


def median(xs):
    return sorted(xs)[len(xs) // 2]


def main(argv):
    from mpi4py import MPI
    from pygpu.bench import parse_size
    world = MPI.COMM_WORLD
    if world.size != 2:
        raise SystemExit("mpi-pieces: run it with 2 ranks")
    rank, other = world.rank, 1 - world.rank
    rounds = 3
    if "--rounds" in argv:
        i = argv.index("--rounds")
        rounds = int(argv[i + 1])
        del argv[i:i + 2]
    sizes = [parse_size(s) for s in argv] or [16 * MiB, 64 * MiB, 256 * MiB]
    dev = pygpu.mpi.select_device(world)
    comm = pygpu.mpi.Comm(world, cuda_aware=False)
    ways = {"as built": pygpu.mpi._schedule, "grow": grow, "2M+slots": first_then_slots(2 * MiB),
            "4M+slots": first_then_slots(4 * MiB)}
    times = {(w, n): [] for w in ways for n in sizes}
    for _ in range(rounds):
        for n in sizes:
            count = n // 8
            mine = np.random.default_rng([n, rank]).integers(0, 2**62, count, dtype=np.int64)
            theirs = np.random.default_rng([n, other]).integers(0, 2**62, count, dtype=np.int64)
            a, b = pygpu.to_gpu(mine), pygpu.empty(count, np.int64)
            for w, cut in ways.items():
                pygpu.mpi._schedule = cut
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
                    raise SystemExit(f"mpi-pieces: rank {rank} received wrong data ({w}, {n} bytes)")
    pygpu.mpi._schedule = ways["as built"]
    if rank != 0:
        world.Barrier()
        return 0
    peer = {}
    if pygpu.device_count() > 1:
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
    print(f"Ping-pong of Comm.Send/Recv, 2 ranks ({pygpu.backend}), GB/s both ways over the round trip "
          f"(ratio to memcpy_peer in one process), {rounds} rounds taking turns, checked bit for bit")
    print(f"{'size':>9}" + "".join(f"{w:>18}" for w in ways) + f"{'peer copy':>11}")
    for n in sizes:
        cells = ""
        for w in ways:
            rate = 2 * n / median(times[(w, n)]) / 1e9
            cells += f"{rate:10.1f}" + (f" ({rate / peer[n]:.2f})" if n in peer else "       ")
        print(f"{n >> 20:>5} MiB{cells}" + (f"{peer[n]:11.1f}" if n in peer else f"{'-':>11}"))
        print("          pieces: " + "  ".join(f"{w}={[s >> 20 for s in cut(n, pygpu.mpi._Mailbox.SLOT_BYTES)]}"
                                           for w, cut in ways.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
