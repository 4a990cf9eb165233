"""Which library's threads break a global capture while this process makes
no call?  One library imported and used once (an array made on the GPU),
then 20 global captures of a non-blocking stream of PyGPU's, each held
200 ms around a plain sleep; prints how many ended broken.  Research only
(2026-11-29; tools/research/capture-gc.py found such breaks with CuPy,
PyTorch, Numba and JAX all loaded).

    python tools/research/capture-libs.py none|cupy|torch|numba|jax [hold_ms]
"""
import sys
import time

import numpy as np

import pygpu

which = sys.argv[1]
hold = float(sys.argv[2]) / 1e3 if len(sys.argv) > 2 else 0.2
keep = None
if which == "cupy":
    import cupy
    keep = cupy.ones(1 << 20)
elif which == "torch":
    import torch
    keep = torch.ones(1 << 20, device="cuda")
elif which == "numba":
    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack
    from numba import cuda
    keep = cuda.to_device(np.ones(1 << 20))
elif which == "jax":
    import jax.numpy as jnp
    keep = jnp.ones(1 << 20).block_until_ready()
lib = pygpu.backend_module
pygpu.synchronize()
bad = 0
for _ in range(20):
    s = pygpu.Stream(non_blocking=True)
    assert lib._stream_begin_capture(s.handle, 0) == 0
    time.sleep(hold)
    bad += lib._stream_end_capture(s.handle) != 0
print(f"{which:6s} broken {bad} of 20 global captures held {hold * 1e3:.0f} ms", flush=True)
