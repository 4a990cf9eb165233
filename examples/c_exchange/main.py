"""Kernel glue in C (glue.c) on GPUArrays, views and (where installed) torch tensors."""
import numpy as np

import glue
import pygpu

n = 1000
x = pygpu.to_gpu(np.arange(n, dtype=np.float32))
y = pygpu.zeros(n, np.float32)
xp, yp, stream = glue.axpy(2.0, x, y)
assert (xp, yp, stream) == (x.ptr, y.ptr, 0), (xp, yp, stream)      # the legacy default stream: NULL

s = pygpu.Stream()
with s:
    _, _, stream = glue.axpy(1.0, x[::-1][::-1], y)
assert stream == (0 if pygpu.backend == "host" else s.ptr), stream    # the stream `with` set
if pygpu.backend == "host":                                           # the loop ran here
    np.testing.assert_array_equal(y.get(), 3 * np.arange(n, dtype=np.float32))

try:
    import torch
except ImportError:
    torch = None
if torch is not None and pygpu.backend == "cuda" and torch.cuda.is_available():
    t = torch.ones(n, device="cuda")
    _, tp, _ = glue.axpy(1.0, x, t)          # a tensor, taken in C through torch's exchange table
    assert tp == t.data_ptr()
    print("torch tensors: taken without a copy")
try:
    glue.axpy(1.0, x, pygpu.zeros(n, np.float64))
except TypeError as e:
    print("refused:", e)
print("c_exchange: ok")
