"""A Python `_copy` that shrinks its destination fails the move, and a failed
move leaves the source live and unchanged (architecture.md "Movement", step
7), also for a source whose storage the core releases at commit (a CPU
carrier): the destination is checked inside the core's commit, before the
source goes. Covers move and move_async, a dropped handle and a move
recorded by the profiler."""

import threading

import pytest

import strideweave as sw
from strideweave.carriers.move import registered_move_operation

from moves_for_tests import PyList

GATE_SECONDS = 30  # a bound for a broken build, never reached when it works
SHRANK = "the destination Dst carrier shrank to 1 slot during the move \\(needs 3\\)"


class Dst(PyList):
    """A destination class of this file's own, so the registered pair is too."""


def shrinking_op(go=None):
    """A Python _copy that copies every value, then loses the destination's
    storage; with `go`, it first waits for the test to open that gate."""

    class Shrinking(sw.MoveOperation):
        def _copy(self, tensor, destination, output, element_count):
            if go is not None and not go.wait(GATE_SECONDS):
                raise TimeoutError("the test never opened the gate")
            for i in range(element_count):
                output[i] = tensor[i]
            destination.values = destination.values[:1]
    return Shrinking


def cpu_source():
    c = sw.CPU(3)
    for i in range(3):
        c[i] = float(i + 1)
    return sw.Tensor(c, 0, sw.Layout(sw.Shape(3), sw.Stride(1))), c


def assert_source_live_and_unchanged(c, version):
    assert not c.is_released()
    assert c.version == version
    assert [c[i] for i in range(3)] == [1.0, 2.0, 3.0]
    c[0] = 9.0  # no longer pending
    assert c[0] == 9.0


def assert_destination_usable(d):
    assert not d.is_released()
    d.values = [0.0, 0.0, 0.0]
    d[0] = 1.0  # no longer pending
    d.release()


@pytest.mark.parametrize("mode", ["move", "move_async"])
def test_shrunk_destination_fails_the_move_and_keeps_a_cpu_source(mode):
    t, c = cpu_source()
    version = c.version
    d = Dst([0.0] * 3)
    with registered_move_operation(sw.CPU, Dst, shrinking_op()):
        with pytest.raises(RuntimeError, match=SHRANK):
            if mode == "move":
                sw.move(t, d)
            else:
                sw.move_async(t, d).wait()
    assert_source_live_and_unchanged(c, version)
    assert_destination_usable(d)


def test_shrunk_destination_with_a_dropped_handle_keeps_the_source():
    t, c = cpu_source()
    version = c.version
    d = Dst([0.0] * 3)
    go, committed = threading.Event(), threading.Event()
    seen = {}

    def on_done(handle):
        try:
            handle.wait()
        except RuntimeError as e:
            seen["error"] = e
        committed.set()

    with registered_move_operation(sw.CPU, Dst, shrinking_op(go)):
        sw.move_async(t, d).add_done_callback(on_done)  # the handle is dropped at once
        go.set()
        assert committed.wait(GATE_SECONDS)
    assert "shrank to 1 slot" in str(seen["error"])
    assert_source_live_and_unchanged(c, version)
    assert_destination_usable(d)


@pytest.mark.parametrize("mode", ["move", "move_async"])
def test_shrunk_destination_under_the_profiler_records_a_failed_move(mode):
    t, c = cpu_source()
    version = c.version
    d = Dst([0.0] * 3)
    op = shrinking_op()
    with registered_move_operation(sw.CPU, Dst, op):
        with sw.profile() as p:
            with pytest.raises(RuntimeError, match=SHRANK):
                if mode == "move":
                    sw.move(t, d)
                else:
                    sw.move_async(t, d).wait()
    submit, complete = p.move_events()
    assert submit.operation_type is op
    assert submit.succeeded is None and complete.succeeded is False
    assert complete.move_id == submit.move_id
    assert_source_live_and_unchanged(c, version)
    assert_destination_usable(d)
