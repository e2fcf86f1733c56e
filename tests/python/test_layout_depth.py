"""One maximum nesting depth (64 levels) for every layout, enforced with
ValueError on every construction path; walks over a layout at that depth
never exhaust the C stack (before the limit, 170k appends crashed)."""

import copy
import pickle

import pytest

import strideweave as sw
from strideweave import Layout, Shape, Stride

MAX = 64


def nested(value, levels):
    for _ in range(levels):
        value = [value]
    return value


def deepest_by_append():
    one = Layout(Shape(1), Stride(0))
    layout = one
    while layout.depth < MAX:
        layout = one.append(layout)
    return layout


def test_shape_and_stride_at_the_limit_and_past_it():
    # Shape(2, [[...]]): each list is one more level below the flat one
    assert Shape(2, nested(1, MAX - 1)).depth == MAX
    assert Stride(0, nested(0, MAX - 1)).depth == MAX
    for cls in (Shape, Stride):
        with pytest.raises(ValueError, match="64 levels"):
            cls(2, nested(1, MAX))


def test_absurdly_deep_input_is_a_value_error_not_a_crash():
    with pytest.raises(ValueError, match="64 levels"):
        Shape(nested(1, 200_000))


def test_append_past_the_limit():
    deep = deepest_by_append()
    assert deep.depth == MAX
    with pytest.raises(ValueError, match="64 levels"):
        Layout(Shape(1), Stride(0)).append(deep)
    assert deep.depth == MAX  # unchanged


def test_walks_at_the_limit():
    deep = deepest_by_append()
    top = deep.shape.top_level
    assert isinstance(top, tuple)
    assert pickle.loads(pickle.dumps(deep)) == deep
    assert copy.deepcopy(deep) == deep
    assert repr(deep) and str(deep)
    assert deep.size == 1 and deep.cosize == 1
    assert deep(0) == 0
    t = sw.Tensor(sw.CPU(1), 0, deep)
    assert t.tolist() == [0.0]


def test_many_appends_of_flat_modes_are_not_nesting():
    layout = Layout(Shape(1), Stride(0))
    for _ in range(2000):
        layout = layout.append(Layout(Shape(1), Stride(0)))
    assert layout.depth == 1 and len(layout.shape) == 2001
