"""What a small move remembers between moves stays right (issue 19).

A move looks up its operation per exact class pair and checks a shipped
operation's pinned classes; both answers are remembered across moves to
cut the per-move cost. These tests change what the answer must be between
two moves and check that the next move follows the change; each fails if
the remembered answer outlives it. The move's handle and request are
recycled too: many moves in a row, failed ones among them, must each end
with their own outcome."""

import gc

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
