"""What a small move remembers between moves stays right (issue 19).

A move looks up its operation per exact class pair and checks a shipped
operation's pinned classes; both answers are remembered across moves to
cut the per-move cost. These tests change what the answer must be between
two moves and check that the next move follows the change; each fails if
the remembered answer outlives it. The move's handle and request are
recycled too: many moves in a row, failed ones among them, must each end
with their own outcome."""

import gc
import weakref

import numpy as np
import pytest

import strideweave as sw
from strideweave.carriers.move import (dispatch_move, register_move_operation,
                                       unregister_move_operation)
from moves_for_tests import L, PyList


class CacheSrc(PyList):
    """A definition-free user source class used only here."""


class CacheDst(PyList):
    """A definition-free user destination class used only here."""


class Counting(sw.MoveOperation):
    calls = 0

    def _copy(self, tensor, destination, output, element_count):
        type(self).calls += 1
        for i in range(tensor.size()):
            output[i] = tensor[i]


def _tensor(values):
    return sw.Tensor(CacheSrc(list(values)), 0, L([len(values)], [1]))


def test_registration_after_a_move_of_the_pair_is_used_by_the_next_move():
    Counting.calls = 0
    # The pair is looked up (and remembered) before it is registered.
    assert dispatch_move(CacheSrc, CacheDst) is sw.ElementwiseMoveOperation
    out = sw.move(_tensor([1.0, 2.0]), CacheDst([0.0, 0.0]))
    assert out.tolist() == [1.0, 2.0] and Counting.calls == 0
    register_move_operation(CacheSrc, CacheDst, Counting)
    try:
        assert dispatch_move(CacheSrc, CacheDst) is Counting
        out = sw.move(_tensor([3.0, 4.0]), CacheDst([0.0, 0.0]))
        assert out.tolist() == [3.0, 4.0] and Counting.calls == 1
    finally:
        assert unregister_move_operation(CacheSrc, CacheDst) is Counting
    # ... and its removal by the one after.
    assert dispatch_move(CacheSrc, CacheDst) is sw.ElementwiseMoveOperation
    out = sw.move(_tensor([5.0, 6.0]), CacheDst([0.0, 0.0]))
    assert out.tolist() == [5.0, 6.0] and Counting.calls == 1


def test_unregistering_a_shipped_pair_after_its_moves_changes_the_route():
    def small_cpu():
        t = sw.Tensor(sw.CPU(4, empty=True), 0, L([4], [1]))
        np.from_dlpack(t)[:] = [1.0, 2.0, 3.0, 4.0]
        return t

    with sw.no_grad():
        sw.move(small_cpu(), sw.FileBacked()).carrier.release()
    assert dispatch_move(sw.CPU, sw.FileBacked) is sw.CpuToFileBackedMoveOperation
    removed = unregister_move_operation(sw.CPU, sw.FileBacked)
    try:
        assert dispatch_move(sw.CPU, sw.FileBacked) is sw.ElementwiseMoveOperation
        with sw.profile() as prof:
            out = sw.move(small_cpu(), sw.FileBacked())
        assert out.tolist() == [1.0, 2.0, 3.0, 4.0]
        out.carrier.release()
        assert {e.operation_type for e in prof.move_events()} == {sw.ElementwiseMoveOperation}
    finally:
        register_move_operation(sw.CPU, sw.FileBacked, removed)
    assert dispatch_move(sw.CPU, sw.FileBacked) is sw.CpuToFileBackedMoveOperation


def test_shipped_pins_are_still_checked_after_a_successful_move():
    op = sw.CpuToFileBackedMoveOperation()
    t = sw.Tensor(sw.CPU(2, empty=True), 0, L([2], [1]))
    np.from_dlpack(t)[:] = [1.0, 2.0]
    op.forward(t, sw.FileBacked()).carrier.release()  # the pins are remembered now
    g = sw.Generic([1.0, 2.0])
    with pytest.raises(TypeError, match="CpuToFileBackedMoveOperation") as e:
        op.forward(sw.Tensor(g, 0, L([2], [1])), sw.FileBacked())
    assert "CPU" in str(e.value) and not g.is_released()
    c = sw.Tensor(sw.CPU(2, empty=True), 0, L([2], [1]))
    with pytest.raises(TypeError, match="FileBacked"):
        op.forward(c, sw.CPU(2, empty=True))
    assert not c.carrier.is_released()


def test_many_small_moves_each_end_with_their_own_outcome():
    # Recycled requests and handles: successes and refusals interleaved,
    # every result on its own destination with its own values.
    outs = []
    with sw.no_grad():
        for i in range(300):
            t = sw.Tensor(sw.CPU(16, empty=True), 0, L([16], [1]))
            np.from_dlpack(t)[:] = np.arange(16, dtype=np.float32) + i
            if i % 7 == 0:
                with pytest.raises(ValueError):
                    sw.move(t, sw.CPU(3, empty=False))  # too small, cannot grow
                assert not t.carrier.is_released()
            handle = sw.move_async(t, sw.CPU(16, empty=True))
            outs.append((i, handle))
            if i % 3 == 0:
                gc.collect()
        for i, h in outs:
            out = h.wait()
            assert h.done
            assert np.from_dlpack(out).tolist() == list(np.arange(16, dtype=np.float32) + i)


def _cpu_tensors(n, first=0):
    ts = []
    for i in range(n):
        t = sw.Tensor(sw.CPU(16, empty=True), 0, L([16], [1]))
        np.from_dlpack(t)[:] = np.arange(16, dtype=np.float32) + first + i
        ts.append(t)
    return ts


def _counting_containers(fn):
    """(fn(), the new containers the cyclic collector counted while it ran),
    with collections held off meanwhile."""
    was = gc.isenabled()
    gc.disable()
    try:
        before = gc.get_count()[0]
        out = fn()
        return out, gc.get_count()[0] - before
    finally:
        if was:
            gc.enable()


def test_handles_of_a_finished_round_serve_the_next_round_without_new_allocations():
    # 64 moves in flight, waited and dropped, then the next 64: the second
    # round's handles are the first round's, so the collector counts one new
    # container per move (its result Tensor), not two.
    with sw.no_grad():
        first = [sw.move_async(t, sw.CPU(16, empty=True)) for t in _cpu_tensors(64)]
        results = [h.wait() for h in first]
        del first
        srcs, dsts = _cpu_tensors(64, 100), [sw.CPU(16, empty=True) for _ in range(64)]
        second, counted = _counting_containers(
            lambda: [sw.move_async(s, d) for s, d in zip(srcs, dsts)])
        assert counted <= 64 + 4, counted  # the results, and the list itself
        for i, h in enumerate(second):
            assert np.from_dlpack(h.wait()).tolist() == list(np.arange(16) + 100.0 + i)
        assert len(results) == 64


def test_results_of_a_dropped_round_serve_the_next_round_without_new_allocations():
    # 64 moves in flight whose results are dropped, then the next 64: the
    # second round's handles and result Tensors are the first round's
    # memory, so the collector counts no new container per move (a round of
    # 256 otherwise set off a collection in most rounds).
    with sw.no_grad():
        first = [sw.move_async(t, sw.CPU(16, empty=True)) for t in _cpu_tensors(64)]
        results = [h.wait() for h in first]
        del first, results
        srcs, dsts = _cpu_tensors(64, 100), [sw.CPU(16, empty=True) for _ in range(64)]
        out, counted = _counting_containers(
            lambda: [h.wait() for h in [sw.move_async(s, d) for s, d in zip(srcs, dsts)]])
        assert counted <= 4, counted  # the two lists
        for i, t in enumerate(out):
            assert np.from_dlpack(t).tolist() == list(np.arange(16) + 100.0 + i)
            assert t.carrier is dsts[i]


def test_a_recycled_tensor_starts_fresh():
    # Dropped Tensors that had a gradient, a retained gradient and a weak
    # reference: the Tensors made next from their memory carry none of them,
    # and a weak reference to one of them works.
    t = _cpu_tensors(1)[0]
    t.grad = _cpu_tensors(1, 5)[0]
    t.retain_grad()
    ref = weakref.ref(t)
    del t
    gc.collect()
    assert ref() is None
    fresh = _cpu_tensors(8, 3)
    for i, f in enumerate(fresh):
        assert f.grad is None
        assert np.from_dlpack(f).tolist() == list(np.arange(16) + 3.0 + i)
        r = weakref.ref(f)
        assert r() is f
    moved = [sw.move(f, sw.FileBacked()) for f in fresh]
    assert [m.carrier.__class__ for m in moved] == [sw.FileBacked] * 8
    assert [m[15] for m in moved] == [18.0 + i for i in range(8)]
    for m in moved:
        m.carrier.release()


def test_a_recycled_handle_starts_fresh():
    # Dropped handles that had a done callback and a weak reference: the
    # next handles made from their memory carry neither.
    seen = []
    with sw.no_grad():
        t = _cpu_tensors(1)[0]
        old = sw.move_async(t, sw.CPU(16, empty=True))
        old.add_done_callback(lambda h: seen.append(1))
        ref = weakref.ref(old)
        old.wait()
        other = sw.move_async(_cpu_tensors(1)[0], sw.CPU(16, empty=True))
        other.wait()
        del old, other
        assert ref() is None and len(seen) == 1
        seen.clear()
        fresh = [sw.move_async(s, sw.CPU(16, empty=True)) for s in _cpu_tensors(4, 7)]
        for i, h in enumerate(fresh):
            assert h.done and h.progress == (64, 64) and repr(h) == "<AwaitMove done>"
            assert np.from_dlpack(h.wait()).tolist() == list(np.arange(16) + 7.0 + i)
            assert h.wait() is h.wait()
        assert seen == []
