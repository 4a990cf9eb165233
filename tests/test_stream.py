"""Streams and the current stream (docs/api.md, Streams)."""
import asyncio
import contextvars
import gc
import sys
import threading

import numpy as np
import pytest

import pygpu

Stream = pygpu.Stream


def clamp_priority(p):
    least, greatest = pygpu.stream_priority_range()
    lo, hi = min(least, greatest), max(least, greatest)
    return min(max(p, lo), hi)


def test_stream_priority_range():
    r = pygpu.stream_priority_range()
    assert isinstance(r, tuple) and len(r) == 2
    least, greatest = r
    assert type(least) is int and type(greatest) is int
    assert greatest <= least  # lower is more urgent


def test_defaults():
    s = Stream()
    assert s.non_blocking is False
    assert s.priority == clamp_priority(0)
    assert int(s.device) == pygpu.get_device()


def test_non_blocking_flag():
    assert Stream(non_blocking=True).non_blocking is True
    assert Stream(non_blocking=False).non_blocking is False
    assert Stream(True).non_blocking is True
    assert Stream(non_blocking=1).non_blocking is True            # (PyCUDA's flags: an int)
    assert Stream(non_blocking=np.True_).non_blocking is True
    for bad in ("yes", "", 1.0, None, [1]):                         # checked as strictly as the priority
        with pytest.raises(TypeError, match="Stream non_blocking must be a bool"):
            Stream(non_blocking=bad)


def test_priority_clamped():
    least, greatest = pygpu.stream_priority_range()
    assert Stream(priority=least).priority == least
    assert Stream(priority=greatest).priority == greatest
    assert Stream(priority=greatest - 100).priority == greatest
    assert Stream(priority=least + 100).priority == least
    for p in range(greatest - 2, least + 3):
        assert Stream(priority=p).priority == clamp_priority(p)


@pytest.mark.parametrize("bad", ["x", 1.5, None, [0]])
def test_priority_must_be_int(bad):
    with pytest.raises(TypeError) as info:
        Stream(priority=bad)
    assert "priority" in str(info.value)


def test_ptr():
    s = Stream()
    assert type(s.ptr) is int
    assert s.ptr == int(s)
    assert s.ptr not in (0, 1, 2)
    other = Stream()
    assert other.ptr != s.ptr


def test_special_streams():
    assert isinstance(Stream.null, Stream)
    assert isinstance(Stream.per_thread, Stream)
    assert Stream.null is Stream.null
    assert Stream.null.ptr == 0 and int(Stream.null) == 0
    assert Stream.per_thread.ptr == 2 and int(Stream.per_thread) == 2
    for s in (Stream.null, Stream.per_thread):
        s.synchronize()
        assert s.query() is True


def test_synchronize_and_query(stream, random_bytes):
    src = random_bytes(1 << 16)
    a = pygpu.mem_alloc(src.nbytes)
    pygpu.memcpy_htod_async(a, src, stream=stream)
    stream.synchronize()
    assert stream.query() is True
    q = Stream().query()
    assert q is True  # nothing queued on a new stream


def test_record_returns_event(stream):
    e = stream.record()
    assert isinstance(e, pygpu.Event)
    assert e.recorded
    e.synchronize()
    assert e.query() is True
    mine = pygpu.Event()
    assert stream.record(mine) is mine
    assert mine.recorded


def test_wait_event(stream):
    other = Stream()
    e = other.record()
    stream.wait_event(e)
    stream.synchronize()
    Stream.null.wait_event(stream.record())
    Stream.null.synchronize()


@pytest.mark.parametrize("bad", [None, 0, "e", object()])
def test_wait_event_needs_an_event(stream, bad):
    with pytest.raises(TypeError):
        stream.wait_event(bad)


def test_wait_event_rejects_a_stream(stream):
    with pytest.raises(TypeError):
        stream.wait_event(Stream())


def test_current_stream_outside_is_null():
    assert pygpu.current_stream() is Stream.null


def test_with_sets_and_restores(stream):
    with stream:
        assert pygpu.current_stream() is stream
    assert pygpu.current_stream() is Stream.null


def test_with_nests():
    s1, s2 = Stream(), Stream()
    with s1:
        assert pygpu.current_stream() is s1
        with s2:
            assert pygpu.current_stream() is s2
            with s1:
                assert pygpu.current_stream() is s1
            assert pygpu.current_stream() is s2
        assert pygpu.current_stream() is s1
        with Stream.per_thread:
            assert pygpu.current_stream() is Stream.per_thread
        assert pygpu.current_stream() is s1
    assert pygpu.current_stream() is Stream.null


def test_with_restores_on_exception():
    s1, s2 = Stream(), Stream()
    with pytest.raises(ZeroDivisionError):
        with s1:
            with s2:
                1 / 0
    assert pygpu.current_stream() is Stream.null
    with s1:
        with pytest.raises(KeyError):
            with s2:
                raise KeyError
        assert pygpu.current_stream() is s1
    assert pygpu.current_stream() is Stream.null


@pytest.mark.timing
def test_threads_have_independent_current_streams():
    s_main, s_thread = Stream(), Stream()
    entered, release = threading.Event(), threading.Event()
    seen = {}

    def worker():
        try:
            seen["start"] = pygpu.current_stream()
            with s_thread:
                seen["inside"] = pygpu.current_stream()
                entered.set()
                release.wait(60)
                seen["inside_later"] = pygpu.current_stream()
            seen["after"] = pygpu.current_stream()
        except BaseException as e:
            seen["error"] = e
            entered.set()

    with s_main:
        t = threading.Thread(target=worker)
        t.start()
        assert entered.wait(60)
        assert pygpu.current_stream() is s_main
        release.set()
        t.join(60)
        assert pygpu.current_stream() is s_main
    assert "error" not in seen, seen
    assert seen["start"] is Stream.null
    assert seen["inside"] is s_thread and seen["inside_later"] is s_thread
    assert seen["after"] is Stream.null
    assert pygpu.current_stream() is Stream.null


def test_contextvars_copy_context():
    s1, s2 = Stream(), Stream()
    with s1:
        ctx = contextvars.copy_context()
        assert ctx.run(pygpu.current_stream) is s1

        def enter_other():
            with s2:
                return pygpu.current_stream()

        assert ctx.run(enter_other) is s2
        assert pygpu.current_stream() is s1
    # The copy still holds the stream that was current when it was taken.
    assert ctx.run(pygpu.current_stream) is s1
    assert pygpu.current_stream() is Stream.null
    assert contextvars.Context().run(pygpu.current_stream) is Stream.null


def test_asyncio_tasks_have_their_own_current_stream():
    streams = [Stream() for _ in range(3)]

    async def task(s):
        with s:
            for _ in range(5):
                await asyncio.sleep(0)
                assert pygpu.current_stream() is s
        return pygpu.current_stream()

    async def main():
        return await asyncio.gather(*(task(s) for s in streams))

    assert asyncio.run(main()) == [Stream.null] * 3
    assert pygpu.current_stream() is Stream.null


def test_stream_argument_forms(random_bytes):
    src = random_bytes(4096)
    a = pygpu.mem_alloc(src.nbytes)
    s = Stream()
    for arg in (None, s, s.ptr, 0, Stream.null, Stream.per_thread, 2):
        dst = np.zeros_like(src)
        pygpu.memcpy_htod_async(a, src, stream=arg)
        pygpu.memcpy_dtoh_async(dst, a, stream=arg)
        pygpu.synchronize()
        np.testing.assert_array_equal(dst, src)
    with pytest.raises(TypeError):
        pygpu.memcpy_htod(a, src, stream="x")
    with pytest.raises(TypeError):
        pygpu.memcpy_htod(a, src, stream=1.5)


def test_many_streams_created_and_destroyed():
    least, greatest = pygpu.stream_priority_range()
    for i in range(2000):
        s = Stream(non_blocking=bool(i & 1), priority=greatest if i & 2 else least)
        if i % 7 == 0:
            with s:
                pygpu.current_stream().record()
        if i % 3 == 0:
            s.synchronize()
        del s
    gc.collect()
    assert pygpu.current_stream() is Stream.null


def test_refcounts_flat():
    s = Stream()
    e = pygpu.Event()
    null = Stream.null
    rc_s, rc_e, rc_null = sys.getrefcount(s), sys.getrefcount(e), sys.getrefcount(null)
    for _ in range(1000):
        with s:
            cur = pygpu.current_stream()
        del cur
        s.record(e)
        s.wait_event(e)
        s.synchronize()
        s.query()
        pygpu.current_stream()
        _ = s.ptr, int(s), s.priority, s.device, s.non_blocking
    del _
    assert sys.getrefcount(s) == rc_s
    assert sys.getrefcount(e) == rc_e
    assert sys.getrefcount(null) == rc_null


def test_refcount_of_stream_used_as_argument(random_bytes):
    s = Stream()
    src = random_bytes(256)
    a = pygpu.mem_alloc(256)
    rc_s = sys.getrefcount(s)
    for _ in range(500):
        pygpu.memcpy_htod_async(a, src, stream=s)
        pygpu.memset_d8(a, 0, 256, stream=s)
    s.synchronize()
    assert sys.getrefcount(s) == rc_s
