"""The asynchronous calls' share of their transfer (bench_scale.async_overlap), alone:
to_gpu_async and get_async of touched pageable memory, 16, 64 and 256 MiB, two rounds.
With --after, one round in a fresh process, then one after each of bench --scale's
sections before the async one, in the whole run's order (the threads tables,
staged and as the defaults; a 1 MiB to_gpu beside a 1 GiB one), in this process:
whether what ran before moves the share (the whole run read 0.07 at 16 MiB up
where this tool alone read 0.04).

    python tools/research/async-share.py [--after] [--sizes 16,64]     (any backend)
"""
import argparse

import pygpu  # noqa: F401 - (the backend chosen first)
from pygpu import bench_scale
from pygpu.bench import registration

MiB = 1 << 20


def round_of(label, sizes):
    for down in (False, True):
        for n in sizes:
            call, total, blocking = bench_scale.async_overlap(n * MiB, 0.5, down=down)
            print(f"{label:>14} {'get_async' if down else 'to_gpu_async'} {n:4d} MiB call {call*1e6:7.1f} us "
                  f"total {total*1e6:8.1f} us share {call/total:.3f} blocking {blocking*1e6:8.1f}", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--after", action="store_true")
    p.add_argument("--sizes", default="16,64,256")
    a = p.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    if not a.after:
        for rnd in range(2):
            round_of(f"round {rnd}", sizes)
        return
    round_of("fresh", sizes)
    with registration(0):
        bench_scale.measure_threads(peers=())
    round_of("after staged", sizes)
    if pygpu.transfer_config()["register_limit"]:
        bench_scale.measure_threads(peers=(), ceilings=False)
        round_of("after defaults", sizes)
    for own in (False, True):
        bench_scale.latency_beside(own_streams=own)
    round_of("after beside", sizes)


if __name__ == "__main__":
    main()
