"""A device reset while background transfers are in flight (research, 2026-11-29):
to_gpu_async and get_async of 32 MiB of pageable memory queued and not waited
for, then cudaDeviceReset, then the device used again; prints what it finds.
Run against an earlier build (PYTHONPATH=...) to see what the reset did before
it waited for them (tests/test_background.py has the test)."""
import numpy as np

import pygpu

print("pygpu from", pygpu.__file__)
pygpu.transfer_config(min_bytes=0)
h = np.random.default_rng(0).random(4 << 20)
back = np.empty_like(h)
s = pygpu.Stream()
g = pygpu.to_gpu(h)
for rnd in range(3):
    sent = [pygpu.to_gpu_async(h, stream=s) for _ in range(3)]
    g.get_async(stream=s, ary=back)
    print("round", rnd, "reset", pygpu.cudaDeviceReset(), flush=True)
    del sent
    g = pygpu.to_gpu(h)
    s = pygpu.Stream()
    x = pygpu.to_gpu_async(h, stream=s)
    y = np.empty_like(h)
    try:
        x.get_async(stream=s, ary=y)
        s.synchronize()
        print("  after: data", "right" if (y == h).all() else "WRONG", flush=True)
    except pygpu.GPUError as e:
        print("  after: GPUError", e, flush=True)
print("done")
