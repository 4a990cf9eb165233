"""The kernel's memory policies read from Python through ctypes, apart
from PyGPU's own reading (src/numa.c), for tests/test_numa.py and the
children it starts (an address is a process's own: the child that made a
block reads its policy)."""
import ctypes
import platform

GET_MEMPOLICY = {"x86_64": 239, "aarch64": 236}.get(platform.machine())    # (its number where PyGPU builds)
MPOL_DEFAULT, MPOL_PREFERRED, MPOL_F_ADDR = 0, 1, 2


def preferred(addr):
    """The node the memory policy of the page at `addr` prefers: -1 for the
    default policy, None where the kernel will not say."""
    if GET_MEMPOLICY is None:
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    mode, mask = ctypes.c_int(-1), (ctypes.c_ulong * 16)()
    if libc.syscall(ctypes.c_long(GET_MEMPOLICY), ctypes.byref(mode), mask, ctypes.c_ulong(1025),
                    ctypes.c_void_p(addr), ctypes.c_ulong(MPOL_F_ADDR)) != 0:
        return None
    if mode.value == MPOL_DEFAULT:
        return -1
    nodes = [i for i in range(1024) if mask[i // 64] >> (i % 64) & 1]
    return nodes[0] if mode.value == MPOL_PREFERRED and len(nodes) == 1 else ("mode", mode.value, nodes)
