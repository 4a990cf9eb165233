"""MPI ping-pong between two ranks of one node, one GPU each.

    mpirun -np 2 python -m pygpu.bench_mpi [--quick] [--sizes 1M 16M ...]

Rank 0 sends a GPUArray to rank 1, which sends it back; the rate is the
bytes moved both ways over the round trip's time (median of several).
Rows, 1 MiB to 1 GiB:

- ``device to device``: ``pygpu.mpi.Comm`` with an MPI that is not
  CUDA-aware, through the mailboxes of device memory (``Comm.Send``/``Recv``);
- ``staged``: the same ``Comm`` with ``ipc=False`` (through pinned host
  memory, one message, as MPI is given a buffer);
- ``in chunks``: staged as between ranks of different nodes (a ``Comm``
  that takes the other rank as one of another node): a header, then the
  bytes in chunks of ``Comm.chunk_bytes``, each copied down (up) while the
  ones before cross;
- ``CuPy, staged by hand``: mpi4py with CuPy arrays copied down and up
  around MPI (``cupy.asnumpy`` / ``cupy.asarray``), what a CuPy user does
  without a CUDA-aware MPI (where CuPy is installed);
- ``peer copy``: the ceiling, ``memcpy_peer`` between the two devices in one
  process (rank 0), peer access on;
- ``MPI host``: MPI's own ping-pong of page-locked NumPy arrays, the floor
  under the staged row (which adds the copies down and up to it);
- pinned down and up on rank 0's device: the ceiling of the staged row;

then an ``Allgather`` of the same sizes a rank, device to device and
staged (the bytes each rank receives over the call's time).

Every received array is checked bit for bit.  Prints one table on rank 0.
"""
import sys
import time

import numpy as np

import pygpu
import pygpu.mpi


def _median(xs):
    return sorted(xs)[len(xs) // 2]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    from mpi4py import MPI
    world = MPI.COMM_WORLD
    if world.size != 2:
        raise SystemExit("pygpu.bench_mpi: run it with 2 ranks (mpirun -np 2 python -m pygpu.bench_mpi)")
    rank, other = world.rank, 1 - world.rank
    quick = "--quick" in argv
    sizes = [1 << 20, 16 << 20, 64 << 20, 256 << 20] + ([] if quick else [1 << 30])
    if "--sizes" in argv:
        from pygpu.bench import parse_size
        sizes = [parse_size(s) for s in argv[argv.index("--sizes") + 1:] if not s.startswith("--")]
    dev = pygpu.mpi.select_device(world)
    ipc = pygpu.mpi.Comm(world, cuda_aware=False)
    staged = pygpu.mpi.Comm(world, cuda_aware=False, ipc=False)
    far = pygpu.mpi._across_nodes(pygpu.mpi.Comm(world.Dup(), cuda_aware=False))
    try:
        import cupy
        cupy.cuda.Device(int(dev)).use()
    except Exception:
        cupy = None

    def rounds(n):
        return 10 if n <= (64 << 20) else 5

    def pingpong(send, recv, n):
        """Seconds of one round trip (median), `send(dest)` and `recv(source)` moving it."""
        times = []
        for _ in range(rounds(n) + 2):
            world.Barrier()
            t0 = time.perf_counter()
            if rank == 0:
                send(1)
                recv(1)
            else:
                recv(0)
                send(0)
            times.append(time.perf_counter() - t0)
        return _median(times[2:])

    table = []
    for n in sizes:
        count = n // 8
        mine = np.random.default_rng([n, rank]).integers(0, 2**62, count, dtype=np.int64)
        theirs = np.random.default_rng([n, other]).integers(0, 2**62, count, dtype=np.int64)
        a = pygpu.to_gpu(mine)
        b = pygpu.empty(count, np.int64)
        row = {"bytes": n}
        for name, comm in (("ipc", ipc), ("staged", staged), ("chunks", far)):
            b.fill(0)
            t = pingpong(lambda d: comm.Send(a, d), lambda s: comm.Recv(b, s), n)
            if not np.array_equal(b.get(), theirs):
                raise SystemExit(f"pygpu.bench_mpi: rank {rank} received wrong data ({name}, {n} bytes)")
            row[name] = 2 * n / t / 1e9
        hs, hr = pygpu.pagelocked_empty(count, np.int64), pygpu.pagelocked_empty(count, np.int64)
        hs[...] = mine
        t = pingpong(lambda d: world.Send(hs, d), lambda s: world.Recv(hr, s), n)
        if not np.array_equal(hr, theirs):
            raise SystemExit(f"pygpu.bench_mpi: rank {rank} received wrong data (host memory, {n} bytes)")
        row["host"] = 2 * n / t / 1e9
        if cupy is not None:
            ca = cupy.asarray(mine)
            got = {}

            def cupy_send(d):
                world.Send(cupy.asnumpy(ca), d)

            def cupy_recv(s):
                host = np.empty(count, np.int64)
                world.Recv(host, s)
                got["x"] = cupy.asarray(host)
            t = pingpong(cupy_send, cupy_recv, n)
            if not np.array_equal(cupy.asnumpy(got["x"]), theirs):
                raise SystemExit(f"pygpu.bench_mpi: rank {rank} received wrong data (CuPy, {n} bytes)")
            row["cupy"] = 2 * n / t / 1e9
        # Allgather of n bytes a rank (each receives the other's n), device to device and staged
        both = pygpu.empty(2 * count, np.int64)
        for name, comm in (("ipc", ipc), ("staged", staged)):
            times = []
            for _ in range(rounds(n) + 2):
                both.fill(0)
                world.Barrier()
                t0 = time.perf_counter()
                comm.Allgather(a, both)
                times.append(time.perf_counter() - t0)
            got = both.get()
            if not (np.array_equal(got[rank * count:(rank + 1) * count], mine)
                    and np.array_equal(got[other * count:(other + 1) * count], theirs)):
                raise SystemExit(f"pygpu.bench_mpi: rank {rank} gathered wrong data ({name}, {n} bytes)")
            row["allgather " + name] = n / _median(times[2:]) / 1e9
        table.append(row)
        del a, b, both

    far.comm.Free()
    if rank != 0:
        world.Barrier()
        return 0
    # the ceilings, in rank 0's process alone (rank 1 waits)
    peer = 1 if pygpu.device_count() > 1 else None
    for row in table:
        n = row["bytes"]
        x = pygpu.empty(n, np.uint8)
        host = pygpu.pagelocked_empty(n, np.uint8)
        times = {"down": [], "up": [], "peer": []}
        y = None
        if peer is not None:
            pygpu.enable_peer_access(int(dev), peer)
            with pygpu.Device(peer):
                y = pygpu.empty(n, np.uint8)
        for _ in range(rounds(n) + 2):
            t0 = time.perf_counter()
            x.get(ary=host)
            t1 = time.perf_counter()
            x.set(host)
            t2 = time.perf_counter()
            times["down"].append(t1 - t0)
            times["up"].append(t2 - t1)
            if y is not None:
                t3 = time.perf_counter()
                pygpu.memcpy_peer(y.ptr, x.ptr, n, peer, int(dev))
                times["peer"].append(time.perf_counter() - t3)
        row["down"] = n / _median(times["down"][2:]) / 1e9
        row["up"] = n / _median(times["up"][2:]) / 1e9
        row["peer"] = n / _median(times["peer"][2:]) / 1e9 if y is not None else None
    world.Barrier()

    print(f"MPI ping-pong, 2 ranks of one node ({pygpu.backend}; devices {int(dev)} and "
          f"{peer if peer is not None else int(dev)}); GB/s both ways over the round trip, "
          f"every result checked bit for bit")
    head = f"{'size':>9} {'device to device':>17} {'/ peer':>7} {'staged':>8} {'/ pinned':>9} {'/ MPI host':>11}"
    head += f" {'in chunks':>10} {'/ MPI host':>11}"
    head += f" {'CuPy staged':>12}" if cupy is not None else ""
    head += f" {'MPI host':>9} {'peer copy':>10} {'pinned down':>12} {'pinned up':>10}"
    print(head)
    for row in table:
        n = row["bytes"]
        size = f"{n >> 20} MiB" if n < (1 << 30) else f"{n >> 30} GiB"
        slower = min(row["down"], row["up"])
        line = f"{size:>9} {row['ipc']:17.1f} "
        line += f"{row['ipc'] / row['peer']:7.2f}" if row["peer"] else f"{'-':>7}"
        line += f" {row['staged']:8.1f} {row['staged'] / slower:9.2f} {row['staged'] / row['host']:11.2f}"
        line += f" {row['chunks']:10.1f} {row['chunks'] / row['host']:11.2f}"
        line += f" {row['cupy']:12.1f}" if cupy is not None else ""
        line += f" {row['host']:9.1f}"
        line += f" {row['peer']:10.1f}" if row["peer"] else f" {'-':>10}"
        line += f" {row['down']:12.1f} {row['up']:10.1f}"
        print(line, flush=True)
    print("Allgather, 2 ranks: GB/s each rank received (the other's part) over the call's time; "
          "device to device (ratio to the peer copy), staged")
    for row in table:
        n = row["bytes"]
        size = f"{n >> 20} MiB" if n < (1 << 30) else f"{n >> 30} GiB"
        ratio = f" ({row['allgather ipc'] / row['peer']:.2f})" if row["peer"] else ""
        print(f"{size:>9} {row['allgather ipc']:10.1f}{ratio:<8} {row['allgather staged']:8.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
