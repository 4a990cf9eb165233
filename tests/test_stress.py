"""Transfers at random from several threads at once, every result checked
against NumPy.

Each thread draws its next step at random: an upload (to_gpu, set, their
async forms), a download (into a new array, a fresh np.empty, a touched
array, get_async), a strided view either way, or a chain of async steps
queued on one stream before a single synchronization (a download queued
behind an upload into the same array, another upload behind that
download: the stream's order must hold across the background's tasks).
Sizes run from a few bytes to several MiB (some repeated, so that the
background's cached blocks come into play), on the default stream or a
stream of the thread's own, blocking or not, each thread on its device
(round the devices there are).  The library's own settings are one case,
everything staged in small chunks (rings, crowded lanes) the other.

Short in every run (a fixed number of steps).  PYGPU_TEST_STRESS_S=N runs
each case for N seconds, with sizes up to 64 MiB on a GPU, for a hunt on
the GPU machine (tools/gpu-check.sh stress).  A failure names the thread's
seed and step.
"""
import os
import time

import numpy as np
import pytest

import pygpu
from test_threads import JOIN_TIMEOUT, run_threads

HOST = pygpu.backend == "host"
MiB = 1 << 20
STRESS_S = float(os.environ.get("PYGPU_TEST_STRESS_S", "0"))
NTHREADS = 6
STEPS = 14                      # per thread, when not hunting
MAX_BYTES = 64 * MiB if STRESS_S and not HOST else 4 * MiB
# Sizes met again and again (the background's blocks are cached by size).
REPEATED = [MiB, 3 * MiB + 8, 4 * MiB - 4096] + ([16 * MiB, 64 * MiB - 8] if MAX_BYTES > 4 * MiB else [])
DTYPES = [np.uint8, np.int16, np.float32, np.float64, np.complex64]

CASES = {
    "as built": {},
    "small chunks": {"min_bytes": 0, "chunk": 256 << 10, "depth": 3},
}


@pytest.fixture(params=list(CASES))
def settings(request):
    saved = pygpu.transfer_config()
    pygpu.transfer_config(**CASES[request.param])
    yield request.param
    pygpu.transfer_config(**saved)


def bits(a):
    """a's elements as unsigned integers of their size: compared bit for
    bit (random bytes make NaNs of floats)."""
    return a.view(np.dtype(f"u{a.itemsize}"))


def same(got, want, what):
    np.testing.assert_array_equal(bits(got), bits(want), err_msg=what)


class Steps:
    """One thread's steps: its random source bytes (never written, so
    that an async upload may read them until its stream has passed it)
    and its streams (made on the thread's current device)."""

    def __init__(self, k):
        self.seed = 1000 + k
        self.rng = np.random.default_rng(self.seed)
        self.pool = self.rng.integers(0, 256, MAX_BYTES + 64, dtype=np.uint8)
        self.streams = [None, pygpu.Stream(), pygpu.Stream(non_blocking=True)]

    def source(self, nbytes, dtype):
        """Host data of about nbytes: a piece of the pool at an offset of
        whole elements."""
        dtype = np.dtype(dtype)
        n = max(1, nbytes // dtype.itemsize)
        off = int(self.rng.integers(0, (self.pool.size - n * dtype.itemsize) // dtype.itemsize + 1))
        return self.pool[off * dtype.itemsize:(off + n) * dtype.itemsize].view(dtype)

    def size(self):
        if self.rng.random() < 0.3:
            return int(self.rng.choice(REPEATED))
        return int(np.exp(self.rng.uniform(0, np.log(MAX_BYTES))))

    def wait(self, s):
        """Until stream s (None: the default stream) has passed what is
        queued on it."""
        pygpu.Event(timing=False).record(s).synchronize()

    # ---- the steps: each moves data and checks it ----

    def up(self, a, s):
        g = pygpu.to_gpu(a, stream=s)
        same(g.get(stream=s), a, "to_gpu")

    def up_async(self, a, s):
        g = pygpu.to_gpu_async(a, stream=s)
        after = g.copy(stream=s)            # (queued behind the upload)
        self.wait(s)
        same(after.get(stream=s), a, "to_gpu_async")

    def set_async(self, a, s):
        g = pygpu.empty(a.shape, a.dtype)
        g.set_async(a, stream=s)
        same(g.get(stream=s), a, "set_async")

    def down_fresh(self, a, s):
        g = pygpu.to_gpu(a, stream=s)
        out = np.empty(a.shape, a.dtype)
        g.get(ary=out, stream=s)
        same(out, a, "get(ary=fresh)")

    def down_async(self, a, s):
        g = pygpu.to_gpu(a, stream=s)
        out = np.zeros(a.shape, a.dtype)
        g.get_async(stream=s, ary=out)
        self.wait(s)
        same(out, a, "get_async(ary=touched)")

    def views(self, a, s):
        rows = int(self.rng.integers(1, 9))
        a2 = a[: a.size // rows * rows].reshape(rows, -1)
        if a2.size == 0:
            return
        g = pygpu.to_gpu(a2, stream=s)
        step = int(self.rng.integers(1, 4))
        same(g[::-1, ::step].get(stream=s), a2[::-1, ::step], "view down")
        other = self.source(a2.nbytes, a2.dtype)[: a2.size].reshape(a2.shape)
        g[:, ::step].set(other[:, ::step], stream=s)
        want = a2.copy()
        want[:, ::step] = other[:, ::step]
        same(g.get(stream=s), want, "view up")

    def chain(self, a, s):
        """Up, down, up again, down again, all queued before one wait."""
        b = self.source(a.nbytes, a.dtype)[: a.size]
        g = pygpu.empty(a.shape, a.dtype)
        first, second = np.zeros(a.shape, a.dtype), np.empty(a.shape, a.dtype)
        g.set_async(a, stream=s)
        g.get_async(stream=s, ary=first)
        g.set_async(b, stream=s)
        g.get_async(stream=s, ary=second)
        self.wait(s)
        same(first, a, "chain: the first download")
        same(second, b, "chain: the second download")

    KINDS = ("up", "up_async", "set_async", "down_fresh", "down_async", "views", "chain")

    def step(self, i):
        kind = self.KINDS[int(self.rng.integers(len(self.KINDS)))]
        a = self.source(self.size(), DTYPES[int(self.rng.integers(len(DTYPES)))])
        s = self.streams[int(self.rng.integers(len(self.streams)))]
        try:
            getattr(self, kind)(a, s)
        except AssertionError as e:
            raise AssertionError(f"seed {self.seed}, step {i} ({kind}, {a.nbytes} B of {a.dtype}, "
                                 f"stream {s!r}): {e}") from None


def test_threads_move_data_at_random(settings):
    deadline = time.monotonic() + STRESS_S
    done = [0] * NTHREADS

    def work(k):
        with pygpu.Device(k % pygpu.device_count()):
            steps = Steps(k)
            i = 0
            while i < STEPS or time.monotonic() < deadline:
                steps.step(i)
                i += 1
            for s in steps.streams:
                steps.wait(s)
            done[k] = i

    run_threads(work, NTHREADS, JOIN_TIMEOUT + STRESS_S)
    assert min(done) >= STEPS
    if STRESS_S:
        print(f"{settings}: {sum(done)} steps in {STRESS_S:.0f} s from {NTHREADS} threads")
    pygpu.trim_pinned_pool()
