"""The per-slot copies over Python carriers go through the core's
sw_carrier_copy_layout (tensor.h): an ElementwiseMoveOperation between
carriers written in Python, and autograd's accumulation into an existing
.grad that is not in host memory. The core's `copy_slot` fault (debug
fault-injection build) fails the copy at slot k: those tests fail on code
that copies in the binding (no fault fires there). The others pin what the
re-routing keeps: hook order read k / write k, objects of dtype Any passed
as they are, a layout that repeats a slot accumulating into it."""

import pytest

import strideweave as sw
from strideweave import DType as D
from strideweave import Tensor, _C

from moves_for_tests import L, PyList
from tiled_helpers import ListCarrier as Mine  # Float32 slots in a list of floats

fault = pytest.mark.skipif(not _C._fault_injection_enabled(),
                           reason="needs the fault-injection build (-Dfault_injection=true)")


class Logged(PyList):
    """PyList whose hooks append ('get'|'set', name, index) to a shared log."""

    def __init__(self, values, log, name, dtype=D.Float32):
        super().__init__(values, dtype=dtype)
        self.log, self.name = log, name

    def get_value(self, index):
        self.log.append(("get", self.name, index))
        return super().get_value(index)

    def set_value(self, index, value):
        self.log.append(("set", self.name, index))
        super().set_value(index, value)


def test_elementwise_move_reads_then_writes_each_slot_in_order():
    log = []
    src = Logged([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], log, "src")
    dst = Logged([0.0] * 5, log, "dst")
    sw.move(Tensor(src, 1, L([3], [2])), dst)
    assert dst.values == [2.0, 0.0, 4.0, 0.0, 6.0]
    assert log == [("get", "src", 1), ("set", "dst", 0), ("get", "src", 3),
                   ("set", "dst", 2), ("get", "src", 5), ("set", "dst", 4)]


def test_any_dtype_values_arrive_as_the_same_objects():
    marks = [object(), "text", (1, 2)]
    src = PyList(marks, dtype=D.Any)
    dst = PyList([None] * 3, dtype=D.Any)
    sw.move(Tensor(src, 0, L([3], [1])), dst)
    assert all(a is b for a, b in zip(dst.values, marks))


@fault
def test_elementwise_move_fails_at_the_core_copys_slot_leaving_the_slots_before():
    src = PyList([1.0, 2.0, 3.0, 4.0])
    dst = PyList([0.0] * 4)
    _C._fault_inject("copy_slot", 2, 1)
    with pytest.raises(OSError, match="slot 2 not copied"):
        sw.move(Tensor(src, 0, L([4], [1])), dst)
    assert dst.values == [1.0, 2.0, 0.0, 0.0]


class Double(sw.Operation):
    def _forward(self, x):
        out = sw.CPU(x.size())
        for k in range(x.size()):
            out[k] = 2.0 * x[k]
        return Tensor(out, 0, L([x.size()], [1]))

    def backward(self, g):
        out = sw.CPU(g.size())
        for k in range(g.size()):
            out[k] = 2.0 * g[k]
        return (Tensor(out, 0, L([g.size()], [1])),)


def ones(n):
    c = sw.CPU(n)
    for k in range(n):
        c[k] = 1.0
    return Tensor(c, 0, L([n], [1]))


def test_grad_accumulates_into_a_python_carrier_slot_by_slot():
    x = Tensor(Mine([1.0, 2.0, 3.0]), 0, L([3], [1]))
    x.grad = Tensor(Mine([0.5]), 0, L([3], [0]))  # one slot, reached three times
    Double().forward(x).backward(ones(3))
    assert x.grad.carrier.v == [6.5]  # each add saw the one before


@fault
def test_grad_accumulation_fails_at_the_core_copys_slot_leaving_the_slots_before():
    x = Tensor(Mine([1.0, 2.0, 3.0]), 0, L([3], [1]))
    x.grad = Tensor(Mine([1.0, 1.0, 1.0]), 0, L([3], [1]))
    _C._fault_inject("copy_slot", 1, 1)
    with pytest.raises(OSError, match="slot 1 not copied"):
        Double().forward(x).backward(ones(3))
    assert x.grad.carrier.v == [3.0, 1.0, 1.0]


def cpu_of(values):
    c = sw.CPU(len(values))
    for k, v in enumerate(values):
        c[k] = v
    return Tensor(c, 0, L([len(values)], [1]))


def test_an_evictable_over_a_python_tier_is_copied_through_its_primary():
    log = []
    p = Logged([1.0, 2.0, 3.0], log, "p")
    e = sw.Evictable(p, PyList([]))
    out = sw.move(Tensor(e, 0, L([3], [1])), sw.CPU(3))
    assert [out.carrier[i] for i in range(3)] == [1.0, 2.0, 3.0]
    assert log == [("get", "p", 0), ("get", "p", 1), ("get", "p", 2)]
    e2 = sw.Evictable(Logged([0.0] * 3, log, "q"), PyList([]))
    del log[:]
    before = e2.version
    sw.move(cpu_of([7.0, 8.0, 9.0]), e2)
    assert e2.primary.values == [7.0, 8.0, 9.0]
    assert log == [("set", "q", 0), ("set", "q", 1), ("set", "q", 2)]
    assert e2.version == before  # a move is not an in-place mutation


@fault
def test_a_copy_into_an_evictable_over_a_python_tier_fails_at_the_core_copys_slot():
    e = sw.Evictable(PyList([0.0] * 3), PyList([]))
    _C._fault_inject("copy_slot", 1, 1)
    with pytest.raises(OSError, match="slot 1 not copied"):
        sw.move(cpu_of([7.0, 8.0, 9.0]), e)
    assert e.primary.values == [7.0, 0.0, 0.0]
