"""Completion handles as a NumPy/PyTorch user drives them (issue 18, items 5
and 6): wait(timeout) as concurrent.futures.Future.result(timeout) does,
add_done_callback (and bridging to asyncio through it), and the progress
property of AwaitMove, AwaitResidency and AwaitProjection.

Incomplete handles are held open deterministically: a definition route
whose provider completion finishes only once the test opens a gate
(extension_for_tests.Pair), or `_C._hold_moves(True)` for built-in pool
moves. Nothing here sleeps to wait for asynchronous work."""

import asyncio
import gc
import math
import sys
import threading

import numpy as np
import pytest

import strideweave as sw
from strideweave import _C
from extension_for_tests import D, L, TIMEOUT, Pair, filled, values_of
from moves_for_tests import held

F32 = D.Float32
MiB = 1 << 20
POOL = 1 << 15  # Float32 elements: 128 KiB, above what finishes on the calling thread

needs_faults = pytest.mark.skipif(not _C._fault_injection_enabled(),
                                  reason="build without -Dfault_injection=true")


def gated_pair(**kwargs):
    gate = threading.Event()
    return Pair(gate=gate, **kwargs), gate


def cpu_tensor(n):
    c = sw.CPU(n, dtype=F32)
    t = sw.Tensor(c, 0, L([n], [1]))
    np.from_dlpack(t)[:] = np.arange(n, dtype=np.float32) + 0.5
    return t, c


class Calls:
    """A done callback recording (handle, thread) per call; `wait_for(n)`
    blocks until n calls happened (no sleeping)."""

    def __init__(self, fail=None):
        self.calls = []
        self.fail = fail
        self.cv = threading.Condition()

    def __call__(self, handle):
        with self.cv:
            self.calls.append((handle, threading.get_ident()))
            self.cv.notify_all()
        if self.fail is not None:
            raise self.fail

    def wait_for(self, n):
        with self.cv:
            assert self.cv.wait_for(lambda: len(self.calls) >= n, TIMEOUT), self.calls
        return self.calls


@pytest.fixture
def unraisable(monkeypatch):
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", seen.append)
    return seen


# ---- item 5: wait(timeout) -------------------------------------------------------------


def test_wait_timeout_expires_on_a_gated_move_and_the_handle_stays_valid():
    p, gate = gated_pair()
    t, c = p.source([1.0, 2.0, 3.0])
    d = p.B(0, dtype=F32)
    h = sw.move_async(t, d)
    for timeout in (0, 0.0, 0.02, 1e-9):
        with pytest.raises(TimeoutError, match="did not finish within"):
            h.wait(timeout)
    with pytest.raises(TimeoutError):
        h.wait(timeout=0.01)
    assert h.done is False and not c.is_released()  # the move still runs
    gate.set()
    r = h.wait()
    assert r.carrier is d and r.tolist() == [1.0, 2.0, 3.0] and c.is_released()
    assert h.wait(timeout=0) is r and h.wait(0.0) is r and h.wait(None) is r


def test_wait_timeout_is_a_concurrent_futures_timeout():
    import concurrent.futures
    p, gate = gated_pair()
    t, _ = p.source([1.0])
    h = sw.move_async(t, p.B(0, dtype=F32))
    with pytest.raises(concurrent.futures.TimeoutError):
        h.wait(0)
    gate.set()
    assert h.wait(TIMEOUT).tolist() == [1.0]


def test_wait_timeout_on_a_held_pool_move():
    t, c = cpu_tensor(POOL)
    with held():
        h = sw.move_async(t, sw.FileBacked())
        with pytest.raises(TimeoutError, match="AwaitMove"):
            h.wait(timeout=0.01)
        assert not h.done
    r = h.wait(TIMEOUT)
    assert r.tolist()[:3] == [0.5, 1.5, 2.5] and c.is_released()


@pytest.mark.parametrize("bad, error", [
    (-1, ValueError), (-0.5, ValueError), (float("nan"), ValueError),
    (float("-inf"), ValueError), (-(10 ** 400), ValueError),
    ("1", TypeError), (b"1", TypeError), (True, TypeError), (1j, TypeError),
    ([1], TypeError), (object(), TypeError),
])
def test_wait_refuses_a_bad_timeout_before_waiting(bad, error):
    p, gate = gated_pair()
    t, c = p.source([1.0])
    h = sw.move_async(t, p.B(0, dtype=F32))
    with pytest.raises(error, match="timeout"):
        h.wait(bad)
    with pytest.raises(error, match="timeout"):
        h.wait(timeout=bad)
    assert not h.done
    gate.set()
    assert h.wait(timeout=float("inf")).tolist() == [1.0]
    with pytest.raises(error, match="timeout"):  # checked even once done
        h.wait(bad)


def test_wait_accepts_numpy_and_huge_timeouts():
    t, _ = cpu_tensor(16)
    h = sw.move_async(t, sw.FileBacked())
    assert h.wait(np.float64(TIMEOUT)).size() == 16
    assert h.wait(np.int64(0)) is h.wait(10 ** 400) is h.wait(1e300)
    with pytest.raises(TypeError):
        h.wait(1, 2)
    with pytest.raises(TypeError):
        h.wait(deadline=1)


class FloatFails:
    def __float__(self):
        raise OverflowError("no float for you")


def test_wait_passes_on_what_converting_the_timeout_raised():
    t, _ = cpu_tensor(4)
    h = sw.move_async(t, sw.FileBacked())
    with pytest.raises(OverflowError, match="no float for you"):
        h.wait(FloatFails())
    assert h.wait(timeout=TIMEOUT).size() == 4


def test_many_threads_time_out_then_all_see_the_same_result():
    p, gate = gated_pair()
    t, _ = p.source([4.0, 5.0])
    h = sw.move_async(t, p.B(0, dtype=F32))
    n = 8
    timed_out, results = [], []
    barrier = threading.Barrier(n + 1)
    lock = threading.Lock()

    def waiter():
        try:
            h.wait(timeout=0.005)
        except TimeoutError:
            with lock:
                timed_out.append(1)
        barrier.wait(TIMEOUT)
        r = h.wait(TIMEOUT)
        with lock:
            results.append(r)

    threads = [threading.Thread(target=waiter) for _ in range(n)]
    for th in threads:
        th.start()
    barrier.wait(TIMEOUT)  # every thread timed out while the gate was shut
    gate.set()
    for th in threads:
        th.join(TIMEOUT)
    assert len(timed_out) == n and len(results) == n
    assert all(r is results[0] for r in results) and results[0].tolist() == [4.0, 5.0]


def test_wait_timeout_reports_the_move_failure_once_done():
    err = OSError("remote store went away")
    p, gate = gated_pair(fail=err)
    t, c = p.source([1.0])
    h = sw.move_async(t, p.B(0, dtype=F32))
    with pytest.raises(TimeoutError):
        h.wait(0)
    gate.set()
    with pytest.raises(OSError, match="went away"):
        h.wait(TIMEOUT)
    with pytest.raises(OSError, match="went away"):
        h.wait(0)
    assert not c.is_released()


def test_handles_stay_without_a_coroutine_protocol():
    for cls in (sw.AwaitResult, sw.AwaitMove, sw.AwaitResidency, sw.AwaitProjection):
        assert not hasattr(cls, "__await__")
        assert callable(cls.add_done_callback) and callable(cls.wait)


# ---- item 5: add_done_callback -----------------------------------------------------------


def test_done_callback_runs_once_on_the_completion_thread():
    p, gate = gated_pair()
    t, _ = p.source([1.0, 2.0])
    h = sw.move_async(t, p.B(0, dtype=F32))
    calls = Calls()
    h.add_done_callback(calls)
    assert calls.calls == []
    gate.set()
    r = h.wait(TIMEOUT)
    ((handle, thread),) = calls.wait_for(1)
    assert handle is h and handle.done and thread != threading.get_ident()
    assert r.tolist() == [1.0, 2.0]
    h.wait()
    assert len(calls.calls) == 1  # once, however often one waits


def test_done_callback_on_a_pool_move_sees_the_result_from_the_completion_thread():
    t, _ = cpu_tensor(POOL)
    seen = []
    done = threading.Event()

    def fn(handle):
        seen.append((handle.done, handle.wait().size(), threading.get_ident()))
        done.set()

    with held():
        h = sw.move_async(t, sw.FileBacked())
        h.add_done_callback(fn)
        assert seen == []
    assert done.wait(TIMEOUT)
    assert seen == [(True, POOL, seen[0][2])] and seen[0][2] != threading.get_ident()


def test_done_callback_added_after_completion_runs_at_once_on_this_thread():
    t, _ = cpu_tensor(8)
    h = sw.move_async(t, sw.FileBacked())
    h.wait()
    calls = Calls()
    assert h.add_done_callback(calls) is None
    assert calls.calls == [(h, threading.get_ident())]


def test_done_callbacks_run_in_order_also_after_failure():
    err = KeyError("lost")
    p, gate = gated_pair(fail=err)
    t, _ = p.source([1.0])
    h = sw.move_async(t, p.B(0, dtype=F32))
    order = []
    done = threading.Event()
    h.add_done_callback(lambda x: order.append(1))
    h.add_done_callback(lambda x: order.append(2))
    h.add_done_callback(lambda x: (order.append(3), done.set()))
    gate.set()
    assert done.wait(TIMEOUT) and order == [1, 2, 3]
    with pytest.raises(KeyError):
        h.wait()


def test_callback_exception_goes_to_unraisablehook(unraisable):
    p, gate = gated_pair()
    t, _ = p.source([3.0])
    h = sw.move_async(t, p.B(0, dtype=F32))
    bad, good = Calls(fail=ValueError("callback broke")), Calls()
    h.add_done_callback(bad)
    h.add_done_callback(good)
    gate.set()
    good.wait_for(1)
    assert h.wait().tolist() == [3.0]  # the move is unaffected
    assert len(bad.calls) == 1
    (u,) = unraisable
    assert isinstance(u.exc_value, ValueError) and u.object is bad
    # Already done: reported the same way, not raised at the caller.
    assert h.add_done_callback(bad) is None
    assert len(unraisable) == 2 and isinstance(unraisable[1].exc_value, ValueError)


@pytest.mark.parametrize("bad", [None, 3, "fn", [print]])
def test_add_done_callback_refuses_a_non_callable(bad):
    t, _ = cpu_tensor(4)
    h = sw.move_async(t, sw.FileBacked())
    with pytest.raises(TypeError, match="callable"):
        h.add_done_callback(bad)


def test_callbacks_run_for_dropped_handles():
    calls = Calls()
    n = 16
    carriers = []
    with held():
        for k in range(n):
            t, c = cpu_tensor(POOL + k)
            carriers.append(c)
            sw.move_async(t, sw.FileBacked()).add_done_callback(calls)  # handle dropped
        gc.collect()
        assert calls.calls == []
    got = calls.wait_for(n)
    assert len(got) == n and len({id(h) for h, _ in got}) == n
    assert sorted(h.wait().size() for h, _ in got) == [POOL + k for k in range(n)]
    assert all(c.is_released() for c in carriers)


def test_many_threads_add_callbacks_to_one_handle_each_called_once():
    p, gate = gated_pair()
    t, _ = p.source([1.0])
    h = sw.move_async(t, p.B(0, dtype=F32))
    calls = Calls()
    n, per = 8, 25
    start = threading.Barrier(n)

    def adder():
        start.wait(TIMEOUT)
        for _ in range(per):
            h.add_done_callback(calls)

    threads = [threading.Thread(target=adder) for _ in range(n)]
    for th in threads:
        th.start()
    gate.set()  # completion races the registrations
    for th in threads:
        th.join(TIMEOUT)
    assert len(calls.wait_for(n * per)) == n * per
    h.wait()
    assert len(calls.calls) == n * per


def test_many_threads_many_moves_each_callback_once():
    n = 8
    calls = Calls()
    errors = []

    def worker(k):
        try:
            for j in range(10):
                t, _ = cpu_tensor((POOL if j % 3 else 512) + k * 10 + j)
                h = sw.move_async(t, sw.FileBacked())
                h.add_done_callback(calls)
                if j % 2:
                    h.wait(TIMEOUT)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(TIMEOUT)
    assert errors == []
    got = calls.wait_for(n * 10)
    assert len(got) == n * 10 and len({id(h) for h, _ in got}) == n * 10


def test_asyncio_awaits_a_future_resolved_by_the_done_callback():
    p, gate = gated_pair()

    def bridge(handle, loop):
        fut = loop.create_future()

        def resolve(h):
            if fut.cancelled():
                return
            try:
                fut.set_result(h.wait())
            except BaseException as e:  # noqa: BLE001 - handed to the awaiting task
                fut.set_exception(e)

        handle.add_done_callback(lambda h: loop.call_soon_threadsafe(resolve, h))
        return fut

    async def main():
        loop = asyncio.get_running_loop()
        sources = [p.source([float(k), k + 0.5]) for k in range(4)]
        handles = [sw.move_async(t, p.B(0, dtype=F32)) for t, _ in sources]
        futures = [bridge(h, loop) for h in handles]
        await asyncio.sleep(0)  # the loop is running and nothing has resolved
        assert not any(f.done() for f in futures)
        loop.call_soon(gate.set)  # the provider completes on its own threads
        results = await asyncio.wait_for(asyncio.gather(*futures), TIMEOUT)
        return [r.tolist() for r in results], [h.done for h in handles]

    values, done = asyncio.run(main())
    assert values == [[float(k), k + 0.5] for k in range(4)] and all(done)


# ---- item 6: progress ------------------------------------------------------------------


def sample_until_done(h):
    samples = [h.progress]
    while not h.done:
        samples.append(h.progress)
    samples.append(h.progress)
    return samples


def assert_monotone(samples, total):
    assert all(len(s) == 2 and s[1] == total for s in samples)
    done = [s[0] for s in samples]
    assert done == sorted(done) and 0 <= done[0] and done[-1] == total


@pytest.mark.parametrize("mib", [1, 40])
def test_progress_of_a_large_move_to_and_from_a_file(mib):
    n = mib * MiB // 4
    t, _ = cpu_tensor(n)
    h = sw.move_async(t, sw.FileBacked())
    samples = sample_until_done(h)
    on_file = h.wait()
    assert_monotone(samples, n * 4)
    assert h.progress == (n * 4, n * 4)
    h2 = sw.move_async(on_file, sw.CPU(n))
    samples = sample_until_done(h2)
    assert_monotone(samples, n * 4)
    back = h2.wait()
    assert np.array_equal(np.from_dlpack(back)[:5], np.arange(5, dtype=np.float32) + 0.5)
    assert h2.progress == (n * 4, n * 4)


def test_progress_counts_nothing_before_a_held_move_starts():
    t, _ = cpu_tensor(3 * MiB)
    with held():
        h = sw.move_async(t, sw.FileBacked())
        assert h.progress == (0, 12 * MiB)
    h.wait()
    assert h.progress == (12 * MiB, 12 * MiB)


@needs_faults
def test_progress_moves_chunk_by_chunk_and_stops_where_a_write_failed():
    # 12 MiB in 8 MiB chunks (below the size that is split across threads,
    # so the writes come in order): the second write fails, one chunk was
    # copied.
    t, c = cpu_tensor(3 * MiB)
    _C._fault_inject("pwrite", 1, 1)
    try:
        h = sw.move_async(t, sw.FileBacked())
        with pytest.raises(OSError):
            h.wait(TIMEOUT)
    finally:
        _C._fault_clear()
    assert h.progress == (8 * MiB, 12 * MiB)
    assert not c.is_released()


@needs_faults
def test_progress_of_a_large_split_move_stays_below_the_total_when_a_write_failed():
    # 40 MiB is copied in parts side by side, so which writes finished before
    # the third one failed depends on the threads; only finished chunks (whole
    # 2 MiB multiples) count, never the total.
    t, c = cpu_tensor(10 * MiB)
    _C._fault_inject("pwrite", 2, 1)
    try:
        h = sw.move_async(t, sw.FileBacked())
        with pytest.raises(OSError):
            h.wait(TIMEOUT)
    finally:
        _C._fault_clear()
    done, total = h.progress
    assert total == 40 * MiB
    assert 0 <= done < total and done % (2 * MiB) == 0
    assert not c.is_released()


def test_progress_total_is_the_physical_span_for_a_gapped_view():
    c = sw.CPU(64, dtype=F32)
    view = sw.Tensor(c, 3, L([4, 5], [2, 12]))  # cosize 1 + 6 + 48 = 55
    h = sw.move_async(view, sw.FileBacked())
    h.wait()
    assert h.progress == (55 * 4, 55 * 4)


def test_progress_of_a_python_route_jumps_from_zero_to_total():
    p, gate = gated_pair()
    t, _ = p.source([1.0, 2.0, 3.0, 4.0, 5.0])
    h = sw.move_async(t, p.B(0, dtype=F32))
    assert h.progress == (0, 20)
    gate.set()
    h.wait()
    assert h.progress == (20, 20)


def test_progress_of_a_failed_python_route_stays_below_total():
    p, gate = gated_pair(fail=OSError("no"))
    t, _ = p.source([1.0, 2.0])
    h = sw.move_async(t, p.B(0, dtype=F32))
    gate.set()
    with pytest.raises(OSError):
        h.wait()
    assert h.progress == (0, 8)


def test_progress_of_a_synchronous_move():
    t, _ = cpu_tensor(100)
    h = sw.move_async(t, sw.CPU(100))
    h.wait()
    assert h.progress == (400, 400)


def test_progress_is_a_read_only_property():
    t, _ = cpu_tensor(4)
    h = sw.move_async(t, sw.FileBacked())
    with pytest.raises(AttributeError):
        h.progress = (1, 1)
    assert "bytes_done" in type(h).progress.__doc__


# ---- AwaitResidency and AwaitProjection ------------------------------------------------

TILES, TILE = 4, 2


def evicted(p):
    te = sw.TiledEvictable(filled(p.A, [i + 0.5 for i in range(TILES * TILE)]),
                           p.B(0, dtype=F32), (TILES,), (TILE,))
    te.evict(sw.TileSet([(i,) for i in range(TILES)]))
    return te


def test_residency_wait_timeout_callback_and_progress():
    p, gate = gated_pair()
    te = evicted(p)
    h = te.promote_async(sw.TileSet([(0,), (1,)]))
    assert isinstance(h, sw.AwaitResidency) and not h.done
    calls = Calls()
    h.add_done_callback(calls)
    with pytest.raises(TimeoutError, match="AwaitResidency"):
        h.wait(timeout=0.01)
    assert h.progress == (0, 2 * TILE * 4)
    gate.set()
    assert h.wait(TIMEOUT) is None
    ((handle, thread),) = calls.wait_for(1)
    assert handle is h and thread != threading.get_ident()
    assert h.progress == (2 * TILE * 4, 2 * TILE * 4)
    assert te.tile_state((0,)).location == "primary" and te[0] == 0.5


def test_synchronous_residency_handle_is_done_with_full_progress():
    prim = sw.CPU(16, dtype=F32)
    te = sw.TiledEvictable(prim, sw.CPU(0), (4,), (4,))
    h = te.evict_async(sw.TileSet([(1,), (3,)]))
    assert h.done and h.wait(0) is None and h.progress == (32, 32)
    calls = Calls()
    h.add_done_callback(calls)
    assert calls.calls == [(h, threading.get_ident())]
    h2 = te.evict_async(sw.TileSet([(1,)]))  # already secondary: nothing to copy
    assert h2.wait(0) is None and h2.progress == (0, 0)


def test_projection_handle_wait_timeout_callback_and_progress():
    prim = sw.CPU(16, dtype=F32)
    for i in range(16):
        prim[i] = float(i)
    te = sw.TiledEvictable(prim, sw.CPU(0), (4,), (4,))
    h = te.project(sw.Tensor(te, 0, L([16], [1])), sw.TileSelection(([1, 2],)))
    assert isinstance(h, sw.AwaitProjection)
    r = h.wait(timeout=0)
    assert r.tolist() == [float(i) for i in range(4, 12)]
    assert h.progress == (8 * 4, 8 * 4)
    calls = Calls()
    h.add_done_callback(calls)
    assert calls.calls == [(h, threading.get_ident())]
    with pytest.raises(ValueError):
        h.wait(-1)
