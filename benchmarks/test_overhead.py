"""Per-call costs of the foundation: streams, events, small allocations and
8-byte copies, with CuPy and PyTorch doing the same where they are present."""
import numpy as np
import pytest

import pygpu
from conftest import peer

pytestmark = pytest.mark.benchmark(group="overhead")


@pytest.fixture(scope="module")
def buf():
    return pygpu.mem_alloc(8)


@pytest.mark.benchmark(group="alloc-1000B")
def test_mem_alloc_free_pygpu(benchmark):
    benchmark(lambda: pygpu.mem_alloc(1000))


@pytest.mark.benchmark(group="alloc-1000B")
def test_mem_alloc_free_cupy(benchmark):
    cp = peer("cupy")
    benchmark(lambda: cp.cuda.alloc(1000))


@pytest.mark.benchmark(group="alloc-1000B")
def test_mem_alloc_free_torch(benchmark):
    torch = peer("torch")
    benchmark(lambda: torch.empty(1000, dtype=torch.uint8, device="cuda"))


@pytest.mark.benchmark(group="htod-8B")
def test_htod_8_pygpu(benchmark, buf):
    host = np.arange(1, dtype=np.int64)
    benchmark(pygpu.memcpy_htod, buf, host)


@pytest.mark.benchmark(group="htod-8B")
def test_htod_8_cupy(benchmark):
    cp = peer("cupy")
    host = np.arange(1, dtype=np.int64)
    dev = cp.empty(1, np.int64)
    benchmark(lambda: (dev.set(host), cp.cuda.get_current_stream().synchronize()))


@pytest.mark.benchmark(group="htod-8B")
def test_htod_8_torch(benchmark):
    torch = peer("torch")
    host = torch.zeros(1, dtype=torch.int64)
    dev = torch.empty(1, dtype=torch.int64, device="cuda")
    benchmark(lambda: dev.copy_(host, non_blocking=False))


@pytest.mark.benchmark(group="dtoh-8B")
def test_dtoh_8_pygpu(benchmark, buf):
    host = np.empty(1, dtype=np.int64)
    benchmark(pygpu.memcpy_dtoh, host, buf)


@pytest.mark.benchmark(group="dtoh-8B")
def test_dtoh_8_cupy(benchmark):
    cp = peer("cupy")
    dev = cp.zeros(1, np.int64)
    host = np.empty(1, np.int64)
    benchmark(lambda: dev.get(out=host))


@pytest.mark.benchmark(group="dtoh-8B")
def test_dtoh_8_torch(benchmark):
    torch = peer("torch")
    dev = torch.zeros(1, dtype=torch.int64, device="cuda")
    benchmark(lambda: dev.cpu())


@pytest.mark.benchmark(group="stream")
def test_stream_create_destroy(benchmark):
    benchmark(pygpu.Stream)


@pytest.mark.benchmark(group="stream")
def test_with_stream(benchmark):
    s = pygpu.Stream()

    def enter_exit():
        with s:
            pass
    benchmark(enter_exit)


@pytest.mark.benchmark(group="event")
def test_event_record_query(benchmark):
    e = pygpu.Event()
    benchmark(lambda: e.record().query())


@pytest.mark.benchmark(group="device")
def test_get_device(benchmark):
    benchmark(pygpu.get_device)


@pytest.mark.benchmark(group="device")
def test_device_name_cached(benchmark):
    d = pygpu.Device(0)
    benchmark(lambda: d.name)
