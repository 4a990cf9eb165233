"""pygpu.mpi device to device between ranks of one node, checked bit for bit.

Run under mpirun with 2 or more ranks (tests/test_mpi.py does, on every
backend; on the host backend with cuda_aware=False, so that the mailboxes
are shared memory).  Every rank sends to the next and receives from the
previous, in every way Comm offers, and checks each result against NumPy;
rank 0 prints "mpi_ipc_check: OK, N ranks" at the end.
"""
import faulthandler
import os
import sys

import numpy as np
from mpi4py import MPI

# A rank still at work after 100 s (the check takes 5-20) prints where each
# of its threads is and exits, so that a hang fails with its stacks shown.
faulthandler.dump_traceback_later(100, exit=True)

import pygpu
import pygpu.mpi

world = MPI.COMM_WORLD
aware = {"aware": True, "staged": False}[sys.argv[1]] if len(sys.argv) > 1 else None
comm = pygpu.mpi.Comm(world, cuda_aware=aware)
rank, size = comm.rank, comm.size
nxt, prv = (rank + 1) % size, (rank - 1) % size
pygpu.mpi.select_device(world)
assert comm._ipc is not None and comm._ipc.local == set(range(size)) - {rank}, (comm._ipc, rank)
assert "device to device" in repr(comm), repr(comm)
# every other rank's process watched (one namespace here), none ended
if pygpu.mpi._started(os.getpid()) is not None:
    assert set(comm._ipc.pids) == comm._ipc.local, (comm._ipc.pids, comm._ipc.local)
    comm._ipc.watch()


def data(n, sender, dtype=np.float64, salt=0):
    """The `n` elements `sender` sends (different for every sender and size)."""
    r = np.random.default_rng([n, sender, salt])
    return r.integers(-2**31, 2**31, n).astype(dtype)


MIN = comm.ipc_min_bytes
if pygpu.backend == "host":     # (smaller slots on CI: the same paths, a quarter of the bytes; the
    pygpu.mpi._Mailbox.SLOT_BYTES = 8 << 20     # header carries the size, so both ends follow it)
PIECE = pygpu.mpi._Mailbox.SLOT_BYTES
SLOTS = pygpu.mpi._Mailbox.SLOTS
# (pieces: one up to 4 MiB, else 2 MiB first, each next 4 times bigger, at most a slot)
# below the threshold (a plain message), at it, pieces that do not divide
# the bytes, more pieces than slots, and far more
counts = [1000, MIN // 8, MIN // 8 + 1, (3 * PIECE) // 8 + 5, ((SLOTS + 2) * PIECE) // 8 + 3]


def ring(c, n, tag, salt=0, ssend=False):
    """Send / Recv of `n` float64 around the ring through Comm `c` (the even
    ranks send first, so that nothing waits on itself; the odd ones with
    Ssend if asked), checked against NumPy with the status."""
    a = pygpu.to_gpu(data(n, rank, salt=salt))
    b = pygpu.zeros(n, np.float64)
    st = MPI.Status()
    if rank % 2 == 0:
        c.Send(a, dest=nxt, tag=tag)
        c.Recv(b, source=prv, tag=tag, status=st)
    else:
        c.Recv(b, source=prv, tag=tag, status=st)
        (c.Ssend if ssend else c.Send)(a, dest=nxt, tag=tag)
    assert np.array_equal(b.get(), data(n, prv, salt=salt)), ("Send/Recv", n, tag)
    assert st.Get_source() == prv and st.Get_tag() == tag and st.Get_count(MPI.DOUBLE) == n, ("status", n, tag)


for n in counts:
    ring(comm, n, 7)

# the sender's mailbox was mapped here, not staged around
opened = list(pygpu.mpi._Node._opened.values())
assert len(opened) == 1 and isinstance(opened[0], pygpu.IPCMemoryHandle), opened

# Sendrecv: everyone sends and receives at once, strided views both ways
for n in counts:
    h = data(2 * n, rank, np.float32)
    a = pygpu.to_gpu(h)
    c = pygpu.zeros(4 * n, np.float32)
    comm.Sendrecv(a[::2], dest=nxt, sendtag=3, recvbuf=c[::4], source=prv, recvtag=3)
    expect = np.zeros(4 * n, np.float32)
    expect[::4] = data(2 * n, prv, np.float32)[::2]
    assert np.array_equal(c.get(), expect), ("Sendrecv strided", n)

# Bcast from every root: device buffers everywhere, or host memory on the root or on the others
for root in range(size):
    for n in counts[:4]:
        for kinds in ("gpu", "host root", "host others"):
            host = (kinds == "host root") == (rank == root) and kinds != "gpu"
            want = data(n, root, salt=11)
            if rank == root:
                buf = want.copy() if host else pygpu.to_gpu(want)
            else:
                buf = np.zeros(n) if host else pygpu.zeros(n)
            comm.Bcast(buf, root=root)
            got = buf if host else buf.get()
            assert np.array_equal(got, want), ("Bcast", root, n, kinds)

# a NumPy receiver of a GPUArray, and a GPUArray receiver of NumPy; any source and tag
n = counts[3]
for way in range(2):
    send = pygpu.to_gpu(data(n, rank, salt=way)) if way == 0 else data(n, rank, salt=way)
    recv = np.zeros(n) if way == 0 else pygpu.zeros(n)
    st = MPI.Status()
    comm.Sendrecv(send, dest=nxt, sendtag=10 + way, recvbuf=recv, status=st)
    got = recv if way == 0 else recv.get()
    assert np.array_equal(got, data(n, prv, salt=way)), ("host and device", way)
    assert st.Get_source() == prv and st.Get_tag() == 10 + way

# buffer specs, an F-ordered array, bytes of another dtype
m = counts[3] // 3
f = pygpu.to_gpu(np.asfortranarray(data(3 * m, rank).reshape(3, m)))
g = pygpu.zeros((m, 3), np.float64)
comm.Sendrecv([f, MPI.DOUBLE], dest=nxt, recvbuf=[g, 3 * m, MPI.DOUBLE], source=prv)
assert np.array_equal(g.get().ravel(), np.asfortranarray(data(3 * m, prv).reshape(3, m)).ravel(order="K"))

# a plain message exactly a header's size is delivered as it is
hs = pygpu.mpi._HEADER.size
plain = np.frombuffer(pygpu.mpi._MAGIC * (hs // 16 + 1), np.uint8)[:hs].copy()
plain[-1] = rank
into = pygpu.zeros(hs, np.uint8)
comm.Sendrecv(plain, dest=nxt, recvbuf=into, source=prv)
expect = plain.copy()
expect[-1] = prv
assert np.array_equal(into.get(), expect)

# an empty message into no buffer (mpi4py's [None, 0, type]): not one a memoryview can take
comm.Sendrecv([None, 0, MPI.BYTE], dest=nxt, sendtag=4, recvbuf=[None, 0, MPI.BYTE], source=prv, recvtag=4)
comm.Send([None, 0, MPI.BYTE], dest=nxt, tag=4)
comm.Recv([None, 0, MPI.BYTE], source=prv, tag=4)


def too_small(c, n, salt):
    """A receive buffer too small, on every rank and then on rank 0 alone, in
    a Sendrecv around the ring: that receiver raises MPI's truncation, its
    send still reaches the next rank, the others receive whole, and the
    next message is right."""
    for everyone in (True, False):
        short = everyone or rank == 0
        b = pygpu.zeros(n // 2 if short else n)
        try:
            c.Sendrecv(pygpu.to_gpu(data(n, rank, salt=salt)), dest=nxt, recvbuf=b, source=prv)
        except MPI.Exception as e:
            assert short and e.Get_error_class() == MPI.ERR_TRUNCATE, e
        else:
            assert not short, "a receive buffer too small was not refused"
            assert np.array_equal(b.get(), data(n, prv, salt=salt)), "beside a truncated receive"
    b = pygpu.zeros(n)
    c.Sendrecv(pygpu.to_gpu(data(n, rank, salt=salt + 1)), dest=nxt, recvbuf=b, source=prv)
    assert np.array_equal(b.get(), data(n, prv, salt=salt + 1))


too_small(comm, counts[3], 5)

# a receiver that cannot map the sender's mailbox has the data staged
opened = pygpu.mpi._Node.opened
pygpu.mpi._Node.opened = lambda self, handle: None
try:
    for n in counts[2:4]:
        b = pygpu.zeros(n)
        comm.Sendrecv(pygpu.to_gpu(data(n, rank, salt=6)), dest=nxt, recvbuf=b, source=prv)
        assert np.array_equal(b.get(), data(n, prv, salt=6)), ("staged", n)
        b = pygpu.to_gpu(data(n, 0, salt=8)) if rank == 0 else pygpu.zeros(n)
        comm.Bcast(b, root=0)
        assert np.array_equal(b.get(), data(n, 0, salt=8)), ("staged Bcast", n)
finally:
    pygpu.mpi._Node.opened = opened

# Gather, Scatter, Allgather and Alltoall device to device (every buffer a dense GPUArray), against
# NumPy: parts below the threshold, at it, and of several pieces; the first and last roots; IN_PLACE;
# a part of 2-D F-ordered arrays; and a host buffer on one rank (all ranks then stage)
moved = [0]
pull = pygpu.mpi._Node._pull


def counted(self, *args):           # (counts the pulls: the device-to-device path taken)
    moved[0] += 1
    return pull(self, *args)


pygpu.mpi._Node._pull = counted
try:
    for n in counts[:2] + counts[3:4]:      # (past the slots: the point-to-point checks above)
        for root in sorted({0, size - 1}):
            every = [data(n, r, salt=10 + root) for r in range(size)]
            before = moved[0]
            out = pygpu.zeros(size * n) if rank == root else None
            comm.Gather(pygpu.to_gpu(every[rank]), out, root=root)
            if rank == root:
                assert np.array_equal(out.get(), np.concatenate(every)), ("Gather", n, root)
            assert (moved[0] > before) == (n * 8 >= MIN and rank == root) or rank != root, ("Gather path", n)
            part = pygpu.zeros(n)
            whole = pygpu.to_gpu(np.concatenate(every)) if rank == root else None
            comm.Scatter(whole, part, root=root)
            assert np.array_equal(part.get(), every[rank]), ("Scatter", n, root)
            if rank == root:        # IN_PLACE at the root, both ways
                inplace = pygpu.to_gpu(np.concatenate(every))
                comm.Scatter(inplace, pygpu.mpi.IN_PLACE, root=root)
                comm.Gather(pygpu.mpi.IN_PLACE, inplace, root=root)
                assert np.array_equal(inplace.get(), np.concatenate(every)), ("IN_PLACE", n, root)
            else:
                comm.Scatter(None, part, root=root)
                comm.Gather(part, None, root=root)
        everyone = pygpu.zeros(size * n)
        comm.Allgather(pygpu.to_gpu(data(n, rank, salt=20)), everyone)
        assert np.array_equal(everyone.get(), np.concatenate([data(n, r, salt=20) for r in range(size)])), n
        whole = pygpu.zeros(size * n)
        whole[rank * n:(rank + 1) * n] = pygpu.to_gpu(data(n, rank, salt=21))
        comm.Allgather(pygpu.mpi.IN_PLACE, whole)
        assert np.array_equal(whole.get(), np.concatenate([data(n, r, salt=21) for r in range(size)])), n
        # Alltoall: rank r's part for rank d is data(n, r, d); everyone checks what it got
        sends = pygpu.to_gpu(np.concatenate([data(n, rank, salt=30 + d) for d in range(size)]))
        got = pygpu.zeros(size * n)
        before = moved[0]
        comm.Alltoall(sends, got)
        assert np.array_equal(got.get(), np.concatenate([data(n, r, salt=30 + rank) for r in range(size)])), n
        assert moved[0] - before == (size - 1 if n * 8 >= MIN else 0), ("Alltoall path", n)
    assert moved[0] > 0
    # F-ordered 2-D parts: bytes in memory order, as MPI takes them
    m = counts[3] // 3 + 1
    fpart = pygpu.to_gpu(np.asfortranarray(data(3 * m, rank, salt=22).reshape(3, m)))
    fall = pygpu.zeros(size * 3 * m)
    comm.Allgather(fpart, fall)
    expect = np.concatenate([np.asfortranarray(data(3 * m, r, salt=22).reshape(3, m)).ravel(order="K")
                             for r in range(size)])
    assert np.array_equal(fall.get(), expect)
    # a host buffer on one rank: everyone stages, the data are the same
    n = counts[3]
    before = moved[0]
    mine = data(n, rank, salt=23)
    out = pygpu.zeros(size * n)
    comm.Allgather(mine if rank == 0 else pygpu.to_gpu(mine), out)
    assert np.array_equal(out.get(), np.concatenate([data(n, r, salt=23) for r in range(size)]))
    assert moved[0] == before
finally:
    pygpu.mpi._Node._pull = pull

# a second Comm of the same communicator finds the first's setup; ipc=False stages# a second Comm of the same communicator finds the first's setup; ipc=False stages
assert pygpu.mpi.Comm(world, cuda_aware=aware)._ipc is comm._ipc
plain_comm = pygpu.mpi.Comm(world, cuda_aware=False, ipc=False)
assert plain_comm._ipc is None and "device to device" not in repr(plain_comm)
n = counts[3]
b = pygpu.zeros(n)
plain_comm.Sendrecv(pygpu.to_gpu(data(n, rank, salt=7)), dest=nxt, recvbuf=b, source=prv)
assert np.array_equal(b.get(), data(n, prv, salt=7))

# communicators made and freed (a later one may reuse a handle: each gets its own
# setup), and one of part of the ranks
for color in (0, rank % 2):
    sub = world.Split(color, rank)
    c = pygpu.mpi.Comm(sub, cuda_aware=aware)
    assert c._ipc is None if sub.size == 1 else c._ipc is not comm._ipc
    if sub.size > 1:
        assert c._ipc.local == set(range(sub.size)) - {sub.rank}
        n = counts[3]
        b = pygpu.zeros(n)
        c.Sendrecv(pygpu.to_gpu(data(n, sub.rank, salt=9)), dest=(sub.rank + 1) % sub.size, recvbuf=b,
                   source=(sub.rank - 1) % sub.size)
        assert np.array_equal(b.get(), data(n, (sub.rank - 1) % sub.size, salt=9)), ("sub", color)
    sub.Free()

# ranks as if on other nodes: GPUArrays go staged, in chunks (small ones here, so that a
# transfer has many: fewer than the page-locked buffers, as many, and more, and a last
# one short), each copied down or up while the ones before cross; every way a receive
# can land, checked against NumPy
far = pygpu.mpi._across_nodes(pygpu.mpi.Comm(world.Dup(), cuda_aware=aware))
assert far._ipc is not None and not far._ipc.local
far.chunk_bytes, far.chunk_min_bytes = 64 << 10, 128 << 10
landed, land = [0], pygpu.mpi._Node._land
pygpu.mpi._Node._land = lambda self, *a: (landed.__setitem__(0, landed[0] + 1), (yield from land(self, *a)))[1]
try:
    for n in (1000, (128 << 10) // 8, (3 * (64 << 10)) // 8 + 5, (11 * (64 << 10)) // 8, (64 << 17) // 8 + 3):
        before = landed[0]
        ring(far, n, 8, salt=40, ssend=True)
        assert landed[0] - before == (n * 8 >= far.chunk_min_bytes), ("far path", n)
    # strided views both ways, into host memory, and ANY_SOURCE
    n = (5 * (64 << 10)) // 8 + 7
    a = pygpu.to_gpu(data(2 * n, rank, salt=41))
    c = pygpu.zeros(4 * n)
    far.Sendrecv(a[::2], dest=nxt, sendtag=5, recvbuf=c[::4], source=prv, recvtag=5)
    assert np.array_equal(c.get()[::4], data(2 * n, prv, salt=41)[::2]) and not c.get()[1::4].any()
    host = np.zeros(n)
    far.Sendrecv(a[:n], dest=nxt, sendtag=6, recvbuf=host, source=MPI.ANY_SOURCE, recvtag=6)
    assert np.array_equal(host, data(2 * n, prv, salt=41)[:n])
    before = landed[0]
    too_small(far, n, 42)
    assert landed[0] - before == 3, "far: not in chunks"
finally:
    pygpu.mpi._Node._land = land
far.comm.Free()

comm.Barrier()
if rank == 0:
    print(f"mpi_ipc_check: OK, {size} ranks", flush=True)
faulthandler.cancel_dump_traceback_later()
