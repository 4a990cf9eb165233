"""Copies between two devices through page-locked host buffers
(transfer_config(peer=False)) against the slower of the two pinned host
links they use (device 0 down, device 1 up), at each size given, medians:
the numbers for choosing PYGPU_CROSS_PARTS and PYGPU_CROSS_CHUNK_MIN
(rebuilt between settings, src/tuning.h edited in place).

    python tools/research/cross-staged.py [16M 64M 256M]
"""
import sys

import numpy as np

import pygpu
from pygpu.bench import parse_size, pinned_array, time_case


def main(argv):
    sizes = [parse_size(s) for s in argv] or [16 << 20, 64 << 20, 256 << 20]
    for n in sizes:
        with pygpu.Device(0):
            a = pygpu.to_gpu(np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8))
            down_host = pinned_array(n)
            down = time_case(lambda: a.get(ary=down_host), n)
        with pygpu.Device(1):
            up_host, d1 = pinned_array(n), pygpu.empty(n, np.uint8)
            up = time_case(lambda: d1.set(up_host), n)
        pygpu.transfer_config(peer=False)
        b = a.copy(device=1)
        assert np.array_equal(b.get(), a.get())
        staged = time_case(lambda: a.copy(device=1), n)
        pygpu.transfer_config(peer=True)
        floor = max(down, up)
        print(f"{n >> 20:5d} MiB: staged {n / staged / 1e9:5.1f} GB/s, down {n / down / 1e9:5.1f}, "
              f"up {n / up / 1e9:5.1f}: {floor / staged:.2f} of the slower link", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
