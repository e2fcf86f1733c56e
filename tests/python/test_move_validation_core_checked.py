"""The validation rows of a move between built-in carriers, with and without
autograd recording (issue 19).

A move of built-in carriers that records no autograd node runs no Python
before the core starts it, so its carrier checks and the core's start meet
with nothing in between; one that records a node builds it first. Each
refusal must come out of `move` / `move_async` itself, with no handle,
with the same exception and words either way, in the same order, and
leave both carriers as they were: a guard for any change that moves these
checks between the binding and the core.
"""

import contextlib

import pytest

import strideweave as sw
from strideweave.carriers.move import registered_move_operation
from moves_for_tests import BIG, D, L, held, state
from loop_device import loop_device  # noqa: F401

ENTRY = pytest.mark.parametrize("call", ["move", "move_async"])


def cpu_tensor(n=4, dtype=D.Float32):
    c = sw.CPU(n, dtype=dtype)
    for i in range(n):
        c[i] = i + 0.5 if dtype is D.Float32 else i
    return sw.Tensor(c, 0, L([n], [1])), c


def file_tensor(n=4):
    t, c = cpu_tensor(n)
    with sw.no_grad():
        moved = sw.move(t, sw.FileBacked())
    return moved, moved.carrier


def allocated_file(n=4, **kw):
    f = sw.FileBacked(**kw)
    f._allocate(n)
    return f


@contextlib.contextmanager
def claimed(carrier):
    token = carrier._claim_ownership()
    try:
        yield
    finally:
        carrier._relinquish_ownership(token)


# Each case: (tensor, destination, carriers compared, a context held around
# the call). A case builds fresh carriers every time it is called.

def source_released():
    t, c = cpu_tensor()
    c.release()
    d = sw.CPU(4)
    return t, d, (c, d), contextlib.nullcontext()


def file_source_released():
    t, c = file_tensor()
    c.release()
    d = sw.CPU(4)
    return t, d, (c, d), contextlib.nullcontext()


def source_owned():
    t, c = cpu_tensor()
    d = sw.CPU(4)
    return t, d, (c, d), claimed(c)


def same_carrier():
    c = sw.CPU(8)
    return sw.Tensor(c, 2, L([3], [1])), c, (c,), contextlib.nullcontext()


def destination_released():
    t, c = cpu_tensor()
    d = sw.CPU(4)
    d.release()
    return t, d, (c, d), contextlib.nullcontext()


def file_destination_released():
    t, c = cpu_tensor()
    d = allocated_file()
    d.release()
    return t, d, (c, d), contextlib.nullcontext()


def destination_immutable():
    t, c = cpu_tensor()
    d = sw.CPU(4, mutable=False)
    return t, d, (c, d), contextlib.nullcontext()


def destination_owned():
    t, c = cpu_tensor()
    d = sw.CPU(4)
    return t, d, (c, d), claimed(d)


def file_destination_owned():
    t, c = cpu_tensor()
    d = allocated_file()
    return t, d, (c, d), claimed(d)


def dtype_mismatch():
    t, c = cpu_tensor()
    d = sw.CPU(4, dtype=D.Int32)
    return t, d, (c, d), contextlib.nullcontext()


def file_dtype_mismatch():
    t, c = cpu_tensor()
    d = allocated_file(dtype=D.Int32)
    return t, d, (c, d), contextlib.nullcontext()


def too_small():
    t, c = cpu_tensor()
    d = sw.CPU(3)
    return t, d, (c, d), contextlib.nullcontext()


def file_too_small():
    t, c = cpu_tensor()
    d = allocated_file(3)
    return t, d, (c, d), contextlib.nullcontext()


def gapped_too_small():
    # Size 6, cosize 13: the cosize decides.
    c = sw.CPU(13)
    d = sw.CPU(12)
    return sw.Tensor(c, 0, L([2, 3], [8, 2])), d, (c, d), contextlib.nullcontext()


def released_before_dtype():
    t, c = cpu_tensor()
    d = sw.CPU(4, dtype=D.Int32)
    d.release()
    return t, d, (c, d), contextlib.nullcontext()


def immutable_before_dtype():
    t, c = cpu_tensor()
    d = sw.CPU(4, dtype=D.Int32, mutable=False)
    return t, d, (c, d), contextlib.nullcontext()


def dtype_before_too_small():
    t, c = cpu_tensor()
    d = sw.CPU(2, dtype=D.Int32)
    return t, d, (c, d), contextlib.nullcontext()


def source_released_before_destination_released():
    t, c = cpu_tensor()
    c.release()
    d = sw.CPU(4)
    d.release()
    return t, d, (c, d), contextlib.nullcontext()


CASES = [source_released, file_source_released, source_owned, same_carrier,
         destination_released, file_destination_released, destination_immutable,
         destination_owned, file_destination_owned, dtype_mismatch, file_dtype_mismatch,
         too_small, file_too_small, gapped_too_small, released_before_dtype,
         immutable_before_dtype, dtype_before_too_small,
         source_released_before_destination_released]


def refusal(case, call, recording):
    """(exception type, message) of the move of `case`, the carriers unchanged."""
    t, d, carriers, ctx = case()
    grad = contextlib.nullcontext() if recording else sw.no_grad()
    with ctx, grad:
        before = [state(c) for c in carriers]
        with pytest.raises(Exception) as e:
            getattr(sw, call)(t, d)  # no handle: move_async raises itself
        assert [state(c) for c in carriers] == before
    return type(e.value), str(e.value)


@ENTRY
@pytest.mark.parametrize("case", CASES, ids=[c.__name__ for c in CASES])
def test_a_move_without_python_refuses_as_a_recorded_move_does(call, case):
    assert refusal(case, call, recording=False) == refusal(case, call, recording=True)


@ENTRY
@pytest.mark.parametrize("role", ["source", "destination"])
def test_a_carrier_pending_in_another_move_is_refused_the_same_way(call, role):
    def attempt(recording):
        big = sw.Tensor(sw.CPU(BIG), 0, L([BIG], [1]))
        t, c = cpu_tensor()
        first = sw.CPU(BIG)
        with held():
            with sw.no_grad():
                h = sw.move_async(big, first)
            if role == "source":
                t, d, carriers = big, sw.CPU(BIG), (big.carrier,)
            else:
                d, carriers = first, (c,)
            grad = contextlib.nullcontext() if recording else sw.no_grad()
            with grad:
                before = [state(x, read_values=False) for x in carriers]
                with pytest.raises(RuntimeError) as e:
                    getattr(sw, call)(t, d)
                assert [state(x, read_values=False) for x in carriers] == before
        h.wait()
        return str(e.value)

    words = attempt(recording=False)
    assert "pending" in words and words == attempt(recording=True)


@pytest.mark.parametrize("call", ["move", "move_async"])
def test_a_refused_move_leaves_both_carriers_ready_for_the_next(call):
    t, c = cpu_tensor()
    with sw.no_grad():
        with pytest.raises(TypeError):
            getattr(sw, call)(t, sw.CPU(4, dtype=D.Int32))
        with pytest.raises(ValueError):
            getattr(sw, call)(t, sw.CPU(3))
        out = sw.move(t, sw.CPU(4))
    assert out.tolist() == [0.5, 1.5, 2.5, 3.5] and c.is_released()


class SourceGenericOnly(sw.MoveOperation):
    source_class = sw.Generic

    def _copy(self, tensor, destination, output, element_count):
        raise AssertionError("_copy must not run after a pinned-class failure")


@ENTRY
@pytest.mark.parametrize("recording", [False, True], ids=["no_grad", "grad"])
def test_a_users_operation_for_built_in_carriers_keeps_row9_before_row10(call, recording):
    # The user's operation class is looked at (row 9) with the carriers
    # checked first, and its refusal still comes before the destination's
    # size (row 10).
    t, c = cpu_tensor()
    d = sw.CPU(2)
    grad = contextlib.nullcontext() if recording else sw.no_grad()
    with registered_move_operation(sw.CPU, sw.CPU, SourceGenericOnly), grad:
        with pytest.raises(TypeError, match="SourceGenericOnly"):
            getattr(sw, call)(t, d)
        c.release()
        with pytest.raises(RuntimeError, match="released"):  # row 2 before row 9
            getattr(sw, call)(t, d)


# ---- CPU <-> BlockDeviceCarrier: checked by the core's start alone too --------
# Each block case builds its carriers on the device `dev`.

def block_tensor(dev, n=4):
    t, _ = cpu_tensor(n)
    with sw.no_grad():
        moved = sw.move(t, dev.allocate(n, empty=True))
    return moved, moved.carrier


def block_source_released(dev):
    t, c = block_tensor(dev)
    c.release()
    d = sw.CPU(4)
    return t, d, (c, d), contextlib.nullcontext()


def block_destination_released(dev):
    t, c = cpu_tensor()
    d = dev.allocate(4, empty=True)
    d.release()
    return t, d, (c, d), contextlib.nullcontext()


def block_destination_immutable(dev):
    t, c = cpu_tensor()
    d = dev.allocate(4, empty=True, mutable=False)
    return t, d, (c, d), contextlib.nullcontext()


def block_destination_too_small(dev):
    t, c = cpu_tensor()
    d = dev.allocate(3, empty=True)
    return t, d, (c, d), contextlib.nullcontext()


def block_source_dtype_mismatch(dev):
    t, c = cpu_tensor(dtype=D.Int32)
    d = dev.allocate(4, empty=True)
    return t, d, (c, d), contextlib.nullcontext()


def block_to_cpu_too_small(dev):
    t, c = block_tensor(dev)
    d = sw.CPU(3)
    return t, d, (c, d), contextlib.nullcontext()


def block_to_cpu_destination_released(dev):
    t, c = block_tensor(dev)
    d = sw.CPU(4)
    d.release()
    return t, d, (c, d), contextlib.nullcontext()


def block_to_cpu_dtype_mismatch(dev):
    t, c = block_tensor(dev)
    d = sw.CPU(4, dtype=D.Int32)
    return t, d, (c, d), contextlib.nullcontext()


def block_same_carrier(dev):
    t, c = block_tensor(dev, 8)
    return sw.Tensor(c, 2, L([3], [1])), c, (c,), contextlib.nullcontext()


def block_to_file(dev):
    t, c = block_tensor(dev)
    d = allocated_file()
    return t, d, (c, d), contextlib.nullcontext()


BLOCK_CASES = [block_source_released, block_destination_released, block_destination_immutable,
               block_destination_too_small, block_source_dtype_mismatch, block_to_cpu_too_small,
               block_to_cpu_destination_released, block_to_cpu_dtype_mismatch,
               block_same_carrier, block_to_file]


@ENTRY
@pytest.mark.parametrize("case", BLOCK_CASES, ids=[c.__name__ for c in BLOCK_CASES])
def test_a_block_move_without_python_refuses_as_a_recorded_move_does(loop_device, call, case):  # noqa: F811
    with sw.BlockDevice(loop_device) as dev:
        def on_dev():
            return case(dev)
        assert refusal(on_dev, call, recording=False) == refusal(on_dev, call, recording=True)
