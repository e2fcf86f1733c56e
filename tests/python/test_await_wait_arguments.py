"""AwaitMove.wait's ways of being called: with no argument, a timeout by
position or by name (also as a keyword string that is not the interned one),
on handles that are done already (a small move finished before move_async
returned), pending (a held pool move) and failed; the argument errors are
Python's usual ones for `wait(timeout=None)`."""

import numpy as np
import pytest

import strideweave as sw
from moves_for_tests import held
from strideweave import _C
from strideweave import Layout, Shape, Stride, Tensor

POOL = 1 << 15  # float32 elements: 128 KiB, above what runs on the caller


def cpu_tensor(n):
    t = Tensor(sw.CPU(n, empty=True), 0, Layout(Shape(n), Stride(1)))
    a = np.from_dlpack(t)
    a[:] = np.arange(n, dtype=np.float32)
    del a
    return t


def kw(name):
    """A keyword name built at run time, not the interned literal."""
    return "".join(["time", "out"]) if name == "timeout" else name


@pytest.mark.parametrize("call", [
    lambda h: h.wait(),
    lambda h: h.wait(None),
    lambda h: h.wait(0),
    lambda h: h.wait(timeout=None),
    lambda h: h.wait(timeout=0.0),
    lambda h: h.wait(**{kw("timeout"): 5}),
])
def test_every_form_answers_a_done_handle_with_the_same_tensor(call):
    h = sw.move_async(cpu_tensor(8), sw.CPU(8, empty=True))
    assert h.done
    first = h.wait()
    assert call(h) is first and first.tolist()[:3] == [0.0, 1.0, 2.0]


@pytest.mark.parametrize("call, message", [
    (lambda h: h.wait(1, 2), r"wait\(\) takes at most 1 argument \(2 given\)"),
    (lambda h: h.wait(foo=1), r"'foo' is an invalid keyword argument for wait\(\)"),
    (lambda h: h.wait(timeout=1, foo=1), r"wait\(\) takes at most 1 keyword argument \(2 given\)"),
    (lambda h: h.wait(1, timeout=1), r"wait\(\) takes at most 1 argument \(2 given\)"),
    (lambda h: h.wait("1"), r"timeout must be None or a number of seconds, not str"),
    (lambda h: h.wait(timeout=True), r"timeout must be None or a number of seconds, not bool"),
])
def test_wrong_arguments_raise_type_error_on_a_done_handle(call, message):
    h = sw.move_async(cpu_tensor(8), sw.CPU(8, empty=True))
    with pytest.raises(TypeError, match=message):
        call(h)
    assert h.wait().tolist()[:2] == [0.0, 1.0]  # the handle is unharmed


@pytest.mark.parametrize("timeout", [-1, float("nan")])
def test_a_negative_or_nan_timeout_is_a_value_error(timeout):
    h = sw.move_async(cpu_tensor(8), sw.CPU(8, empty=True))
    with pytest.raises(ValueError, match="number of seconds >= 0"):
        h.wait(timeout)
    with pytest.raises(ValueError, match="number of seconds >= 0"):
        h.wait(timeout=timeout)


def test_a_pending_handle_times_out_by_position_and_by_name_then_finishes():
    t = cpu_tensor(POOL)
    with held():
        h = sw.move_async(t, sw.FileBacked())
        for call in (lambda: h.wait(0.01), lambda: h.wait(timeout=0),
                     lambda: h.wait(**{kw("timeout"): 0.001})):
            with pytest.raises(TimeoutError, match="AwaitMove did not finish"):
                call()
        assert not h.done and h.progress == (0, POOL * 4)
        with pytest.raises(TypeError, match="takes at most 1 argument"):
            h.wait(1, 2)
    r = h.wait(timeout=60)
    assert h.done and h.progress == (POOL * 4, POOL * 4)
    assert r.tolist()[POOL - 1] == float(POOL - 1) and h.wait() is r


@pytest.mark.skipif(not _C._fault_injection_enabled(),
                    reason="build without -Dfault_injection=true")
def test_a_small_failed_move_raises_the_same_exception_from_every_form():
    t = cpu_tensor(8)
    _C._fault_inject("move_transfer", 0, 1)
    try:
        h = sw.move_async(t, sw.CPU(8, empty=True))  # fails on the caller
    finally:
        _C._fault_clear()
    assert h.done and h.progress == (0, 32) and not t.carrier.is_released()
    raised = []
    for call in (lambda: h.wait(), lambda: h.wait(0), lambda: h.wait(timeout=None)):
        with pytest.raises(OSError, match="injected transfer failure") as e:
            call()
        raised.append(e.value)
    assert raised[0] is raised[1] is raised[2]
