"""Chains of views (slice with steps, permute, reshape, broadcast_to) read
the same values as NumPy's and PyTorch's equivalents over the exported
memory: the core computes each layout, DLPack carries it, and the
consumers' own view arithmetic is the reference.

Layouts are first-mode-fastest, so a reshape follows NumPy's order="F".
A reshape the view rules refuse (elements not evenly spaced) must be
exactly the one whose exported strides are not ``b * cumprod(shape)``.
"""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import strideweave as sw
from strideweave import Layout, Shape, Stride
from strideweave import friendly as F


def numbered(shape):
    """A Float32 tensor (canonical first-mode-fastest layout) holding its
    ordinals, and NumPy's view of the same memory."""
    strides, s = [], 1
    for e in shape:
        strides.append(s)
        s *= e
    layout = Layout(Shape(list(shape)), Stride(strides))
    t = F.zeros(layout.cosize)
    t = sw.Tensor(t.carrier, 0, layout)
    a = np.from_dlpack(t)
    a[...] = np.arange(a.size, dtype=np.float32).reshape(shape, order="F")
    return t, a


def evenly_spaced(a):
    """The reshape rule on an array: ordinal k (order F) sits at k * b."""
    expect, base = None, None
    for e, s in zip(a.shape, a.strides):
        if e == 1:
            continue
        if base is None:
            base = s
        elif s != expect:
            return False
        expect = s * e
    return True


def draw_key(data, shape):
    key = []
    for e in shape:
        if data.draw(st.booleans(), label="integer entry"):
            key.append(data.draw(st.integers(0, e - 1)))
        else:
            start = data.draw(st.none() | st.integers(-e, e - 1))
            step = data.draw(st.none() | st.integers(1, e + 1))
            key.append(slice(start, None, step))
    return tuple(key)


def check_same(v, a):
    got = np.from_dlpack(v)
    assert got.shape == a.shape
    assert np.array_equal(got, a)
    assert torch.equal(torch.from_dlpack(v), torch.from_numpy(np.array(a)))


@settings(max_examples=300, deadline=None)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=3), data=st.data())
def test_view_chains_read_what_numpy_reads(shape, data):
    t, a = numbered(tuple(shape))
    for _ in range(data.draw(st.integers(1, 4), label="chain length")):
        op = data.draw(st.sampled_from(["slice", "permute", "reshape", "broadcast"]))
        dims = list(a.shape)
        if op == "slice":
            key = draw_key(data, dims)
            if all(isinstance(k, int) for k in key):
                continue  # all integers is an element read, not a view
            t, a = t[key], a[key]
        elif op == "permute":
            order = data.draw(st.permutations(range(len(dims))))
            t, a = sw.permute(t, *order), a.transpose(order)
        elif op == "reshape":
            split = data.draw(st.sampled_from([[a.size], [1, a.size], [a.size, 1]]))
            if evenly_spaced(a):
                t, a = sw.reshape(t, Shape(split)), a.reshape(split, order="F")
            else:
                with pytest.raises(ValueError, match="evenly spaced"):
                    sw.reshape(t, Shape(split))
        else:
            wide = [e if e != 1 else data.draw(st.integers(1, 3)) for e in dims]
            t, a = sw.broadcast_to(t, Shape(wide)), np.broadcast_to(a, wide)
        check_same(t, a)
