"""The original PyGPU (PybindGPU) interface: cuda* calls returning
cudaError_t objects, cudaEvent_t / cudaStream_t / cudaDeviceProp,
DeviceArray_<dtype> and pointer_wrapper_<dtype> (docs/api.md,
Compatibility).  NumPy is the oracle for every copy."""
import ctypes
import gc
import json
import textwrap
import weakref

import numpy as np
import pytest

import pygpu
from pygpu import lowlevel

DTYPES = pygpu._LOWLEVEL_DTYPES
INVALID_VALUE, MEMORY_ALLOCATION, INVALID_DEVICE, INVALID_HANDLE, NOT_READY = 1, 2, 101, 400, 600


def random_of(rng, dtype, shape):
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def device_view(da):
    """The device side of `da` as a GPUArray (its own layout), read back by NumPy."""
    order = "F" if da._order == "F" else "C"
    return pygpu.GPUArray(tuple(da.shape()), da.dtype, gpudata=int(da.device_data()), order=order).get()


def is_error(e, code=None):
    return isinstance(e, pygpu.cudaError_t) and (e.code != 0 if code is None else e.code == code)


def is_success(e):
    return isinstance(e, pygpu.cudaError_t) and e.code == 0 and not e


# ---- names ------------------------------------------------------------------

def test_every_name_is_in_lowlevel_and_at_the_top_level():
    for name in pygpu._LOWLEVEL_NAMES:
        assert hasattr(lowlevel, name), name
        assert getattr(pygpu, name) is getattr(lowlevel, name), name
        assert name in pygpu.__all__
    assert set(lowlevel.__all__) == set(pygpu._LOWLEVEL_NAMES)
    assert lowlevel.cudaError_t is pygpu.cudaError_t


def test_the_issue_names_exist():
    for t in ("int16", "int32", "int64", "uint16", "uint32", "uint64", "float32", "float64",
              "complex64", "complex128"):
        assert issubclass(getattr(pygpu, f"DeviceArray_{t}"), pygpu.backend_module._HostBuffer)
        assert getattr(pygpu, f"ptr_wrapper_{t}") is getattr(pygpu, f"pointer_wrapper_{t}")
        assert getattr(pygpu, f"DeviceArray_{t}").dtype == np.dtype(t)


def test_PyGPU_has_the_names_and_star_import(run_python):
    proc = run_python("""
        import sys
        import pygpu
        assert "pygpu.lowlevel" not in sys.modules and "pygpu.driver" not in sys.modules
        from PyGPU import *
        assert "pygpu.lowlevel" in sys.modules
        print(cudaGetDevice(), cudaSetDevice(0), DeviceArray_int64.__name__)
        """)
    assert proc.stdout.split("\n")[0] == "(0, <cudaError: code=0>) <cudaError: code=0> DeviceArray_int64"


def test_unknown_attribute_raises_AttributeError():
    with pytest.raises(AttributeError, match="cudaNonesuch"):
        pygpu.cudaNonesuch
    with pytest.raises(AttributeError):
        pygpu.DeviceArray_object
    assert "cudaGetDevice" in dir(pygpu)


# ---- the original README and scripts, verbatim ------------------------------

README_ROUND_TRIP = """
A = numpy.array([1, 2, 3, 4, 5, 6])

da = DeviceArray_int64(A) # Point host_data() to the data pointer in A
da.allocate()             # Allocate memory on the device
da.to_device()            # Copy data to device
fn(da.device_data())      # Apply function to data on device
da.to_host()              # Copy data back into the data pointer in A
"""


def test_readme_round_trip_verbatim():
    def fn(p):
        """A stand-in for the user's kernel: doubles the six int64 at device address p."""
        g = pygpu.GPUArray((6,), np.int64, gpudata=int(p))
        g[...] = g.get() * 2

    ns = {"numpy": np, "fn": fn}
    exec("from PyGPU import *", ns)
    exec(textwrap.dedent(README_ROUND_TRIP), ns)
    assert ns["A"].tolist() == [2, 4, 6, 8, 10, 12]
    assert is_success(ns["da"].last_status())


def test_readme_status_values():
    assert repr(pygpu.cudaSetDevice(0)) == "<cudaError: code=0>"
    dev, err = pygpu.cudaGetDevice()
    assert (dev, repr(err)) == (0, "<cudaError: code=0>")


def test_original_memcpy_script(run_python):
    """test/basic/test_memcpy.py of the original, run unchanged."""
    proc = run_python("""
        import numpy, PyGPU

        a = numpy.array([1., 2., 3., 4., 5.])
        print(a.dtype)

        # Alias a DeviceArray to the numpy array. Note that the suffix (_float64) needs
        # to match the numpy array's dtype.
        da = PyGPU.DeviceArray_float64(a)

        # Allocate memory on device (and check result)
        da.allocate()
        print(da.last_status())

        # Send data to device (and check result)
        da.to_device()
        print(da.last_status())

        # Send data to host (and check result)
        da.to_host()
        print(da.last_status())
        """)
    assert proc.stdout.split("\n")[:4] == ["float64"] + ["<cudaError: code=0>"] * 3


def test_original_device_properties_script(run_python):
    """test/device/get_device_properties.py, with `import PybindGPU` -> `import PyGPU as PybindGPU`."""
    proc = run_python("""
        import PyGPU as PybindGPU

        n_device, err = PybindGPU.cudaGetDeviceCount()

        for i in range(n_device):
            prop = PybindGPU.cudaDeviceProp(i)
            print(f"Device {i}:")
            print(f" | name = {prop.name()}")
            if not PybindGPU.use_hip:
                print(f" | uuid = {prop.uuid()}")
            print(f" | pciBusID = {prop.pciBusID()}")
            print(f" | pciDeviceID = {prop.pciDeviceID()}")
            print(f" `-pciDomainID = {prop.pciDomainID()}")
        print(n_device, err)
        """)
    lines = proc.stdout.splitlines()
    n = int(lines[-1].split()[0])
    assert n >= 1 and lines[-1].endswith("<cudaError: code=0>")
    assert proc.stdout.count("Device ") == n and proc.stdout.count("pciDomainID = ") == n


def test_original_ctypes_idioms(capsys):
    """test/ctypes/test_ctypes.py's calls (minus the CUDA library): the
    device address as an int and through print_address()."""
    k = np.array([1, 2, 3])
    dk = pygpu.DeviceArray_int64(k)
    dk.allocate()
    dk.to_device()
    dk.device_data().print_address()
    assert capsys.readouterr().out.strip() == hex(dk.device_data().__int__())
    assert np.array_equal(device_view(dk), k)


# ---- device calls -----------------------------------------------------------

def test_device_calls_return_error_objects():
    n, err = pygpu.cudaGetDeviceCount()
    assert n == pygpu.device_count() and is_success(err)
    assert is_success(pygpu.cudaSetDevice(0))
    assert pygpu.cudaGetDevice() == (0, pygpu.cudaError_t(0))
    assert is_success(pygpu.cudaDeviceSynchronize())
    (free, total), err = pygpu.cudaMemGetInfo()
    assert is_success(err) and 0 <= free <= total == pygpu.Device().total_memory


@pytest.mark.parametrize("bad", [-1, "count", 2**40, -2**70])
def test_set_device_out_of_range_is_an_error_object(bad):
    if bad == "count":
        bad = pygpu.device_count()
    err = pygpu.cudaSetDevice(bad)
    assert is_error(err, INVALID_DEVICE)
    assert err.name.endswith("ErrorInvalidDevice")
    assert pygpu.get_device() == 0


@pytest.mark.parametrize("bad", ["0", 1.0, None, True, [0]])
def test_set_device_wrong_type_is_TypeError(bad):
    with pytest.raises(TypeError):
        pygpu.cudaSetDevice(bad)


def test_error_names_and_strings():
    assert pygpu.cudaGetErrorName(0).endswith("Success")
    assert pygpu.cudaGetErrorName(pygpu.cudaError_t(INVALID_DEVICE)) == pygpu.cudaError_t(INVALID_DEVICE).name
    assert pygpu.cudaGetErrorString(MEMORY_ALLOCATION) == pygpu.cudaError_t(2).string
    assert isinstance(pygpu.cudaGetErrorString(0), str)
    with pytest.raises(TypeError):
        pygpu.cudaGetErrorName("cudaSuccess")


def test_last_error_reports_and_clears():
    pygpu.cudaGetLastError()
    assert pygpu.backend_module._host_register(0, 0) == INVALID_VALUE     # a failing runtime call
    assert is_error(pygpu.cudaPeekAtLastError(), INVALID_VALUE)
    assert is_error(pygpu.cudaGetLastError(), INVALID_VALUE)
    assert is_success(pygpu.cudaGetLastError())
    assert is_success(pygpu.cudaPeekAtLastError())


def test_device_reset_in_a_fresh_process(run_python):
    proc = run_python("""
        import numpy, pygpu
        a = pygpu.to_gpu(numpy.arange(10.))
        del a
        print(pygpu.cudaDeviceReset())
        b = pygpu.to_gpu(numpy.arange(10.))         # the device works again
        assert (b.get() == numpy.arange(10.)).all()
        assert (pygpu.to_gpu(numpy.ones(1 << 20)).get() == 1).all()
        print("ok")
        """)
    assert proc.stdout.split() == ["<cudaError:", "code=0>", "ok"]


def test_what_a_device_reset_destroyed_is_refused_and_left_alone(run_python):
    """A device reset destroys the memory, streams and events made on the
    device before it: using one of them (an array too: copies, fills,
    casts, assignment from it) raises a GPUError that says so (the runtime
    could crash on its handle, or a kernel break the context on its
    memory), and when they die nothing is given back through the runtime;
    what is made after works.  The host backend keeps its objects through
    a reset, but for under PYGPU_HOST_RESET_RULE=gpu, which takes the
    GPUs' rule so that it is tested everywhere."""
    proc = run_python("""
        import gc, numpy as np, pygpu
        s = pygpu.Stream(non_blocking=True)
        e = pygpu.Event()
        e.record(s)
        a = pygpu.to_gpu(np.arange(1000.), stream=s)
        b = pygpu.to_gpu(np.arange(1 << 22, dtype=np.uint8))
        old = [a, b, s, e]
        s.synchronize()
        print(pygpu.cudaDeviceReset())
        refused = 0
        for fn in (s.synchronize, s.query, e.synchronize, e.query, lambda: e.record(),
                   lambda: pygpu.to_gpu(np.ones(3), stream=s), lambda: pygpu.Stream().wait_event(e),
                   lambda: pygpu.empty(8, np.float32, stream=s)):
            try:
                fn()
            except pygpu.GPUError as exc:
                assert "before the device was reset" in str(exc), exc
                refused += 1
        with s:
            try:
                pygpu.to_gpu(np.ones(3))
            except pygpu.GPUError as exc:
                assert "before the device was reset" in str(exc), exc
                refused += 1
        fresh = pygpu.zeros(1000, np.float64)
        for fn in (b.get, lambda: a.get(stream=None), lambda: b.fill(1), lambda: b.set(np.ones(b.shape, np.uint8)),
                   lambda: b.__setitem__(slice(None), 7), lambda: b.astype(np.float32), lambda: b[::2].copy(),
                   lambda: fresh.__setitem__(slice(None), a)):
            try:
                fn()
            except pygpu.GPUError as exc:
                assert "array's memory was made on device 0 before the device was reset" in str(exc), exc
                refused += 1
        assert (fresh.get() == 0).all()
        free = pygpu.mem_get_info()[0]
        del a, b, s, e, old
        gc.collect()
        print(refused, pygpu.mem_get_info()[0] == free)
        s = pygpu.Stream(non_blocking=True)
        c = pygpu.to_gpu(np.arange(10.), stream=s)
        ev = s.record()
        ev.synchronize()
        assert (c.get() == np.arange(10.)).all()
        print("ok")
        """, env={"PYGPU_BACKEND": pygpu.backend, "PYGPU_HOST_RESET_RULE": "gpu"})
    assert proc.stdout.split() == ["<cudaError:", "code=0>", "17", "True", "ok"], proc.stdout + proc.stderr


def test_a_pooled_array_kept_through_a_reset_stays_readable_and_is_not_cached_again(run_python):
    """A get() result from the pinned pool kept through a device reset: its
    memory is still the program's (ordinary memory once the reset drops
    the registration), and when it dies the pool frees it rather than
    cache it, so that no later transfer meets memory it takes for
    page-locked.  (On the host backend under PYGPU_HOST_RESET_RULE=gpu.)"""
    proc = run_python("""
        import time, numpy as np, pygpu
        pygpu.transfer_config(min_bytes=0)
        expect = np.arange(1 << 18, dtype=np.float32)
        g = pygpu.to_gpu(expect)
        g.get()                                   # none cached: the warmer makes one
        end = time.monotonic() + 30
        while pygpu.pinned_pool_stats()["cached"] < expect.nbytes and time.monotonic() < end:
            time.sleep(0.002)
        h = g.get()
        assert isinstance(h.base, pygpu.HostAllocation)
        del g
        print(pygpu.cudaDeviceReset())
        assert (h == expect).all()
        h[:] = 3                                   # still the program's memory
        assert pygpu.pinned_pool_stats()["cached"] == 0
        del h
        st = pygpu.pinned_pool_stats()
        print(st["in_use"], st["cached"])
        g = pygpu.to_gpu(expect)                   # the device and the pool work again
        assert (g.get() == expect).all()
        print("ok")
        """, env={"PYGPU_BACKEND": pygpu.backend, "PYGPU_HOST_RESET_RULE": "gpu"})
    assert proc.stdout.split() == ["<cudaError:", "code=0>", "0", "0", "ok"], proc.stdout + proc.stderr


def test_a_forked_child_reads_the_parents_page_locked_arrays(run_python):
    """A pagelocked_empty array and a get() result from the pinned pool,
    written by the parent, read by a child after os.fork(), as any NumPy
    array: the pool's blocks are shared pages, not ones a fork leaves out
    (a child reading those segfaults)."""
    proc = run_python("""
        import os, time, warnings, numpy as np, pygpu
        warnings.simplefilter("ignore", DeprecationWarning)      # (fork() of a threaded process)
        pygpu.transfer_config(min_bytes=0)
        h = pygpu.pagelocked_empty(1 << 20, np.uint8)
        h[:] = 7
        g = pygpu.to_gpu(np.full(4 << 20, 5, np.uint8))
        g.get()                                   # none cached: the warmer makes one
        end = time.monotonic() + 30
        while pygpu.pinned_pool_stats()["cached"] < (4 << 20) and time.monotonic() < end:
            time.sleep(0.002)
        r = g.get()
        assert isinstance(r.base, pygpu.HostAllocation)
        for a, want in ((h, 7), (r, 5)):
            pid = os.fork()
            if pid == 0:
                os._exit(0 if int(a[0]) == want and int(a[-1]) == want else 3)
            print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
        """, env={"PYGPU_BACKEND": pygpu.backend})
    assert proc.stdout.split() == ["0", "0"], proc.stdout + proc.stderr


def test_no_device_never_raises(run_python):
    """On a GPU backend that finds no device, every call returns its error."""
    names = [b for b in ("cuda", "hip") if b in pygpu.backends()]
    if not names:
        pytest.skip("no GPU backend was built")
    for name in names:
        proc = run_python("""
            import json, numpy, pygpu
            try:
                pygpu.device_count()
                print(json.dumps("has devices"))
                raise SystemExit
            except pygpu.GPUError:
                pass
            da = pygpu.DeviceArray_int64(numpy.arange(3))
            ev, st = pygpu.cudaEvent_t(), pygpu.cudaStream_t()
            out = dict(
                count=pygpu.cudaGetDeviceCount(), get=pygpu.cudaGetDevice(), set=pygpu.cudaSetDevice(0),
                sync=pygpu.cudaDeviceSynchronize(), mem=pygpu.cudaMemGetInfo(),
                prop=pygpu.cudaDeviceProp(0).last_status(), prop_name=pygpu.cudaDeviceProp(0).name(),
                event=ev.last_status(), event_handle=ev.get(), stream=st.last_status(),
                record=pygpu.cudaEventRecord(ev), query=pygpu.cudaStreamQuery(st),
                elapsed=pygpu.cudaEventElapsedTime(ev, ev), alloc=da.allocate(), status=da.last_status(),
                to_device=da.to_device(), to_host=da.to_host())
            print(json.dumps({k: repr(v) for k, v in out.items()}))
            """, env={"PYGPU_BACKEND": name})
        out = json.loads(proc.stdout.splitlines()[-1])
        if out == "has devices":
            continue
        ok = "<cudaError: code=0>"
        assert out["count"].startswith("(0, <cudaError: code=") and ok not in out["count"], out
        assert out["get"].startswith("(None, ") and ok not in out["get"], out
        for key in ("set", "sync", "prop", "event", "stream", "alloc", "status"):
            assert out[key] != ok and out[key].startswith("<cudaError: code="), (key, out)
        assert out["mem"].startswith("(None, ") and out["prop_name"] == "None" and out["event_handle"] == "0"
        assert out["record"] == out["query"] == f"<cudaError: code={INVALID_HANDLE}>"
        assert out["elapsed"] == f"(None, <cudaError: code={INVALID_HANDLE}>)"
        assert out["to_device"] == out["to_host"] == f"<cudaError: code={INVALID_VALUE}>"


# ---- cudaDeviceProp ---------------------------------------------------------

def test_device_prop_matches_Device():
    for i in range(pygpu.device_count()):
        p, d = pygpu.cudaDeviceProp(i), pygpu.Device(i)
        assert is_success(p.last_status())
        domain, bus, rest = d.pci_bus_id.split(":")
        assert (p.name(), p.uuid(), p.totalGlobalMem(), p.multiProcessorCount(), (p.major(), p.minor())) == \
            (d.name, d.uuid, d.total_memory, d.multiprocessor_count, d.compute_capability)
        assert (p.pciDomainID(), p.pciBusID(), p.pciDeviceID()) == \
            (int(domain, 16), int(bus, 16), int(rest.split(".")[0], 16))
        assert len(p.uuid().replace("-", "")) == 32


def test_device_prop_pci_fields_are_each_their_own(run_python):
    """The original returned the bus number for all three; the host backend
    numbers its devices by PCI device, so they differ there."""
    proc = run_python("""
        import pygpu
        p = pygpu.cudaDeviceProp(2)
        print(p.pciDomainID(), p.pciBusID(), p.pciDeviceID(), pygpu.Device(2).pci_bus_id)
        """, env={"PYGPU_BACKEND": "host", "PYGPU_HOST_DEVICES": 3})
    assert proc.stdout.split() == ["0", "0", "2", "0000:00:02.0"]


@pytest.mark.gpu_only
def test_device_prop_pci_address_is_the_system_one():
    import os
    gpus = "/proc/driver/nvidia/gpus"
    if pygpu.backend != "cuda" or not os.path.isdir(gpus):
        pytest.skip("needs the NVIDIA driver's /proc entries")
    known = {e.lower() for e in os.listdir(gpus)}
    for i in range(pygpu.device_count()):
        p = pygpu.cudaDeviceProp(i)
        assert "%04x:%02x:%02x.0" % (p.pciDomainID(), p.pciBusID(), p.pciDeviceID()) in known


def test_device_prop_out_of_range_and_wrong_type():
    p = pygpu.cudaDeviceProp(pygpu.device_count())
    assert is_error(p.last_status(), INVALID_DEVICE)
    assert p.name() is None and p.pciBusID() is None and p.major() is None and p.uuid() is None
    assert "cudaDeviceProp" in repr(p)
    with pytest.raises(TypeError):
        pygpu.cudaDeviceProp("0")


# ---- events and streams -------------------------------------------------------

def test_events_and_streams(random_bytes):
    start, end = pygpu.cudaEvent_t(), pygpu.cudaEvent_t()
    s = pygpu.cudaStream_t(flags=1, priority=0)
    for obj in (start, end, s):
        assert is_success(obj.last_status())
        assert obj.get() == int(obj) != 0
    assert start.get() == start.event.ptr and s.get() == s.stream.ptr and s.stream.non_blocking
    assert is_success(pygpu.cudaEventRecord(start, s))
    with s.stream:
        g = pygpu.to_gpu(random_bytes(1 << 16))
    assert is_success(pygpu.cudaEventRecord(end, s))
    assert is_success(pygpu.cudaStreamWaitEvent(None, end))
    assert is_success(pygpu.cudaEventSynchronize(end))
    assert is_success(pygpu.cudaEventQuery(end))
    ms, err = pygpu.cudaEventElapsedTime(start, end)
    assert is_success(err) and isinstance(ms, float) and ms >= 0
    assert is_success(pygpu.cudaStreamSynchronize(s)) and is_success(pygpu.cudaStreamQuery(s))
    assert is_success(pygpu.cudaStreamSynchronize()) and is_success(pygpu.cudaStreamQuery(None))
    assert is_success(pygpu.cudaEventRecord(start))          # the legacy default stream
    assert is_success(pygpu.cudaStreamWaitEvent(pygpu.Stream.null, start))
    del g


def test_an_event_recorded_on_another_devices_stream_is_an_error_status():
    """As the runtime answers: cudaErrorInvalidResourceHandle, not an
    exception; a stream of another device may still wait for the event."""
    if pygpu.device_count() < 2:
        pytest.skip("needs 2 devices")
    e0 = pygpu.cudaEvent_t()
    pygpu.set_device(1)
    try:
        s1 = pygpu.cudaStream_t()
    finally:
        pygpu.set_device(0)
    assert is_error(pygpu.cudaEventRecord(e0, s1), INVALID_HANDLE) and not e0.event.recorded
    assert is_success(pygpu.cudaEventRecord(e0)) and is_success(pygpu.cudaStreamWaitEvent(s1, e0))
    assert is_success(pygpu.cudaStreamSynchronize(s1))


def test_event_and_stream_flags():
    assert not pygpu.cudaEvent_t(2).event.timing
    assert pygpu.cudaEvent_t(1).event.timing
    assert is_success(pygpu.cudaEvent_t(6).last_status())        # interprocess needs no timing
    for bad in (4, 8, -1):
        e = pygpu.cudaEvent_t(bad)
        assert is_error(e.last_status(), INVALID_VALUE) and e.get() == 0 and e.event is None
    assert not pygpu.cudaStream_t().stream.non_blocking
    assert is_error(pygpu.cudaStream_t(2).last_status(), INVALID_VALUE)
    for bad in ("1", 1.5, None):
        with pytest.raises(TypeError):
            pygpu.cudaEvent_t(bad)
        with pytest.raises(TypeError):
            pygpu.cudaStream_t(bad)


def test_elapsed_time_errors_are_objects():
    a, b, notime = pygpu.cudaEvent_t(), pygpu.cudaEvent_t(), pygpu.cudaEvent_t(2)
    assert pygpu.cudaEventElapsedTime(a, b) == (None, pygpu.cudaError_t(INVALID_HANDLE))    # never recorded
    pygpu.cudaEventRecord(a), pygpu.cudaEventRecord(notime)
    assert pygpu.cudaEventElapsedTime(a, notime) == (None, pygpu.cudaError_t(INVALID_HANDLE))
    dead = pygpu.cudaEvent_t(8)
    assert is_error(pygpu.cudaEventRecord(dead), INVALID_HANDLE)
    assert is_error(pygpu.cudaEventSynchronize(dead), INVALID_HANDLE)
    assert is_error(pygpu.cudaEventQuery(dead), INVALID_HANDLE)
    assert is_error(pygpu.cudaStreamQuery(pygpu.cudaStream_t(4)), INVALID_HANDLE)
    assert is_error(pygpu.cudaStreamWaitEvent(None, a, 1), INVALID_VALUE)


@pytest.mark.parametrize("call", ["record", "sync", "query", "elapsed", "wait", "stream_sync"])
def test_event_calls_wrong_types(call):
    e = pygpu.cudaEvent_t()
    bad = {"record": lambda: pygpu.cudaEventRecord(e, "stream"), "sync": lambda: pygpu.cudaEventSynchronize(5),
           "query": lambda: pygpu.cudaEventQuery(None), "elapsed": lambda: pygpu.cudaEventElapsedTime(e, 1.0),
           "wait": lambda: pygpu.cudaStreamWaitEvent(e, e), "stream_sync": lambda: pygpu.cudaStreamSynchronize(7)}
    with pytest.raises(TypeError):
        bad[call]()


@pytest.mark.gpu_only
def test_query_reports_not_ready_or_success():
    a = np.ones(1 << 26, np.uint8)
    s, e = pygpu.cudaStream_t(1), pygpu.cudaEvent_t()
    with s.stream:
        g = pygpu.to_gpu_async(a)
        g2 = g.copy()
    pygpu.cudaEventRecord(e, s)
    assert pygpu.cudaEventQuery(e).code in (0, NOT_READY)
    assert pygpu.cudaStreamQuery(s).code in (0, NOT_READY)
    pygpu.cudaStreamSynchronize(s)
    assert is_success(pygpu.cudaEventQuery(e)) and is_success(pygpu.cudaStreamQuery(s))
    del g, g2


# ---- DeviceArray ------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip_every_dtype(rng, dtype):
    a = random_of(rng, dtype, (3, 5))
    keep = a.copy()
    da = getattr(pygpu, f"DeviceArray_{dtype}")(a)
    assert not da.allocated()
    assert is_success(da.allocate()) and da.allocated()
    assert is_success(da.to_device())
    assert np.array_equal(device_view(da), keep)
    a[...] = random_of(rng, dtype, a.shape)
    assert is_success(da.to_host())
    assert np.array_equal(a, keep)
    assert da.size() == a.size and da.nbytes() == a.nbytes
    assert da.shape() == [3, 5] and da.strides() == list(a.strides)
    assert np.shares_memory(np.asarray(da), a)


@pytest.mark.parametrize("key", [np.s_[::2], np.s_[:, ::-3], np.s_[1:, 1::2], "T", "F"])
def test_strided_buffers_copy_the_right_elements(rng, key):
    base = random_of(rng, np.float32, (6, 7))
    a = base.T if key == "T" else np.asfortranarray(base) if key == "F" else base[key]
    keep = a.copy()
    da = pygpu.DeviceArray_float32(a)
    da.allocate()
    da.to_device()
    assert np.array_equal(device_view(da), keep)
    assert da.strides() == list(a.strides)
    a[...] = 0
    da.to_host()
    assert np.array_equal(a, keep)
    assert np.array_equal(np.asarray(memoryview(da)), keep)


def test_other_buffers(rng):
    import array
    b = bytearray(rng.integers(0, 256, 40, dtype=np.uint8).tobytes())
    da = pygpu.DeviceArray_uint8(b)
    da.allocate(), da.to_device()
    keep = bytes(b)
    b[:] = bytes(40)
    da.to_host()
    assert bytes(b) == keep
    ai = array.array("i", range(10))
    di = pygpu.DeviceArray_int32(ai)
    di.allocate(), di.to_device()
    assert device_view(di).tolist() == list(range(10))


@pytest.mark.parametrize("args,shape,order", [
    ((7,), (7,), "C"), (([2, 3],), (2, 3), "C"), (((2, 3, 4),), (2, 3, 4), "C"),
    (([2, 3], "F"), (2, 3), "F"), (([2, 3], 0), (2, 3), "F"), (([2, 3], True), (2, 3), "C"),
    ((np.int64(4),), (4,), "C"), (([],), (), "C"), (([0, 3],), (0, 3), "C")])
def test_sized_and_shaped(rng, args, shape, order):
    da = pygpu.DeviceArray_float64(*args)
    host = np.asarray(da)
    assert host.shape == shape and da.shape() == list(shape) and (host == 0).all()
    assert host.flags["F_CONTIGUOUS" if order == "F" else "C_CONTIGUOUS"]
    if host.size:
        assert da.strides() == list(host.strides)
    host[...] = random_of(rng, np.float64, shape)
    keep = host.copy()
    da.allocate(), da.to_device()
    if host.size:
        assert np.array_equal(device_view(da), keep)
    host[...] = 0
    da.to_host()
    assert np.array_equal(host, keep)


@pytest.mark.parametrize("bad", [np.arange(3.0), np.arange(3, dtype=np.int32), np.arange(3).astype(">i8"),
                                 b"12345678", np.array(["a"])])
def test_buffer_of_another_dtype_is_TypeError(bad):
    with pytest.raises(TypeError, match="int64"):
        pygpu.DeviceArray_int64(bad)


def test_wrong_dtype_message_names_the_right_class():
    with pytest.raises(TypeError, match="DeviceArray_float64"):
        pygpu.DeviceArray_int64(np.zeros(2))


@pytest.mark.parametrize("args", [("abc",), (1.5,), (None,), ([1, "a"],), ([2], "X"), (1, 2), (1, 2, 3, 4, 5),
                                  (pygpu.to_gpu(np.zeros(2, np.int64)),)])
def test_bad_constructor_arguments(args):
    with pytest.raises((TypeError, ValueError)):
        pygpu.DeviceArray_int64(*args)


def test_negative_shape_is_ValueError():
    with pytest.raises(ValueError):
        pygpu.DeviceArray_int64([2, -1])
    with pytest.raises(ValueError):
        pygpu.DeviceArray_int64(-3)


def test_unallocated_memory_gives_a_status_not_a_crash():
    a = np.arange(4, dtype=np.int64)
    da = pygpu.DeviceArray_int64(a)
    assert is_error(da.to_device(), INVALID_VALUE) and is_error(da.last_status(), INVALID_VALUE)
    assert is_error(da.to_host(), INVALID_VALUE)
    assert is_error(da.set(np.ones(4, np.int64)), INVALID_VALUE)
    assert is_error(da.set(0, 5), INVALID_VALUE)
    p = da.device_data()
    assert int(p) == 0 and is_error(da.last_status(), INVALID_VALUE)
    with pytest.raises(ValueError, match="device memory"):
        p.get()
    assert a.tolist() == [0, 1, 2, 3]
    assert is_success(da.allocate()) and is_success(da.last_status())


def test_allocate_twice_keeps_the_memory():
    da = pygpu.DeviceArray_int32([3])
    da.allocate()
    p = int(da.device_data())
    assert is_success(da.allocate()) and int(da.device_data()) == p


def test_out_of_memory_is_a_status():
    da = pygpu.DeviceArray_uint8(0, 0, [1 << 50])    # no host side; far more than any device
    assert not da.allocated()
    err = da.allocate()
    assert is_error(err, MEMORY_ALLOCATION) and da.last_status() == err and not da.allocated()
    assert is_error(da.to_device(), INVALID_VALUE)
    with pytest.raises(BufferError):
        memoryview(da)


def test_read_only_host_side():
    a = np.arange(4, dtype=np.int64)
    a.flags.writeable = False
    da = pygpu.DeviceArray_int64(a)
    da.allocate()
    assert is_success(da.to_device())
    assert is_error(da.to_host(), INVALID_VALUE)
    assert memoryview(da).readonly


def test_host_and_device_addresses_are_never_freed(rng):
    host = random_of(rng, np.float64, (4, 3))
    mem = pygpu.mem_alloc(host.nbytes)
    da = pygpu.DeviceArray_float64(host.ctypes.data, int(mem), [4, 3])
    assert da.allocated() and int(da.device_data()) == int(mem)
    assert np.shares_memory(np.asarray(da), host)
    assert is_success(da.to_device())
    out = np.empty_like(host)
    pygpu.memcpy_dtoh(out, mem)
    assert np.array_equal(out, host)
    del da
    gc.collect()
    pygpu.memcpy_dtoh(out, mem)         # both still alive and ours
    assert np.array_equal(out, host)
    host[0, 0] = 1


def test_addresses_in_F_order(rng):
    host = np.asfortranarray(random_of(rng, np.int16, (3, 4)))
    mem = pygpu.mem_alloc(host.nbytes)
    da = pygpu.DeviceArray_int16(host.ctypes.data, int(mem), (3, 4), "F")
    assert np.array_equal(np.asarray(da), host)
    da.to_device()
    assert np.array_equal(device_view(da), host)


def test_device_address_zero_means_unallocated():
    host = np.zeros(3)
    da = pygpu.DeviceArray_float64(host.ctypes.data, 0, [3])
    assert not da.allocated()
    assert is_success(da.allocate()) and da.allocated()


def test_from_pointer_wrapper(rng):
    p = pygpu.pointer_wrapper_float32()
    p.create(6)
    p.get()[:] = np.arange(6)
    da = pygpu.DeviceArray_float32(p, [2, 3])
    assert np.array_equal(np.asarray(da), np.arange(6).reshape(2, 3))
    da.allocate(), da.to_device()
    np.asarray(da)[...] = 0
    da.to_host()
    assert p.get().tolist() == list(range(6))
    with pytest.raises(ValueError):
        pygpu.DeviceArray_float32(p, [7])              # more than the pointer holds
    with pytest.raises(ValueError):
        pygpu.DeviceArray_float32(da.device_data(), [2, 3])
    with pytest.raises(TypeError):
        pygpu.DeviceArray_float64(p, [2, 3])           # a float32 pointer


def test_set_from_every_source(rng):
    da = pygpu.DeviceArray_int32([2, 3])
    da.allocate()
    src = random_of(rng, np.int32, (2, 3))
    assert is_success(da.set(src.ctypes.data))
    assert np.array_equal(device_view(da), src)
    assert is_success(da.set(src.ravel() * 2))                   # same size, reshaped
    assert np.array_equal(device_view(da), src * 2)
    other = pygpu.DeviceArray_int32(src * 3)
    other.allocate(), other.to_device()
    assert is_success(da.set(other.device_data()))             # device to device
    assert np.array_equal(device_view(da), src * 3)
    assert is_success(da.set(other.host_data()))                # a safe host pointer
    assert np.array_equal(device_view(da), src * 3)
    assert is_success(da.set(4, 99)) and device_view(da).ravel()[4] == 99
    assert is_success(da.set_val(0, -1)) and device_view(da).ravel()[0] == -1
    assert is_error(da.set(6, 1), INVALID_VALUE) and is_error(da.set(-1, 1), INVALID_VALUE)
    with pytest.raises(TypeError):
        da.set()


def test_set_item_follows_the_device_order():
    da = pygpu.DeviceArray_int64([2, 3], "F")
    da.allocate()
    da.set(np.zeros((2, 3), np.int64))
    da.set(1, 7)                        # the second element in memory: [1, 0] in F order
    assert device_view(da)[1, 0] == 7


def test_device_memory_dies_with_the_array():
    da = pygpu.DeviceArray_float64([8])
    da.allocate()
    ref = weakref.ref(da._dev)
    del da
    gc.collect()
    assert ref() is None


def test_buffer_protocol_matches_the_host_side(rng):
    a = random_of(rng, np.complex64, (4, 6))[:, ::2]
    da = pygpu.DeviceArray_complex64(a)
    m = memoryview(da)
    assert (m.shape, m.strides, m.itemsize, m.readonly) == (a.shape, a.strides, 8, False)
    assert np.array_equal(np.asarray(m), a)
    assert np.array(da, copy=False).base is not None
    assert "DeviceArray_complex64" in repr(da)


# ---- pointer_wrapper -----------------------------------------------------------------

def test_pointer_wrapper_basics(capsys):
    p = pygpu.ptr_wrapper_int64()
    assert int(p) == 0 and p.unsafe_get() == 0 and not p.is_safe()
    with pytest.raises(ValueError, match="not known"):
        p.get()
    p.create(5)
    assert p.is_safe() and p.get().tolist() == [0] * 5 and int(p) == p.get().ctypes.data
    p.print_address()
    assert capsys.readouterr().out.strip() == hex(int(p))
    p.destroy()
    assert not p.is_safe() and int(p) == 0
    q = pygpu.pointer_wrapper_uint8(1234)
    assert int(q) == 1234 and not q.is_safe()
    for bad in ("x", 1.5):
        with pytest.raises(TypeError):
            pygpu.pointer_wrapper_uint8(bad)
    with pytest.raises(ValueError):
        pygpu.pointer_wrapper_uint8(-1)
    with pytest.raises(ValueError):
        p.create(-1)


def test_host_and_device_pointers():
    a = np.arange(6, dtype=np.float64)
    da = pygpu.DeviceArray_float64(a)
    da.allocate()
    h, d = da.host_data(), da.device_data()
    assert isinstance(h, pygpu.pointer_wrapper_float64)
    assert h.is_safe() and int(h) == a.ctypes.data
    assert h.get() is a
    h.get()[0] = 42
    assert a[0] == 42
    assert not d.is_safe() and int(d) == d.unsafe_get() == da._dev.ptr
    with pytest.raises(ValueError, match="device memory"):
        d.get()
    assert "device" in repr(d) and "is_safe=True" in repr(h)


def test_pointers_go_to_ctypes_functions():
    a = np.arange(8, dtype=np.uint8)
    da = pygpu.DeviceArray_uint8(a)
    libc = ctypes.CDLL(None)
    libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    libc.memset(da.host_data(), 7, 8)      # fn(ptr) as the original's README does it
    assert a.tolist() == [7] * 8
