"""pygpu.mpi: GPUArrays in mpi4py calls, direct and staged, and the MPI
example run with mpirun, one device per rank.

In-process tests use MPI.COMM_SELF (a communicator of one: sends reach the
same process), so they run under plain pytest; the example runs under
`mpirun -np 2` where mpirun exists.  Everything skips without mpi4py.
"""
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

import pygpu

MPI = pytest.importorskip("mpi4py.MPI")
import pygpu.mpi  # noqa: E402  (after the skip)

from conftest import clean_env, PACKAGE_ROOT  # noqa: E402

# (the checkout's examples: with an installed wheel, PACKAGE_ROOT is site-packages)
EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "mpi_scatter_gather.py")
MODES = [pytest.param(True, id="direct"), pytest.param(False, id="staged")]
# Staged works everywhere; direct needs an MPI that reads device memory.
if pygpu.backend != "host" and not pygpu.mpi.cuda_aware():
    MODES[0] = pytest.param(True, id="direct", marks=pytest.mark.skip(reason="this MPI is not CUDA-aware"))


@pytest.fixture(params=MODES)
def comm(request):
    return pygpu.mpi.Comm(MPI.COMM_SELF, cuda_aware=request.param)


def test_sendrecv_to_self(comm, rng):
    h = rng.standard_normal((8, 16)).astype(np.float32)
    a = pygpu.to_gpu(h)
    b = pygpu.zeros((8, 16), np.float32)
    comm.Sendrecv(a, dest=0, recvbuf=b, source=0)
    np.testing.assert_array_equal(b.get(), h)
    # strided views both ways: sent as a dense copy, received through one
    c = pygpu.zeros((8, 64), np.float32)
    comm.Sendrecv(a[::2, ::-1], dest=0, recvbuf=c[::2, ::4], source=0)
    expect = np.zeros((8, 64), np.float32)
    expect[::2, ::4] = h[::2, ::-1]
    np.testing.assert_array_equal(c.get(), expect)


def test_buffer_specs_and_host_buffers(comm):
    a = pygpu.to_gpu(np.arange(10, dtype=np.int32))
    out = np.zeros(10, np.int32)
    comm.Sendrecv([a, MPI.INT], dest=0, recvbuf=out, source=0)
    np.testing.assert_array_equal(out, np.arange(10))
    b = pygpu.zeros(10, np.int32)
    comm.Sendrecv(np.arange(10, dtype=np.int32) * 3, dest=0, recvbuf=[b, 10, MPI.INT], source=0)
    np.testing.assert_array_equal(b.get(), np.arange(10) * 3)


def test_collectives(comm):
    x = pygpu.to_gpu(np.arange(6.0))
    comm.Bcast(x, root=0)
    np.testing.assert_array_equal(x.get(), np.arange(6.0))
    y = pygpu.zeros(6)
    comm.Allreduce(x, y, op=MPI.SUM)
    np.testing.assert_array_equal(y.get(), np.arange(6.0))
    comm.Allreduce(pygpu.mpi.IN_PLACE, y, op=MPI.MAX)
    np.testing.assert_array_equal(y.get(), np.arange(6.0))
    r = pygpu.zeros(6)
    comm.Reduce(x[::-1], r, op=MPI.SUM, root=0)
    np.testing.assert_array_equal(r.get(), np.arange(6.0)[::-1])
    part = pygpu.zeros(6)
    comm.Scatter(np.arange(6.0) + 1, part, root=0)
    np.testing.assert_array_equal(part.get(), np.arange(6.0) + 1)
    g = pygpu.zeros(6)
    comm.Gather(part, g, root=0)
    comm.Allgather(part, g)
    comm.Alltoall(part, g)
    np.testing.assert_array_equal(g.get(), np.arange(6.0) + 1)


def test_the_wrapper_passes_the_rest_through(comm):
    assert comm.rank == 0 and comm.size == 1
    comm.Barrier()
    assert comm.bcast("x", root=0) == "x"
    assert ("direct" if comm.cuda_aware else "staged") in repr(comm)
    assert pygpu.mpi.Comm(comm).comm is MPI.COMM_SELF


def test_staged_leaves_no_pinned_memory_in_use():
    comm = pygpu.mpi.Comm(MPI.COMM_SELF, cuda_aware=False)
    a = pygpu.to_gpu(np.ones(1 << 18))
    b = pygpu.empty_like(a)
    in_use = pygpu.pinned_pool_stats()["in_use"]       # (the staging pipeline's buffers stay)
    for _ in range(5):
        comm.Sendrecv(a, dest=0, recvbuf=b, source=0)
    del a, b
    import gc
    gc.collect()
    assert pygpu.pinned_pool_stats()["in_use"] == in_use


def test_staged_messages_reuse_their_page_locked_buffers(rng):
    """The staged path keeps its page-locked buffers: messages of random
    sizes, dtypes and layouts arrive whole through buffers kept from earlier
    (larger) ones, a thread keeps at most KEEP, and free_staging lets go."""
    comm = pygpu.mpi.Comm(MPI.COMM_SELF, cuda_aware=False)
    pygpu.mpi.free_staging()
    kept = pygpu.mpi._Scratch._free
    big = pygpu.to_gpu(rng.integers(0, 255, 3 << 20, dtype=np.uint8))
    out = pygpu.zeros(3 << 20, np.uint8)
    comm.Sendrecv(big, dest=0, recvbuf=out, source=0)
    np.testing.assert_array_equal(out.get(), big.get())
    assert len(kept()) == 2 and all(raw.nbytes >= 3 << 20 for raw in kept())
    first = sorted(raw.ctypes.data for raw in kept())
    for _ in range(20):
        dtype = rng.choice([np.uint8, np.int16, np.float32, np.complex128])
        shape = tuple(int(n) for n in rng.integers(1, 40, rng.integers(1, 4)))
        h = (rng.standard_normal(shape) * 100).astype(dtype)
        a = pygpu.to_gpu(h)
        if a.ndim > 1 and rng.random() < 0.5:           # a transposed or strided view
            a, h = a.T, h.T
        b = pygpu.zeros(h.shape, dtype)
        comm.Sendrecv(a[::-1], dest=0, recvbuf=b, source=0)
        np.testing.assert_array_equal(b.get(), h[::-1])
        host = np.zeros(h.shape, dtype)
        comm.Sendrecv(a, dest=0, recvbuf=host, source=0)
        np.testing.assert_array_equal(host, h)
    # every one of those fit the first two buffers: nothing new was page-locked
    assert sorted(raw.ctypes.data for raw in kept()) == first
    x = pygpu.zeros(6)
    comm.Allreduce(pygpu.to_gpu(np.arange(6.0)), x, op=MPI.SUM)      # (send and receive buffers at once)
    np.testing.assert_array_equal(x.get(), np.arange(6.0))
    for n in range(1, 4):           # messages larger each time: at most KEEP stay, the largest
        a = pygpu.to_gpu(np.full((3 << 20) + (n << 20), n, np.uint8))
        b = pygpu.empty_like(a)
        comm.Sendrecv(a, dest=0, recvbuf=b, source=0)
        np.testing.assert_array_equal(b.get(), a.get())
    assert len(kept()) == pygpu.mpi._Scratch.KEEP
    assert min(raw.nbytes for raw in kept()) >= 5 << 20
    assert len(kept()) == pygpu.mpi._Scratch.KEEP
    pygpu.mpi.free_staging()
    assert kept() == []


def test_the_pieces_of_a_transfer_are_whole_slots(rng):
    """Both ends cut a transfer into the same pieces from its header: whole
    slots, the last what is left; together exactly the bytes."""
    MiB = 1 << 20
    for n in [1, 4 * MiB, 4 * MiB + 1, 64 * MiB] + [int(x) for x in rng.integers(1, 1 << 31, 40)]:
        for slot in (1 * MiB, 8 * MiB, 32 * MiB):
            sizes = pygpu.mpi._schedule(n, slot)
            assert sum(sizes) == n and all(s == slot for s in sizes[:-1]) and 0 < sizes[-1] <= slot, (n, slot)
            assert len(sizes) == -(-n // slot)
    assert pygpu.mpi._schedule(64 * MiB, 32 * MiB) == [32 * MiB, 32 * MiB]
    assert pygpu.mpi._schedule(16 * MiB, 32 * MiB) == [16 * MiB]


def test_a_push_to_several_ranks_yields_once_one_of_them_is_done():
    """A push to several ranks whose first gave every slot back while another
    has not: it asks the first no more (a completed request tests true for
    ever, and a loop that kept finding it so never yielded, starving the
    pulls beside it: an Allgather of 3 ranks hung so), and yields while it
    waits for the other.  Closed part way (as when the steps beside it
    raise), it leaves no receive pending: MPI would write into a buffer
    freed with the steps."""
    import types
    made = []

    class Request:
        def __init__(self, buf, done):
            self.buf, self.done, self.tested, self.cancelled, self.waited = buf, done, False, False, False
            made.append(self)

        def Test(self):
            assert not (self.done and self.tested), "a completed request tested again"
            self.tested = True
            if self.done:
                self.buf[0] = 0         # (a slot given back)
            return self.done

        def Cancel(self):
            self.cancelled = True

        def Wait(self):
            self.waited = True

    class Comm:                         # rank 1 gives every slot back at once, rank 2 never
        def Irecv(self, buf, source, tag):
            return Request(buf, source == 1)

        def Send(self, buf, dest, tag):
            pass

    piece, pieces = 1 << 12, 3
    src = pygpu.to_gpu(np.arange(piece * pieces, dtype=np.uint8))
    box = types.SimpleNamespace(SLOTS=4, SLOT_BYTES=piece, mem=pygpu.empty(4 * piece, np.uint8),
                                stream=pygpu.Stream())
    node = types.SimpleNamespace(priv=Comm())
    filled = pygpu.mpi._first_piece(src, box, [piece] * pieces)
    steps = pygpu.mpi._Node._push(node, src, [1, 2], box, 0, piece, [piece] * pieces, {}, filled)
    waited = sum(next(steps) is None for _ in range(50))
    assert waited >= 40                 # (it yields each pass that moved nothing)
    pending = [r for r in made if not r.done]
    assert len(pending) == 1 and not pending[0].cancelled
    steps.close()
    assert pending[0].cancelled and pending[0].waited
    assert not any(r.cancelled for r in made if r.done)


def test_a_push_copies_its_first_piece_before_the_header_and_announces_it_before_the_next(monkeypatch):
    """The sender queues the first piece into its mailbox before it
    announces the header (the copy runs while the receiver takes it), and
    the second piece's copy only once the first is announced."""
    import itertools
    import threading
    import types
    log = []
    copy = pygpu.memcpy_dtod_async
    monkeypatch.setattr(pygpu, "memcpy_dtod_async", lambda *a, **k: (log.append("copy"), copy(*a, **k)))

    class Request:                      # (no slot is ever given back)
        def Test(self):
            return False

        def Cancel(self):
            pass

        def Wait(self):
            pass

    class Comm:
        def Irecv(self, buf, source, tag):
            return Request()

        def Send(self, buf, dest, tag):
            log.append(f"ready {int(buf[0])}")

    piece = 1 << 12
    box = types.SimpleNamespace(SLOTS=4, SLOT_BYTES=piece, mem=pygpu.empty(4 * piece, np.uint8),
                                stream=pygpu.Stream(), lock=threading.Lock(), handle=b"")
    node = types.SimpleNamespace(priv=Comm(), ids=itertools.count(), tags=100, key=1, mailbox=lambda: box)
    node._plan = lambda b, n: pygpu.mpi._Node._plan(node, b, n)
    node._push = lambda *a: pygpu.mpi._Node._push(node, *a)
    node._staged = lambda *a: pygpu.mpi._Node._staged(node, *a)
    src = pygpu.to_gpu(np.arange(3 * piece, dtype=np.uint8) * 7)
    steps, _ = pygpu.mpi._Node._posting(node, src, [1], lambda header: log.append("header"))
    assert log == ["copy", "header"]
    for _ in range(20):
        next(steps)
    assert log[:4] == ["copy", "header", "ready 0", "copy"], log
    steps.close()
    assert not box.lock.locked()
    np.testing.assert_array_equal(box.mem[:piece].get(), src[:piece].get())


def test_a_mailbox_held_by_steps_goes_back_however_they_end():
    """The steps of a push hold their mailbox's lock: it goes back when they
    end, when they fail, when a driver closes them because another failed,
    and when they are dropped before they ever ran (no `finally` runs then)."""
    import gc
    import threading
    lock = threading.Lock()

    def push(fail=False):
        assert lock.acquire(timeout=5), "the lock was not given back"
        held = pygpu.mpi._Held(lock)

        def steps():
            try:
                yield None
                if fail:
                    raise RuntimeError("a copy failed")
            finally:
                held.release()
        return held.of(steps())

    pygpu.mpi._drive(push())                    # to the end
    assert not lock.locked()
    with pytest.raises(RuntimeError, match="a copy failed"):
        pygpu.mpi._drive(push(fail=True))
    assert not lock.locked()

    def other():
        yield None
        raise ValueError("another step failed")
    with pytest.raises(ValueError):            # the push closed by the driver part way
        pygpu.mpi._drive(push(), other())
    assert not lock.locked()

    def first():
        raise ValueError("failed before the push ran")
        yield                                   # noqa: unreachable (a generator)
    with pytest.raises(ValueError):            # the push never started
        pygpu.mpi._drive(first(), push())
    assert not lock.locked()
    steps = push()
    del steps                                   # dropped unstarted
    gc.collect()
    assert not lock.locked()


def test_cuda_aware_setting(monkeypatch):
    monkeypatch.setenv("PYGPU_MPI_CUDA_AWARE", "0")
    assert pygpu.mpi.cuda_aware() is False
    assert pygpu.mpi.Comm(MPI.COMM_SELF).cuda_aware is False
    monkeypatch.setenv("PYGPU_MPI_CUDA_AWARE", "1")
    assert pygpu.mpi.cuda_aware() is True
    monkeypatch.setenv("PYGPU_MPI_CUDA_AWARE", "yes")
    with pytest.raises(ValueError, match="PYGPU_MPI_CUDA_AWARE must be 0 or 1"):
        pygpu.mpi.cuda_aware()
    monkeypatch.delenv("PYGPU_MPI_CUDA_AWARE")
    assert isinstance(pygpu.mpi.cuda_aware(), bool)


def test_select_device():
    assert pygpu.mpi.local_rank(MPI.COMM_SELF) == 0
    dev = pygpu.mpi.select_device(MPI.COMM_SELF)
    assert int(dev) == 0 == pygpu.get_device()


# ---- the example, under mpirun ------------------------------------------------------------

def mpirun():
    exe = shutil.which("mpirun") or shutil.which("mpiexec")
    if exe is None:
        pytest.skip("no mpirun on PATH")
    version = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
    extra = ["--oversubscribe"] if "Open MPI" in version or "OpenRTE" in version else []
    if extra and os.geteuid() == 0:
        extra.append("--allow-run-as-root")
    return [exe] + extra


@pytest.mark.parametrize("aware", ["0", None], ids=["staged", "as-reported"])
def test_example_with_two_ranks(aware):
    ndev = pygpu.device_count()
    env = {"PYGPU_MPI_CUDA_AWARE": aware}
    if pygpu.backend == "host":
        env.update(PYGPU_BACKEND="host", PYGPU_HOST_DEVICES=2)
        ndev = 2
    else:
        env["PYGPU_BACKEND"] = pygpu.backend
    proc = subprocess.run(mpirun() + ["-np", "2", sys.executable, EXAMPLE], env=clean_env(**env),
                          cwd=PACKAGE_ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "mpi_scatter_gather: OK, 2 ranks" in proc.stdout, proc.stdout
    devices = "[0, 1]" if ndev >= 2 else "[0, 0]"
    assert f"devices {devices}" in proc.stdout, proc.stdout
    if aware == "0":
        assert "staged through pinned host memory" in proc.stdout


# ---- device to device between ranks of one node, under mpirun ---------------------------------

IPC_CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mpi_ipc_check.py")


@pytest.mark.parametrize("ranks", [2, 3])
def test_device_to_device_between_ranks(ranks):
    """Every way Comm sends and receives, through the mailboxes and (the
    ranks taken as of other nodes) in chunks, checked bit for bit
    (tests/mpi_ipc_check.py); 3 ranks share 2 devices."""
    env = {"PYGPU_BACKEND": pygpu.backend}
    if pygpu.backend == "host":
        env["PYGPU_HOST_DEVICES"] = 2
    proc = subprocess.run(mpirun() + ["-np", str(ranks), sys.executable, IPC_CHECK, "staged"],
                          env=clean_env(**env), cwd=PACKAGE_ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"mpi_ipc_check: OK, {ranks} ranks" in proc.stdout, proc.stdout


DIES = """
import os, sys
import numpy as np
from mpi4py import MPI
import pygpu, pygpu.mpi

world = MPI.COMM_WORLD
comm = pygpu.mpi.Comm(world, cuda_aware=False)
pygpu.mpi.select_device(world)
n = (pygpu.mpi._Mailbox.SLOTS + 2) * pygpu.mpi._Mailbox.SLOT_BYTES     # more pieces than slots
if comm.rank == 1:
    class Dying:                    # the receiver dies as it gives back its second slot
        def __init__(self, c):
            self.c, self.given = c, 0

        def __getattr__(self, name):
            return getattr(self.c, name)

        def Send(self, *args):
            self.given += 1
            if self.given == 2:
                print("rank 1 dies", flush=True)
                os._exit(3)
            return self.c.Send(*args)
    comm._ipc.priv = Dying(comm._ipc.priv)
    comm.Recv(pygpu.empty(n, np.uint8), source=0)
else:
    comm.Send(pygpu.to_gpu(np.ones(n, np.uint8)), dest=1)
print("rank", comm.rank, "returned", flush=True)
"""


def test_a_rank_that_dies_mid_transfer_ends_the_job():
    """A receiver that dies part way through a device-to-device transfer:
    the sender, waiting for slots that will never be given back, does not
    hang: it sees the receiver's process gone and raises (_Node.watch),
    if MPI's launcher has not ended the job first (as it does any job
    whose rank dies; once, on CI, one did not), well within the timeout."""
    env = {"PYGPU_BACKEND": pygpu.backend}
    if pygpu.backend == "host":
        env["PYGPU_HOST_DEVICES"] = 2
    try:
        proc = subprocess.run(mpirun() + ["-np", "2", sys.executable, "-c", DIES], env=clean_env(**env),
                              cwd=PACKAGE_ROOT, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("the job hung after a rank died")
    assert proc.returncode != 0, proc.stdout
    assert "rank 1 dies" in proc.stdout and "returned" not in proc.stdout, proc.stdout


def test_the_mpi_benchmark_runs_and_checks_its_results():
    """python -m pygpu.bench_mpi under mpirun (small sizes; 16 MiB goes in
    chunks where staged as across nodes): both tables, every row measured
    (its results are checked bit for bit inside)."""
    env = {"PYGPU_BACKEND": pygpu.backend}
    if pygpu.backend == "host":
        env["PYGPU_HOST_DEVICES"] = 2
    proc = subprocess.run(mpirun() + ["-np", "2", sys.executable, "-m", "pygpu.bench_mpi", "--sizes", "1M", "16M"],
                          env=clean_env(**env), cwd=PACKAGE_ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert sum(line.split()[:2] in (["1", "MiB"], ["16", "MiB"]) for line in lines) == 4, proc.stdout
    assert "in chunks" in proc.stdout, proc.stdout
    assert any(line.startswith("Allgather, 2 ranks") for line in lines), proc.stdout


def test_the_mpi_timeline_tool_runs():
    """tools/research/mpi-timeline.py: its one-process modes (the link's
    pull and push, the calls' costs) and, under mpirun, one round trip's
    merged timeline of each size, both ranks' calls in it."""
    env = {"PYGPU_BACKEND": pygpu.backend}
    if pygpu.backend == "host":
        env["PYGPU_HOST_DEVICES"] = 2
    tool = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools", "research",
                        "mpi-timeline.py")          # (the checkout's: the wheel suite runs against site-packages)

    def run(*argv):
        proc = subprocess.run(list(argv), env=clean_env(**env), cwd=PACKAGE_ROOT, capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        return proc.stdout
    if pygpu.backend == "host" or pygpu.device_count() >= 2:        # (2 host devices in the subprocess)
        assert re.search(r"^\s+4 MiB  pull\s+[\d.]+  push\s+[\d.]+$", run(sys.executable, tool, "links", "4M"), re.M)
    out = run(sys.executable, tool, "calls")
    assert re.search(r"^memcpy_dtod_async\(ipc mailbox, pool\)\s+median\s+[\d.]+ us", out, re.M), out
    out = run(*mpirun(), "-np", "2", sys.executable, tool)
    for size in ("1 MiB", "64 MiB"):
        part = out.split(f"== {size}: round trip")[1].split("==")[0]
        for rank in (0, 1):
            assert re.search(rf"^\s+[\d.]+\s+{rank}\s+Recv returned$", part, re.M), out
            assert re.search(rf"^\s+[\d.]+\s+{rank}\s+memcpy_dtod_async \d+ KiB queued$", part, re.M), out


def test_comm_of_one_rank_has_no_mailbox():
    comm = pygpu.mpi.Comm(MPI.COMM_SELF, cuda_aware=False)
    assert comm._ipc is None
    assert pygpu.mpi.Comm(MPI.COMM_SELF, cuda_aware=False, ipc=True)._ipc is None


def test_a_transfer_that_waits_on_a_rank_that_died_raises(monkeypatch):
    """While a transfer's steps wait (polling, or on one request), _drive
    calls its watch every so often; a watch that raises (_Node.watch: a rank
    of this node whose process has ended) ends the steps, closed, with the
    error, instead of waiting for ever."""
    monkeypatch.setattr(pygpu.mpi, "_WATCH_PASSES", 8)
    monkeypatch.setattr(pygpu.mpi, "_WATCH_S", 0.0)
    closed = []

    def polling():
        try:
            while True:
                yield None
        finally:
            closed.append("polling")

    class Never:                        # a request that never completes
        def Test(self):
            return False

        def Wait(self):
            raise AssertionError("a watched wait must not block in MPI")

    def waiting():
        try:
            yield Never()
        finally:
            closed.append("waiting")

    calls = []

    def watch():
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("rank 1 ended")

    for steps in ([polling(), waiting()], [waiting()]):
        closed.clear()
        calls.clear()
        with pytest.raises(RuntimeError, match="rank 1 ended"):
            pygpu.mpi._drive(*steps, watch=watch)
        assert len(calls) == 3 and len(closed) == len(steps)


def test_a_rank_process_that_ended_is_seen_so():
    """_alive: this process is; a child that has exited is not, whether its
    parent has reaped it yet (a zombie) or not; nor is a live process under
    another start time (another process under the pid since, or the pid of
    another PID namespace).  _Node.watch names the ranks whose processes
    ended."""
    import types
    me = pygpu.mpi._started(os.getpid())
    if me is None:
        pytest.skip("no /proc here: the ranks are not watched")
    assert pygpu.mpi._alive(os.getpid(), me[1])
    assert not pygpu.mpi._alive(os.getpid(), me[1] + 1)
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    start = pygpu.mpi._started(child.pid)[1]
    for _ in range(200):                # (exited, not yet reaped: a zombie)
        if not pygpu.mpi._alive(child.pid, start):
            break
        time.sleep(0.05)
    assert pygpu.mpi._started(child.pid) is not None and not pygpu.mpi._alive(child.pid, start)
    child.wait()
    assert not pygpu.mpi._alive(child.pid, start)
    node = types.SimpleNamespace(pids={1: (os.getpid(), me[1]), 3: (child.pid, start)})
    with pytest.raises(RuntimeError, match=rf"rank 3 of this node \(pid {child.pid}\) ended during a transfer"):
        pygpu.mpi._Node.watch(node)
    node.pids = {1: (os.getpid(), me[1])}
    pygpu.mpi._Node.watch(node)         # (all alive: nothing)
