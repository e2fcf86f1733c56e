"""The legacy move registry and move operations (seed: "Move dispatches on the
exact carrier class pair", "Move registration is explicit, validated, and
process-global", "A move operation performs its transfer through the copy
hook", "A move operation may pin the carrier pair it supports"; contract
M-6 for the Metal entries)."""

import pytest

import strideweave as sw
from strideweave.carriers import move as move_mod
from strideweave.carriers.move import (dispatch_move, register_move_operation,
                                       registered_move_operation,
                                       unregister_move_operation)
from moves_for_tests import D, FixedPyList, L, PyList, values_of

TOP_LEVEL = ["move", "move_async", "AwaitResult", "AwaitMove", "MoveOperation",
             "ElementwiseMoveOperation", "CpuToFileBackedMoveOperation",
             "FileBackedToCpuMoveOperation"]
REGISTRY = ["dispatch_move", "register_move_operation", "unregister_move_operation",
            "registered_move_operation"]


class SrcCarrier(PyList):
    """A definition-free user source class (distinctive name for messages)."""


class DstCarrier(PyList):
    """A definition-free user destination class."""


class SubSrcCarrier(SrcCarrier):
    pass


class SubDstCarrier(DstCarrier):
    pass


class Recording(sw.MoveOperation):
    """Records every _copy call and copies elementwise (the seed fallback)."""

    calls = []

    def _copy(self, tensor, destination, output, element_count):
        type(self).calls.append(dict(
            op=type(self), tensor=tensor, destination=destination, output=output,
            element_count=element_count,
            source_released=tensor.carrier.is_released(),
            output_offset=output.offset, output_layout=output.layout,
            output_carrier=output.carrier))
        for i in range(tensor.size()):
            output[i] = tensor[i]


class OtherRecording(Recording):
    calls = []


@pytest.fixture(autouse=True)
def _fresh_calls():
    Recording.calls = []
    OtherRecording.calls = []
    yield


# ---- import paths -------------------------------------------------------------


def test_import_paths_are_identical_objects():
    for name in TOP_LEVEL:
        assert getattr(sw, name) is getattr(move_mod, name), name
    for name in REGISTRY:
        assert callable(getattr(move_mod, name))
    from strideweave import (AwaitMove, AwaitResult, CpuToFileBackedMoveOperation,  # noqa: F401
                             ElementwiseMoveOperation, FileBackedToCpuMoveOperation,
                             MoveOperation, move, move_async)


def test_metal_import_paths():
    assert sw.Metal is sw.carriers.Metal is sw.carriers.metal.Metal
    for name in ("CpuToMetalMoveOperation", "MetalToCpuMoveOperation",
                 "MetalToMetalMoveOperation"):
        assert getattr(sw, name) is getattr(move_mod, name)
        assert issubclass(getattr(sw, name), sw.MoveOperation)


def test_concrete_operations_subclass_move_operation():
    for op in (sw.ElementwiseMoveOperation, sw.CpuToFileBackedMoveOperation,
               sw.FileBackedToCpuMoveOperation):
        assert issubclass(op, sw.MoveOperation)
    assert sw.MoveOperation.source_class is None
    assert sw.MoveOperation.destination_class is None
    assert sw.ElementwiseMoveOperation.source_class is None
    assert sw.ElementwiseMoveOperation.destination_class is None
    assert sw.CpuToFileBackedMoveOperation.source_class is sw.CPU
    assert sw.CpuToFileBackedMoveOperation.destination_class is sw.FileBacked
    assert sw.FileBackedToCpuMoveOperation.source_class is sw.FileBacked
    assert sw.FileBackedToCpuMoveOperation.destination_class is sw.CPU


# ---- built-in entries ---------------------------------------------------------------


def test_built_in_entries():
    assert dispatch_move(sw.CPU, sw.FileBacked) is sw.CpuToFileBackedMoveOperation
    assert dispatch_move(sw.FileBacked, sw.CPU) is sw.FileBackedToCpuMoveOperation


def test_built_in_metal_entries():
    # M-6: the Metal pairs are registered on every host.
    assert dispatch_move(sw.CPU, sw.Metal) is sw.CpuToMetalMoveOperation
    assert dispatch_move(sw.Metal, sw.CPU) is sw.MetalToCpuMoveOperation
    assert dispatch_move(sw.Metal, sw.Metal) is sw.MetalToMetalMoveOperation


def cls(name):
    """A carrier class by name, resolved at test time (so a missing Metal fails
    its own tests instead of the module's collection)."""
    return globals()[name] if name in globals() else getattr(sw, name)


@pytest.mark.parametrize("src, dst", [
    ("CPU", "CPU"), ("Generic", "Generic"), ("FileBacked", "FileBacked"),
    ("Generic", "CPU"), ("CPU", "Generic"), ("Generic", "FileBacked"),
    ("FileBacked", "Generic"), ("PyList", "CPU"), ("CPU", "PyList"),
    ("Metal", "FileBacked"), ("Generic", "Metal"),
])
def test_unregistered_pairs_fall_back_to_elementwise(src, dst):
    # Seed: every unregistered pair, including (CPU, CPU), uses the fallback.
    assert dispatch_move(cls(src), cls(dst)) is sw.ElementwiseMoveOperation


# ---- register_move_operation validation ---------------------------------------------


@pytest.mark.parametrize("args, argument", [
    ((int, DstCarrier, Recording), "source_class"),
    ((SrcCarrier(), DstCarrier, Recording), "source_class"),
    (("CPU", DstCarrier, Recording), "source_class"),
    ((int, int, int), "source_class"),             # first bad argument decides
    ((SrcCarrier, int, Recording), "destination_class"),
    ((SrcCarrier, DstCarrier(), Recording), "destination_class"),
    ((SrcCarrier, None, None), "destination_class"),
    ((SrcCarrier, DstCarrier, int), "operation_class"),
    ((SrcCarrier, DstCarrier, Recording()), "operation_class"),
    ((SrcCarrier, DstCarrier, sw.CPU), "operation_class"),
    ((SrcCarrier, DstCarrier, None), "operation_class"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_register_type_error_identifies_argument_in_order(args, argument):
    with pytest.raises(TypeError, match=argument):
        register_move_operation(*args)
    with pytest.raises(TypeError, match=argument):
        with registered_move_operation(*args):
            raise AssertionError("body must not run")
    assert dispatch_move(SrcCarrier, DstCarrier) is sw.ElementwiseMoveOperation


def test_register_dispatch_unregister_exact_pair():
    # Seed scenarios "Register and dispatch an exact legacy pair", "Remove a registration".
    assert register_move_operation(SrcCarrier, DstCarrier, Recording) is None
    try:
        assert dispatch_move(SrcCarrier, DstCarrier) is Recording
        assert dispatch_move(DstCarrier, SrcCarrier) is sw.ElementwiseMoveOperation
        assert dispatch_move(SrcCarrier, sw.CPU) is sw.ElementwiseMoveOperation
    finally:
        removed = unregister_move_operation(SrcCarrier, DstCarrier)
    assert removed is Recording
    assert dispatch_move(SrcCarrier, DstCarrier) is sw.ElementwiseMoveOperation
    with pytest.raises(KeyError) as e:
        unregister_move_operation(SrcCarrier, DstCarrier)
    assert "SrcCarrier" in str(e.value) and "DstCarrier" in str(e.value)


def test_duplicate_registration_value_error_keeps_existing():
    # Seed scenario "Refuse to overwrite a registration".
    register_move_operation(SrcCarrier, DstCarrier, Recording)
    try:
        with pytest.raises(ValueError) as e:
            register_move_operation(SrcCarrier, DstCarrier, OtherRecording)
        assert "SrcCarrier" in str(e.value) and "DstCarrier" in str(e.value)
        with pytest.raises(ValueError):
            register_move_operation(SrcCarrier, DstCarrier, Recording)  # same class too
        with pytest.raises(ValueError):
            with registered_move_operation(SrcCarrier, DstCarrier, OtherRecording):
                raise AssertionError("body must not run")
        assert dispatch_move(SrcCarrier, DstCarrier) is Recording
    finally:
        assert unregister_move_operation(SrcCarrier, DstCarrier) is Recording


@pytest.mark.parametrize("src, dst, builtin", [
    ("CPU", "FileBacked", "CpuToFileBackedMoveOperation"),
    ("FileBacked", "CPU", "FileBackedToCpuMoveOperation"),
    ("CPU", "Metal", "CpuToMetalMoveOperation"),
    ("Metal", "CPU", "MetalToCpuMoveOperation"),
    ("Metal", "Metal", "MetalToMetalMoveOperation"),
])
def test_duplicate_of_built_in_entry_value_error_keeps_it(src, dst, builtin):
    pair = (cls(src), cls(dst))
    with pytest.raises(ValueError) as e:
        register_move_operation(*pair, Recording)
    assert pair[0].__name__ in str(e.value) and pair[1].__name__ in str(e.value)
    assert dispatch_move(*pair) is getattr(sw, builtin)


def test_unregister_built_in_entry_returns_it_and_can_be_restored():
    removed = unregister_move_operation(sw.CPU, sw.FileBacked)
    try:
        assert removed is sw.CpuToFileBackedMoveOperation
        assert dispatch_move(sw.CPU, sw.FileBacked) is sw.ElementwiseMoveOperation
    finally:
        register_move_operation(sw.CPU, sw.FileBacked, removed)
    assert dispatch_move(sw.CPU, sw.FileBacked) is sw.CpuToFileBackedMoveOperation


@pytest.mark.parametrize("pair", [(SrcCarrier, DstCarrier), (sw.CPU, sw.CPU),
                                  (sw.Generic, sw.FileBacked)],
                         ids=["user", "CPU-CPU", "Generic-FileBacked"])
def test_unregister_absent_pair_key_error_names_both(pair):
    with pytest.raises(KeyError) as e:
        unregister_move_operation(*pair)
    assert pair[0].__name__ in str(e.value) and pair[1].__name__ in str(e.value)


# ---- exact classes: no inheritance -----------------------------------------------------


def test_subclasses_do_not_inherit_a_registration():
    # Seed scenario "Do not match a different exact pair".
    with registered_move_operation(SrcCarrier, DstCarrier, Recording):
        for pair in [(SubSrcCarrier, DstCarrier), (SrcCarrier, SubDstCarrier),
                     (SubSrcCarrier, SubDstCarrier), (PyList, DstCarrier)]:
            assert dispatch_move(*pair) is sw.ElementwiseMoveOperation
            with pytest.raises(KeyError):
                unregister_move_operation(*pair)
        # a real move with a subclass source runs the fallback, not Recording
        src = SubSrcCarrier([1.0, 2.0, 3.0])
        r = sw.move(sw.Tensor(src, 0, L([3], [1])), DstCarrier())
        assert r.tolist() == [1.0, 2.0, 3.0]
        assert Recording.calls == []
        # the exact pair runs Recording
        src = SrcCarrier([4.0, 5.0])
        r = sw.move(sw.Tensor(src, 0, L([2], [1])), DstCarrier())
        assert r.tolist() == [4.0, 5.0]
        assert len(Recording.calls) == 1


def test_parent_registration_does_not_apply_to_subclass_of_builtin_partner():
    # A registration for (PyList, CPU) does not match (SrcCarrier, CPU).
    with registered_move_operation(PyList, sw.CPU, Recording):
        assert dispatch_move(PyList, sw.CPU) is Recording
        assert dispatch_move(SrcCarrier, sw.CPU) is sw.ElementwiseMoveOperation


# ---- registered_move_operation --------------------------------------------------------


def test_context_manager_registers_yields_and_unregisters():
    # Seed scenario "Scope a registration to a block" (normal exit).
    cm = registered_move_operation(SrcCarrier, DstCarrier, Recording)
    with cm as op:
        assert op is Recording
        assert dispatch_move(SrcCarrier, DstCarrier) is Recording
    assert dispatch_move(SrcCarrier, DstCarrier) is sw.ElementwiseMoveOperation
    with pytest.raises(KeyError):
        unregister_move_operation(SrcCarrier, DstCarrier)


def test_context_manager_unregisters_on_exception_and_does_not_suppress():
    class Boom(Exception):
        pass

    err = Boom()
    with pytest.raises(Boom) as e:
        with registered_move_operation(SrcCarrier, DstCarrier, Recording):
            assert dispatch_move(SrcCarrier, DstCarrier) is Recording
            raise err
    assert e.value is err
    assert dispatch_move(SrcCarrier, DstCarrier) is sw.ElementwiseMoveOperation
    # and the pair can be registered again
    with registered_move_operation(SrcCarrier, DstCarrier, OtherRecording) as op:
        assert op is OtherRecording


def test_context_manager_validates_before_body():
    ran = []
    with pytest.raises(TypeError, match="operation_class"):
        with registered_move_operation(SrcCarrier, DstCarrier, object):
            ran.append(1)
    assert ran == []
    assert dispatch_move(SrcCarrier, DstCarrier) is sw.ElementwiseMoveOperation


# ---- the copy hook ---------------------------------------------------------------------


@pytest.mark.parametrize("offset, layout, view", [
    (0, L([3, 2], [2, 8]), None),                                  # gapped: cosize 13 > size 6
    (2, L([2, [2, 2]], [1, [2, 5]]), None),                        # nested with offset
    (0, L([2, 1], [1, 1]), lambda t: sw.broadcast_to(t, sw.Shape([2, 3]))),  # cosize 2 < 6
], ids=["gapped", "nested-offset", "broadcast"])
def test_copy_hook_receives_cosize_as_element_count(offset, layout, view):
    # Seed scenario "Run a custom copy".
    src = SrcCarrier([float(k) for k in range(offset + layout.cosize)])
    t = sw.Tensor(src, offset, layout)
    if view is not None:
        t = view(t)
    expected = t.tolist()
    dst = DstCarrier()
    with registered_move_operation(SrcCarrier, DstCarrier, Recording):
        r = sw.move(t, dst)
    assert len(Recording.calls) == 1
    call = Recording.calls[0]
    assert call["op"] is Recording
    assert call["tensor"] is t
    assert call["destination"] is dst
    assert call["element_count"] == t.layout.cosize and type(call["element_count"]) is int
    assert call["source_released"] is False  # released only after _copy returns
    assert call["output_carrier"] is dst
    assert call["output_offset"] == 0
    assert call["output_layout"] == t.layout
    assert dst.size() == t.layout.cosize  # allocated before _copy
    assert r.tolist() == expected and r.carrier is dst
    assert src.is_released()


def test_copy_hook_runs_only_after_every_validation():
    src = SrcCarrier([1.0, 2.0, 3.0])
    t = sw.Tensor(src, 0, L([3], [1]))
    with registered_move_operation(SrcCarrier, FixedPyList, Recording):
        with pytest.raises(ValueError):
            sw.move_async(t, FixedPyList([0.0]))  # row 10
        with pytest.raises(TypeError):
            sw.move_async(t, FixedPyList([0, 0, 0], dtype=D.Int32))  # row 8
        dst = FixedPyList([0.0] * 3, dtype=D.Float32)
        dst.release()
        with pytest.raises(RuntimeError):
            sw.move_async(t, dst)  # row 6
    assert Recording.calls == []
    assert not src.is_released()


def test_copy_hook_exception_keeps_source_and_versions():
    class Failing(sw.MoveOperation):
        def _copy(self, tensor, destination, output, element_count):
            output[0] = 42.0  # a partial write under transfer access
            raise err

    err = LookupError("copy failed")
    src = SrcCarrier([1.0, 2.0])
    src_version = src.version
    t = sw.Tensor(src, 0, L([2], [1]))
    dst = DstCarrier([0.0, 0.0])
    with registered_move_operation(SrcCarrier, DstCarrier, Failing):
        h = sw.move_async(t, dst)  # the failure is the handle's, not move_async's
        with pytest.raises(LookupError) as e:
            h.wait()
    assert e.value is err
    assert not src.is_released() and values_of(src) == [1.0, 2.0]
    assert src.version == src_version and dst.version == 0
    assert dst.is_mutable()  # no longer pending
    dst[1] = 3.0
    assert dst.version == 1


class SourceCPUOnly(Recording):
    source_class = sw.CPU
    calls = []


class DestinationFileOnly(Recording):
    destination_class = sw.FileBacked
    calls = []


def test_pinned_source_class_type_error_before_copy_or_release():
    # Seed scenario "Reject a mismatched carrier class".
    g = sw.Generic([1.0, 2.0, 3.0])
    t = sw.Tensor(g, 0, L([3], [1]))
    d = sw.FileBacked()
    with pytest.raises(TypeError, match="SourceCPUOnly") as e:
        SourceCPUOnly().forward(t, d)
    assert "CPU" in str(e.value)
    assert SourceCPUOnly.calls == []
    assert not g.is_released() and g.version == 0 and d.size() == 0
    with registered_move_operation(sw.Generic, sw.FileBacked, SourceCPUOnly):
        with pytest.raises(TypeError, match="SourceCPUOnly"):
            sw.move_async(t, d)
    assert SourceCPUOnly.calls == [] and not g.is_released() and d.size() == 0


def test_pinned_destination_class_type_error_names_required_class():
    c = sw.CPU(3)
    t = sw.Tensor(c, 0, L([3], [1]))
    d = sw.CPU(3)
    with pytest.raises(TypeError, match="DestinationFileOnly") as e:
        DestinationFileOnly().forward(t, d)
    assert "FileBacked" in str(e.value)
    assert DestinationFileOnly.calls == [] and not c.is_released() and d.version == 0


def test_pinned_classes_are_exact_not_subclasses():
    class PinnedPy(Recording):
        source_class = PyList
        calls = []

    src = SrcCarrier([1.0])  # a subclass of PyList: not the pinned exact class
    with pytest.raises(TypeError, match="PinnedPy"):
        PinnedPy().forward(sw.Tensor(src, 0, L([1], [1])), sw.CPU(1))
    assert PinnedPy.calls == [] and not src.is_released()
    ok = PinnedPy().forward(sw.Tensor(PyList([2.0]), 0, L([1], [1])), sw.CPU(1))
    assert ok.tolist() == [2.0] and len(PinnedPy.calls) == 1


@pytest.mark.parametrize("op", ["MoveOperation", "subclass without _copy"])
def test_base_copy_not_implemented_before_any_allocation(op):
    class Bare(sw.MoveOperation):
        pass

    cls = sw.MoveOperation if op == "MoveOperation" else Bare
    c = sw.CPU(4)
    t = sw.Tensor(c, 0, L([4], [1]))
    d = sw.FileBacked()
    with pytest.raises(NotImplementedError):
        cls().forward(t, d)
    assert d.size() == 0 and d.path.stat().st_size == 0
    assert not c.is_released() and c.version == 0
    py = PyList()
    with pytest.raises(NotImplementedError):
        cls().forward(t, py)
    assert py.allocations == [] and py.size() == 0


def test_registered_op_without_copy_raises_directly_from_move_async():
    class Bare(sw.MoveOperation):
        pass

    c = sw.Generic([1.0, 2.0])
    d = sw.FileBacked()
    with registered_move_operation(sw.Generic, sw.FileBacked, Bare):
        with pytest.raises(NotImplementedError):
            sw.move_async(sw.Tensor(c, 0, L([2], [1])), d)
    assert d.size() == 0 and not c.is_released()


def test_base_copy_hook_itself_raises_not_implemented():
    with pytest.raises(NotImplementedError):
        sw.MoveOperation()._copy(None, None, None, 0)


# ---- forward() ----------------------------------------------------------------------------


def test_forward_performs_one_move_with_its_own_class():
    # forward() replaces dispatch by type(self): a registration for the pair is ignored.
    g = sw.Generic([1.0, 2.0, 3.0, 4.0])
    t = sw.Tensor(g, 1, L([3], [1]))
    d = sw.CPU(3)
    with registered_move_operation(sw.Generic, sw.CPU, Recording):
        r = sw.ElementwiseMoveOperation().forward(t, d)
    assert Recording.calls == []
    assert isinstance(r, sw.Tensor) and r.carrier is d and r.offset == 0
    assert r.layout == t.layout and r.tolist() == [2.0, 3.0, 4.0]
    assert g.is_released()


def test_forward_with_unregistered_user_operation():
    c = sw.CPU(3)
    for i in range(3):
        c[i] = i + 0.25
    d = sw.CPU(3)
    r = Recording().forward(sw.Tensor(c, 0, L([3], [1])), d)
    assert len(Recording.calls) == 1 and Recording.calls[0]["element_count"] == 3
    assert r.tolist() == [0.25, 1.25, 2.25] and c.is_released()
    assert c.version == 3 and d.version == 0


def test_forward_built_in_bulk_operations():
    c = sw.CPU(4, dtype=D.Int32)
    for i in range(4):
        c[i] = i * 10
    t = sw.Tensor(c, 0, L([2, 2], [1, 2]))
    on_file = sw.CpuToFileBackedMoveOperation().forward(t, sw.FileBacked(dtype=D.Int32))
    assert on_file.tolist() == [0, 10, 20, 30] and c.is_released()
    back = sw.FileBackedToCpuMoveOperation().forward(on_file, sw.CPU(4, dtype=D.Int32))
    assert back.tolist() == [0, 10, 20, 30] and on_file.carrier.is_released()


def test_forward_validates_like_move():
    c = sw.CPU(2)
    t = sw.Tensor(c, 0, L([2], [1]))
    with pytest.raises(ValueError):
        sw.ElementwiseMoveOperation().forward(t, c)  # row 5
    with pytest.raises(TypeError):
        sw.ElementwiseMoveOperation().forward(t, [sw.CPU(2)])  # row 4
    with pytest.raises(TypeError):
        sw.ElementwiseMoveOperation().forward([t], sw.CPU(2))  # row 1
    assert not c.is_released()


def test_custom_copy_writes_do_not_advance_versions():
    # issue 6 / C-14: writes made under the move's transfer access do not advance versions.
    src = sw.CPU(3)
    for i in range(3):
        src[i] = float(i)
    sv = src.version
    d = sw.Generic([9.0, 9.0, 9.0])
    r = Recording().forward(sw.Tensor(src, 0, L([3], [1])), d)
    assert r.tolist() == [0.0, 1.0, 2.0]
    assert d.version == 0 and src.version == sv
