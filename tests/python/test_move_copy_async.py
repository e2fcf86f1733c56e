"""A MoveOperation may start its transfer on an engine's own threads: its
`_copy_async(tensor, destination, output, element_count)` returns a
ProviderCompletion, move_async returns at once, and the framework's waiter
threads commit when it finishes (the hook the TensorStore integration uses;
seed: pending protection, one commit, source release)."""

import threading

import pytest

import strideweave as sw
from strideweave.carriers.move import registered_move_operation

from moves_for_tests import PyList


class Dst(PyList):
    """A separate class so the pair is ours alone."""


class Gate:
    """A ProviderCompletion the test opens: wait() blocks until then."""

    def __init__(self, fail=None):
        self.opened = threading.Event()
        self.fail = fail
        self.waited = False

    @property
    def done(self):
        return self.opened.is_set()

    def wait(self):
        self.waited = True
        self.opened.wait(10)
        if self.fail:
            raise self.fail


def make_op(gate, log):
    class AsyncCopy(sw.MoveOperation):
        def _copy_async(self, tensor, destination, output, element_count):
            log.append(("started", element_count))
            # the values land now; completion is what the gate holds back
            for i in range(element_count):
                destination.values[i] = tensor.carrier.values[tensor.offset + i]
            return gate

        def _copy(self, tensor, destination, output, element_count):
            raise AssertionError("the framework must call _copy_async when it exists")
    return AsyncCopy


def tensor(values):
    return sw.Tensor(PyList(values), 0, sw.Layout(sw.Shape(len(values)), sw.Stride(1)))


def test_copy_async_move_returns_before_the_engine_finishes_and_commits_once():
    gate, log = Gate(), []
    t = tensor([1.0, 2.0, 3.0])
    dst = Dst()
    with registered_move_operation(PyList, Dst, make_op(gate, log)):
        h = sw.move_async(t, dst)
        assert not h.done                      # handed to a worker / waiter thread
        assert not t.carrier.is_released()     # the source goes only at the commit
        with pytest.raises(RuntimeError, match="pending"):
            t.carrier.release()                # pending protection holds meanwhile
        gate.opened.set()
        r = h.wait()
    assert log == [("started", 3)]
    assert gate.waited and h.done
    assert r.carrier is dst and r.tolist() == [1.0, 2.0, 3.0]
    assert t.carrier.is_released()


def test_copy_async_failure_is_the_handles_and_leaves_the_source_live():
    gate, log = Gate(fail=OSError("engine: disk on fire")), []
    t = tensor([4.0, 5.0])
    with registered_move_operation(PyList, Dst, make_op(gate, log)):
        h = sw.move_async(t, Dst())
        gate.opened.set()
        with pytest.raises(OSError, match="disk on fire"):
            h.wait()
    assert not t.carrier.is_released() and t.tolist() == [4.0, 5.0]
    t.carrier[0] = 9.0                         # no longer pending


def test_copy_async_returning_none_commits_at_once():
    class Sync(sw.MoveOperation):
        def _copy_async(self, tensor, destination, output, element_count):
            for i in range(element_count):
                destination.values[i] = tensor.carrier.values[i]
            return None

        def _copy(self, *a):
            raise AssertionError("unused")

    t = tensor([7.0])
    with registered_move_operation(PyList, Dst, Sync):
        h = sw.move_async(t, Dst())
        assert h.wait().tolist() == [7.0] and h.done


def test_copy_async_returning_something_else_fails_the_move():
    class Bad(sw.MoveOperation):
        def _copy_async(self, tensor, destination, output, element_count):
            return 42

        def _copy(self, *a):
            raise AssertionError("unused")

    t = tensor([7.0])
    with registered_move_operation(PyList, Dst, Bad):
        with pytest.raises(TypeError):
            sw.move(t, Dst())
    assert not t.carrier.is_released()
