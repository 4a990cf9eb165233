"""GPUArrays in MPI programs, through mpi4py.

One process per GPU, as PyCUDA's MPI tutorial runs them::

    from mpi4py import MPI
    import pygpu, pygpu.mpi

    comm = pygpu.mpi.Comm(MPI.COMM_WORLD)
    pygpu.mpi.select_device(comm)           # local rank -> device, made current
    x = pygpu.empty(n, "f4")
    comm.Scatter(host_data, x, root=0)      # GPUArrays wherever mpi4py takes a buffer
    comm.Allreduce(pygpu.mpi.IN_PLACE, x, op=MPI.SUM)

``Comm`` wraps an mpi4py communicator.  Its buffer methods (``Send``,
``Recv``, ``Sendrecv``, ``Bcast``, ``Reduce``, ``Allreduce``, ``Scatter``,
``Gather``, ``Allgather``, ``Alltoall``) take GPUArrays, NumPy arrays,
``None`` and mpi4py buffer specs (``[array, MPI.FLOAT]``,
``[array, count, MPI.FLOAT]``) as mpi4py does; everything else (``rank``,
``size``, ``Barrier``, ``bcast``...) is the wrapped communicator's.

Four ways a GPUArray reaches MPI:

* **direct**, when the MPI library is CUDA-aware (or ROCm-aware for HIP):
  the array goes to mpi4py as it is, through ``__cuda_array_interface__``
  or DLPack, and MPI reads and writes device memory itself.  Views that are
  not contiguous go through a contiguous device copy first (MPI needs one
  block).  The host backend is direct: its device memory is host memory.
* **staged** otherwise: sends copy the array into page-locked host memory
  and hand MPI that; receives land in page-locked memory and are copied up
  when MPI returns.  Nothing else changes for the caller.  The page-locked
  buffers are kept for the next message (a few a thread, each as large as
  the largest message it carried: locking memory and MPI's registration
  of it cost more than the copies); ``free_staging()`` lets them go.  The
  non-blocking calls (``Isend``, ``Irecv``...) are not
  wrapped in this mode: their buffers would have to outlive the call.

* **device to device** between ranks of one node when MPI is not CUDA-aware
  (the GPU backends; the host backend too when ``cuda_aware=False`` is
  asked, so that CI runs it): ``Send``/``Recv``/``Sendrecv`` (and ``Bcast``
  where every rank shares the node) of a GPUArray of
  ``Comm.ipc_min_bytes`` or more go through a mailbox of device memory
  that the receiving rank maps once (``mem_alloc(ipc=True)``,
  ``IPCMemoryHandle``): the sender copies pieces into its mailbox on its
  device, the receiver copies them out over the link between the devices
  (NVLink where there is one) into its buffer, the two taking turns by MPI
  messages, so that both copies run at once.  MPI still matches the
  message: a small header goes where the data would (same source, tag and
  communicator), the rest on a duplicate of the communicator.  Both ends
  must therefore use ``Comm`` (any buffer kind on the receiving side), and
  ``Comm(comm)`` is collective over ``comm`` (it duplicates it), as MPI's
  communicator constructors are; ``Comm(comm, ipc=False)`` is not, and
  stages as before.  A receiver that cannot map the sender's mailbox (another
  container, devices that cannot reach each other) has the data staged.
  A rank of this node whose process ends while a transfer waits on it makes
  the ranks waiting raise ``RuntimeError`` naming it, where MPI's launcher
  has not ended the job first.
  ``Gather``, ``Scatter``, ``Allgather`` and ``Alltoall`` go the same way
  where every rank shares the node, each rank's part is ``ipc_min_bytes``
  or more, and every
  buffer is a dense GPUArray on every rank (``IN_PLACE`` where MPI allows
  it; asked of all ranks by a small allreduce): the headers on the
  duplicate, then the pieces pulled over the links (the root pulls every
  rank's part at once; a Scatter's root, and each rank of an Alltoall,
  sends its parts in turn).  The reductions (``Reduce``, ``Allreduce``:
  PyGPU has no kernels for them), an ``Alltoall`` ``IN_PLACE``, and ranks
  on other nodes, are staged.
* **in chunks** to ranks of other nodes, in the same mode: ``Send``,
  ``Ssend``, ``Recv`` and ``Sendrecv`` of a GPUArray of
  ``Comm.chunk_min_bytes`` (8 MiB) or more send a header where the data
  would go, then the bytes in chunks of ``Comm.chunk_bytes`` (4 MiB) on the
  duplicate: each chunk is copied down into page-locked memory while the
  ones before cross the network, and copied up on the receiving side while
  the next ones arrive (into host memory, straight).  Both ends use
  ``Comm``, as between ranks of one node.

``cuda_aware()`` says which holds: ``PYGPU_MPI_CUDA_AWARE=1`` or ``0`` decides;
else the MPI library is asked (``MPIX_Query_cuda_support``, which Open MPI
and MPICH provide, or their ROCm/HIP forms); a library that cannot say is
taken as not aware.  ``Comm(comm, cuda_aware=...)`` overrides it per
communicator.
"""
import collections
import ctypes
import itertools
import os
import socket
import struct
import threading
import time

import numpy as np

import pygpu

__all__ = ["Comm", "cuda_aware", "select_device", "local_rank", "free_staging", "IN_PLACE"]

_QUERIES = {
    "cuda": ("MPIX_Query_cuda_support",),
    "hip": ("MPIX_Query_rocm_support", "MPIX_Query_hip_support"),
}


def _mpi():
    from mpi4py import MPI
    return MPI


def __getattr__(name):
    if name == "IN_PLACE":
        return _mpi().IN_PLACE
    raise AttributeError(f"module 'pygpu.mpi' has no attribute {name!r}")


def _loaded_mpi_libraries():
    """Paths of the MPI libraries this process has loaded (mpi4py's)."""
    paths = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.rsplit(None, 1)[-1]
                base = os.path.basename(path)
                if base.startswith(("libmpi.", "libmpich.", "libmpi_")) and path not in paths:
                    paths.append(path)
    except OSError:
        pass
    return paths


def _ask_library():
    """1 or 0 from the MPI library's own query, or None if it has none."""
    names = _QUERIES.get(pygpu.backend, ())
    _mpi()      # loads the library
    for path in _loaded_mpi_libraries() + [None]:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in names:
            fn = getattr(lib, name, None)
            if fn is not None:
                fn.restype = ctypes.c_int
                fn.argtypes = []
                return bool(fn())
    return None


_aware = None


def cuda_aware():
    """True if MPI can read and write this backend's device memory itself.

    PYGPU_MPI_CUDA_AWARE=1/0 decides when set; the host backend is always
    direct; otherwise the MPI library's MPIX query answers (False when it
    has none)."""
    global _aware
    env = os.environ.get("PYGPU_MPI_CUDA_AWARE")
    if env is not None:
        if env not in ("0", "1"):
            raise ValueError(f"PYGPU_MPI_CUDA_AWARE must be 0 or 1, not {env!r}")
        return env == "1"
    if pygpu.backend == "host":
        return True
    if _aware is None:
        _aware = bool(_ask_library())
    return _aware


_library_cuda_aware = cuda_aware     # (Comm's argument of that name hides the function)


def local_rank(comm=None):
    """This process's rank among the processes of its node."""
    MPI = _mpi()
    comm = getattr(comm, "comm", comm) or MPI.COMM_WORLD
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        return node.Get_rank()
    finally:
        node.Free()


def select_device(comm=None):
    """Make device ``local_rank % device_count()`` current and return it
    (one GPU per process when a node runs as many processes as GPUs)."""
    dev = pygpu.Device(local_rank(comm) % pygpu.device_count())
    dev.make_current()
    return dev


# ---- buffers ------------------------------------------------------------------------

def _split(buf):
    """(array, rest of the spec, is_list) of a buffer argument."""
    if isinstance(buf, (list, tuple)) and buf and isinstance(buf[0], pygpu.GPUArray):
        return buf[0], list(buf[1:]), True
    return buf, [], False


def _join(arr, rest, is_list):
    return [arr] + rest if is_list else arr


def _contiguous(a):
    return a.flags.c_contiguous or a.flags.f_contiguous


class _Scratch:
    """Page-locked host buffers that the staged path reuses, a few a thread.

    A message staged through a fresh buffer pays for page-locking it (and
    MPI for registering it) each time, which costs more than the copies;
    a buffer kept is locked and registered once.  Each thread keeps up to
    KEEP of them (the largest), each as large as the largest message it
    carried; ``pygpu.mpi.free_staging()`` lets this thread's go."""

    KEEP = 4
    _local = threading.local()

    @classmethod
    def _free(cls):
        free = getattr(cls._local, "free", None)
        if free is None:
            free = cls._local.free = []
        return free

    @classmethod
    def take(cls, shape, dtype):
        """A C-ordered array of `shape` and `dtype` in a kept buffer (or a new one)."""
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        free = cls._free()
        fits = [i for i, raw in enumerate(free) if raw.nbytes >= nbytes]
        if fits:
            raw = free.pop(min(fits, key=lambda i: free[i].nbytes))
        else:       # (rounded up, so that messages of about one size share it)
            raw = pygpu.pagelocked_empty(-(-max(nbytes, 1) // (1 << 16)) * (1 << 16), np.uint8)
        view = raw[:nbytes].view(dtype).reshape(shape)
        return view, raw

    @classmethod
    def give(cls, raw):
        free = cls._free()
        free.append(raw)
        if len(free) > cls.KEEP:
            del free[min(range(len(free)), key=lambda i: free[i].nbytes)]


def free_staging():
    """Let go of the page-locked buffers this thread keeps for staged messages."""
    _Scratch._free().clear()


class _Buffers:
    """Turns the GPUArrays of one call into what MPI gets, and copies
    received data back to them afterwards (``finish``, once MPI is done
    with every buffer of the call)."""

    def __init__(self, direct):
        self.direct = direct
        self.writebacks = []
        self.taken = []

    def _host(self, a):
        view, raw = _Scratch.take(a.shape, a.dtype)
        self.taken.append(raw)
        return view

    def send(self, buf):
        a, rest, is_list = _split(buf)
        if not isinstance(a, pygpu.GPUArray):
            return buf
        if self.direct:
            return _join(a if _contiguous(a) else a.copy(), rest, is_list)
        host = self._host(a)
        a.get(ary=host)
        return _join(host, rest, is_list)

    def recv(self, buf, initial=False):
        """A receive buffer; with `initial` its current contents are kept
        (IN_PLACE reductions read it)."""
        a, rest, is_list = _split(buf)
        if not isinstance(a, pygpu.GPUArray):
            return buf
        if self.direct and _contiguous(a):
            return buf
        if self.direct:
            tmp = a.copy()
        else:
            tmp = self._host(a)
            if initial:
                a.get(ary=tmp)
        self.writebacks.append((a, tmp))
        return _join(tmp, rest, is_list)

    def finish(self):
        try:
            for a, tmp in self.writebacks:
                a[...] = tmp
        finally:
            self.writebacks.clear()
            for raw in self.taken:
                _Scratch.give(raw)
            self.taken.clear()


class Comm:
    """An mpi4py communicator whose buffer methods take GPUArrays.

    ``cuda_aware``: None asks ``cuda_aware()``; True passes GPUArrays to MPI
    directly; False stages them through page-locked host memory."""

    #: GPUArrays of at least this many bytes go device to device to ranks of this node
    ipc_min_bytes = 256 << 10
    #: GPUArrays sent to ranks of other nodes, of at least ``chunk_min_bytes``, go
    #: staged in chunks of ``chunk_bytes``: each copied down while the one before
    #: crosses the network
    chunk_bytes = 4 << 20
    chunk_min_bytes = 8 << 20

    def __init__(self, comm, cuda_aware=None, ipc=None):
        if isinstance(comm, Comm):
            if cuda_aware is None and ipc is None:
                self.__dict__.update(comm.__dict__)
                return
            comm = comm.comm
        self.comm = comm
        self.cuda_aware = _library_cuda_aware() if cuda_aware is None else bool(cuda_aware)
        self._ipc = None
        if (not self.cuda_aware if ipc is None else bool(ipc)) and comm.Get_size() > 1:
            self._ipc = _Node.of(comm)

    def __getattr__(self, name):
        return getattr(self.comm, name)

    def __repr__(self):
        how = "direct" if self.cuda_aware else "staged through pinned host memory"
        if self._ipc is not None and self._ipc.local:
            how += f", device to device with {len(self._ipc.local)} rank(s) of this node"
        return f"<pygpu.mpi.Comm rank {self.comm.Get_rank()} of {self.comm.Get_size()}, {how}>"

    def _run(self, fn, sends=(), recvs=(), inplace_recv=()):
        b = _Buffers(self.cuda_aware)
        args = [b.send(x) for x in sends] + [b.recv(x) for x in recvs] + [b.recv(x, True) for x in inplace_recv]
        result = fn(*args)
        b.finish()
        return result

    def _in_place(self, sendbuf):
        return sendbuf is _mpi().IN_PLACE

    # point to point
    def _sending(self, buf, dest, tag, sync=False):
        """The steps of a send of `buf` to `dest` where a GPUArray goes device
        to device (a rank of this node) or in chunks (a rank of another
        node); None where it goes as before.  `sync`: the send completes
        only once the receive has begun (Ssend)."""
        a = _split(buf)[0]
        if self._ipc is None or not isinstance(a, pygpu.GPUArray):
            return None
        if dest in self._ipc.local:     # (it returns once the receiver has the data: synchronous already)
            return self._ipc.send(a, dest, tag) if a.nbytes >= self.ipc_min_bytes else None
        if 0 <= dest != self.comm.Get_rank() and a.nbytes >= max(self.chunk_min_bytes, 1):
            return self._ipc.send_chunks(a, dest, tag, max(self.chunk_bytes, 1), sync)
        return None

    def Send(self, buf, dest, tag=0):
        steps = self._sending(buf, dest, tag)
        if steps is not None:
            return _drive(steps, watch=self._ipc.watch)
        return self._run(lambda s: self.comm.Send(s, dest, tag), sends=[buf])

    def Ssend(self, buf, dest, tag=0):
        steps = self._sending(buf, dest, tag, sync=True)
        if steps is not None:
            return _drive(steps, watch=self._ipc.watch)
        return self._run(lambda s: self.comm.Ssend(s, dest, tag), sends=[buf])

    def Recv(self, buf, source=None, tag=None, status=None):
        MPI = _mpi()
        source = MPI.ANY_SOURCE if source is None else source
        tag = MPI.ANY_TAG if tag is None else tag
        if self._ipc is not None:       # (a header may come from this node or from another)
            return _drive(self._ipc.recv(self, buf, source, tag, status), watch=self._ipc.watch)
        return self._run(lambda r: self.comm.Recv(r, source, tag, status), recvs=[buf])

    def Sendrecv(self, sendbuf, dest, sendtag=0, recvbuf=None, source=None, recvtag=None, status=None):
        MPI = _mpi()
        source = MPI.ANY_SOURCE if source is None else source
        recvtag = MPI.ANY_TAG if recvtag is None else recvtag
        if self._ipc is not None:
            sending = self._sending(sendbuf, dest, sendtag)
            if sending is None:
                sending = self._plain_send(sendbuf, dest, sendtag)
            return _drive(sending, self._ipc.recv(self, recvbuf, source, recvtag, status), watch=self._ipc.watch)
        return self._run(lambda s, r: self.comm.Sendrecv(s, dest, sendtag, r, source, recvtag, status),
                         sends=[sendbuf], recvs=[recvbuf])

    def _node_wide(self):
        """True if every other rank of the communicator shares this node (and its mailboxes)."""
        return self._ipc is not None and len(self._ipc.local) == self.comm.Get_size() - 1

    def _plain_send(self, buf, dest, tag):
        """A send as before (staged, or direct), as steps for _drive."""
        b = _Buffers(self.cuda_aware)
        data = b.send(buf)
        yield self.comm.Isend(data, dest, tag)
        b.finish()

    # collectives
    def Bcast(self, buf, root=0):
        if self._node_wide() and _nbytes(buf) >= self.ipc_min_bytes:
            return _drive(self._ipc.bcast(self, buf, root), watch=self._ipc.watch)
        if self.comm.Get_rank() == root:
            return self._run(lambda s: self.comm.Bcast(s, root), sends=[buf])
        return self._run(lambda r: self.comm.Bcast(r, root), recvs=[buf])

    def _reduce_like(self, call, sendbuf, recvbuf, *rest):
        if self._in_place(sendbuf):
            return self._run(lambda r: call(sendbuf, r, *rest), inplace_recv=[recvbuf])
        return self._run(lambda s, r: call(s, r, *rest), sends=[sendbuf], recvs=[recvbuf])

    def Reduce(self, sendbuf, recvbuf, op=None, root=0):
        op = _mpi().SUM if op is None else op
        return self._reduce_like(self.comm.Reduce, sendbuf, recvbuf, op, root)

    def Allreduce(self, sendbuf, recvbuf, op=None):
        op = _mpi().SUM if op is None else op
        return self._reduce_like(self.comm.Allreduce, sendbuf, recvbuf, op)

    def _by_ipc_collective(self, part_bytes, *bufs):
        """True if a Gather, Scatter, Allgather or Alltoall of `part_bytes` a rank goes
        device to device: every rank shares the node, the part is
        ipc_min_bytes or more (the same on every rank), and (asked of all)
        every buffer given is a dense GPUArray."""
        return self._node_wide() and part_bytes >= self.ipc_min_bytes and self._ipc.all_gpu(*bufs)

    def _part_bytes(self, mine, whole):
        """The bytes of one rank's part: of `mine` unless IN_PLACE, else
        `whole` (the root's, or everyone's, buffer of all parts) over size."""
        return _nbytes(whole) // self.comm.Get_size() if self._in_place(mine) else _nbytes(mine)

    def Scatter(self, sendbuf, recvbuf, root=0):
        root_side = self.comm.Get_rank() == root
        part = _nbytes(sendbuf) // self.comm.Get_size() if root_side else _nbytes(recvbuf)
        if self._by_ipc_collective(part, sendbuf if root_side else None,
                                   None if self._in_place(recvbuf) else recvbuf):
            return _drive(*self._ipc.scatter(self, sendbuf, recvbuf, root), watch=self._ipc.watch)
        if self._in_place(recvbuf):
            return self._run(lambda s: self.comm.Scatter(s, recvbuf, root), sends=[sendbuf])
        return self._run(lambda s, r: self.comm.Scatter(s, r, root), sends=[sendbuf], recvs=[recvbuf])

    def Gather(self, sendbuf, recvbuf, root=0):
        root_side = self.comm.Get_rank() == root
        if self._by_ipc_collective(self._part_bytes(sendbuf, recvbuf),
                                   None if self._in_place(sendbuf) else sendbuf, recvbuf if root_side else None):
            return _drive(*self._ipc.gather(self, sendbuf, recvbuf, root), watch=self._ipc.watch)
        return self._reduce_like(self.comm.Gather, sendbuf, recvbuf, root)

    def Allgather(self, sendbuf, recvbuf):
        if self._by_ipc_collective(self._part_bytes(sendbuf, recvbuf),
                                   None if self._in_place(sendbuf) else sendbuf, recvbuf):
            return _drive(*self._ipc.allgather(self, sendbuf, recvbuf), watch=self._ipc.watch)
        return self._reduce_like(self.comm.Allgather, sendbuf, recvbuf)

    def Alltoall(self, sendbuf, recvbuf):
        if not self._in_place(sendbuf) and self._by_ipc_collective(_nbytes(sendbuf) // self.comm.Get_size(),
                                                                   sendbuf, recvbuf):
            return _drive(*self._ipc.alltoall(self, sendbuf, recvbuf), watch=self._ipc.watch)
        return self._reduce_like(self.comm.Alltoall, sendbuf, recvbuf)


# ---- device to device between ranks of one node -------------------------------------

_MAGIC = b"pygpu-mpi-ipc\x00\x02\x00"
_HEADER = struct.Struct("<16sQQQQQ64s")     # magic, node key, transfer, bytes, slot bytes, slots, handle
_READY, _FREED = 0, 1                       # the two kinds of message of a transfer
_TRUNCATED, _STAGE = -1, -2                 # what a receiver answers instead of a free slot
_NO_BOX = bytes(64)                         # the handle of a header whose bytes come in chunks, staged
_CHUNK_SLOTS = 4                            # page-locked chunks a side has in flight


def _node_name():
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        boot = ""
    return f"{socket.gethostname()}/{boot}"


class _Held:
    """A mailbox's lock held by steps that give it back when they end (or
    fail), and also when they are closed or collected before they ever ran
    (a generator that never started runs no `finally`)."""

    def __init__(self, lock):
        self.lock, self.held = lock, True

    def release(self):
        if self.held:
            self.held = False
            self.lock.release()

    def of(self, gen):
        return _HeldSteps(gen, self)


class _HeldSteps:
    """Steps (generator `gen`) that give `held` back when closed or collected."""

    def __init__(self, gen, held):
        self.gen, self.held = gen, held

    def __iter__(self):
        return self

    def __next__(self):
        return next(self.gen)

    def close(self):
        self.gen.close()
        self.held.release()

    def __del__(self):
        self.held.release()


class _Events:
    """Events (no timing) kept for the next transfers, per thread and device:
    making them costs each transfer a few microseconds."""

    _local = threading.local()

    @classmethod
    def _kept(cls):
        kept = getattr(cls._local, "kept", None)
        if kept is None:
            kept = cls._local.kept = {}
        return kept.setdefault(pygpu.get_device(), [])

    @classmethod
    def take(cls, k):
        kept = cls._kept()
        return [kept.pop() if kept else pygpu.Event(timing=False) for _ in range(k)]

    @classmethod
    def give(cls, events):
        cls._kept().extend(events)


def _schedule(n, slot):
    """The sizes of the pieces of a transfer of `n` bytes through slots of
    `slot` bytes (both ends compute it from the header): whole slots, the
    last what is left.  Each copy over the link costs the receiver some
    microseconds whatever its size, which a small first piece (to start the
    link sooner) did not win back: 0.03-0.07 of the peer copy lost from 16
    MiB to 256 MiB in two runs on 2 H200s (docs/performance.md#mpi-first-piece)."""
    return [min(slot, n - at) for at in range(0, n, slot)] or [n]


def _first_piece(src, box, sizes):
    """The events of a push of `src` in pieces of `sizes` through `box`, one
    a slot it uses, with the first piece queued into the first slot: before
    the header goes, so that it is copied while the receiver takes the
    header (docs/performance.md#mpi-first-piece).  It goes on the current
    stream, so that it follows the work there that writes `src`; the next
    pieces, on the mailbox's stream, are queued once it is done."""
    filled = _Events.take(min(box.SLOTS, len(sizes)))
    stream = pygpu.current_stream()
    pygpu.memcpy_dtod_async(box.mem.ptr, src.ptr, sizes[0], stream=stream)
    filled[0].record(stream)
    return filled


def _then(steps, req):
    """`steps`, then a wait for `req`."""
    yield from steps
    yield req


def _release(reqs, events, copying, raw):
    """What chunked steps hold, given back when they end however they end:
    MPI's requests settled, the copies in `events` waited for where any is
    still `copying`, the page-locked buffers `raw` and the events kept."""
    for r in reqs:
        _settle(r)
    if copying:
        for e in events:
            e.synchronize()
    _Scratch.give(raw)
    _Events.give(events)


def _settle(req):
    """A receive still pending when its steps end early (closed because
    the steps beside them raised): cancelled, or completed if its message
    has come, so that MPI writes into no buffer freed with the steps."""
    if req is not None and not req.Test():
        req.Cancel()
        req.Wait()


_WATCH_PASSES = 4096                        # passes of _drive's loop between two looks at the clock
_WATCH_S = 0.5                              # seconds between two calls of its `watch`


def _drive(*steps, watch=None):
    """Run generators of MPI requests to the end, together: each yields a
    request to wait for, or None to be asked again (polling).  The last
    one's return value.  If one raises, all are closed (so that what they
    hold goes back) and the error propagates.  One that returns an
    exception instead (an error met after doing its part, as a receive
    that drained a message too big for its buffer: MPI's truncation) has
    it raised once all have ended, so that the others do theirs (a
    Sendrecv's send still reaches its receiver).  `watch`, called every
    _WATCH_S seconds or so while they wait, may raise to end them (a rank
    of this node that died: _Node.watch)."""
    try:
        results = _drive_all(steps, watch)
    except BaseException:
        for s in steps:
            close = getattr(s, "close", None)
            if close is not None:
                close()
        raise
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results[-1]


def _drive_all(steps, watch=None):
    results = [None] * len(steps)
    live = {}                       # index -> what it waits for
    passes, last = 0, time.monotonic()

    def advance(i):
        try:
            live[i] = next(steps[i])
        except StopIteration as stop:
            live.pop(i, None)
            results[i] = stop.value

    def watched():
        nonlocal last
        now = time.monotonic()
        if now - last >= _WATCH_S:
            last = now
            watch()

    for i in range(len(steps)):
        advance(i)
    while live:
        passes += 1
        if watch is not None and passes % _WATCH_PASSES == 0:
            watched()
        if len(live) == 1:
            (i, req), = live.items()
            if req is not None:
                if watch is None:
                    req.Wait()
                else:               # (MPI's Wait on a rank that died may never return)
                    while not req.Test():
                        passes += 1
                        if passes % _WATCH_PASSES == 0:
                            watched()
            advance(i)
            continue
        for i, req in list(live.items()):
            if req is None or req.Test():
                advance(i)
    return results


def _started(pid):
    """(state, start time in clock ticks since boot) of process `pid` from
    /proc, or None where it has no entry there (ended and reaped, or no
    /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return fields[0], int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def _alive(pid, start):
    """False if the process `pid` that started at `start` (_started) has
    ended: gone, another process under its pid since, or a zombie its
    parent has not reaped (as a launcher that is itself stuck leaves it)."""
    now = _started(pid)
    return now is not None and now[1] == start and now[0] not in (b"Z", b"X")


class _Mailbox:
    """This process's device memory for pieces on their way to another rank
    (one per device), and the receiving side's mappings of other ranks'."""

    SLOTS = 4
    SLOT_BYTES = 32 << 20

    def __init__(self):
        self.mem = pygpu.mem_alloc(self.SLOTS * self.SLOT_BYTES, ipc=True)
        self.handle = pygpu.mem_get_ipc_handle(self.mem)
        self.lock = threading.Lock()
        # The copies into the slots go on a stream of their own: on the current
        # stream they queued behind this rank's own copies out of other ranks'
        # mailboxes (a Sendrecv, an Allgather), and each side's pieces waited
        # for the other's.
        self.stream = pygpu.Stream(non_blocking=True)


class _Node:
    """What the ranks of one communicator know of each other: which are on
    this node, a duplicate of the communicator for the messages of a
    transfer, and the mailboxes.  One per communicator (made collectively
    the first time, then found again)."""

    _keyval = None              # the MPI attribute that holds a communicator's _Node
    _boxes = {}                 # device -> _Mailbox
    _opened = {}                # sender's handle -> IPCMemoryHandle, or the error opening it

    def __init__(self, comm):
        MPI = _mpi()
        self.comm = comm
        self.priv = comm.Dup()
        mine = _started(os.getpid())
        me = (_node_name(), os.getpid(), mine and mine[1])
        everyone = self.priv.allgather(me)
        self.rank = comm.Get_rank()
        self.local = {r for r, (node, pid, start) in enumerate(everyone) if node == me[0] and r != self.rank}
        # The ranks of this node whose processes this one can see (in /proc, under
        # the pid and start time each gave: not those of another PID namespace,
        # where the pid is another process's or none): watched while a transfer
        # waits, so that one that dies ends it with an error.
        self.pids = {r: (pid, start) for r, (node, pid, start) in enumerate(everyone)
                     if r in self.local and start is not None and _alive(pid, start)}
        self.key = self.priv.bcast(int.from_bytes(os.urandom(8), "little") >> 1 if self.rank == 0 else None)
        self.ids = itertools.count()
        ub = self.priv.Get_attr(MPI.TAG_UB) or 32767
        self.tags = max(1, (ub - 1) // 2)
        self.coll_tag = 2 * self.tags           # (above every transfer's two tags: a Scatter's headers)

    def watch(self):
        """Raise if a rank of this node has died (its process gone): what a
        transfer waits for from it will never come."""
        dead = sorted(r for r, (pid, start) in self.pids.items() if not _alive(pid, start))
        if dead:
            raise RuntimeError(f"pygpu.mpi: rank{'s' * (len(dead) > 1)} {', '.join(map(str, dead))} of this node "
                               f"(pid {', '.join(str(self.pids[r][0]) for r in dead)}) ended during a transfer; "
                               f"what this rank waits for from it will never come")

    @classmethod
    def of(cls, comm):
        """The communicator's, kept as an MPI attribute of it (so that it goes
        with the communicator when that is freed, and a later one that reuses
        its handle makes its own, collectively, on every rank)."""
        MPI = _mpi()
        if cls._keyval is None:
            cls._keyval = MPI.Comm.Create_keyval()
        node = comm.Get_attr(cls._keyval)
        if node is None:
            node = cls(comm)
            comm.Set_attr(cls._keyval, node)
        return node

    def mailbox(self):
        dev = pygpu.get_device()
        box = self._boxes.get(dev)
        if box is None:
            box = self._boxes[dev] = _Mailbox()
        return box

    def opened(self, handle):
        """The sender's mailbox mapped here, or None where it cannot be."""
        m = self._opened.get(handle)
        if m is None:
            try:
                m = pygpu.IPCMemoryHandle(handle)
            except pygpu.GPUError as e:
                m = e
            self._opened[handle] = m
        return None if isinstance(m, Exception) else m

    # -- sending ------------------------------------------------------------------

    def _plan(self, box, n):
        """A transfer of `n` bytes through `box`: its id and its header."""
        x = next(self.ids) % self.tags
        return x, _HEADER.pack(_MAGIC, self.key, x, n, box.SLOT_BYTES, box.SLOTS, box.handle)

    def _push(self, src, dests, box, x, slot, sizes, answers, filled):
        """Steps that move `src` (dense) through `box` (slots of `slot` bytes)
        in pieces of `sizes` to every rank of `dests`, each pulling them
        (_pull); a slot is filled again once every one of them has given it
        back.  A rank that answers instead (_TRUNCATED, _STAGE) drops out:
        its answer lands in `answers`.  `filled`: _first_piece's events, the
        first piece queued.  The second piece's copy is queued only once the
        first is announced: its call (5-9 us) held the message up."""
        stream = box.stream
        pieces = len(sizes)
        starts = list(itertools.accumulate(sizes, initial=0))
        slots = min(box.SLOTS, pieces)
        ready = np.zeros(1, np.int64)
        replies = {d: np.zeros(1, np.int64) for d in dests}
        back = {d: self.priv.Irecv(replies[d], d, 2 * x + _FREED) for d in dests}
        freed = dict.fromkeys(dests, 0)         # pieces each has given back
        told = dict.fromkeys(dests, 0)          # pieces each was told are ready
        live = set(dests)
        queued, announced = 1, 0                # pieces copied in (or being), said ready

        def tell(d, k):
            ready[0] = k
            self.priv.Send(ready, d, 2 * x + _READY)
            told[d] += 1

        try:
            while any(freed[d] < pieces for d in live):
                moved = False
                if announced < queued and filled[announced % box.SLOTS].query():
                    for d in dests:                 # (one that answered drains one "ready" a slot)
                        if d in live or told[d] < slots:
                            tell(d, announced)
                    announced += 1
                    moved = True
                if announced and queued < min(pieces, min(freed[d] for d in live) + box.SLOTS):   # a slot back
                    at = (queued % box.SLOTS) * slot
                    pygpu.memcpy_dtod_async(box.mem.ptr + at, src.ptr + starts[queued], sizes[queued], stream=stream)
                    filled[queued % box.SLOTS].record(stream)
                    queued += 1
                    moved = True
                for d in list(live):
                    # (a completed request tests true for ever: a rank that gave every slot back is
                    # asked no more, or this loop would never yield and the pulls beside it would starve)
                    if back[d] is not None and back[d].Test():
                        if replies[d][0] < 0:
                            answers[d] = int(replies[d][0])
                            live.discard(d)
                        else:
                            freed[d] += 1
                            back[d] = self.priv.Irecv(replies[d], d, 2 * x + _FREED) if freed[d] < pieces else None
                        moved = True
                if not moved:
                    yield None
        finally:            # (steps closed early: no receive left writing into `replies`)
            for req in back.values():
                _settle(req)
            if announced < queued:      # (copies into the slots still running, on two streams: done
                for e in filled:        # before another transfer fills the slots)
                    e.synchronize()
        for d in dests:                         # the drains of those that answered
            while told[d] < slots:
                if told[d] < queued:
                    filled[told[d] % box.SLOTS].synchronize()
                tell(d, told[d])
        _Events.give(filled)

    def _staged(self, src, answers, x):
        """Steps that send `src` through host memory to the ranks that asked (_STAGE)."""
        asked = [d for d, answer in answers.items() if answer == _STAGE]
        if asked:
            host = src.get(pagelocked=True)
            for d in asked:
                yield self.priv.Isend([host, src.nbytes, _mpi().BYTE], d, 2 * x + _READY)

    def _posting(self, a, dests, announce):
        """A send of GPUArray `a` to the ranks `dests` through this rank's
        mailbox: planned, and its header announced (`announce(header)`,
        whose result is returned) now; then (the steps returned) the pieces
        pushed, the mailbox held until they are all read.  (steps, said)."""
        src = a if _contiguous(a) else a.copy()
        box = self.mailbox()
        box.lock.acquire()
        held = _Held(box.lock)
        filled = None
        try:
            slot = box.SLOT_BYTES
            sizes = _schedule(src.nbytes, slot)
            filled = _first_piece(src, box, sizes)
            x, header = self._plan(box, src.nbytes)
            said = announce(header)
        except BaseException:
            if filled is not None:      # (its copy done before another transfer fills the slot)
                filled[0].synchronize()
            held.release()
            raise

        def steps():
            answers = {}
            try:
                yield from self._push(src, dests, box, x, slot, sizes, answers, filled)
            finally:
                held.release()
            yield from self._staged(src, answers, x)
        return held.of(steps()), said

    def send(self, a, dest, tag):
        """Steps of a send of GPUArray `a` to `dest` through this rank's
        mailbox, its first piece queued and its header sent by this call
        (before the steps are driven: the receiver's side starts sooner)."""
        steps, sent = self._posting(a, [dest], lambda h: self.comm.Isend([h, _mpi().BYTE], dest, tag))
        return _then(steps, sent)

    def send_chunks(self, a, dest, tag, chunk, sync=False):
        """Steps of a send of GPUArray `a` to `dest`, a rank of another node:
        a header where the data would go (MPI's matching is the header's),
        then the bytes in chunks of `chunk` on the duplicate, each copied
        down into page-locked memory while the ones before cross the
        network.  `sync`: the header goes synchronously (Ssend)."""
        MPI = _mpi()
        src = a if _contiguous(a) else a.copy()
        n = src.nbytes
        slots = min(_CHUNK_SLOTS, -(-n // chunk))
        x = next(self.ids) % self.tags
        header = _HEADER.pack(_MAGIC, self.key, x, n, chunk, slots, _NO_BOX)
        sent = (self.comm.Issend if sync else self.comm.Isend)([header, MPI.BYTE], dest, tag)
        return _then(self._chunks_out(src, dest, x, chunk, slots), sent)

    def _chunks_out(self, src, dest, x, chunk, slots):
        """Steps that copy `src` down chunk by chunk into `slots` page-locked
        buffers and send each (transfer `x`) once it is down, a buffer
        filled again once its send is done."""
        MPI = _mpi()
        n = src.nbytes
        pieces = -(-n // chunk)
        host, raw = _Scratch.take((slots, chunk), np.uint8)
        events = _Events.take(slots)
        stream = pygpu.current_stream()         # (after the work there that writes `src`)
        sends = collections.deque()             # sends under way, in order
        queued = posted = done = 0              # chunks copied down (or being), sent, sent and done
        try:
            while done < pieces:
                moved = False
                while sends and sends[0].Test():
                    sends.popleft()
                    done += 1
                    moved = True
                while queued < min(pieces, done + slots):
                    at = queued * chunk
                    pygpu.memcpy_dtoh_async(host[queued % slots, :min(chunk, n - at)], src.ptr + at, stream=stream)
                    events[queued % slots].record(stream)
                    queued += 1
                    moved = True
                if posted < queued and events[posted % slots].query():
                    at = posted * chunk
                    sends.append(self.priv.Isend([host[posted % slots, :min(chunk, n - at)], MPI.BYTE],
                                                 dest, 2 * x + _READY))
                    posted += 1
                    moved = True
                if not moved:       # (nothing to do but wait for the oldest send: let the driver block on it)
                    yield sends[0] if posted == queued and sends else None
        finally:
            _release(sends, events, queued > posted, raw)

    def _land(self, owner, fields, peer, buf, land=None):
        """Steps of the receiving side of a transfer in chunks (its header's
        `fields`) from `peer`: into host memory straight, into a GPUArray
        through page-locked buffers, each chunk copied up while the next
        ones arrive."""
        MPI = _mpi()
        _, _, x, n, chunk, slots, _ = fields
        pieces = -(-n // chunk)
        a, gpu, capacity, stream, _, _ = land or _Landing(buf)
        tag = 2 * x + _READY
        if n > capacity or not gpu:
            if n > capacity:        # (each chunk drained, then MPI's error)
                into, raw = _Scratch.take((chunk,), np.uint8)
                try:
                    for k in range(pieces):
                        yield self.priv.Irecv([into, min(chunk, n - k * chunk), MPI.BYTE], peer, tag)
                finally:
                    _Scratch.give(raw)
                return MPI.Exception(MPI.ERR_TRUNCATE)     # (raised by _drive once the rest are done)
            into = np.frombuffer(_split_host(buf), np.uint8)
            recvs = [self.priv.Irecv([into[at:at + chunk], MPI.BYTE], peer, tag) for at in range(0, n, chunk)]
            try:
                for r in recvs:
                    yield r
            finally:
                for r in recvs:
                    _settle(r)
            return None
        dest = a if _contiguous(a) else a.copy()
        host, raw = _Scratch.take((slots, chunk), np.uint8)
        events = _Events.take(slots)
        recvs = collections.deque()             # receives posted, in order
        posted = copied = freed = 0             # chunks asked for, copied up (or being), copied up and done
        try:
            while copied < pieces:
                moved = False
                while freed < copied and events[freed % slots].query():
                    freed += 1
                    moved = True
                while posted < min(pieces, freed + slots):
                    at = posted * chunk
                    recvs.append(self.priv.Irecv([host[posted % slots, :min(chunk, n - at)], MPI.BYTE], peer, tag))
                    posted += 1
                    moved = True
                if recvs and recvs[0].Test():
                    recvs.popleft()
                    at = copied * chunk
                    pygpu.memcpy_htod_async(dest.ptr + at, host[copied % slots, :min(chunk, n - at)], stream=stream)
                    events[copied % slots].record(stream)
                    copied += 1
                    moved = True
                if not moved:       # (every buffer asked for: wait for the oldest)
                    yield recvs[0] if posted == min(pieces, freed + slots) and recvs else None
        finally:
            _release(recvs, events, copied > freed, raw)
        if dest is not a:
            a[...] = dest
        return None

    def bcast(self, owner, buf, root):
        """Steps of a Bcast between ranks that all share this node: the root's
        header goes to all (MPI's Bcast), then each pulls the pieces from the
        root's mailbox.  A root whose buffer is host memory sends no header,
        and MPI broadcasts as before."""
        MPI = _mpi()
        raw = bytearray(_HEADER.size)
        a = _split(buf)[0]
        if self.rank == root and isinstance(a, pygpu.GPUArray):
            others = sorted(set(range(self.comm.Get_size())) - {root})
            steps, _ = self._posting(a, others, lambda h: self.comm.Bcast([bytearray(h), MPI.BYTE], root))
            yield from steps
            return None
        self.comm.Bcast([raw, MPI.BYTE], root)
        fields = _HEADER.unpack(raw)
        if fields[0] != _MAGIC or fields[1] != self.key:     # the root's buffer is host memory
            if self.rank == root:
                return owner._run(lambda s: self.comm.Bcast(s, root), sends=[buf])
            return owner._run(lambda r: self.comm.Bcast(r, root), recvs=[buf])
        return (yield from self._pull(owner, fields, root, buf))

    # -- collectives that move data only: every rank's buffers GPUArrays ----------

    def all_gpu(self, *bufs):
        """Collectively: True if on every rank the buffers given (None
        skipped) are dense GPUArrays (a small allreduce on the duplicate)."""
        mine = all(isinstance(_split(b)[0], pygpu.GPUArray) and _contiguous(_split(b)[0])
                   for b in bufs if b is not None)
        return self.priv.allreduce(mine, op=_mpi().LAND)

    def _headers_to(self, root):
        return lambda h: self.priv.gather(h, root=root)

    def gather(self, owner, sendbuf, recvbuf, root):
        """The steps of a Gather (sendbuf may be IN_PLACE on the root): each
        rank's header gathered to the root (on the duplicate), then the root
        pulls every rank's bytes into its part of recvbuf at once."""
        if self.rank != root:
            steps, _ = self._posting(_split(sendbuf)[0], [root], self._headers_to(root))
            return [steps]
        headers = self.priv.gather(None, root=root)
        out = _bytes_of(_split(recvbuf)[0])
        n = out.nbytes // self.comm.Get_size()
        if sendbuf is not _mpi().IN_PLACE:
            out[root * n:(root + 1) * n] = _bytes_of(_split(sendbuf)[0])
        return [self._pull(owner, _HEADER.unpack(headers[r]), r, out[r * n:(r + 1) * n])
                for r in range(self.comm.Get_size()) if r != root]

    def scatter(self, owner, sendbuf, recvbuf, root):
        """The steps of a Scatter (recvbuf may be IN_PLACE on the root): the
        root sends each rank its part in turn, the header on the duplicate."""
        size = self.comm.Get_size()
        if self.rank != root:
            raw = bytearray(_HEADER.size)
            self.priv.Recv([raw, _mpi().BYTE], root, self.coll_tag)
            return [self._pull(owner, _HEADER.unpack(raw), root, recvbuf)]
        src = _bytes_of(_split(sendbuf)[0])
        n = src.nbytes // size
        if recvbuf is not _mpi().IN_PLACE:
            _bytes_of(_split(recvbuf)[0])[...] = src[root * n:(root + 1) * n]

        def turns():
            for r in range(size):
                if r != root:
                    steps, _ = self._posting(src[r * n:(r + 1) * n], [r],
                                             lambda h, r=r: self.priv.Send([h, _mpi().BYTE], r, self.coll_tag))
                    yield from steps
        return [turns()]

    def allgather(self, owner, sendbuf, recvbuf):
        """The steps of an Allgather (sendbuf may be IN_PLACE): every rank's
        header to every rank, then each pushes its part to all the others
        while it pulls theirs."""
        size, me = self.comm.Get_size(), self.rank
        out = _bytes_of(_split(recvbuf)[0])
        n = out.nbytes // size
        mine = out[me * n:(me + 1) * n]
        if sendbuf is not _mpi().IN_PLACE:
            mine[...] = _bytes_of(_split(sendbuf)[0])
        push, headers = self._posting(mine, [r for r in range(size) if r != me], self.priv.allgather)
        return [push] + [self._pull(owner, _HEADER.unpack(headers[r]), r, out[r * n:(r + 1) * n])
                         for r in range(size) if r != me]

    def alltoall(self, owner, sendbuf, recvbuf):
        """The steps of an Alltoall: each rank sends the others their parts
        in turn (to the next rank first, so that not all start with the
        same), each header on the duplicate, while it pulls the parts sent
        to it as their headers come."""
        size, me = self.comm.Get_size(), self.rank
        src, out = _bytes_of(_split(sendbuf)[0]), _bytes_of(_split(recvbuf)[0])
        n = src.nbytes // size
        out[me * n:(me + 1) * n] = src[me * n:(me + 1) * n]

        def turns():
            for k in range(1, size):
                d = (me + k) % size
                steps, _ = self._posting(src[d * n:(d + 1) * n], [d],
                                         lambda h, d=d: self.priv.Send([h, _mpi().BYTE], d, self.coll_tag))
                yield from steps

        def from_(s):
            raw = bytearray(_HEADER.size)
            yield self.priv.Irecv([raw, _mpi().BYTE], s, self.coll_tag)
            return (yield from self._pull(owner, _HEADER.unpack(raw), s, out[s * n:(s + 1) * n]))

        return [turns()] + [from_(s) for s in range(size) if s != me]

    # -- receiving ----------------------------------------------------------------

    def recv(self, owner, buf, source, tag, status):
        """Steps of a receive into `buf` (any buffer): a header starts a
        transfer from a mailbox; any other message is received as it is."""
        MPI = _mpi()
        probed = MPI.Status()
        try:                        # (made while no header has come: it follows one at once)
            land = _Landing(buf)
        except (TypeError, ValueError, BufferError):
            land = None             # (one MPI takes but a memoryview does not, as [None, 0, type]: a
                                    # plain message goes there as before, a transfer fails in _pull as before)
        while True:
            msg = self.comm.Improbe(source, tag, probed)
            if msg is not None:
                break
            yield None
        if probed.Get_count(MPI.BYTE) != _HEADER.size:
            b = _Buffers(owner.cuda_aware)
            target = b.recv(buf)
            msg.Recv(target, status)
            b.finish()
            return None
        raw = bytearray(_HEADER.size)
        msg.Recv([raw, MPI.BYTE], status)
        fields = _HEADER.unpack(raw)
        if fields[0] != _MAGIC or fields[1] != self.key:
            _write_bytes(buf, raw, owner.cuda_aware)     # a plain message of that size
            return None
        if status is not None:
            status.Set_elements(MPI.BYTE, fields[3])
        if fields[6] == _NO_BOX:
            return (yield from self._land(owner, fields, probed.Get_source(), buf, land))
        return (yield from self._pull(owner, fields, probed.Get_source(), buf, land))

    def _pull(self, owner, fields, peer, buf, land=None):
        """Steps of the receiving side of a transfer (its header's `fields`)
        from `peer`'s mailbox into `buf` (`land`: its _Landing, if made
        already), giving each slot back once read."""
        MPI = _mpi()
        _, _, x, n, slot, slots, handle = fields
        sizes = _schedule(n, slot)
        pieces, starts = len(sizes), list(itertools.accumulate(sizes, initial=0))
        a, gpu, capacity, stream, reply, ready = land or _Landing(buf)
        box = self.opened(handle)
        answer = _TRUNCATED if n > capacity else (_STAGE if box is None else None)
        if answer is not None:
            reply[0] = answer
            self.priv.Send(reply, peer, 2 * x + _FREED)
            for _ in range(min(slots, pieces)):         # the pieces it sent before it knew
                yield self.priv.Irecv(ready, peer, 2 * x + _READY)
            if answer == _TRUNCATED:
                return MPI.Exception(MPI.ERR_TRUNCATE)     # (raised by _drive once the rest are done)
            b = _Buffers(owner.cuda_aware)
            target = _split_host(b.recv(buf))
            yield self.priv.Irecv([target, n, MPI.BYTE], peer, 2 * x + _READY)
            b.finish()
            return None
        dest = a if gpu and _contiguous(a) else (a.copy() if gpu else None)
        host = None if gpu else np.frombuffer(_split_host(buf), np.uint8)
        done = _Events.take(min(slots, pieces))
        queued = collections.deque()    # pieces copied out or being copied, their slots not yet given back
        k = 0
        arrived = self.priv.Irecv(ready, peer, 2 * x + _READY)
        try:
            while k < pieces or queued:
                moved = False
                if k < pieces and arrived.Test():
                    at = (k % slots) * slot
                    if dest is not None:
                        pygpu.memcpy_dtod_async(dest.ptr + starts[k], box.ptr + at, sizes[k], stream=stream)
                    else:           # (into pageable memory: landed when the call returns)
                        pygpu.memcpy_dtoh(host[starts[k]:starts[k + 1]], box.ptr + at, stream=stream)
                    done[k % slots].record(stream)
                    queued.append(k)
                    k += 1
                    if k < pieces:
                        arrived = self.priv.Irecv(ready, peer, 2 * x + _READY)
                    moved = True
                while queued and done[queued[0] % slots].query():     # give each slot back once read
                    reply[0] = queued.popleft()
                    self.priv.Send(reply, peer, 2 * x + _FREED)
                    moved = True
                if not moved:
                    yield None
        finally:            # (steps closed early: no receive left writing into `ready`)
            _settle(arrived)
        _Events.give(done)
        if dest is not None and dest is not a:
            a[...] = dest
        return None


class _Landing(tuple):
    """What a receive into `buf` needs before its header is read: (the
    array, whether it is a GPUArray, its capacity in bytes, the current
    stream, and the 8-byte buffers of the slots' messages out and in)."""

    def __new__(cls, buf):
        a = _split(buf)[0]
        gpu = isinstance(a, pygpu.GPUArray)
        capacity = a.nbytes if gpu else memoryview(_split_host(buf)).nbytes
        return super().__new__(cls, (a, gpu, capacity, pygpu.current_stream(),
                                     np.zeros(1, np.int64), np.zeros(1, np.int64)))


def _across_nodes(comm):
    """`comm` (a Comm) as if every other rank were on another node: its
    GPUArrays go to them staged, in chunks.  For the benchmarks and tests,
    which have one node; give it a communicator of its own (comm.Dup()):
    what a communicator's ranks know of each other is kept with it."""
    if comm._ipc is not None:
        comm._ipc.local, comm._ipc.pids = set(), {}
    return comm


def _nbytes(buf):
    """The bytes of a buffer argument (the same on every rank of a collective)."""
    a = _split(buf)[0]
    if isinstance(a, pygpu.GPUArray):
        return a.nbytes
    try:
        return memoryview(_split_host(buf)).nbytes
    except TypeError:
        return 0


def _bytes_of(a):
    """A dense GPUArray's bytes as a flat uint8 GPUArray (a view)."""
    return a.reshape(-1, order="A").view(np.uint8)


def _split_host(buf):
    """The host object of a buffer argument (an array, or [array, ...])."""
    return buf[0] if isinstance(buf, (list, tuple)) else buf


def _write_bytes(buf, raw, direct):
    """Put the bytes of a message received elsewhere where MPI would have."""
    b = _Buffers(direct)
    target = _split_host(b.recv(buf))
    if isinstance(target, pygpu.GPUArray):
        pygpu.memcpy_htod(target.ptr, np.frombuffer(raw, np.uint8)[:min(len(raw), target.nbytes)])
    else:
        view = memoryview(target).cast("B")
        if len(raw) > view.nbytes:
            raise _mpi().Exception(_mpi().ERR_TRUNCATE)
        view[:len(raw)] = raw
    b.finish()
