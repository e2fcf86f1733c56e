"""The seed's move validation table (requirements "move relocates values into a
caller-supplied carrier" and "move_async validates one movement request"):
the multi-subtensor boundary first (T-11), then rows 1-10 in order, with a
sequence in either position rejected at row 1 / row 4.

Every failure must raise directly -- from `move_async` itself, with no handle --
and leave both carriers exactly as they were: versions, released state, sizes,
values, public mutability, ownership, and (for an allocatable-empty FileBacked
destination) the file, which must not have grown. Each row is also checked
against a later row that fails at the same time, so the order is tested too.
"""

import pytest

import strideweave as sw
from strideweave import _C
from strideweave.carriers.move import registered_move_operation
from moves_for_tests import (BIG, D, FixedPyList, L, PyList, held, scaled_tensor,
                             state)

needs_faults = pytest.mark.skipif(not _C._fault_injection_enabled(),
                                  reason="build without -Dfault_injection=true")


def move_sync(t, d):
    return sw.move(t, d)


def move_handle(t, d):
    # Validation failures must come out of move_async itself: no handle.
    return sw.move_async(t, d)


ENTRY = pytest.mark.parametrize("call", [move_sync, move_handle], ids=["move", "move_async"])


def cpu_tensor(n=4, dtype=D.Float32):
    c = sw.CPU(n, dtype=dtype)
    for i in range(n):
        c[i] = i + 0.5 if dtype is D.Float32 else (i % 2 == 1 if dtype is D.Bool else i)
    return sw.Tensor(c, 0, L([n], [1])), c


def check_unchanged(before, *carriers, read_values=True):
    after = [state(c, read_values) for c in carriers]
    assert after == before


def snap(*carriers, read_values=True):
    return [state(c, read_values) for c in carriers]


# ---- multi-subtensor boundary: first ------------------------------------------------


@ENTRY
@pytest.mark.parametrize("destination", ["cpu", "not a carrier", "released"])
def test_t11_multi_subtensor_rejected_first(call, destination):
    t, c0, c1 = scaled_tensor()
    d = sw.CPU(8, dtype=D.Int32)
    if destination == "not a carrier":
        d = [1, 2]
    elif destination == "released":
        d.release()
    before = snap(c0, c1)
    with pytest.raises(NotImplementedError, match="(?i)move"):
        call(t, d)
    check_unchanged(before, c0, c1)
    if isinstance(d, sw.Carrier) and not d.is_released():
        assert d.version == 0 and d.size() == 8


def test_t11_multi_subtensor_rejected_before_source_release_check():
    t, c0, c1 = scaled_tensor()
    c0.release()
    with pytest.raises(NotImplementedError):
        sw.move_async(t, sw.CPU(8, dtype=D.Int32))
    assert not c1.is_released()


# ---- row 1: tensor is not a Tensor -----------------------------------------------------


@ENTRY
@pytest.mark.parametrize("bad", [None, 1.5, "tensor", sw.CPU(3)], ids=repr)
def test_row1_tensor_not_a_tensor_type_error(call, bad):
    d = sw.FileBacked()
    before = snap(d)
    with pytest.raises(TypeError, match="Tensor"):
        call(bad, d)
    check_unchanged(before, d)


@ENTRY
@pytest.mark.parametrize("wrap", [list, tuple], ids=["list", "tuple"])
def test_row1_tensor_sequence_rejected_batched_movement(call, wrap):
    # Seed scenario "Reject batched movement": a sequence of Tensors is row 1.
    t, c = cpu_tensor()
    d = sw.FileBacked()
    before = snap(c, d)
    with pytest.raises(TypeError, match="(?i)sequence|batch"):
        call(wrap([t]), d)
    with pytest.raises(TypeError, match="(?i)sequence|batch"):
        call(wrap([t, t]), wrap([d]))
    check_unchanged(before, c, d)


@ENTRY
def test_row1_before_row4(call):
    with pytest.raises(TypeError, match="Tensor"):
        call(object(), object())


# ---- row 2: source released ---------------------------------------------------------------


@ENTRY
@pytest.mark.parametrize("kind", ["CPU", "Generic", "FileBacked", "Py"])
def test_row2_source_released_runtime_error(call, kind):
    src = {"CPU": lambda: sw.CPU(4), "Generic": lambda: sw.Generic([1.0] * 4),
           "FileBacked": lambda: sw.FileBacked(), "Py": lambda: PyList([1.0] * 4)}[kind]()
    if kind == "FileBacked":
        src._allocate(4)
    t = sw.Tensor(src, 0, L([4], [1]))
    src.release()
    d = sw.FileBacked()
    before = snap(src, d)
    with pytest.raises(RuntimeError, match="released"):
        call(t, d)
    check_unchanged(before, src, d)


@ENTRY
def test_row2_before_row4(call):
    t, c = cpu_tensor()
    c.release()
    with pytest.raises(RuntimeError, match="released"):
        call(t, "not a carrier")


# ---- row 3: source owned by another carrier -----------------------------------------


@ENTRY
def test_row3_source_owned_runtime_error(call):
    t, c = cpu_tensor()
    token = c._claim_ownership()
    try:
        d = sw.FileBacked()
        before = snap(c, d)
        with pytest.raises(RuntimeError, match="owned"):
            call(t, d)
        check_unchanged(before, c, d)
        with pytest.raises(RuntimeError, match="owned"):
            call(t, "not a carrier")  # row 3 before row 4
    finally:
        c._relinquish_ownership(token)
    assert not c.is_owned()


@ENTRY
def test_row3_source_pending_in_another_move_runtime_error(call):
    # C-13 / architecture "Pending guard": another move of a pending source.
    src = sw.CPU(BIG)
    t = sw.Tensor(src, 0, L([BIG], [1]))
    first = sw.FileBacked()
    second = sw.FileBacked()
    with held():
        h = sw.move_async(t, first)
        before = snap(src, second, read_values=False)
        with pytest.raises(RuntimeError, match="pending"):
            call(t, second)
        with pytest.raises(RuntimeError, match="pending"):
            call(t, "not a carrier")  # row 3 before row 4
        check_unchanged(before, src, second, read_values=False)
        assert not h.done
    r = h.wait()
    assert r.carrier is first and src.is_released()
    assert second.size() == 0 and second.path.stat().st_size == 0


# ---- row 4: destination not a Carrier ---------------------------------------------


@ENTRY
@pytest.mark.parametrize("bad", [None, 3, "dst", sw.Tensor(sw.CPU(4), 0, L([4], [1])), sw.CPU],
                         ids=["None", "int", "str", "Tensor", "class"])
def test_row4_destination_not_a_carrier_type_error(call, bad):
    t, c = cpu_tensor()
    before = snap(c)
    with pytest.raises(TypeError, match="destination"):
        call(t, bad)
    check_unchanged(before, c)


@ENTRY
@pytest.mark.parametrize("wrap", [list, tuple], ids=["list", "tuple"])
def test_row4_destination_sequence_rejected_batched_movement(call, wrap):
    t, c = cpu_tensor()
    d = sw.FileBacked()
    before = snap(c, d)
    with pytest.raises(TypeError, match="(?i)destination|sequence|batch"):
        call(t, wrap([d]))
    check_unchanged(before, c, d)


# ---- row 5: destination is the Tensor's own carrier -----------------------------------


@ENTRY
@pytest.mark.parametrize("kind", ["CPU", "FileBacked", "Py"])
def test_row5_destination_is_source_carrier_value_error(call, kind):
    if kind == "CPU":
        c = sw.CPU(8)
    elif kind == "FileBacked":
        c = sw.FileBacked()
        c._allocate(8)
    else:
        c = PyList([0.0] * 8)
    t = sw.Tensor(c, 2, L([3], [1]))
    before = snap(c)
    with pytest.raises(ValueError, match="(?i)same|source"):
        call(t, c)
    check_unchanged(before, c)


@ENTRY
def test_row5_before_row7_and_row8(call):
    c = sw.CPU(4, dtype=D.Int32, mutable=False)
    t = sw.Tensor(c, 0, L([4], [1]))
    with pytest.raises(ValueError):
        call(t, c)


# ---- row 6: destination released -------------------------------------------------------


@ENTRY
@pytest.mark.parametrize("kind", ["CPU", "Generic", "FileBacked", "Py"])
def test_row6_destination_released_runtime_error(call, kind):
    d = {"CPU": lambda: sw.CPU(4), "Generic": lambda: sw.Generic([0.0] * 4),
         "FileBacked": lambda: sw.FileBacked(), "Py": lambda: PyList([0.0] * 4)}[kind]()
    d.release()
    t, c = cpu_tensor()
    before = snap(c, d)
    with pytest.raises(RuntimeError, match="released"):
        call(t, d)
    check_unchanged(before, c, d)


@ENTRY
def test_row6_before_row8(call):
    t, c = cpu_tensor()
    d = sw.CPU(4, dtype=D.Int32)
    d.release()
    with pytest.raises(RuntimeError, match="released"):
        call(t, d)


# ---- row 7: destination not publicly mutable ---------------------------------------------


@ENTRY
@pytest.mark.parametrize("kind", ["CPU", "Generic", "FileBacked", "Py"])
def test_row7_destination_immutable_runtime_error(call, kind):
    d = {"CPU": lambda: sw.CPU(4, mutable=False),
         "Generic": lambda: sw.Generic([0.0] * 4, mutable=False),
         "FileBacked": lambda: sw.FileBacked(mutable=False),
         "Py": lambda: PyList([], mutable=False)}[kind]()
    t, c = cpu_tensor()
    before = snap(c, d)
    with pytest.raises(RuntimeError, match="mutable"):
        call(t, d)
    check_unchanged(before, c, d)
    if kind == "Py":
        assert d.allocations == []


@ENTRY
def test_row7_destination_owned_runtime_error(call):
    t, c = cpu_tensor()
    d = sw.FileBacked()
    token = d._claim_ownership()
    try:
        before = snap(c, d)
        with pytest.raises(RuntimeError, match="(?i)owned|mutable"):
            call(t, d)
        check_unchanged(before, c, d)
    finally:
        d._relinquish_ownership(token)


@ENTRY
def test_row7_destination_pending_runtime_error_mentions_pending(call):
    other = sw.Tensor(sw.CPU(BIG), 0, L([BIG], [1]))
    d = sw.FileBacked()
    t, c = cpu_tensor()
    with held():
        h = sw.move_async(other, d)
        before = snap(c, d, read_values=False)
        with pytest.raises(RuntimeError, match="pending"):
            call(t, d)
        check_unchanged(before, c, d, read_values=False)
    h.wait()
    assert d.size() == BIG and not c.is_released()


@ENTRY
def test_row7_before_row8(call):
    t, c = cpu_tensor()
    d = sw.CPU(4, dtype=D.Int32, mutable=False)
    with pytest.raises(RuntimeError):
        call(t, d)


# ---- row 8: dtype mismatch --------------------------------------------------------------------


@ENTRY
@pytest.mark.parametrize("src_dtype, dst", [
    (D.Float32, lambda: sw.CPU(4, dtype=D.Int32)),
    (D.Int32, lambda: sw.CPU(4, dtype=D.Float32)),
    (D.Bool, lambda: sw.Generic([0] * 4, dtype=D.Int32)),
    (D.Float32, lambda: sw.FileBacked(dtype=D.Int32)),
    (D.Int32, lambda: PyList([], dtype=D.Float32)),
], ids=["f32->i32", "i32->f32", "bool->i32", "f32->fileI32", "i32->pyF32"])
def test_row8_dtype_mismatch_type_error(call, src_dtype, dst):
    d = dst()
    t, c = cpu_tensor(dtype=src_dtype)
    before = snap(c, d)
    with pytest.raises(TypeError, match="dtype"):
        call(t, d)
    check_unchanged(before, c, d)


@ENTRY
def test_row8_before_row10(call):
    t, c = cpu_tensor(n=6)
    d = sw.CPU(2, dtype=D.Int32)  # also too small
    with pytest.raises(TypeError, match="dtype"):
        call(t, d)


# ---- row 9: the resolved route pins another carrier class ------------------------------


class SourceCPUOnly(sw.MoveOperation):
    source_class = sw.CPU

    def _copy(self, tensor, destination, output, element_count):
        raise AssertionError("_copy must not run after a pinned-class failure")


class DestinationCPUOnly(sw.MoveOperation):
    destination_class = sw.CPU

    def _copy(self, tensor, destination, output, element_count):
        raise AssertionError("_copy must not run after a pinned-class failure")


@ENTRY
def test_row9_registered_route_pins_source_class_type_error(call):
    # Seed scenario "Reject a mismatched carrier class": CPU-pinned op, Generic source.
    g = sw.Generic([1.0, 2.0, 3.0])
    t = sw.Tensor(g, 0, L([3], [1]))
    d = sw.FileBacked()
    with registered_move_operation(sw.Generic, sw.FileBacked, SourceCPUOnly):
        before = snap(g, d)
        with pytest.raises(TypeError, match="SourceCPUOnly") as e:
            call(t, d)
        assert "CPU" in str(e.value)
        check_unchanged(before, g, d)  # the FileBacked destination did not grow


@ENTRY
def test_row9_registered_route_pins_destination_class_type_error(call):
    src = PyList([1.0, 2.0])
    t = sw.Tensor(src, 0, L([2], [1]))
    d = sw.Generic([0.0, 0.0])
    with registered_move_operation(PyList, sw.Generic, DestinationCPUOnly):
        before = snap(src, d)
        with pytest.raises(TypeError, match="DestinationCPUOnly") as e:
            call(t, d)
        assert "CPU" in str(e.value)
        check_unchanged(before, src, d)


def test_row9_built_in_bulk_routes_pin_their_classes():
    g = sw.Generic([1.0, 2.0])
    tg = sw.Tensor(g, 0, L([2], [1]))
    d = sw.FileBacked()
    before = snap(g, d)
    with pytest.raises(TypeError, match="CpuToFileBackedMoveOperation") as e:
        sw.CpuToFileBackedMoveOperation().forward(tg, d)
    assert "CPU" in str(e.value)
    t, c = cpu_tensor()
    cpu_dst = sw.CPU(4)
    with pytest.raises(TypeError, match="CpuToFileBackedMoveOperation") as e:
        sw.CpuToFileBackedMoveOperation().forward(t, cpu_dst)
    assert "FileBacked" in str(e.value)
    with pytest.raises(TypeError, match="FileBackedToCpuMoveOperation") as e:
        sw.FileBackedToCpuMoveOperation().forward(t, cpu_dst)
    assert "FileBacked" in str(e.value)
    check_unchanged(before, g, d)
    assert not c.is_released() and cpu_dst.version == 0


@ENTRY
def test_row9_before_row10(call):
    g = sw.Generic([1.0, 2.0, 3.0])
    t = sw.Tensor(g, 0, L([3], [1]))
    d = FixedPyList([0.0])  # also too small and not allocatable
    with registered_move_operation(sw.Generic, FixedPyList, SourceCPUOnly):
        with pytest.raises(TypeError, match="SourceCPUOnly"):
            call(t, d)


# ---- row 10: destination smaller than cosize and cannot allocate --------------------


@ENTRY
@pytest.mark.parametrize("make", [
    lambda: sw.CPU(12),
    lambda: sw.Generic([0.0] * 12),
    lambda: FixedPyList([0.0] * 12),
    lambda: FixedPyList([]),  # empty without _allocate is not allocatable-empty
], ids=["CPU", "Generic", "PyNoAllocate", "PyNoAllocateEmpty"])
def test_row10_destination_too_small_value_error(call, make):
    # Gapped layout: size 6, cosize 13 -- the cosize decides, not the size.
    src = sw.CPU(13)
    t = sw.Tensor(src, 0, L([3, 2], [2, 8]))
    assert t.size() == 6 and t.layout.cosize == 13
    d = make()
    before = snap(src, d)
    with pytest.raises(ValueError, match="(?i)cosize|small|size"):
        call(t, d)
    check_unchanged(before, src, d)


@ENTRY
def test_row10_non_empty_file_backed_is_not_allocatable(call):
    src = sw.CPU(5)
    t = sw.Tensor(src, 0, L([5], [1]))
    d = sw.FileBacked()
    d._allocate(2)  # size 2 > 0: not allocatable-empty, so it is never grown
    before = snap(src, d)
    with pytest.raises(ValueError):
        call(t, d)
    check_unchanged(before, src, d)


def test_row10_broadcast_needs_only_cosize_slots():
    # Six coordinates over two slots: a two-slot destination is large enough,
    # a one-slot destination is not.
    src = sw.CPU(2)
    t = sw.broadcast_to(sw.Tensor(src, 0, L([2, 1], [1, 1])), sw.Shape([2, 3]))
    assert t.size() == 6 and t.layout.cosize == 2
    with pytest.raises(ValueError):
        sw.move_async(t, sw.CPU(1))
    assert not src.is_released()
    r = sw.move(t, sw.CPU(2))
    assert r.layout == t.layout and src.is_released()


# ---- failures up to allocation raise directly --------------------------------------------


@needs_faults
def test_allocation_failure_raises_directly_and_leaves_destination_empty():
    # architecture.md "Movement" step 5: up to allocation, failures raise from
    # move_async and undo growth.
    t, c = cpu_tensor(n=16)
    d = sw.FileBacked()
    before = snap(c, d)
    _C._fault_inject("truncate")
    with pytest.raises(OSError):
        sw.move_async(t, d)
    _C._fault_clear()
    check_unchanged(before, c, d)
    r = sw.move(t, d)  # and the same request then succeeds
    assert r.carrier is d and d.size() == 16


def test_python_allocate_failure_propagates_directly():
    class Boom(Exception):
        pass

    class FailingAllocate(PyList):
        def _allocate(self, size):
            raise Boom()

    t, c = cpu_tensor()
    d = FailingAllocate()
    before = snap(c, d)
    with pytest.raises(Boom):
        sw.move_async(t, d)
    check_unchanged(before, c, d)


def test_c12_allocate_returning_a_value_type_error():
    class Returns(PyList):
        def _allocate(self, size):
            super()._allocate(size)
            return size

    t, c = cpu_tensor()
    d = Returns()
    before = snap(c)
    with pytest.raises(TypeError):
        sw.move_async(t, d)
    check_unchanged(before, c)
    assert not d.is_released()


def test_failed_validation_records_nothing_then_valid_move_succeeds():
    # A rejected request leaves both carriers usable for a later valid move.
    t, c = cpu_tensor()
    d = sw.CPU(4, dtype=D.Int32)
    with pytest.raises(TypeError):
        sw.move(t, d)
    good = sw.CPU(4)
    r = sw.move(t, good)
    assert r.tolist() == [0.5, 1.5, 2.5, 3.5]
    assert c.is_released()
    d[0] = 3
    assert d.version == 1
