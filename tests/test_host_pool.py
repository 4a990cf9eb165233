"""The host backend's pool of freed large blocks (src/backend/rt_host.c):
a block of 1 MiB or more that is freed is the next allocation of about its
size, so that to_gpu() does not take fresh pages (and their faults) every
time; it is bounded (PYGPU_HOST_POOL, and PYGPU_HOST_MEMORY for live plus
pooled memory), and trim_memory_pool() gives it back to the system.  Each
case runs in a fresh interpreter, so that the pool and the resident set
start from nothing."""
import pytest

POOL_CASE = """
    import numpy as np, pygpu
    MiB = 1 << 20

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096

    a = np.ones(64 * MiB, np.uint8)
    g = pygpu.to_gpu(a)
    p = g.ptr
    free_live = pygpu.mem_get_info()[0]
    del g
    free_after = pygpu.mem_get_info()[0]
    h = pygpu.to_gpu(a[: 60 * MiB])              # within 1/8 of the freed block's size
    reused = h.ptr == p
    assert (h.get() == 1).all()
    del h
    before_trim = rss()
    pygpu.trim_memory_pool()
    dropped = before_trim - rss()
    k = pygpu.empty(60 * MiB, np.uint8)            # after a trim: a block of its own
    print(reused, dropped, free_after - free_live, flush=True)
"""


def _under_asan():
    """Whether AddressSanitizer's runtime is loaded here (tools/asan.sh)."""
    with open("/proc/self/maps") as f:
        maps = f.read()
    return "libclang_rt.asan" in maps or "libasan.so" in maps


def run_case(run_python, **env):
    proc = run_python(POOL_CASE, env={"PYGPU_BACKEND": "host", "PYGPU_HOST_MEMORY": "1G", **env})
    reused, dropped, freed = proc.stdout.split()
    return reused == "True", int(dropped), int(freed)


def test_freed_block_is_reused_and_trimmed(run_python):
    reused, dropped, freed = run_case(run_python)
    assert reused, "a freed 64 MiB block should serve the next 60 MiB allocation"
    if not _under_asan():   # (ASan holds freed memory in its quarantine: the process keeps it)
        assert dropped >= 56 << 20, f"trim_memory_pool() gave back only {dropped} bytes"
    assert freed == 64 << 20, "pooled bytes count as free in mem_get_info() (PYGPU_HOST_MEMORY set: exact)"


def test_pool_off(run_python):
    reused, dropped, _ = run_case(run_python, PYGPU_HOST_POOL="0")
    assert dropped < 8 << 20, "with PYGPU_HOST_POOL=0 freed blocks go back at once"


def test_pool_within_host_memory_limit(run_python):
    run_python("""
        import numpy as np, pygpu
        MiB = 1 << 20
        assert pygpu.mem_get_info() == (64 * MiB, 64 * MiB)
        for n in (8, 12, 16, 40, 60, 3, 63):     # each freed, pooled, and trimmed to make room
            g = pygpu.empty(n * MiB, np.uint8)
            g.fill(n)
            assert (g[-3:].get() == n).all()
            del g
        assert pygpu.mem_get_info()[0] == 64 * MiB
        with __import__("pytest").raises(pygpu.GPUMemoryError):
            pygpu.empty(65 * MiB, np.uint8)
        held = [pygpu.empty(16 * MiB, np.uint8) for _ in range(4)]
        del held
        big = pygpu.empty(64 * MiB, np.uint8)   # the four pooled blocks make way
        big.fill(1)
    """, env={"PYGPU_BACKEND": "host", "PYGPU_HOST_MEMORY": "64M"})


@pytest.mark.parametrize("threads", [4])
def test_pool_from_threads(run_python, threads):
    run_python(f"""
        import threading, numpy as np, pygpu
        MiB = 1 << 20
        def work(k):
            for i in range(30):
                n = (1 + (i * 7 + k) % 9) * MiB
                g = pygpu.empty(n, np.uint8)
                g.fill(k)
                assert (g[-5:].get() == k).all()
                if i % 10 == 9:
                    pygpu.trim_memory_pool(4 * MiB)
        ts = [threading.Thread(target=work, args=(k,)) for k in range({threads})]
        [t.start() for t in ts]
        [t.join() for t in ts]
    """, env={"PYGPU_BACKEND": "host"})
