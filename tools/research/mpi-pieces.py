"""How the pieces of a device-to-device MPI message should be cut (pygpu.mpi's mailboxes).

    mpirun -np 2 python tools/research/mpi-pieces.py [--rounds R] [--sizes SIZE ...]

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

import pygpu.mpi

from mpi_pingpong import MiB, parse, run


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


def main(argv):
    from mpi4py import MPI
    world = MPI.COMM_WORLD
    if world.size != 2:
        raise SystemExit("mpi-pieces: run it with 2 ranks")
    rounds, sizes, _ = parse(argv)
    dev = pygpu.mpi.select_device(world)
    comm = pygpu.mpi.Comm(world, cuda_aware=False)
    cuts = {"as built": pygpu.mpi._schedule, "grow": grow, "2M+slots": first_then_slots(2 * MiB),
            "4M+slots": first_then_slots(4 * MiB)}

    def use(cut):
        def before():
            pygpu.mpi._schedule = cut
        return before

    try:
        run(world, dev, {w: (comm, use(cut)) for w, cut in cuts.items()}, sizes, rounds, "mpi-pieces",
            notes=lambda n: "          pieces: " + "  ".join(
                f"{w}={[s >> 20 for s in cut(n, pygpu.mpi._Mailbox.SLOT_BYTES)]}" for w, cut in cuts.items()))
    finally:
        pygpu.mpi._schedule = cuts["as built"]
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
