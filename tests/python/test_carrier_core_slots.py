"""Value reads of carriers written in Python go through the core (issue 17):
the core checks the carrier's state under its lock, lets go of it, and calls
the binding back, which reads each slot the layout reaches with the carrier's
own hooks (state re-checked before each), once, in logical order. A hook's
exception comes out as it was raised; a hook may use its carrier freely,
from its own thread or another (no core lock is held while it runs)."""

import numpy as np
import pytest

import strideweave as sw
from strideweave import _C
from carriers_for_tests import state_seen_from_a_thread

D = sw.DType


def L(shape, stride):
    return sw.Layout(sw.Shape(shape), sw.Stride(stride))


class Logged(sw.Carrier):
    """Float32 slots in a list; logs every get_value; runs `on_read`."""

    def __init__(self, vals, on_read=None):
        super().__init__()
        self.vals = list(vals)
        self.log = []
        self.on_read = on_read

    def size(self):
        return len(self.vals)

    def dtype(self):
        return D.Float32

    def get_value(self, i):
        self.log.append(i)
        if self.on_read:
            self.on_read(self, i)
        return self.vals[i]

    def new_like(self, values, *, mutable=True, dtype=None):
        return Logged(values)


class Boom(Exception):
    pass


def dispatched(name):
    """The built-in operation `name`, dispatched as if for Logged."""
    op = sw.CPU(1).dispatch_op(name)
    _C._set_dispatch_metadata(op, name, Logged)
    return op


def test_python_carrier_classes_let_the_core_read_their_slots():
    assert _C._core_slots_unlocked(Logged([1.0]))
    for c in (sw.CPU(1), sw.Generic([1.0]), sw.FileBacked()):
        assert not _C._core_slots_unlocked(c)  # the core holds these slots itself


def test_each_reached_slot_is_read_once_in_logical_order():
    c = Logged([float(k) for k in range(12)])
    t = sw.Tensor(c, 1, L([2, 3], [4, 1]))  # slots 1 + 4*i + j, i fastest
    a = np.asarray(t)
    assert c.log == [1, 5, 2, 6, 3, 7]
    np.testing.assert_array_equal(a, np.float32([[1, 2, 3], [5, 6, 7]]))
    c.log.clear()
    op = dispatched("reduce_sum")
    r = op._forward(t, "a b -> a")
    assert c.log == [1, 5, 2, 6, 3, 7]
    assert r.tolist() == [6.0, 18.0]


def test_a_hooks_exception_comes_out_as_it_was_raised():
    raised = Boom("slot 2 is gone")

    def fail(_, i):
        if i == 2:
            raise raised

    c = Logged([1.0, 2.0, 3.0, 4.0], on_read=fail)
    t = sw.Tensor(c, 0, L([4], [1]))
    with pytest.raises(Boom) as e:
        np.asarray(t)
    assert e.value is raised and c.log == [0, 1, 2]  # nothing read after it
    c.log.clear()
    with pytest.raises(Boom) as e:
        dispatched("add")._forward(t, t)
    assert e.value is raised


def test_a_hook_may_use_its_carrier_from_another_thread():
    seen = []
    look_from_a_thread = state_seen_from_a_thread(seen)

    c = Logged([1.0, 2.0, 3.0], on_read=look_from_a_thread)
    np.testing.assert_array_equal(np.asarray(sw.Tensor(c, 0, L([3], [1]))),
                                  np.float32([1, 2, 3]))
    assert seen == [(0, False)]


def test_released_before_the_read_is_refused_in_the_binding_words():
    c = Logged([1.0, 2.0])
    t = sw.Tensor(c, 0, L([2], [1]))
    c.release()
    with pytest.raises(RuntimeError, match="cannot read a released Logged carrier"):
        np.asarray(t)
    assert c.log == []  # refused before any hook ran
