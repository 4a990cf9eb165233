"""The small-block cache in front of the stream-ordered pool (on by default on
GPU backends; PYGPU_BLOCK_CACHE=1 turns it on for the host backend so that
CI exercises it): blocks come back for the next allocation of the same size
on the legacy stream, out-of-memory empties the cache and tries again, and
trim_memory_pool() gives everything back."""


def test_block_cache_reuse_oom_and_trim(run_python):
    run_python("""
        import numpy as np, pygpu
        MiB = 1 << 20
        free0, total = pygpu.mem_get_info()
        assert total == 4 * MiB

        # Reuse: a freed small block is the next one of that size class.
        a = pygpu.empty(1000, np.uint8); p = a.ptr; del a
        b = pygpu.empty(1000, np.uint8); assert b.ptr == p; del b
        c = pygpu.empty(900, np.uint8); assert c.ptr == p, "sizes round to 512 B"
        c.fill(7); assert (c.get() == 7).all(); del c

        # Not on another stream: stream order only covers the same stream.
        s = pygpu.Stream()
        d = pygpu.empty(1000, np.uint8, stream=s); assert d.ptr != p; del d

        # Blocks held by the cache count as used until trimmed ...
        held = [pygpu.empty(64 << 10, np.uint8) for _ in range(16)]
        del held
        assert pygpu.mem_get_info()[0] <= free0 - 15 * (64 << 10)  # one slot holds the 1 KiB block
        # ... and an allocation that needs them gets them back.
        big = pygpu.empty(free0 - 8 * (64 << 10), np.uint8)
        del big
        pygpu.trim_memory_pool()
        assert pygpu.mem_get_info()[0] == free0

        # Bounded: many sizes do not grow it past its slots.
        for n in range(1, 40):
            pygpu.empty(n * 512, np.uint8)
        assert pygpu.mem_get_info()[0] >= free0 - 16 * (64 << 10)
        pygpu.set_memory_pool(False)
        assert pygpu.mem_get_info()[0] == free0
        pygpu.set_memory_pool(True)
        print("ok")
        """, env={"PYGPU_BACKEND": "host", "PYGPU_BLOCK_CACHE": "1", "PYGPU_HOST_MEMORY": "4M"})
