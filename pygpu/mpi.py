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

Two ways a GPUArray reaches MPI:

* **direct**, when the MPI library is CUDA-aware (or ROCm-aware for HIP):
  the array goes to mpi4py as it is, through ``__cuda_array_interface__``
  or DLPack, and MPI reads and writes device memory itself.  Views that are
  not contiguous go through a contiguous device copy first (MPI needs one
  block).  The host backend is direct: its device memory is host memory.
* **staged** otherwise: sends copy the array into page-locked host memory
  (``get(pagelocked=True)``) and hand MPI that; receives land in page-locked
  memory and are copied up (``set``) when MPI returns.  Nothing else changes
  for the caller.  The non-blocking calls (``Isend``, ``Irecv``...) are not
  wrapped in this mode: their buffers would have to outlive the call.

``cuda_aware()`` says which holds: ``PYGPU_MPI_CUDA_AWARE=1`` or ``0`` decides;
else the MPI library is asked (``MPIX_Query_cuda_support``, which Open MPI
and MPICH provide, or their ROCm/HIP forms); a library that cannot say is
taken as not aware.  ``Comm(comm, cuda_aware=...)`` overrides it per
communicator.
"""
import ctypes
import os

import numpy as np

import pygpu

__all__ = ["Comm", "cuda_aware", "select_device", "local_rank", "IN_PLACE"]

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


class _Buffers:
    """Turns the GPUArrays of one call into what MPI gets, and copies
    received data back to them afterwards."""

    def __init__(self, direct):
        self.direct = direct
        self.writebacks = []

    def send(self, buf):
        a, rest, is_list = _split(buf)
        if not isinstance(a, pygpu.GPUArray):
            return buf
        if self.direct:
            return _join(a if _contiguous(a) else a.copy(), rest, is_list)
        return _join(a.get(pagelocked=True), rest, is_list)

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
        elif initial:
            tmp = a.get(pagelocked=True)
        else:
            tmp = pygpu.pagelocked_empty(a.shape, a.dtype)
        self.writebacks.append((a, tmp))
        return _join(tmp, rest, is_list)

    def finish(self):
        for a, tmp in self.writebacks:
            a[...] = tmp
        self.writebacks.clear()


class Comm:
    """An mpi4py communicator whose buffer methods take GPUArrays.

    ``cuda_aware``: None asks ``cuda_aware()``; True passes GPUArrays to MPI
    directly; False stages them through page-locked host memory."""

    def __init__(self, comm, cuda_aware=None):
        if isinstance(comm, Comm):
            comm = comm.comm
        self.comm = comm
        self.cuda_aware = _library_cuda_aware() if cuda_aware is None else bool(cuda_aware)

    def __getattr__(self, name):
        return getattr(self.comm, name)

    def __repr__(self):
        how = "direct" if self.cuda_aware else "staged through pinned host memory"
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
    def Send(self, buf, dest, tag=0):
        return self._run(lambda s: self.comm.Send(s, dest, tag), sends=[buf])

    def Ssend(self, buf, dest, tag=0):
        return self._run(lambda s: self.comm.Ssend(s, dest, tag), sends=[buf])

    def Recv(self, buf, source=None, tag=None, status=None):
        MPI = _mpi()
        source = MPI.ANY_SOURCE if source is None else source
        tag = MPI.ANY_TAG if tag is None else tag
        return self._run(lambda r: self.comm.Recv(r, source, tag, status), recvs=[buf])

    def Sendrecv(self, sendbuf, dest, sendtag=0, recvbuf=None, source=None, recvtag=None, status=None):
        MPI = _mpi()
        source = MPI.ANY_SOURCE if source is None else source
        recvtag = MPI.ANY_TAG if recvtag is None else recvtag
        return self._run(lambda s, r: self.comm.Sendrecv(s, dest, sendtag, r, source, recvtag, status),
                         sends=[sendbuf], recvs=[recvbuf])

    # collectives
    def Bcast(self, buf, root=0):
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

    def Scatter(self, sendbuf, recvbuf, root=0):
        if self._in_place(recvbuf):
            return self._run(lambda s: self.comm.Scatter(s, recvbuf, root), sends=[sendbuf])
        return self._run(lambda s, r: self.comm.Scatter(s, r, root), sends=[sendbuf], recvs=[recvbuf])

    def Gather(self, sendbuf, recvbuf, root=0):
        return self._reduce_like(self.comm.Gather, sendbuf, recvbuf, root)

    def Allgather(self, sendbuf, recvbuf):
        return self._reduce_like(self.comm.Allgather, sendbuf, recvbuf)

    def Alltoall(self, sendbuf, recvbuf):
        return self._reduce_like(self.comm.Alltoall, sendbuf, recvbuf)
