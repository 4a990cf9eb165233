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

import pygpu.mpi

from mpi_pingpong import parse, run


def load(name, path):
    spec = importlib.util.spec_from_file_location(f"pygpu._mpi_ab_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main(argv):
    from mpi4py import MPI
    world = MPI.COMM_WORLD
    if world.size != 2:
        raise SystemExit("mpi-ab: run it with 2 ranks")
    rounds, sizes, others = parse(argv)
    dev = pygpu.mpi.select_device(world)
    versions = {"as built": pygpu.mpi}
    versions.update((name, load(name, path)) for name, path in (o.split("=", 1) for o in others))
    ways = {name: (mod.Comm(world, cuda_aware=False), lambda: None) for name, mod in versions.items()}
    run(world, dev, ways, sizes, rounds, "mpi-ab")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
