"""PyCUDA's MPI tutorial program, with PyGPU: one process per GPU.

Rank 0 scatters a NumPy array; each rank takes its part onto its own GPU,
works on it there, passes its result to the next rank GPU to GPU, and rank
0 gathers everything and checks it.

    mpirun -np 2 python3 examples/mpi_scatter_gather.py

The work here is done by copies on the device (a reversed view made dense);
your own kernel goes in the same place, launched on ``x.ptr`` (see
examples/ctypes_kernel).  With a CUDA-aware MPI the GPUArrays go to MPI
directly; otherwise pygpu.mpi stages them through page-locked host memory
(``PYGPU_MPI_CUDA_AWARE=0/1`` overrides what the MPI library reports).
"""
# requires: mpi4py, mpirun
# run: mpirun -np 2
import numpy as np
from mpi4py import MPI

import pygpu
import pygpu.mpi

comm = pygpu.mpi.Comm(MPI.COMM_WORLD)
rank, size = comm.rank, comm.size
device = pygpu.mpi.select_device(comm)          # local rank -> its own GPU
N = 1 << 20                                     # elements per rank

# Rank 0 holds the data; the other ranks pass None, as in mpi4py.
data = np.arange(size * N, dtype=np.float32).reshape(size, N) if rank == 0 else None

# Scatter from rank 0's host memory straight into each rank's GPU array.
x = pygpu.empty(N, np.float32)
comm.Scatter(data, x, root=0)

# Work on the GPU: here, reverse the part (a strided view copied on the
# device).  A kernel would be called here instead: kernel(x.ptr, N, stream.ptr).
y = x[::-1].copy()

# GPU to GPU: pass the result to the next rank, receive the previous one's.
z = pygpu.empty_like(y)
comm.Sendrecv(y, dest=(rank + 1) % size, recvbuf=z, source=(rank - 1) % size)

# A reduction over GPU arrays: every rank gets the element-wise sum.
total = pygpu.empty_like(z)
comm.Allreduce(z, total, op=MPI.SUM)

# Gather every rank's part back into rank 0's host memory, and check.
result = np.empty((size, N), np.float32) if rank == 0 else None
comm.Gather(z, result, root=0)
devices = comm.gather(int(device), root=0)     # (lower-case: mpi4py's pickling calls)

if rank == 0:
    expect = np.stack([data[(r - 1) % size][::-1] for r in range(size)])
    assert np.array_equal(result, expect), "gathered data differ"
    assert np.array_equal(total.get(), data[:, ::-1].sum(axis=0)), "all-reduce differs"
    how = "direct" if comm.cuda_aware else "staged through pinned host memory"
    print(f"mpi_scatter_gather: OK, {size} ranks x {N} float32 on {pygpu.backend} devices {devices}, "
          f"GPU buffers {how}")
