"""Graph capture: work on a stream that a CUDA graph capture records either
joins the capture (device copies and fills, casts, asynchronous copies
between the device and page-locked memory) or is refused with a GPUError
that says why and what to do, before it touches the stream, so that the
capture stays valid.

On the host backend PYGPU_HOST_CAPTURE=1 makes every stream but the default
ones report a capture (in a child process), so that the rules run on CI;
on CUDA a capture begun by CuPy on a stream handed over is ended and its
graph launched, and the data it moved checked against NumPy.
"""
import gc
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pygpu

from conftest import clean_env, PACKAGE_ROOT

# The rules, run where every stream made reports a capture (the host
# backend's switch), or inside a real capture (CUDA: `s` handed in).
RULES = textwrap.dedent('''
    import numpy as np, pygpu

    def make(n=1 << 12):
        """What the rules use, made before the capture (page-locked memory
        cannot be allocated under a capture in global mode)."""
        host_in = pygpu.pagelocked_empty(n, np.float32)
        host_in[:] = np.arange(n, dtype=np.float32)
        return dict(n=n, host_in=host_in, host_out=pygpu.pagelocked_zeros(n, np.float32),
                    half=pygpu.pagelocked_zeros(n // 2, np.float64), other=pygpu.pagelocked_empty(n, np.float32),
                    a=pygpu.empty(n, np.float32), b=pygpu.empty(n, np.float32), c=pygpu.empty(n // 2, np.float64))

    def check_rules(s, m):
        """What PyGPU does on its stream `s` (being captured) with the arrays
        of make(): the work that joins the capture, then each refusal;
        returns the refusals' messages."""
        n, host_in, host_out, half = m["n"], m["host_in"], m["host_out"], m["half"]
        a, b, c = m["a"], m["b"], m["c"]
        refused = []

        def refuse(fn, *words):
            try:
                fn()
            except pygpu.GPUError as e:
                msg = str(e)
                assert all(w in msg for w in words) and "capture" in msg, (words, msg)
                refused.append(msg)
            else:
                raise AssertionError(f"not refused: {words}")

        # joins: page-locked copies queued, device copies, fills, a cast
        pygpu.memset_d8_async(b.ptr, 0, b.nbytes, stream=s)
        a.set_async(host_in, stream=s)
        with s:
            b[...] = a
            b[: n // 4].fill(7.0)
            b[n // 4: n // 2] = 3.0
            c[...] = b[n // 2:][::-1]
        b.get_async(ary=host_out, stream=s)
        c.get_async(ary=half, stream=s)
        # refused, each before touching the stream
        refuse(lambda: a.set(np.ones(n, np.float32), stream=s), "pageable", "page-locked")
        refuse(lambda: a.set_async(np.ones(n, np.float32), stream=s), "pageable", "page-locked")
        refuse(lambda: a.get(stream=s), "pageable")
        refuse(lambda: a.get_async(ary=np.empty(n, np.float32), stream=s), "pageable")
        refuse(lambda: a.set(host_in, stream=s), "synchronous", "set_async")
        refuse(lambda: a.get(ary=host_out, stream=s), "synchronous")
        refuse(lambda: a.get_async(ary=m["other"][::-1], stream=s), "laid out")
        refuse(lambda: pygpu.zeros(8, np.float32, stream=s), "allocation", "before the capture")
        refuse(s.synchronize, "synchronize")
        refuse(lambda: pygpu.memset_d8(b.ptr, 0, 16, stream=s), "memset_d8", "memset_d8_async")
        refuse(lambda: pygpu.memcpy_peer(b.ptr, a.ptr, 16, 0, 0, stream=s), "memcpy_peer", "memcpy_peer_async")
        return refused

    def expected(n=1 << 12):
        e = np.arange(n, dtype=np.float32)
        e[: n // 4] = 7.0
        e[n // 4: n // 2] = 3.0
        return e, e[n // 2:][::-1].astype(np.float64)
''')


def run_child(code, **env):
    proc = subprocess.run([sys.executable, "-c", code], env=clean_env(**env), cwd=PACKAGE_ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.skipif(pygpu.backend != "host", reason="PYGPU_HOST_CAPTURE is the host backend's switch")
def test_capture_rules_on_the_host():
    out = run_child(RULES + textwrap.dedent('''
        s = pygpu.Stream()
        m = make()
        refused = check_rules(s, m)
        want, want_half = expected()       # (the host's streams run at once: the joined work has run)
        assert np.array_equal(m["host_out"], want), m["host_out"]
        assert np.array_equal(m["half"], want_half), m["half"]
        # the default streams are never captured here: the same calls run there
        a = pygpu.zeros(16, np.float32)
        a.set(np.ones(16, np.float32))
        assert a.get().sum() == 16
        pygpu.Stream.null.synchronize()
        print("refused", len(refused))
        print("\\n".join(refused))
    '''), PYGPU_BACKEND="host", PYGPU_HOST_CAPTURE="1")
    assert "refused 11" in out, out
    # each refusal says what to do instead
    assert "Use page-locked memory (pygpu.pagelocked_empty)" in out
    assert "Allocate the arrays before the capture begins" in out


# ---- CUDA: captures begun by CuPy -----------------------------------------------------------

@pytest.fixture
def cp():
    if pygpu.backend != "cuda":
        pytest.skip("a CUDA graph capture needs the CUDA backend")
    return pytest.importorskip("cupy")


GLOBAL = 0      # cudaStreamCaptureModeGlobal: unsafe calls from any thread break the capture


def rules_namespace():
    ns = {}
    exec(RULES, ns)
    return ns


def test_capture_begun_by_cupy_on_a_pygpu_stream(cp):
    """CuPy captures PyGPU's stream (in global mode); PyGPU's work joins, its
    refusals leave the capture valid, and the launched graph moves the data."""
    ns = rules_namespace()
    ps = pygpu.Stream(non_blocking=True)
    if hasattr(cp.cuda.Stream, "from_external"):       # (newer CuPy: through PyGPU's __cuda_stream__)
        ext = cp.cuda.Stream.from_external(ps)
    else:
        ext = cp.cuda.ExternalStream(ps.ptr)
    m = ns["make"]()
    pygpu.synchronize()
    ext.begin_capture(mode=GLOBAL)
    try:
        refused = ns["check_rules"](ps, m)
        capsule = m["b"].__dlpack__()          # (no stream: no wait of the legacy stream on the capture)
        assert capsule is not None
        pygpu.Stream.null.record()             # (the legacy stream is not in this capture: still usable)
    finally:
        graph = ext.end_capture()             # (raises if anything broke the capture)
    assert len(refused) == 11, refused
    assert not m["host_out"].any()            # recorded, not run
    for _ in range(2):                         # (each launch runs it all again)
        m["host_out"][:] = 0
        graph.launch(ext)
        ext.synchronize()
        want, want_half = ns["expected"]()
        np.testing.assert_array_equal(m["host_out"], want)
        np.testing.assert_array_equal(m["half"], want_half)


def test_capture_begun_by_cupy_on_its_own_stream(cp, rng):
    """A CuPy stream handed over (its handle): page-locked copies and device
    copies join CuPy's capture, a pageable copy is refused, and the graph
    replays them."""
    n = 1 << 16
    cs = cp.cuda.Stream(non_blocking=True)
    data = rng.standard_normal(n).astype(np.float32)
    host_in, host_out = pygpu.pagelocked_empty(n, np.float32), pygpu.pagelocked_zeros(n, np.float32)
    host_in[:] = data
    a, b = pygpu.empty(n, np.float32), pygpu.empty(n, np.float32)
    pygpu.synchronize()
    cs.begin_capture(mode=GLOBAL)
    try:
        a.set_async(host_in, stream=cs.ptr)
        with pytest.raises(pygpu.GPUError, match="pageable host memory cannot join the graph capture"):
            a.set(data, stream=cs.ptr)
        with pytest.raises(pygpu.GPUError, match="synchronous"):
            a.get(ary=host_out, stream=cs.ptr)
        a.get_async(ary=host_out, stream=cs.ptr)
        # the CAI export names the capturing stream; DLPack to it makes no wait
        assert a.__cuda_array_interface__["stream"] == cs.ptr
        a.__dlpack__(stream=cs.ptr)
    finally:
        graph = cs.end_capture()
    assert not host_out.any()
    graph.launch(cs)
    cs.synchronize()
    np.testing.assert_array_equal(host_out, data)


def test_a_captured_upload_reads_the_host_when_replayed(cp):
    """Under a capture (begun by CuPy on a stream handed over), an 8-byte
    set_async from page-locked memory joins the graph as a copy, not as
    the bytes of the capture's time: each replay reads the host anew."""
    cs = cp.cuda.Stream(non_blocking=True)
    host = pygpu.pagelocked_zeros(1, np.float64)
    g = pygpu.zeros(1, np.float64)
    pygpu.synchronize()
    cs.begin_capture(mode=GLOBAL)
    try:
        g.set_async(host, stream=cs.ptr)
    finally:
        graph = cs.end_capture()
    for value in (2.5, -7.0):
        host[0] = value
        graph.launch(cs)
        cs.synchronize()
        assert g.get()[0] == value


def test_the_legacy_stream_is_refused_under_a_global_capture(cp):
    """A blocking stream captured in global mode: the legacy stream waits for
    it, so PyGPU work there (the current stream by default) is refused, and
    the capture stays valid."""
    n = 4096
    cs = cp.cuda.Stream(non_blocking=False)
    host = pygpu.pagelocked_empty(n, np.float32)
    host[:] = 5.0
    a = pygpu.zeros(n, np.float32)
    pygpu.synchronize()
    cs.begin_capture(mode=GLOBAL)
    try:
        with pytest.raises(pygpu.GPUError, match="legacy default stream"):
            a.fill(1.0)
        with pytest.raises(pygpu.GPUError, match="legacy default stream"):
            pygpu.zeros(8, np.float32)
        with pytest.raises(pygpu.GPUError, match="legacy default stream"):
            a.set_async(host)
        a.set_async(host, stream=cs.ptr)
    finally:
        graph = cs.end_capture()
    graph.launch(cs)
    cs.synchronize()
    np.testing.assert_array_equal(a.get(), host)


# ---- memory given back under a capture ------------------------------------------------------

@pytest.mark.parametrize("mode", [0, 2])
def test_an_array_freed_while_its_stream_is_captured_waits_for_the_capture_to_end(mode, run_python):
    """An array given back while a capture records its stream (begun by
    the backend's own call, here in global or relaxed mode): a free queued
    there would be a free node for memory the graph did not allocate,
    which the runtime refuses (and the memory would be lost); it is put off
    until the capture has ended, freed at the next allocation, the capture
    valid all along.  (A child process: on the host backend its device
    memory is counted against PYGPU_HOST_MEMORY.)"""
    code = f"""
        import gc, numpy as np, pygpu
        lib = pygpu.backend_module

        def free_memory():
            pygpu.synchronize()
            pygpu.trim_memory_pool(0)
            return pygpu.mem_get_info()[0]
        n = 64 << 20                                # (256 MiB of float32: the pool must grow for it)
        s = pygpu.Stream(non_blocking=True)
        b = pygpu.zeros(n // 64, np.float32, stream=s)
        before = free_memory()
        data = np.random.default_rng(1).standard_normal(n).astype(np.float32)
        a = pygpu.to_gpu(data, stream=s)
        held = free_memory()
        assert held <= before - (224 << 20), (before, held)
        assert lib._stream_begin_capture(s.handle, {mode}) == 0
        try:
            with s:
                b[...] = a[: n // 64]               # (joins the capture)
                b[: n // 128].fill(1.0)
            del a                                   # (its free put off)
            gc.collect()
        finally:
            assert lib._stream_end_capture(s.handle) == 0   # (the capture was valid to its end)
        if pygpu.backend == "host":
            assert free_memory() == held            # (still held: not freed, not lost)
        pygpu.empty(8, np.uint8, stream=s)          # (the next allocation frees it)
        after = free_memory()
        assert after >= before - (32 << 20), (before, held, after)
        b[...] = pygpu.to_gpu(data[: n // 64], stream=s)
        s.synchronize()
        assert (b.get() == data[: n // 64]).all()
        print("ok")
    """
    env = {"PYGPU_BACKEND": pygpu.backend, "PYGPU_HOST_MEMORY": "1G"}
    proc = run_python(code, env=env)
    assert proc.stdout.strip() == "ok", proc.stdout + proc.stderr


def test_a_capture_that_never_ends_keeps_what_it_put_off(run_python):
    """Memory whose free a capture put off, the capture still on when the
    process ends: no crash, no error at exit."""
    code = """
        import gc, numpy as np, pygpu
        s = pygpu.Stream(non_blocking=True)
        a = pygpu.zeros(1 << 22, np.float32, stream=s)
        s.synchronize()
        assert pygpu.backend_module._stream_begin_capture(s.handle, 2) == 0
        del a
        gc.collect()
        print("ok")
    """
    proc = run_python(code, env={"PYGPU_BACKEND": pygpu.backend})
    assert proc.stdout.strip() == "ok" and "Error" not in proc.stderr, proc.stderr


def test_the_legacy_streams_array_freed_under_a_global_capture(cp):
    """An array of the legacy stream (past the block cache: given back to
    the pool there) freed while a blocking stream is captured in global
    mode: using the legacy stream would break that capture, so the free is
    put off, and the capture ends valid."""
    cs = cp.cuda.Stream(non_blocking=False)
    a = pygpu.zeros(1 << 20, np.float32)
    pygpu.synchronize()
    gc.collect()                                    # (not inside: test_registered.py says why)
    cs.begin_capture(mode=GLOBAL)
    try:
        del a                                       # (no cycle: freed at once)
    finally:
        graph = cs.end_capture()                    # (raises if the capture was broken)
    graph.launch(cs)
    cs.synchronize()
    pygpu.zeros(8, np.float32)                      # (the put-off free goes)
    pygpu.synchronize()


# ---- PyGPU's own work beside another library's capture in global mode -----------------------

def own_stream_work(s, rng):
    """PyGPU's work on its stream `s` (not captured) that makes the calls
    the runtime calls potentially unsafe under a capture: allocations
    (pool and page-locked), staged copies of pageable memory both ways,
    a small upload by launch, buffers met again (page-locked in place; a
    big one's copies in pieces on a stream of their own, made and
    destroyed), waits and queries.  Checks every result against NumPy."""
    MiB = 1 << 20
    big = rng.standard_normal(4 * MiB // 8)
    g = pygpu.to_gpu(big, stream=s)                                 # a pool allocation, staged
    out = np.empty_like(big)
    g.get(ary=out, stream=s)                                        # staged down, waited for
    np.testing.assert_array_equal(out, big)
    tiny = pygpu.to_gpu(np.array([2.5]), stream=s)                  # (by launch)
    assert tiny.get(stream=s)[0] == 2.5
    again = rng.standard_normal(big.size)
    for _ in range(3):                                              # (met again: page-locked in place)
        g.set(again, stream=s)
    np.testing.assert_array_equal(g.get(stream=s), again)
    bulk = rng.standard_normal(34 * MiB // 8)                       # (pages of its own)
    gb = pygpu.to_gpu(bulk, stream=s)
    gb.set(bulk, stream=s)              # (met again: page-locked in place; from 16 MiB in pieces on a stream
    back = np.zeros_like(bulk)          # made for the copy, waited for there)
    pygpu.to_gpu(back, stream=s)
    gb.get(ary=back, stream=s)
    np.testing.assert_array_equal(back, bulk)
    if pygpu.transfer_config()["register_limit"]:
        assert pygpu.registered_stats()["buffers"] >= 2
    del gb
    p = pygpu.pagelocked_empty(3 * MiB + 4096, np.uint8)            # page-locked, a size no pooled block has
    p[:] = 7
    d = pygpu.empty(p.shape, np.uint8, stream=s)
    d.set_async(p, stream=s)
    s.synchronize()
    assert s.query() is True
    e = pygpu.Event()
    e.record(s)
    e.synchronize()
    assert int(d.get(stream=s)[-1]) == 7
    del p, d, g
    gc.collect()


@pytest.mark.parametrize("where", ["this thread", "another thread"])
def test_own_streams_work_beside_a_global_capture_keeps_it_valid(cp, where, rng):
    """A stream of CuPy's captured in global mode, by this thread or by
    another one: PyGPU's work on a non-blocking stream of its own runs
    and is right, and the capture ends valid (the runtime would refuse the
    work's allocations, frees, page-locking and waits, and break the
    capture, but PyGPU makes those calls in relaxed mode); the graph then
    does what was captured."""
    import threading
    s = pygpu.Stream(non_blocking=True)
    x = cp.zeros(1024, cp.float32)
    cs = cp.cuda.Stream(non_blocking=True)
    cp.cuda.Device().synchronize()
    begun, done, result = threading.Event(), threading.Event(), {}

    def capture():
        try:
            cs.begin_capture(mode=GLOBAL)
            try:
                with cs:
                    x[...] += 1
                begun.set()
                if where == "another thread":
                    assert done.wait(120)
            finally:
                result["graph"] = cs.end_capture()         # (raises if the capture was broken)
        except BaseException as exc:    # noqa: BLE001 - reported by the main thread
            result["error"] = exc
            begun.set()

    if where == "this thread":
        cs.begin_capture(mode=GLOBAL)
        try:
            with cs:
                x[...] += 1
            own_stream_work(s, rng)
        finally:
            graph = cs.end_capture()
    else:
        t = threading.Thread(target=capture)
        t.start()
        assert begun.wait(120)
        try:
            own_stream_work(s, rng)
        finally:
            done.set()
            t.join(120)
        if "error" in result:
            raise result["error"]
        graph = result["graph"]
    assert cs.is_capturing() is False
    graph.launch(cs)
    graph.launch(cs)
    cs.synchronize()
    np.testing.assert_array_equal(cp.asnumpy(x), np.full(1024, 2.0, np.float32))


# ---- the legacy stream beside a blocking stream being captured (the host backend's emulation) -----

@pytest.mark.skipif(pygpu.backend != "host", reason="the host backend's emulation of the runtime's rule; on a GPU "
                    "test_the_legacy_stream_is_refused_under_a_global_capture has the runtime's own")
@pytest.mark.parametrize("mode", [0, 2], ids=["global", "relaxed"])
def test_the_legacy_stream_beside_a_blocking_stream_being_captured(mode, rng):
    """A blocking stream (one the legacy stream waits for) captured by the
    backend's own call: as on a GPU, the host backend refuses work on the
    legacy stream and breaks the capture if it is queued.  PyGPU refuses
    its users' work there with a GPUError before touching the stream, its
    work on a non-blocking stream of its own never uses the legacy stream
    (allocations, staged copies both ways, the 8-byte launch, a buffer met
    again, page-locked memory, waits), and the capture ends valid
    (tests/c/test_capture_host.c: the backend's refusal itself)."""
    lib = pygpu.backend_module
    n = 4096
    # (registered in place: the host backend counts its own page-locked
    # allocations as pageable, but for under PYGPU_HOST_CAPTURE)
    host = pygpu.register_host_memory(np.full(n, 5.0, np.float32))
    a = pygpu.zeros(n, np.float32)
    s = pygpu.Stream(non_blocking=False)
    own = pygpu.Stream(non_blocking=True)
    pygpu.synchronize()
    assert lib._stream_begin_capture(s.handle, mode) == 0
    try:
        for fn in (lambda: a.fill(1.0), lambda: pygpu.zeros(8, np.float32), lambda: a.set_async(host),
                   lambda: a.get(), lambda: pygpu.cudaStreamSynchronize(None)):     # (the old API's too)
            with pytest.raises(pygpu.GPUError, match="legacy default stream"):
                fn()
        a.set_async(host, stream=s)                     # (joins the capture)
        own_stream_work(own, rng)
    finally:
        ended = lib._stream_end_capture(s.handle)
    assert ended == 0
    pygpu.synchronize()
    np.testing.assert_array_equal(a.get(), np.full(n, 5.0, np.float32))


@pytest.mark.skipif(pygpu.backend != "host", reason="the host backend's emulation; on a GPU "
                    "test_the_legacy_streams_array_freed_under_a_global_capture has the runtime's own")
def test_the_legacy_streams_array_freed_beside_a_blocking_stream_being_captured():
    """An array of the legacy stream freed while a blocking stream is being
    captured: its free would use the legacy stream and break the capture
    (the host backend refuses it as the runtime does), so it is put off,
    the capture ends valid, and the next allocation frees it."""
    lib = pygpu.backend_module
    s = pygpu.Stream(non_blocking=False)
    a = pygpu.zeros(1 << 22, np.float32)            # (16 MiB: past the block cache, given back to the pool)
    pygpu.synchronize()
    gc.collect()
    assert lib._stream_begin_capture(s.handle, 0) == 0
    try:
        del a                                       # (no cycle: freed at once)
    finally:
        ended = lib._stream_end_capture(s.handle)
    assert ended == 0
    b = pygpu.zeros(8, np.float32)                  # (the put-off free goes)
    pygpu.synchronize()
    assert b.get().sum() == 0
