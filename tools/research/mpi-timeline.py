"""Where the time of a device-to-device MPI message goes (pygpu.mpi's mailboxes).

    python tools/research/mpi-timeline.py links [SIZE...]  # one process, 2 devices or more
    python tools/research/mpi-timeline.py calls            # one process: what the calls cost
    mpirun -np 2 python tools/research/mpi-timeline.py     # 2 ranks of one node

`links`: the same bytes between devices 0 and 1 copied by the engine of
the device that reads over the link ("pull": the copy on the destination's
stream) and of the one that writes over it ("push": on the source's
stream), as memcpy_peer_async; GB/s, median of several, sizes 4 MiB-1 GiB
(or those given, such as 4M).
The mailboxes pull (the receiver reads the sender's mailbox).

`calls`: microseconds each call of a mailbox's sender costs its caller
(median of 200): current_stream(), Event(), memcpy_dtod_async of 8 MiB
from pool memory into memory of mem_alloc(ipc=True) (as the mailbox
does), the same between two pool allocations, record, query; and the CPUs
this process may run on (mpirun binds each of 2 ranks to one core).

Under mpirun: a ping-pong of each size (1 MiB, 64 MiB) with every MPI
call, copy and event of pygpu.mpi logged with time.perf_counter() (one
clock for every process of a host), and rank 0 prints one round trip's
merged timeline: microseconds from its start, the rank, what happened.
"""
import sys
import time

import numpy as np

import pygpu


def links(sizes):
    if pygpu.device_count() < 2:
        raise SystemExit("links: needs 2 devices")
    print("bytes, GB/s: pull (copy on the destination's stream), push (on the source's)")
    for n in sizes or (4 << 20, 8 << 20, 16 << 20, 64 << 20, 1 << 30):
        with pygpu.Device(0):
            a = pygpu.mem_alloc(n)
            s0 = pygpu.Stream()
        with pygpu.Device(1):
            b = pygpu.mem_alloc(n)
            s1 = pygpu.Stream()
        row = []
        for name, s, dev in (("pull", s1, 1), ("push", s0, 0)):
            times = []
            for _ in range(12):
                with pygpu.Device(dev):
                    e0, e1 = pygpu.Event(), pygpu.Event()
                    e0.record(s)
                    for _ in range(4):
                        pygpu.memcpy_peer_async(b.ptr, a.ptr, n, 1, 0, stream=s)
                    e1.record(s)
                    e1.synchronize()
                    times.append(e0.time_till(e1) / 1e3 / 4)
            row.append(f"{name} {n / sorted(times)[len(times) // 2] / 1e9:7.1f}")
        print(f"{n >> 20:6d} MiB  " + "  ".join(row))


def calls():
    import os
    print(f"cpus online {os.cpu_count()}, this process may use {len(os.sched_getaffinity(0))}")
    n = 8 << 20
    box = pygpu.mem_alloc(4 * n, ipc=True)
    src, dst = pygpu.empty(n, np.uint8), pygpu.empty(n, np.uint8)
    stream = pygpu.current_stream()
    ev = pygpu.Event(timing=False)
    dev = pygpu.get_device()
    cases = {
        "current_stream()": lambda: pygpu.current_stream(),
        "Event(timing=False)": lambda: pygpu.Event(timing=False),
        "memcpy_dtod_async(ipc mailbox, pool)": lambda: pygpu.memcpy_dtod_async(box.ptr + n, src.ptr, n, stream=stream),
        "memcpy_dtod_async(pool, pool)": lambda: pygpu.memcpy_dtod_async(dst.ptr, src.ptr, n, stream=stream),
        "memcpy_peer_async(ipc mailbox, pool)": lambda: pygpu.memcpy_peer_async(box.ptr + n, src.ptr, n, dev, dev,
                                                                                stream=stream),
        "event.record(stream)": lambda: ev.record(stream),
        "event.query()": lambda: ev.query(),
    }
    try:
        import cupy
        sp = stream.handle
        cases["cupy: runtime.memcpyAsync (raw, pool)"] = lambda: cupy.cuda.runtime.memcpyAsync(
            dst.ptr, src.ptr, n, cupy.cuda.runtime.memcpyDeviceToDevice, sp)
    except ImportError:
        pass
    for name, fn in cases.items():
        times = []
        for i in range(200):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
            if i % 8 == 7:
                stream.synchronize()
        times.sort()
        print(f"{name:40s} median {times[100] * 1e6:7.1f} us  p90 {times[180] * 1e6:7.1f} us")


class _Log:
    def __init__(self, rank):
        self.rank, self.items, self.on = rank, [], False

    def __call__(self, what):
        if self.on:
            self.items.append((time.perf_counter(), self.rank, what))


class _Req:
    def __init__(self, req, log, what):
        self.req, self.log, self.what = req, log, what

    def Test(self):
        done = self.req.Test()
        if done:
            self.log(f"test true: {self.what}")
        return done

    def Wait(self):
        self.req.Wait()
        self.log(f"waited: {self.what}")


class _Comm:
    def __init__(self, comm, log, name):
        self.comm, self.log, self.name = comm, log, name

    def __getattr__(self, attr):
        return getattr(self.comm, attr)

    def Send(self, buf, dest, tag=0):
        self.comm.Send(buf, dest, tag)
        self.log(f"{self.name}.Send to {dest} tag {tag}")

    def Isend(self, buf, dest, tag=0):
        self.log(f"{self.name}.Isend to {dest} tag {tag}")
        return _Req(self.comm.Isend(buf, dest, tag), self.log, f"{self.name}.Isend tag {tag}")

    def Irecv(self, buf, source, tag):
        return _Req(self.comm.Irecv(buf, source, tag), self.log, f"{self.name}.Irecv from {source} tag {tag}")

    def Improbe(self, source, tag, status):
        m = self.comm.Improbe(source, tag, status)
        if m is not None:
            self.log(f"{self.name}.Improbe found")
        return m


def timeline():
    from mpi4py import MPI
    import pygpu.mpi as pm
    world = MPI.COMM_WORLD
    rank = world.rank
    pm.select_device(world)
    comm = pm.Comm(world, cuda_aware=False)
    log = _Log(rank)
    node = comm._ipc
    node.priv = _Comm(node.priv, log, "priv")
    node.comm = _Comm(node.comm, log, "comm")
    real_copy, real_event = pygpu.memcpy_dtod_async, pygpu.Event

    def copy(dst, src, n, stream=None):
        log(f"memcpy_dtod_async {n >> 10} KiB called")
        real_copy(dst, src, n, stream=stream)
        log(f"memcpy_dtod_async {n >> 10} KiB queued")

    class Event(real_event):
        def query(self):
            done = super().query()
            if done:
                log("event query true")
            return done

        def synchronize(self):
            super().synchronize()
            log("event synchronized")
            return self

    pygpu.memcpy_dtod_async, pygpu.Event = copy, Event
    for n in (1 << 20, 64 << 20):
        a = pygpu.to_gpu(np.arange(n // 8, dtype=np.int64) + rank)
        b = pygpu.empty(n // 8, np.int64)
        for r in range(4):
            log.items.clear()
            world.Barrier()
            log.on = True
            t0 = time.perf_counter()
            if rank == 0:
                comm.Send(a, 1)
                log("Send returned")
                comm.Recv(b, 1)
                log("Recv returned")
            else:
                comm.Recv(b, 0)
                log("Recv returned")
                comm.Send(a, 0)
                log("Send returned")
            t1 = time.perf_counter()
            log.on = False
            everyone = world.gather((t0, t1, log.items), root=0)
        if rank == 0:
            start = everyone[0][0]
            print(f"== {n >> 20} MiB: round trip {(everyone[0][1] - start) * 1e6:.0f} us "
                  f"(the last of 4); copy at 380 GB/s would take {n / 380e9 * 1e6:.0f} us a way")
            merged = sorted(item for _, _, items in everyone for item in items)
            for t, r, what in merged:
                print(f"{(t - start) * 1e6:9.1f}  {r}  {what}")
        assert np.array_equal(b.get(), np.arange(n // 8, dtype=np.int64) + 1 - rank)
    pygpu.memcpy_dtod_async, pygpu.Event = real_copy, real_event


if __name__ == "__main__":
    if sys.argv[1:2] == ["links"]:
        from pygpu.bench import parse_size
        links([parse_size(a) for a in sys.argv[2:]])
    elif sys.argv[1:] == ["calls"]:
        calls()
    else:
        timeline()
