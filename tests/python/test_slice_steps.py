"""Slicing with steps follows Python's slice semantics, as NumPy does.

A leaf slice selects range(start, stop, step) after Python's normalization
(its length is len(range(...)), the width need not be a multiple of the
step). What the view rules forbid stays refused: a step <= 0 and a slice
selecting no index are ValueErrors; a nested mode takes only a whole-mode
slice.
"""

import itertools

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import strideweave as sw
from strideweave import Layout, Shape, Stride
from strideweave import friendly as F


def numbered(shape, strides=None):
    """A Float32 tensor whose element at coordinate c is its row-major number,
    with NumPy's view of the same memory."""
    n = int(np.prod(shape))
    if strides is None:  # first-mode-fastest canonical layout
        strides, s = [], 1
        for e in shape:
            strides.append(s)
            s *= e
    layout = Layout(Shape(list(shape)), Stride(list(strides)))
    t = F.zeros(layout.cosize)  # storage, then a view over it
    t = sw.Tensor(t.carrier, 0, layout)
    a = np.from_dlpack(t)
    a[...] = np.arange(n, dtype=np.float32).reshape(shape)
    return t, a


def same_as_numpy(t, a, key):
    v = t[key]
    got = np.from_dlpack(v)
    want = a[key]
    assert got.shape == want.shape, (key, got.shape, want.shape)
    assert np.array_equal(got, want), key
    assert torch.equal(torch.from_dlpack(v), torch.from_dlpack(t)[key]), key
    assert v.carrier is t.carrier  # a view: nothing copied


def test_issue_example_zeros_2_3_every_other_column():
    v = F.zeros(2, 3)[:, ::2]
    assert np.from_dlpack(v).shape == (2, 2)
    t, a = numbered((2, 3))
    same_as_numpy(t, a, (slice(None), slice(None, None, 2)))


BOUNDS = [None, -7, -3, -1, 0, 1, 2, 4, 6, 9]
STEPS = [None, 1, 2, 3, 4, 5, 7, 100]


def test_every_start_stop_step_combination_matches_numpy_on_one_mode():
    t, a = numbered((6,))
    checked = refused = 0
    for start, stop, step in itertools.product(BOUNDS, BOUNDS, STEPS):
        key = slice(start, stop, step)
        count = len(range(6)[key])
        if start is not None and start >= 6:
            count = 0  # a start past the end is refused with its own message
        if count == 0:
            with pytest.raises(ValueError):
                t[key]
            refused += 1
        else:
            same_as_numpy(t, a, (key,))
            checked += 1
    assert checked > 300 and refused > 100


def test_steps_on_two_modes_with_integers_match_numpy():
    t, a = numbered((5, 7))
    for k0, k1 in itertools.product(
        [slice(None, None, 2), slice(1, None, 3), slice(0, 5, 4), 3, slice(4, 5, 9)],
        [slice(None, None, 3), slice(2, 6, 4), slice(-5, None, 2), 6, slice(None, -1, 5)],
    ):
        if isinstance(k0, int) and isinstance(k1, int):
            continue  # all integers is an element read
        same_as_numpy(t, a, (k0, k1))


def test_steps_on_a_strided_layout_match_numpy():
    # Not canonical: row-major strides and a gap; the view keeps stride * step.
    t, a = numbered((4, 6), strides=[7, 1])
    for key in [(slice(None, None, 3), slice(1, None, 4)), (slice(1, 4, 2), slice(None, None, 5))]:
        same_as_numpy(t, a, key)
    v = t[::3, 1::4]
    assert v.layout == Layout(Shape([2, 2]), Stride([21, 4]))
    assert v.offset == 1


@pytest.mark.parametrize("step", [0, -1, -2])
def test_non_positive_steps_stay_refused(step):
    t, _ = numbered((6,))
    with pytest.raises(ValueError, match="step must be positive"):
        t[::step]


def test_empty_selection_stays_refused():
    t, _ = numbered((6,))
    for key in (slice(4, 2), slice(3, 3, 2), slice(-1, -4, 2)):
        with pytest.raises(ValueError, match="must select at least one index"):
            t[key]


def test_nested_mode_still_takes_only_a_whole_mode_slice():
    t = F.tensor(list(range(6)), layout=Layout(Shape([[2, 3]]), Stride([[1, 2]])))
    with pytest.raises(ValueError, match="nested"):
        t[::2]
    assert np.from_dlpack(t[::1]).shape == (2, 3)


@settings(max_examples=400, deadline=None)
@given(
    shape=st.lists(st.integers(1, 7), min_size=1, max_size=3),
    data=st.data(),
)
def test_random_keys_match_numpy(shape, data):
    t, a = numbered(tuple(shape))
    key = []
    for e in shape:
        if data.draw(st.booleans()):
            key.append(data.draw(st.integers(0, e - 1)))
            continue
        start = data.draw(st.none() | st.integers(-e - 2, e - 1))
        stop = data.draw(st.none() | st.integers(-e - 2, e + 3))
        step = data.draw(st.none() | st.integers(1, e + 2))
        key.append(slice(start, stop, step))
    if not any(isinstance(k, slice) for k in key):
        key[0] = slice(None)  # all integers is an element read
    key = tuple(key)
    empty = any(isinstance(k, slice) and len(range(e)[k]) == 0 for e, k in zip(shape, key))
    if empty:
        with pytest.raises(ValueError):
            t[key]
    else:
        same_as_numpy(t, a, key)
