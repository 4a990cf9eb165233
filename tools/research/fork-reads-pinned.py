"""Can a forked child read the parent's page-locked arrays?  A
pagelocked_empty array and a get() result from the pinned pool, written
by the parent, read by a child after os.fork(); the child's exit status
(-11: a segfault: the pages were not inherited).

    python tools/research/fork-reads-pinned.py"""
import os, time
import numpy as np
import pygpu

h = pygpu.pagelocked_empty(1 << 20, np.uint8)
h[:] = 7
g = pygpu.to_gpu(np.full(4 << 20, 5, np.uint8))
g.get()
end = time.monotonic() + 10
while pygpu.pinned_pool_stats()["cached"] < (4 << 20) and time.monotonic() < end:
    time.sleep(0.002)
r = g.get()
for name, a, want in (("pagelocked_empty", h, 7), ("get() from the pool", r, 5)):
    pid = os.fork()
    if pid == 0:
        os._exit(0 if int(a[0]) == want and int(a[-1]) == want else 3)
    _, status = os.waitpid(pid, 0)
    print(f"{name} ({type(a.base).__name__}): the child's exit {os.waitstatus_to_exitcode(status)}", flush=True)
