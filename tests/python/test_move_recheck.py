"""A move checks the carriers again after Python code ran between its checks
and the destination's allocation (an operation's constructor here): a
carrier released meanwhile is reported as changed while the move was being
checked, and neither carrier changes."""

import pytest

import strideweave as sw
from strideweave import CPU, Layout, Shape, Stride, Tensor
from strideweave.carriers.move import registered_move_operation

CHANGED = "carrier was released, claimed or moved while the move was being checked"


def cpu_tensor(n=4):
    return Tensor(CPU(n), 0, Layout(Shape(n), Stride(1)))


def releasing_operation(carrier):
    class Releasing(sw.MoveOperation):
        """Releases `carrier` when the move makes it, after the checks."""

        def __init__(self):
            super().__init__()
            carrier.release()

        def _copy(self, tensor, destination, output, element_count):
            raise AssertionError("the move must not copy")

    return Releasing


@pytest.mark.parametrize("role", ["source", "destination"])
@pytest.mark.parametrize("call", ["move", "move_async"])
def test_a_carrier_released_by_an_operations_constructor_is_reported(role, call):
    t, d = cpu_tensor(), CPU(4, empty=True)
    released = t.carrier if role == "source" else d
    other = d if role == "source" else t.carrier
    with sw.no_grad(), registered_move_operation(CPU, CPU, releasing_operation(released)):
        with pytest.raises(RuntimeError, match=f"the {role} CPU {CHANGED}"):
            getattr(sw, call)(t, d)
    assert released.is_released() and not other.is_released()
