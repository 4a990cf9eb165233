"""Which PyGPU calls on a stream of their own break a graph capture that
another stream is under in global mode (cudaStreamCaptureModeGlobal:
"potentially unsafe" calls from any thread invalidate it)?  Each case runs
inside a capture of its own (CuPy's, on a non-blocking stream of CuPy's,
begun in this thread, then in another thread that ends it once the case
is done) and prints whether that capture ended valid, and whether the
case's data landed.

    python tools/research/global-capture-probe.py      (CUDA backend, CuPy)
"""
import gc
import threading

import cupy as cp
import numpy as np

import pygpu

MiB = 1 << 20
s = pygpu.Stream(non_blocking=True)
big = np.ones(64 * MiB // 8)
small8 = np.array([2.5])
g = pygpu.to_gpu(big, stream=s)
g_reg = pygpu.empty(big.shape, big.dtype, stream=s)      # (registering's: g keeps its ones)
s.synchronize()


def case_staged_up():
    x = pygpu.to_gpu(big, stream=s)
    s.synchronize()
    return float(x[:4].get(stream=s).sum()) == 4.0


def case_staged_down():
    out = np.empty_like(big)
    g.get(ary=out, stream=s)
    return out[-1] == 1.0


def case_registering():
    h = np.full(64 * MiB // 8, 3.0)
    for _ in range(3):          # (met again: page-locked in place at a later meeting)
        g_reg.set(h, stream=s)
    s.synchronize()
    return pygpu.registered_stats()["buffers"] >= 0


def case_launch8():
    x = pygpu.to_gpu(small8, stream=s)
    return x.get(stream=s)[0] == 2.5


def case_pagelocked_new():
    p = pygpu.pagelocked_empty(3 * MiB + 4096, np.uint8)       # (a size the pool holds no block of)
    p[:] = 1
    return int(p[5]) == 1


def case_pinned_freed():
    p = pygpu.pagelocked_empty(5 * MiB + 4096, np.uint8)
    del p
    gc.collect()
    pygpu.trim_pinned_pool()
    return True


def case_device_alloc():
    x = pygpu.empty(16 * MiB, np.uint8, stream=s)
    del x
    return True


def case_new_stream_and_event():
    t = pygpu.Stream(non_blocking=True)
    e = pygpu.Event()
    e.record(t)
    e.synchronize()
    return e.query() and t.query()


def case_device_synchronize():
    pygpu.synchronize()
    return True


def run(fn, where):
    """(capture's end, landed, raised) for fn run under a global capture
    begun in this thread or in another one."""
    cs = cp.cuda.Stream(non_blocking=True)
    cp.cuda.Device().synchronize()
    begun, done, ended = threading.Event(), threading.Event(), {}

    def end():
        try:
            cs.end_capture()
            ended["valid"] = "valid"
        except Exception as e:      # noqa: BLE001 - reported
            ended["valid"] = f"BROKEN ({type(e).__name__}: {str(e)[:120]})"

    def capture():
        cs.begin_capture(mode=0)
        begun.set()
        done.wait(60)
        end()

    if where == "other":
        t = threading.Thread(target=capture)
        t.start()
        begun.wait(60)
    else:
        cs.begin_capture(mode=0)
    try:
        landed = fn()
        err = None
    except Exception as e:          # noqa: BLE001 - reported
        landed, err = None, f"{type(e).__name__}: {str(e)[:160]}"
    if where == "other":
        done.set()
        t.join()
    else:
        end()
    return ended["valid"], landed, err


for where in ("this", "other"):
    print(f"-- the capture begun in {where} thread")
    for name, fn in list(globals().items()):
        if not name.startswith("case_"):
            continue
        valid, landed, err = run(fn, where)
        print(f"{name[5:]:<24} capture {valid}; landed {landed}; raised {err}", flush=True)
        try:
            cp.cuda.Device().synchronize()
            pygpu.synchronize()
        except Exception as e:      # noqa: BLE001 - a broken capture may leave an error behind
            print("   after:", type(e).__name__, str(e)[:120])
