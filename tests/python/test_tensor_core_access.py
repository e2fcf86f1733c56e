"""Element access and views through the core tensor (issue 17).

A view is the core's view of its source (sw_tensor_view): the source's
representation checks are not run again (a Python carrier's dtype() hook is
not asked once more), only its placement is (a carrier released by a key's
hook still refuses). Element reads of a Python carrier go through its own
get_value at the slot the core finds, objects as it returns them.
"""

import pytest

import strideweave as sw
from strideweave import DType as D, Layout, Shape, Stride, Tensor

from moves_for_tests import PyList


class Counting(PyList):
    """PyList counting its dtype() and size() hooks."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = {"dtype": 0, "size": 0}

    def dtype(self):
        self.calls["dtype"] += 1
        return super().dtype()

    def size(self):
        self.calls["size"] += 1
        return super().size()


def grid(carrier):
    return Tensor(carrier, 0, Layout(Shape(2, 3), Stride(1, 2)))


@pytest.mark.parametrize("make_view", [
    lambda t: t[0:2, 1:],
    lambda t: sw.permute(t, 1, 0),
    lambda t: sw.reshape(t, Shape(6)),
    lambda t: sw.reshape(t[0:1, :], Shape(3, 1)),
], ids=["slice", "permute", "reshape", "reshape-of-slice"])
def test_view_runs_no_dtype_hook_but_checks_the_placement(make_view):
    c = Counting([float(k) for k in range(6)])
    t = grid(c)
    before = dict(c.calls)
    v = make_view(t)
    assert c.calls["dtype"] == before["dtype"]  # the constructor's T-5 hook: not again
    assert c.calls["size"] > before["size"]  # the placement: checked again
    assert v.carrier is c and v.dtype() is D.Float32


def test_view_of_a_released_python_carrier_still_refuses():
    c = Counting([float(k) for k in range(6)])
    t = grid(c)
    c.release()
    with pytest.raises(ValueError, match="exceeds the carrier size"):
        sw.permute(t, 1, 0)


def test_python_carrier_elements_are_its_own_objects_at_the_core_slot():
    marker = object()
    values = [float(k) for k in range(6)]
    values[5] = marker  # slot 5 = element (1, 2) of the column-major grid
    t = grid(PyList(values))
    assert t[1, 2] is marker and t[5] is marker
    assert sw.permute(t, 1, 0)[2, 1] is marker
    assert t.tolist()[5] is marker
    assert sw.permute(t, 1, 0).tolist() == [0.0, 2.0, 4.0, 1.0, 3.0, marker]
