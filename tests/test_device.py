"""Devices: count, current device, Device objects (docs/api.md, Devices)."""
import re
import shutil
import subprocess
import threading

import pytest

import pygpu

PCI_RE = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]$", re.I)
UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)


def test_device_count():
    n = pygpu.device_count()
    assert type(n) is int and n >= 1


def test_get_set_device_round_trip():
    n = pygpu.device_count()
    start = pygpu.get_device()
    assert type(start) is int and 0 <= start < n
    for i in list(range(n)) + [start]:
        assert pygpu.set_device(i) is None
        assert pygpu.get_device() == i


def _assert_names_range(msg, n):
    assert "device" in msg.lower(), msg
    assert "0" in msg and (str(n - 1) in msg or str(n) in msg), (
        "the message should name the valid range [0, %d): %s" % (n, msg))


def test_set_device_out_of_range():
    n = pygpu.device_count()
    start = pygpu.get_device()
    for bad in (-1, n, n + 100):
        with pytest.raises(ValueError) as info:
            pygpu.set_device(bad)
        _assert_names_range(str(info.value), n)
        assert pygpu.get_device() == start


def test_set_device_wrong_type():
    for bad in ("x", 0.0, [0]):
        with pytest.raises(TypeError):
            pygpu.set_device(bad)


def test_Device_out_of_range_and_wrong_type():
    n = pygpu.device_count()
    for bad in (-1, n):
        with pytest.raises(ValueError) as info:
            pygpu.Device(bad)
        _assert_names_range(str(info.value), n)
    with pytest.raises(TypeError):
        pygpu.Device("x")


@pytest.mark.parametrize("i", range(pygpu.device_count()))
def test_Device_attributes(i):
    d = pygpu.Device(i)
    assert d.id == i and type(d.id) is int
    assert int(d) == i
    assert isinstance(d.name, str) and d.name.strip()
    cc = d.compute_capability
    assert isinstance(cc, tuple) and len(cc) == 2
    assert all(type(x) is int and x >= 0 for x in cc), cc
    if pygpu.backend != "host":
        assert cc[0] >= 1, cc
    assert type(d.total_memory) is int and d.total_memory > 0
    assert type(d.multiprocessor_count) is int and d.multiprocessor_count > 0
    assert isinstance(d.pci_bus_id, str) and PCI_RE.match(d.pci_bus_id), d.pci_bus_id
    assert isinstance(d.uuid, str) and UUID_RE.match(d.uuid), d.uuid
    assert not d.uuid.upper().startswith("GPU-")


def test_Device_identity():
    n = pygpu.device_count()
    for i in range(n):
        assert pygpu.Device(i) is pygpu.Device(i)
    cur = pygpu.get_device()
    assert pygpu.Device() is pygpu.Device(cur)
    assert pygpu.Device(None) is pygpu.Device(cur)
    assert int(pygpu.Device(0)) == 0


def test_mem_info():
    d = pygpu.Device()
    info = d.mem_info()
    assert isinstance(info, tuple) and len(info) == 2
    free, total = info
    assert type(free) is int and type(total) is int
    assert 0 <= free <= total
    assert total > 0
    gfree, gtotal = pygpu.mem_get_info()
    assert 0 <= gfree <= gtotal == total


def test_synchronize():
    assert pygpu.synchronize() is None
    pygpu.Device().synchronize()
    for i in range(pygpu.device_count()):
        pygpu.Device(i).synchronize()


def test_make_current():
    start = pygpu.get_device()
    pygpu.Device(0).make_current()
    assert pygpu.get_device() == 0
    pygpu.Device(start).make_current()
    assert pygpu.get_device() == start


def test_context_manager_single_device():
    """With whatever devices exist: enter, nest, and restore on exceptions."""
    n = pygpu.device_count()
    last = n - 1
    pygpu.set_device(0)
    with pygpu.Device(last):
        assert pygpu.get_device() == last
        assert pygpu.Device() is pygpu.Device(last)
        with pygpu.Device(0):
            assert pygpu.get_device() == 0
        assert pygpu.get_device() == last
    assert pygpu.get_device() == 0
    with pytest.raises(KeyError):
        with pygpu.Device(last):
            raise KeyError("boom")
    assert pygpu.get_device() == 0


@pytest.mark.timing
def test_thread_does_not_change_main_current_device():
    n = pygpu.device_count()
    j = n - 1
    pygpu.set_device(0)
    entered, release = threading.Event(), threading.Event()
    seen = {}

    def worker():
        try:
            with pygpu.Device(j):
                seen["inside"] = pygpu.get_device()
                entered.set()
                release.wait(60)
        except BaseException as e:  # report to the main thread
            seen["error"] = e
            entered.set()

    t = threading.Thread(target=worker)
    t.start()
    assert entered.wait(60)
    assert pygpu.get_device() == 0
    release.set()
    t.join(60)
    assert "error" not in seen, seen
    assert seen["inside"] == j
    assert pygpu.get_device() == 0


MULTI_DEVICE_SCRIPT = r"""
import re, threading
import pygpu

n = pygpu.device_count()
assert n == 3, n
assert pygpu.get_device() == 0

devs = [pygpu.Device(i) for i in range(n)]
assert [d.id for d in devs] == [0, 1, 2]
assert [int(d) for d in devs] == [0, 1, 2]
assert len({d.uuid for d in devs}) == 3, [d.uuid for d in devs]
assert len({d.pci_bus_id for d in devs}) == 3, [d.pci_bus_id for d in devs]
assert all(pygpu.Device(i) is devs[i] for i in range(n))

# set_device / get_device
for i in (2, 1, 0):
    pygpu.set_device(i)
    assert pygpu.get_device() == i
    assert pygpu.Device() is devs[i]
for bad in (-1, 3):
    try:
        pygpu.set_device(bad)
    except ValueError as e:
        msg = str(e)
        assert "0" in msg and ("2" in msg or "3" in msg), msg
    else:
        raise AssertionError("set_device(%d) did not raise" % bad)
    assert pygpu.get_device() == 0

# nested context managers restore on exit
with devs[1]:
    assert pygpu.get_device() == 1
    assert pygpu.Device() is devs[1]
    with devs[2]:
        assert pygpu.get_device() == 2
        with devs[0]:
            assert pygpu.get_device() == 0
        assert pygpu.get_device() == 2
    assert pygpu.get_device() == 1
    with devs[1]:                      # re-entering the same device nests too
        assert pygpu.get_device() == 1
    assert pygpu.get_device() == 1
assert pygpu.get_device() == 0

# exceptions restore
try:
    with devs[2]:
        with devs[1]:
            raise KeyError("boom")
except KeyError:
    pass
assert pygpu.get_device() == 0

# restores the device that was current when entering
pygpu.set_device(1)
with devs[2]:
    assert pygpu.get_device() == 2
assert pygpu.get_device() == 1
pygpu.set_device(0)

# objects made inside `with Device(i)` belong to device i
with devs[2]:
    s = pygpu.Stream()
    a = pygpu.mem_alloc(64)
    e = pygpu.Event().record()
    assert int(s.device) == 2, s.device
    assert int(a.device) == 2, a.device
    free, total = devs[2].mem_info()
    assert 0 <= free <= total
assert pygpu.get_device() == 0
a.free()

# per thread: a thread entering Device(2) leaves the main thread on 0
entered, release = threading.Event(), threading.Event()
seen = {}
def worker():
    try:
        start = pygpu.get_device()
        with devs[2]:
            seen["inside"] = pygpu.get_device()
            entered.set()
            release.wait(60)
        seen["after"] = pygpu.get_device()
        seen["start"] = start
    except BaseException as e:
        seen["error"] = repr(e)
        entered.set()
with devs[1]:
    t = threading.Thread(target=worker)
    t.start()
    assert entered.wait(60)
    assert pygpu.get_device() == 1, pygpu.get_device()
    release.set()
    t.join(60)
    assert pygpu.get_device() == 1
assert pygpu.get_device() == 0
assert "error" not in seen, seen
assert seen["inside"] == 2 and seen["after"] == seen["start"], seen

# two threads each inside a different device at the same time
barrier = threading.Barrier(3)
results = {}
def hold(i):
    with devs[i]:
        barrier.wait(60)
        results[i] = pygpu.get_device()
        barrier.wait(60)
threads = [threading.Thread(target=hold, args=(i,)) for i in (1, 2)]
for t in threads:
    t.start()
barrier.wait(60)
barrier.wait(60)
for t in threads:
    t.join(60)
assert results == {1: 1, 2: 2}, results
assert pygpu.get_device() == 0
print("OK")
"""


@pytest.mark.timing
def test_multi_device_host_subprocess(run_python):
    """Three host devices: nesting, restore, per-thread state."""
    proc = run_python(MULTI_DEVICE_SCRIPT,
                      env={"PYGPU_BACKEND": "host", "PYGPU_HOST_DEVICES": "3"})
    assert proc.stdout.strip().endswith("OK")


def test_host_devices_env_default_is_one(run_python):
    proc = run_python("import pygpu; print(pygpu.device_count())",
                      env={"PYGPU_BACKEND": "host"})
    assert proc.stdout.strip() == "1"


# ---- GPU only ------------------------------------------------------------------

def _nvidia_smi_gpus():
    exe = shutil.which("nvidia-smi")
    if exe is None:
        pytest.skip("nvidia-smi is not on PATH")
    out = subprocess.run(
        [exe, "--query-gpu=name,uuid,pci.bus_id", "--format=csv,noheader"],
        capture_output=True, text=True, timeout=60, check=True).stdout
    gpus = {}
    for line in out.splitlines():
        if line.strip():
            name, uuid, bus = [x.strip() for x in line.rsplit(",", 2)]
            gpus[uuid] = (name, bus)
    return gpus


def _normalize_pci(bus):
    domain, rest = bus.split(":", 1)
    return "%x:%s" % (int(domain, 16), rest.lower())


@pytest.mark.gpu_only
def test_device_matches_nvidia_smi():
    if pygpu.backend != "cuda":
        pytest.skip("nvidia-smi describes CUDA devices; backend is %r" % pygpu.backend)
    gpus = _nvidia_smi_gpus()
    for i in range(pygpu.device_count()):
        d = pygpu.Device(i)
        key = "GPU-" + d.uuid
        assert key in gpus, (key, gpus)
        name, bus = gpus[key]
        assert d.name == name
        assert _normalize_pci(d.pci_bus_id) == _normalize_pci(bus)


@pytest.mark.gpu_only
def test_multi_device_in_process():
    n = pygpu.device_count()
    if n < 2:
        pytest.skip("needs two GPUs; the host-backend subprocess test covers the logic")
    pygpu.set_device(0)
    with pygpu.Device(1):
        assert pygpu.get_device() == 1
        with pygpu.Device(n - 1):
            assert pygpu.get_device() == n - 1
        assert pygpu.get_device() == 1
    assert pygpu.get_device() == 0
    assert len({pygpu.Device(i).uuid for i in range(n)}) == n
