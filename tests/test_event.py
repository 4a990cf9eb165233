"""Events: flags, recording, timing (docs/api.md, Events)."""
import time

import numpy as np
import pytest

import pygpu

Event, Stream = pygpu.Event, pygpu.Stream
MiB = 1 << 20


def test_defaults():
    e = Event()
    assert e.timing is True
    assert e.recorded is False
    assert type(e.ptr) is int and e.ptr != 0


def test_flags():
    assert Event(timing=False).timing is False
    assert Event(timing=True).timing is True
    Event(blocking=True).record().synchronize()
    Event(timing=False, blocking=True).record().synchronize()


def test_record_and_synchronize_return_self(stream):
    e = Event()
    assert e.record() is e
    assert e.recorded is True
    assert e.synchronize() is e
    assert e.query() is True
    assert e.record(stream) is e
    assert e.record(stream=stream) is e
    assert e.record(stream=stream.ptr) is e
    assert e.record(Stream.null) is e
    assert e.synchronize().query() is True


def test_record_on_current_stream():
    s = Stream()
    with s:
        e = Event().record()
    s.wait_event(e)
    s.synchronize()
    assert e.query() is True


def test_record_bad_stream():
    with pytest.raises(TypeError):
        Event().record(stream="x")


@pytest.mark.timing
def test_elapsed_time_matches_sleep():
    a, b = Event(), Event()
    a.record()
    time.sleep(0.05)
    b.record()
    b.synchronize()
    ms = a.elapsed_time(b)
    assert isinstance(ms, float)
    assert ms >= 0
    if pygpu.backend == "host":
        # host events carry their recording time: the sleep must show
        assert ms >= 50 * 0.5, ms


@pytest.mark.timing
def test_time_since_time_till_consistent():
    a, b = Event(), Event()
    a.record()
    time.sleep(0.002)
    b.record().synchronize()
    ab = a.elapsed_time(b)
    assert a.time_till(b) == ab
    assert b.time_since(a) == ab
    assert ab >= 0


def test_elapsed_time_waits_for_both(stream, random_bytes):
    src = random_bytes(4 * MiB)
    d = pygpu.mem_alloc(src.nbytes)
    a = stream.record()
    pygpu.memcpy_htod_async(d, src, stream=stream)
    b = stream.record()
    assert a.elapsed_time(b) >= 0  # no synchronize: elapsed_time waits
    stream.synchronize()


def test_never_recorded_raises():
    a, never = Event(), Event()
    a.record().synchronize()
    for call in (lambda: never.elapsed_time(a), lambda: a.elapsed_time(never),
                 lambda: never.time_since(a), lambda: never.time_till(a),
                 lambda: a.time_since(never), lambda: a.time_till(never)):
        with pytest.raises(ValueError) as info:
            call()
        assert "record" in str(info.value).lower()


def test_non_timing_event_raises():
    a, b = Event(timing=False), Event()
    a.record()
    b.record().synchronize()
    for call in (lambda: a.elapsed_time(b), lambda: b.elapsed_time(a),
                 lambda: b.time_since(a), lambda: a.time_till(b)):
        with pytest.raises(ValueError) as info:
            call()
        assert "timing" in str(info.value).lower()


def test_elapsed_time_needs_an_event():
    a = Event().record()
    for bad in (None, 0, Stream()):
        with pytest.raises(TypeError):
            a.elapsed_time(bad)


def test_interprocess_needs_timing_false():
    with pytest.raises(ValueError):
        Event(interprocess=True)
    with pytest.raises(ValueError):
        Event(interprocess=True, timing=True)


def test_interprocess_without_timing_works(stream):
    e = Event(interprocess=True, timing=False)
    assert e.timing is False
    assert e.record(stream) is e
    assert e.synchronize() is e
    assert e.query() is True
    stream.wait_event(e)


def test_many_events():
    s = Stream()
    events = [s.record() for _ in range(1000)]
    events[-1].synchronize()
    assert all(e.query() for e in events)
    assert events[0].elapsed_time(events[-1]) >= 0
    del events


# ---- GPU only: the hardware did what was asked ----------------------------------

COPY_BYTES = 256 * MiB


@pytest.fixture(scope="module")
def pinned_pair():
    hA, hB = pygpu.mem_alloc_host(COPY_BYTES), pygpu.mem_alloc_host(COPY_BYTES)
    np.frombuffer(hA, np.uint8)[:] = 1  # touch the pages
    np.frombuffer(hB, np.uint8)[:] = 2
    dA, dB = pygpu.mem_alloc(COPY_BYTES), pygpu.mem_alloc(COPY_BYTES)
    pygpu.memset_d8(dB, 3, COPY_BYTES)
    pygpu.synchronize()
    yield hA, hB, dA, dB
    pygpu.synchronize()
    dA.free()
    dB.free()
    hA.free()
    hB.free()


@pytest.mark.timing
@pytest.mark.gpu_only
def test_h2d_and_d2h_on_two_streams_overlap(pinned_pair):
    hA, hB, dA, dB = pinned_pair
    sA, sB = Stream(non_blocking=True), Stream(non_blocking=True)
    attempts = []
    for _ in range(10):     # (a loaded machine can hold this thread between the two copies' calls)
        ref = Event()
        pygpu.synchronize()
        ref.record(sA)
        sB.wait_event(ref)
        a0 = sA.record()
        pygpu.memcpy_htod_async(dA, hA, stream=sA)
        a1 = sA.record()
        b0 = sB.record()
        pygpu.memcpy_dtoh_async(hB, dB, stream=sB)
        b1 = sB.record()
        a1.synchronize()
        b1.synchronize()
        sa, ea = ref.elapsed_time(a0), ref.elapsed_time(a1)
        sb, eb = ref.elapsed_time(b0), ref.elapsed_time(b1)
        overlap = min(ea, eb) - max(sa, sb)
        shorter = min(ea - sa, eb - sb)
        attempts.append(dict(a=(sa, ea), b=(sb, eb), overlap=overlap, shorter=shorter))
        if shorter > 0 and overlap >= 0.3 * shorter:
            break
    else:
        pytest.fail("H2D on one stream and D2H on another did not overlap "
                    "(need >= 30%% of the shorter interval): %r" % attempts)
    assert (np.frombuffer(hB, np.uint8)[:: 1 << 20] == 3).all()


@pytest.mark.timing
@pytest.mark.gpu_only
def test_events_time_a_pinned_h2d_copy(pinned_pair):
    hA, _, dA, _ = pinned_pair
    s = Stream()
    e0, e1 = Event(), Event()
    pygpu.memcpy_htod_async(dA, hA, stream=s)  # warm-up
    s.synchronize()
    t0 = time.perf_counter()
    e0.record(s)
    pygpu.memcpy_htod_async(dA, hA, stream=s)
    e1.record(s)
    e1.synchronize()
    wall_ms = (time.perf_counter() - t0) * 1e3
    ms = e0.elapsed_time(e1)
    assert ms > 0
    gb_per_s = COPY_BYTES / (ms / 1e3) / 1e9
    assert 1 <= gb_per_s <= 1000, (ms, gb_per_s)
    assert ms <= wall_ms + 1, (ms, wall_ms)
