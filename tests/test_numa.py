"""PyGPU's page-locked blocks on their device's NUMA node: Device.numa_node
says where the host puts a device (sysfs on a GPU backend, PYGPU_HOST_NUMA
on the host backend), the pinned pool's blocks for a device (staging
buffers, get()'s pooled arrays) prefer that node, as the kernel itself
reports, a node the kernel does not have is tried once and forgotten,
and transfer_config(numa=False) or PYGPU_NUMA=0 turns it off; the data
are NumPy's throughout.  The kernel's answers are read here with
get_mempolicy through ctypes, apart from PyGPU's own reading."""
import os
import re

import numpy as np
import pytest

import pygpu
from numa_helpers import preferred

HOST_ONLY = pytest.mark.skipif(pygpu.backend != "host", reason="PYGPU_HOST_NUMA is the host backend's")


def sysfs_node(busid):
    """What sysfs says of the PCI device at `busid`, read apart from PyGPU."""
    m = re.fullmatch(r"([0-9a-fA-F]+):([0-9a-fA-F]+):([0-9a-fA-F]+)\.([0-7])", busid)
    assert m, busid
    name = "%04x:%02x:%02x.%x" % tuple(int(g, 16) for g in m.groups())
    try:
        with open(f"/sys/bus/pci/devices/{name}/numa_node") as f:
            node = int(f.read())
    except (OSError, ValueError):
        return -1
    return node if node >= 0 else -1


@HOST_ONLY
def test_the_host_devices_are_on_the_nodes_the_environment_lists(run_python):
    code = "import pygpu; print([pygpu.Device(i).numa_node for i in range(4)])"
    env = {"PYGPU_BACKEND": "host", "PYGPU_HOST_DEVICES": "4"}
    assert run_python(code, env=env).stdout.split("\n")[-2] == "[-1, -1, -1, -1]"
    env["PYGPU_HOST_NUMA"] = "3,x,-2"
    assert run_python(code, env=env).stdout.split("\n")[-2] == "[3, -1, -1, -1]"
    env["PYGPU_HOST_NUMA"] = "0,,1,2x"
    assert run_python(code, env=env).stdout.split("\n")[-2] == "[0, -1, 1, -1]"


@pytest.mark.skipif(pygpu.backend == "host", reason="a GPU's node is sysfs's; the host backend's, the environment's")
def test_each_gpu_is_on_the_node_sysfs_names():
    for i in range(pygpu.device_count()):
        d = pygpu.Device(i)
        assert d.numa_node == sysfs_node(d.pci_bus_id), d.pci_bus_id


def test_the_setting_and_its_arguments():
    before = pygpu.transfer_config()["numa"]
    try:
        assert pygpu.transfer_config(numa=False)["numa"] is False
        assert pygpu.transfer_config()["numa"] is False
        for bad in (1, 0, None, "yes", np.bool_(True)):     # (as peer: a bool, nothing else)
            with pytest.raises(TypeError, match="numa must be True or False"):
                pygpu.transfer_config(numa=bad)
        assert pygpu.transfer_config()["numa"] is False
    finally:
        pygpu.transfer_config(numa=before)
    assert {"placed", "unplaced"} <= set(pygpu.pinned_pool_stats())


def test_pygpu_numa_0_turns_it_off(run_python):
    code = "import pygpu; print(pygpu.transfer_config()['numa'])"
    assert run_python(code, env={"PYGPU_NUMA": "0"}).stdout.split("\n")[-2] == "False"
    assert run_python(code, env={"PYGPU_NUMA": "1"}).stdout.split("\n")[-2] == "True"


PLACED = """
    import sys, time
    import numpy as np, pygpu
    sys.path.insert(0, "tests")
    from numa_helpers import preferred
    {setup}
    pygpu.transfer_config(min_bytes=1 << 20)         # (staged on the host backend too)
    MiB = 1 << 20

    def settled():
        for _ in range(2000):
            if pygpu.pinned_pool_stats()["background"] == 0:
                return
            time.sleep(0.005)
        raise SystemExit("the warmer never finished")

    def pooled_get(g):
        '''get() twice: the second's array is a block the warmer made for g's device.'''
        first = g.get()
        settled()
        second = g.get()
        np.testing.assert_array_equal(first, second)
        return second

    x = np.random.default_rng(5).integers(0, 255, 24 * MiB, dtype=np.uint8)
    out, kept = {{}}, []                                # (the results kept: their blocks not given back)
    for dev in range(pygpu.device_count()):
        with pygpu.Device(dev):
            g = pygpu.to_gpu(x)                        # (a lane's staging buffers)
            y = np.empty_like(x)
            g.get(ary=y)
            np.testing.assert_array_equal(y, x)
            r = pooled_get(g)
            np.testing.assert_array_equal(r, x)
            out[dev] = preferred(r.ctypes.data)
            kept.append(r)
    print("NODES", *(out[d] for d in sorted(out)))
    s = pygpu.pinned_pool_stats()
    print("STATS", s["placed"], s["unplaced"])
"""


def run_placed(run_python, env, setup=""):
    proc = run_python(PLACED.format(setup=setup), env={"PYGPU_BACKEND": "host", "PYGPU_HOST_DEVICES": "2", **env})
    lines = dict(ln.split(" ", 1) for ln in proc.stdout.splitlines() if ln[:5] in ("NODES", "STATS"))
    nodes = [None if a == "None" else int(a) for a in lines["NODES"].split()]
    return nodes, [int(v) for v in lines["STATS"].split()]


@HOST_ONLY
def test_a_devices_blocks_lie_on_its_node(run_python):
    """Device 0 on node 0 (every Linux host has one), device 1 on none: the
    staging buffers and the pooled get() result for device 0 prefer node
    0, device 1's keep the default policy, and the data are NumPy's."""
    (n0, n1), (placed, unplaced) = run_placed(run_python, {"PYGPU_HOST_NUMA": "0"})
    if placed == 0:
        assert unplaced >= 1            # (the kernel refused: said, and nothing placed)
        pytest.skip("this kernel or sandbox refuses memory policies: blocks made on no node")
    assert unplaced == 0 and placed >= 3    # (a lane's buffers and the warmed block, at least)
    if n0 is None:
        pytest.skip("get_mempolicy unreadable here")
    assert (n0, n1) == (0, -1)


@HOST_ONLY
def test_the_setting_off_places_nothing(run_python):
    nodes, (placed, unplaced) = run_placed(run_python, {"PYGPU_HOST_NUMA": "0,0"},
                                           setup="pygpu.transfer_config(numa=False)")
    assert placed == 0 and unplaced == 0
    assert all(n in (-1, None) for n in nodes), nodes
    (_, _), (placed, unplaced) = run_placed(run_python, {"PYGPU_HOST_NUMA": "0,0", "PYGPU_NUMA": "0"})
    assert placed == 0 and unplaced == 0


@HOST_ONLY
def test_a_node_the_kernel_has_not_is_tried_once(run_python):
    """Node 1000 (no host here has it): the kernel refuses it once for
    device 0, which is then on none for its blocks (Device.numa_node
    still says what the host says); the transfers are right all the same."""
    code = """
        import numpy as np, pygpu
        pygpu.transfer_config(min_bytes=1 << 20)
        x = np.random.default_rng(9).standard_normal(3 << 20)
        for depth in (2, 3, 4):                     # (new staging buffers each time)
            pygpu.transfer_config(depth=depth)
            g = pygpu.to_gpu(x)
            np.testing.assert_array_equal(g.get(), x)
        s = pygpu.pinned_pool_stats()
        print("STATS", s["placed"], s["unplaced"], pygpu.Device(0).numa_node)
    """
    proc = run_python(code, env={"PYGPU_BACKEND": "host", "PYGPU_HOST_NUMA": "1000"})
    placed, unplaced, node = [int(v) for v in proc.stdout.split("STATS")[1].split()]
    assert placed == 0 and unplaced == 1 and node == 1000


@pytest.mark.skipif(not os.path.exists("/sys/devices/system/node/node0"), reason="no NUMA node 0 in sysfs")
def test_get_mempolicy_reads_the_default_policy_of_ordinary_memory():
    """The reading these tests rely on, checked against memory no one placed."""
    x = np.ones(1 << 20, np.uint8)
    assert preferred(x.ctypes.data) in (-1, None)
