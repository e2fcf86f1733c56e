"""A move of built-in host carriers is checked once, by the core's start
(issue 19).

A move between CPU, Generic and FileBacked carriers on their shipped route,
with no autograd node and no profiling record, runs nothing between its
checks and the core's start of the move, so the core's validation (one
lock round on the pair, in the table's order, with the growth of an empty
destination) is its only check. The separate check (`move_check` fault
point) then must not run: with it failing, such moves still go through,
and a move that needs it (a node to record) still meets it. The words of
each refusal are guarded by test_move_validation_core_checked.py.
"""

import pytest

import strideweave as sw
from strideweave import _C
from moves_for_tests import BIG, D, L

needs_faults = pytest.mark.skipif(not _C._fault_injection_enabled(),
                                  reason="needs a fault-injection build")


def tensor_on(carrier, n):
    for i in range(n):
        carrier[i] = i + 0.5
    return sw.Tensor(carrier, 0, L([n], [1]))


def cpu(n):
    return sw.CPU(n)


def generic(n):
    return sw.Generic([0.0] * n, dtype=D.Float32)


def file_backed(n):
    f = sw.FileBacked()
    f._allocate(n)
    return f


def empty_file(n):
    return sw.FileBacked()


PAIRS = [(cpu, cpu), (cpu, file_backed), (cpu, empty_file), (file_backed, cpu), (generic, cpu),
         (cpu, generic)]
IDS = ["cpu->cpu", "cpu->file", "cpu->empty-file", "file->cpu", "generic->cpu", "cpu->generic"]


@pytest.fixture
def check_fails():
    _C._fault_inject("move_check", count=-1)
    try:
        yield
    finally:
        _C._fault_clear()


def run(call, t, d):
    return sw.move(t, d) if call == "move" else sw.move_async(t, d).wait()


@needs_faults
@pytest.mark.parametrize("n", [4, BIG])
@pytest.mark.parametrize("call", ["move", "move_async"])
@pytest.mark.parametrize("make", PAIRS, ids=IDS)
def test_a_move_of_built_ins_is_checked_only_by_its_start(make, call, n, check_fails):
    src, dst = make
    t, d = tensor_on(src(n), n), dst(n)
    with sw.no_grad():
        out = run(call, t, d)
    assert out.carrier is d and [d[0], d[n - 1]] == [0.5, n - 0.5]
    assert t.carrier.is_released()


@needs_faults
@pytest.mark.parametrize("call", ["move", "move_async"])
def test_a_move_that_records_a_node_still_runs_the_separate_check(call, check_fails):
    t, dst = tensor_on(sw.CPU(4), 4), sw.CPU(4)
    with pytest.raises(OSError, match="injected check failure"):  # autograd on
        run(call, t, dst)
    assert not t.carrier.is_released() and not dst.is_released()


@needs_faults
@pytest.mark.parametrize("call", ["move", "move_async"])
def test_a_growth_the_start_fails_raises_before_the_move(call):
    t, d = tensor_on(sw.CPU(4), 4), sw.FileBacked()
    _C._fault_inject("truncate")
    try:
        with sw.no_grad(), pytest.raises(OSError, match="resiz"):
            getattr(sw, call)(t, d)
    finally:
        _C._fault_clear()
    assert d.size() == 0 and d.path.stat().st_size == 0 and not t.carrier.is_released()
    with sw.no_grad():
        assert sw.move(t, d).carrier.size() == 4


@needs_faults
@pytest.mark.parametrize("call", ["move", "move_async"])
def test_a_start_failure_no_row_explains_is_the_handles(call):
    # The core's start fails for a reason none of the checks finds: as
    # before, the move's handle fails and neither carrier changes.
    t, d = tensor_on(sw.CPU(4), 4), sw.CPU(4)
    _C._fault_inject("move_submit")
    try:
        with sw.no_grad():
            h = sw.move_async(t, d) if call == "move_async" else None
            with pytest.raises(OSError, match="injected submission failure"):
                h.wait() if h else sw.move(t, d)
    finally:
        _C._fault_clear()
    assert not t.carrier.is_released() and not d.is_released()
    with sw.no_grad():
        assert sw.move(t, d).carrier is d and d[3] == 3.5
