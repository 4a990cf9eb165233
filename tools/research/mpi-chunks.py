"""pygpu.mpi's staged transfers between nodes, by the size of their chunks.

    mpirun -np 2 python tools/research/mpi-chunks.py [--rounds R] [--sizes SIZE ...] [--chunks SIZE ...]

Two ranks of one node, each Comm taking the other rank as one of another
node (pygpu.mpi._across_nodes), so that GPUArrays go staged in chunks:
the ping-pong (mpi_pingpong.py) of each chunk size in turn (default 1, 2,
4, 8 and 16 MiB), and of the one-message staged path (ipc=False), for R
rounds (default 2); sizes 16, 64, 256 MiB unless given.  The ratios it
prints are to memcpy_peer, beside the point here: compare the rows.
"""
import sys

from mpi4py import MPI

import pygpu.mpi
from pygpu.bench import parse_size

from mpi_pingpong import parse, run


def main(argv):
    world = MPI.COMM_WORLD
    if world.size != 2:
        raise SystemExit("mpi-chunks: run it with 2 ranks")
    chunks = [1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20]
    if "--chunks" in argv:
        i = argv.index("--chunks")
        chunks, argv = [parse_size(s) for s in argv[i + 1:]], argv[:i]
    rounds, sizes, _ = parse(argv + (["--rounds", "2"] if "--rounds" not in argv else []))
    dev = pygpu.mpi.select_device(world)
    ways = {"one message": (pygpu.mpi.Comm(world, cuda_aware=False, ipc=False), lambda: None)}
    for c in chunks:
        far = pygpu.mpi._across_nodes(pygpu.mpi.Comm(world.Dup(), cuda_aware=False))
        far.chunk_bytes, far.chunk_min_bytes = c, 2 * c
        ways[f"chunks of {c >> 20} MiB"] = (far, lambda: None)
    run(world, dev, ways, sizes, rounds, "mpi-chunks")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
