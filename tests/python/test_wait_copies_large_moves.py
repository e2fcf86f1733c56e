"""A large move_async (32 MiB and up) runs on the pool with one CPU left to
its caller; a wait() with no timeout gives that CPU back by copying the
parts of the move nobody has started. These tests hold what a user sees:
every value arrives once, for one waiter or many, from CPU and from a
FileBacked source; a wait with a timeout still returns at its timeout; a
signal still interrupts a waiting caller, and the move still finishes."""

import signal
import threading

import numpy as np
import pytest
import torch

import strideweave as sw
from moves_for_tests import held
from strideweave import Layout, Shape, Stride, Tensor

N = 12 << 20  # Float32 slots: 48 MiB, cut into parts on the pool


def layout(n):
    return Layout(Shape(n), Stride(1))


def cpu_tensor(n, offset=0.0):
    t = Tensor(sw.CPU(n, empty=True), 0, layout(n))
    a = np.from_dlpack(t)
    a[:] = np.arange(n, dtype=np.float32)
    a += offset
    del a
    return t


def file_tensor(n):
    return sw.move(cpu_tensor(n, 0.5), sw.FileBacked())


def expect(n, offset=0.0):
    return np.arange(n, dtype=np.float32) + np.float32(offset)


def test_one_waiter_gets_every_value_through_numpy_and_torch():
    h = sw.move_async(cpu_tensor(N), sw.CPU(N, empty=True))
    r = h.wait()
    np.testing.assert_array_equal(np.from_dlpack(r), expect(N))
    assert torch.equal(torch.from_dlpack(r), torch.from_numpy(expect(N)))
    assert h.progress == (4 * N, 4 * N)


def test_a_filebacked_source_is_read_whole_by_its_waiter():
    src = file_tensor(N)
    r = sw.move_async(src, sw.CPU(N, empty=True)).wait()
    np.testing.assert_array_equal(np.from_dlpack(r), expect(N, 0.5))


def test_many_threads_waiting_on_one_move_get_the_same_tensor():
    with held():
        h = sw.move_async(cpu_tensor(N), sw.CPU(N, empty=True))
        results, errors = [], []

        def waiter():
            try:
                results.append(h.wait())
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=waiter) for _ in range(6)]
        for t in threads:
            t.start()
    for t in threads:
        t.join(60)
    assert not errors and len(results) == 6
    assert all(r is results[0] for r in results)
    np.testing.assert_array_equal(np.from_dlpack(results[0]), expect(N))


def test_large_moves_from_many_threads_each_arrive_whole():
    failures = []

    def mover(k):
        try:
            for _ in range(2):
                r = sw.move_async(cpu_tensor(N // 2, k), sw.CPU(N // 2, empty=True)).wait()
                if not np.array_equal(np.from_dlpack(r), expect(N // 2, k)):
                    failures.append(k)
        except BaseException as e:  # noqa: BLE001 - reported below
            failures.append(e)

    threads = [threading.Thread(target=mover, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert failures == []


def test_a_timeout_is_kept_while_the_move_waits_to_start():
    with held():
        h = sw.move_async(cpu_tensor(N), sw.CPU(N, empty=True))
        with pytest.raises(TimeoutError, match="did not finish"):
            h.wait(timeout=0.01)
        assert not h.done and h.progress == (0, 4 * N)
    np.testing.assert_array_equal(np.from_dlpack(h.wait()), expect(N))


class Interrupted(Exception):
    pass


def _interrupt(signum, frame):
    raise Interrupted


def test_a_signal_interrupts_the_waiter_and_the_move_still_finishes():
    old = signal.signal(signal.SIGALRM, _interrupt)
    try:
        with held():
            h = sw.move_async(cpu_tensor(N), sw.CPU(N, empty=True))
            signal.setitimer(signal.ITIMER_REAL, 0.02)
            with pytest.raises(Interrupted):
                h.wait()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    np.testing.assert_array_equal(np.from_dlpack(h.wait()), expect(N))
