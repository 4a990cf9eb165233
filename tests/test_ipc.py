"""Device memory shared between processes: mem_alloc(ipc=True),
mem_get_ipc_handle and IPCMemoryHandle (as PyCUDA names them), each
process checking the other's bytes.  On the host backend the memory is a
shared mapping, so the same tests run without a GPU."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pygpu

from conftest import clean_env

N = 1 << 18


def child(code, *args):
    """Run `code` in a fresh process on this backend; its stdout."""
    env = clean_env(PYGPU_BACKEND=pygpu.backend)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_another_process_reads_and_writes_the_memory(rng):
    h = rng.integers(-2**31, 2**31, N, dtype=np.int64).astype(np.int32)
    mem = pygpu.mem_alloc(h.nbytes, ipc=True)
    assert mem.ipc and not mem.pooled and mem.size == h.nbytes
    pygpu.memcpy_htod(mem, h)
    handle = pygpu.mem_get_ipc_handle(mem)
    assert isinstance(handle, bytes) and len(handle) == 64
    out = child("""
        import sys, numpy as np, pygpu
        with pygpu.IPCMemoryHandle(bytes.fromhex(sys.argv[1])) as m:
            assert m.device == pygpu.get_device() and int(m) == m.ptr and m.ptr != 0
            got = np.empty(int(sys.argv[2]), np.int32)
            pygpu.memcpy_dtoh(got, m)
            pygpu.memcpy_htod(m, ~got)                  # and write back
            print(got.tobytes().hex())
        print(repr(m))
        """, handle.hex(), str(N))
    lines = out.split()
    assert np.array_equal(np.frombuffer(bytes.fromhex(lines[0]), np.int32), h)
    assert lines[-1] == "closed>"
    back = np.empty_like(h)
    pygpu.memcpy_dtoh(back, mem)
    assert np.array_equal(back, ~h)


def test_an_array_over_mapped_memory_is_a_gpuarray(rng):
    h = rng.standard_normal((64, 32))
    mem = pygpu.mem_alloc(h.nbytes, ipc=True)
    pygpu.memcpy_htod(mem, h)
    out = child("""
        import sys, numpy as np, pygpu
        m = pygpu.IPCMemoryHandle(bytes.fromhex(sys.argv[1]))
        a = pygpu.GPUArray((64, 32), np.float64, gpudata=m)
        print(float(a[3:9, ::-1].get().sum()))
        m.close()
        m.close()                                       # (again: nothing)
        """, pygpu.mem_get_ipc_handle(mem).hex())
    assert float(out) == pytest.approx(h[3:9, ::-1].sum())


def test_refusals():
    pooled = pygpu.mem_alloc(1024)
    with pytest.raises(ValueError, match=r"stream-ordered pool.*mem_alloc\(nbytes, ipc=True\)"):
        pygpu.mem_get_ipc_handle(pooled)
    mem = pygpu.mem_alloc(1024, ipc=True)
    handle = pygpu.mem_get_ipc_handle(mem)
    with pytest.raises(pygpu.GPUError):                 # this process's own memory
        pygpu.IPCMemoryHandle(handle)
    with pytest.raises(ValueError, match="a handle is 64 bytes"):
        pygpu.IPCMemoryHandle(handle[:10])
    with pytest.raises(TypeError):
        pygpu.IPCMemoryHandle("not bytes")
    with pytest.raises(ValueError, match="takes no stream"):
        pygpu.mem_alloc(1024, pygpu.Stream(), ipc=True)
    with pytest.raises(TypeError):
        pygpu.mem_get_ipc_handle("x")
    mem.free()
    with pytest.raises(ValueError, match="was freed"):
        pygpu.mem_get_ipc_handle(mem)


def test_a_closed_mapping_refuses_use():
    mem = pygpu.mem_alloc(4096, ipc=True)
    out = child("""
        import sys, pygpu
        m = pygpu.IPCMemoryHandle(bytes.fromhex(sys.argv[1]))
        m.close()
        for use in (lambda: m.ptr, lambda: int(m), lambda: m.__enter__()):
            try:
                use()
            except ValueError as e:
                print("refused:", e)
        """, pygpu.mem_get_ipc_handle(mem).hex())
    assert out.count("refused: this IPCMemoryHandle was closed") == 3


@pytest.mark.skipif(pygpu.backend != "host", reason="the runtimes may map a freed allocation's handle "
                    "(what they do then is theirs); the host backend refuses it")
def test_the_handle_of_freed_memory_is_refused():
    mem = pygpu.mem_alloc(4096, ipc=True)
    handle = pygpu.mem_get_ipc_handle(mem).hex()
    mem.free()
    out = child("""
        import sys, pygpu
        try:
            pygpu.IPCMemoryHandle(bytes.fromhex(sys.argv[1]))
        except pygpu.GPUError as e:
            print("refused:", e)
        """, handle)
    assert "refused:" in out and "invalid resource handle" in out


# ---- events another process waits for ------------------------------------------------------

def spin_on(stream, seconds):
    """Keep `stream` busy for about `seconds` (CuPy's kernel: a GPU only)."""
    cp = pytest.importorskip("cupy")
    kernel = cp.RawKernel(r'''
        extern "C" __global__ void spin(long long cycles) {
            long long t0 = clock64();
            while (clock64() - t0 < cycles) {}
        }''', "spin")
    rate_khz = cp.cuda.runtime.deviceGetAttribute(cp.cuda.runtime.cudaDevAttrClockRate, pygpu.get_device())
    from_external = getattr(cp.cuda.Stream, "from_external", None)     # (CuPy 14 on: ExternalStream is deprecated)
    with (from_external(stream) if from_external else cp.cuda.ExternalStream(stream.ptr)):
        kernel((1,), (1,), (np.int64(seconds * rate_khz * 1000),))


def test_another_process_waits_for_an_event_before_it_reads(rng):
    """The child opens this process's event and memory, and its stream waits
    for the event before it copies: on a GPU the event is recorded behind a
    kernel that keeps the stream busy, after the copy that writes the bytes
    the child must see (without the wait it reads the earlier ones)."""
    n = N
    first = rng.integers(0, 2**62, n // 8, dtype=np.int64)
    second = ~first
    mem = pygpu.mem_alloc(n, ipc=True)
    pygpu.memcpy_htod(mem, first)
    later = pygpu.to_gpu(second)
    ev = pygpu.Event(timing=False, interprocess=True)
    handle = ev.ipc_handle()
    assert isinstance(handle, bytes) and len(handle) == 64
    code = textwrap.dedent("""
        import sys, numpy as np, pygpu
        mem_hex, ev_hex = sys.stdin.readline().split()
        m = pygpu.IPCMemoryHandle(bytes.fromhex(mem_hex))
        ev = pygpu.Event.from_ipc_handle(bytes.fromhex(ev_hex))
        assert not ev.timing and ev.device == pygpu.get_device()
        s = pygpu.Stream(non_blocking=True)
        s.wait_event(ev)
        busy = not ev.query()
        out = pygpu.empty(int(sys.argv[1]) // 8, np.int64)
        pygpu.memcpy_dtod_async(out.ptr, m.ptr, int(sys.argv[1]), stream=s)
        s.synchronize()
        print(int(busy), out.get().tobytes().hex())
        del ev
        m.close()
        """)
    proc = subprocess.Popen([sys.executable, "-c", code, str(n)], env=clean_env(PYGPU_BACKEND=pygpu.backend),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        s = pygpu.Stream(non_blocking=True)
        if pygpu.backend != "host":
            spin_on(s, 3.0)
        pygpu.memcpy_dtod_async(mem.ptr, later.ptr, n, stream=s)
        ev.record(s)
        out, err = proc.communicate(f"{pygpu.mem_get_ipc_handle(mem).hex()} {handle.hex()}\n", timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-3000:]
    busy, data = out.split()
    assert np.array_equal(np.frombuffer(bytes.fromhex(data), np.int64), second)
    if pygpu.backend != "host":
        assert busy == "1"          # (the child asked while the kernel ran: the wait was what held it)
    s.synchronize()


def test_event_handle_refusals():
    with pytest.raises(ValueError, match="interprocess=True"):
        pygpu.Event(timing=False).ipc_handle()
    ev = pygpu.Event(timing=False, interprocess=True)
    handle = ev.ipc_handle()
    if pygpu.backend != "cuda":                     # this process's own event: HIP's rule, and the host's
        with pytest.raises(pygpu.GPUError):
            pygpu.Event.from_ipc_handle(handle)
    with pytest.raises(ValueError, match="a handle is 64 bytes"):
        pygpu.Event.from_ipc_handle(handle[:10])
    with pytest.raises(TypeError):
        pygpu.Event.from_ipc_handle("not bytes")
    if pygpu.backend == "host":                     # (the runtimes' handles are theirs to judge)
        with pytest.raises(pygpu.GPUError):
            pygpu.Event.from_ipc_handle(bytes(64))
