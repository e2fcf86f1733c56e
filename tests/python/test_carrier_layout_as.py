"""The binding's float reads of carriers whose slots the core holds go
through the core's sw_carrier_read_layout_as (tensor.h) in one read: a
FileBacked Float32 tensor read as floats by autograd (a Float32 slot
widened to a binary64 in the core), and an Evictable over a Python tier
read by a minimal operation (the core reaches the tier's hooks). The pread
fault (debug fault-injection build) shows the reads: code that reads one
slot at a time reads the file once per slot and meets the fault; the
others pin what the re-routing keeps (hook order and count, the refusal's
words)."""

import pytest

import strideweave as sw
from strideweave import Tensor, _C

from moves_for_tests import L
from tiled_helpers import ListCarrier  # Float32 slots in a list, with allocate_like

fault = pytest.mark.skipif(not _C._fault_injection_enabled(),
                           reason="needs the fault-injection build (-Dfault_injection=true)")


class Logged(ListCarrier):
    """ListCarrier whose get_value appends (name, index) to a shared log."""

    def __init__(self, values, log, name):
        super().__init__(values)
        self.log, self.name = log, name

    def get_value(self, index):
        self.log.append((self.name, index))
        return super().get_value(index)

    def new_like(self, values, *, mutable=True, dtype=None):
        return ListCarrier(list(values))


def cpu_of(values):
    t = Tensor(sw.CPU(len(values)), 0, L([len(values)], [1]))
    for k, v in enumerate(values):
        t[k] = v
    return t


@fault
def test_autograd_reads_a_file_backed_cotangent_in_one_read_per_use():
    x = cpu_of([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])
    f = sw.move(sw.elementwise_mul(x, cpu_of([1.0] * 8)), sw.FileBacked())
    g = sw.move(cpu_of([0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5]), sw.FileBacked())
    # the backward reads g's 8 slots three times: three preads, where one
    # pread per slot would be 24 and meet the fault at the fourth
    _C._fault_inject("pread", skip=3, count=1)
    try:
        f.backward(g)
    finally:
        _C._fault_clear()
    assert [x.grad[k] for k in range(8)] == [0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5]


def test_a_minimal_op_reads_an_evictable_over_a_python_tier_once_per_slot_in_order():
    log = []
    e = sw.Evictable(Logged([1.0, 2.0, 3.0, 4.0], log, "q"), ListCarrier([]))
    two = sw.Evictable(Logged([2.0, 2.0, 2.0], log, "t"), ListCarrier([]))
    r = sw.elementwise_mul(Tensor(e, 1, L([3], [1])), Tensor(two, 0, L([3], [1])))
    assert [r[k] for k in range(3)] == [4.0, 6.0, 8.0]
    assert log == [("q", 1), ("q", 2), ("q", 3), ("t", 0), ("t", 1), ("t", 2)]


def test_an_evicted_evictable_over_a_python_tier_refuses_the_read_in_the_slot_reads_words():
    e = sw.Evictable(ListCarrier([1.0, 2.0]), ListCarrier([]))
    other = sw.Evictable(ListCarrier([1.0, 1.0]), ListCarrier([]))
    e.evict()
    with pytest.raises(RuntimeError) as one:
        e[0]
    with pytest.raises(RuntimeError) as op:
        sw.elementwise_mul(Tensor(e, 0, L([2], [1])), Tensor(other, 0, L([2], [1])))
    assert str(op.value) == str(one.value)
