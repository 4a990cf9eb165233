"""Where a device-to-device MPI message's microseconds go inside pygpu.mpi.

    mpirun -np 2 python tools/research/mpi-marks.py [SIZE]     # default 64M

Loads a copy of pygpu/mpi.py with a clock reading (perf_counter, one clock
for the processes of a host) after each of the lines named in MARKS, runs
a ping-pong of SIZE bytes between the two ranks (one GPU each), and rank
0 prints the last round trip's readings of both ranks merged: microseconds
from the start, the rank, the line read after.  Nothing is wrapped, so the
readings cost only the clock (about 0.1 us each).
"""
import importlib.util
import os
import sys
import time

import numpy as np

import pygpu

# (the text of a line of pygpu/mpi.py, stripped) -> label
MARKS = {
    "def Send(self, buf, dest, tag=0):": "Send called",
    "src = a if _contiguous(a) else a.copy()": "_posting",
    "filled = _Events.take(min(box.SLOTS, len(sizes)))": "events taken",
    "pygpu.memcpy_dtod_async(box.mem.ptr, src.ptr, sizes[0], stream=stream)": "first piece queued",
    "said = announce(header)": "header sent",
    "ready[0] = k": "announcing",
    "told[d] += 1": "announced",
    "pygpu.memcpy_dtod_async(box.mem.ptr + at, src.ptr + starts[queued], sizes[queued], stream=stream)": "next piece queued",
    "if msg is not None:": "header found",
    "msg.Recv([raw, MPI.BYTE], status)": "header received",
    "arrived = self.priv.Irecv(ready, peer, 2 * x + _READY)": "ready posted",
    "if k < pieces and arrived.Test():": "tested",
    "pygpu.memcpy_dtod_async(dest.ptr + starts[k], box.ptr + at, sizes[k], stream=stream)": "pull queued",
    "self.priv.Send(reply, peer, 2 * x + _FREED)": "slot given back",
    "_Events.give(done)": "pulls done",
}


def load():
    path = os.path.join(os.path.dirname(pygpu.__file__), "mpi.py")
    out, hit = [], set()
    for line in open(path):
        out.append(line)
        key = line.strip()
        if key in MARKS:
            indent = len(line) - len(line.lstrip())
            if key.startswith("def "):
                indent += 4
            elif key.endswith(":"):
                indent += 4
            out.append(" " * indent + f"_MARK({MARKS[key]!r})\n")
            hit.add(key)
    missing = set(MARKS) - hit
    if missing:
        raise SystemExit(f"mpi-marks: lines not found in {path}: {sorted(missing)}")
    spec = importlib.util.spec_from_loader("pygpu._mpi_marks", loader=None)
    mod = importlib.util.module_from_spec(spec)
    mod.__dict__["_MARK"] = lambda what: LOG.append((time.perf_counter(), what))
    exec(compile("".join(out), path + " (marked)", "exec"), mod.__dict__)
    return mod


LOG = []


def main():
    from mpi4py import MPI
    from pygpu.bench import parse_size
    n = parse_size(sys.argv[1]) if len(sys.argv) > 1 else 64 << 20
    world = MPI.COMM_WORLD
    pm = load()
    pm.select_device(world)
    comm = pm.Comm(world, cuda_aware=False)
    a = pygpu.to_gpu(np.arange(n // 8, dtype=np.int64) + world.rank)
    b = pygpu.empty(n // 8, np.int64)
    for _ in range(8):
        world.Barrier()
        LOG.clear()
        t0 = time.perf_counter()
        if world.rank == 0:
            comm.Send(a, 1)
            LOG.append((time.perf_counter(), "Send returned"))
            comm.Recv(b, 1)
            LOG.append((time.perf_counter(), "Recv returned"))
        else:
            comm.Recv(b, 0)
            LOG.append((time.perf_counter(), "Recv returned"))
            comm.Send(a, 0)
            LOG.append((time.perf_counter(), "Send returned"))
        t1 = time.perf_counter()
        everyone = world.gather((t0, t1, list(LOG)), root=0)
    assert np.array_equal(b.get(), np.arange(n // 8, dtype=np.int64) + 1 - world.rank)
    if world.rank == 0:
        start = everyone[0][0]
        print(f"== {n >> 20} MiB: round trip {(everyone[0][1] - start) * 1e6:.0f} us (the last of 8)")
        for t, r, what in sorted((t, r, w) for r, (_, _, items) in enumerate(everyone) for t, w in items):
            print(f"{(t - start) * 1e6:9.1f}  {r}  {what}")


if __name__ == "__main__":
    main()
