"""Why does a 1 MiB to_gpu beside a 1 GiB one wait for all of it when the
big buffer is page-locked in place and each thread has a non-blocking
stream of its own?  (4 H200 host, 2026-11-27: 20 ms beside against 50 us
alone, 405 times, where the same on the default streams took 7.4 times
once big DMAs went in pieces, and the staged path 2.75.)  Each case a 1
MiB (or 512 KiB: staged, under the registration minimum) to_gpu alone and
beside a thread moving 1 GiB in a loop, medians, on streams of their own
and on the default streams: the small one registered, staged, or
page-locked memory of its own, the big one registered in place or
page-locked memory of its own, and how many copies PyGPU's kernel
carried (bus.c: the small copies beside a bulk one, since the run above).

    python tools/research/beside-registered.py
"""
import pygpu
from pygpu.bench import GiB, MiB, pageable_array, pinned_array
from pygpu.bench_scale import latency_beside


def met(host, times=80):
    """`host` after `times` to_gpu of it (page-locked in place from 1 MiB: 64 MiB moved)."""
    for _ in range(times):
        pygpu.to_gpu(host)
    return host


def main():
    big, pin_big = met(pageable_array(GiB), 3), pinned_array(GiB)
    cases = (("small 1M registered, big registered", lambda: met(pageable_array(MiB)), big),
             ("small 512K staged, big registered", lambda: pageable_array(512 << 10), big),
             ("small 1M pinned, big pinned", lambda: pinned_array(MiB), pin_big),
             ("small 1M pinned, big registered", lambda: pinned_array(MiB), big))
    for own in (True, False):
        for label, small, big_host in cases:
            carried = pygpu.backend_module._bus_kernel_copies()
            alone, beside = latency_beside(budget=0.5, own_streams=own, small_host=small(), big_host=big_host)
            carried = pygpu.backend_module._bus_kernel_copies() - carried
            print(f"{label}, own streams {own}: alone {alone * 1e6:.0f} us, beside {beside * 1e6:.0f} us "
                  f"({beside / alone:.1f}x; {carried} copies by kernel)", flush=True)


if __name__ == "__main__":
    main()
