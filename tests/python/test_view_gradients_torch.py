"""Gradients through random chains of views (slice with steps and integer
entries, permute, reshape, broadcast_to) equal PyTorch's for the same chain
(contract-core V-9): each view node maps its gradient back through the
core's map of which source element each view element reads.

Layouts are first-mode-fastest, so values travel between the two in
order="F", and a reshape is PyTorch's reshape of the reversed shape seen
through reversed dimensions. Values are small integers, so every sum is
exact in float32.
"""

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import strideweave as sw
from strideweave import Layout, Shape, Stride
from test_view_chains_numpy import draw_key


def source(shape, row_major, values):
    """A Float32 tensor of `shape` holding `values` in ordinal order, in a
    first-mode-fastest layout or (row_major) the reverse stride order."""
    dims = range(len(shape))
    strides = [int(np.prod(shape[:i] if not row_major else shape[i + 1:])) for i in dims]
    layout = Layout(Shape(list(shape)), Stride(strides))
    return filled(layout, values)


def filled(layout, values):
    t = sw.Tensor(sw.CPU(layout.cosize), 0, layout)
    for k, v in enumerate(values):
        t[k] = v
    return t


def f_order(values, shape):
    return torch.tensor(np.array(values, dtype=np.float32).reshape(shape, order="F"))


def torch_reshape_f(a, split):
    back = list(range(a.dim()))[::-1]
    r = a.permute(*back).reshape(list(split)[::-1])
    return r.permute(*range(len(split))[::-1])


def shape_of(t):
    return [mode.size for mode in t.layout.shape]


@settings(max_examples=200, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3), row_major=st.booleans(),
       data=st.data())
def test_v9_view_chain_gradients_match_torch(shape, row_major, data):
    n = int(np.prod(shape))
    xs = data.draw(st.lists(st.integers(-4, 4), min_size=n, max_size=n), label="x")
    x = source(shape, row_major, xs)
    xt = f_order(xs, shape).requires_grad_(True)
    v, vt = x, xt
    for _ in range(data.draw(st.integers(1, 4), label="chain length")):
        op = data.draw(st.sampled_from(["slice", "permute", "reshape", "broadcast"]))
        dims = list(vt.shape)
        if op == "slice":
            key = draw_key(data, dims)
            if all(isinstance(k, int) for k in key):
                continue  # all integers is an element read, not a view
            v, vt = v[key], vt[key]
        elif op == "permute":
            order = data.draw(st.permutations(range(len(dims))))
            v, vt = sw.permute(v, *order), vt.permute(*order)
        elif op == "reshape":
            split = data.draw(st.sampled_from([[vt.numel()], [1, vt.numel()], [vt.numel(), 1]]))
            try:
                v = sw.reshape(v, Shape(split))
            except ValueError:
                continue  # not evenly spaced: the view rules refuse it
            vt = torch_reshape_f(vt, split)
        else:
            wide = [e if e != 1 else data.draw(st.integers(1, 3)) for e in dims]
            v, vt = sw.broadcast_to(v, Shape(wide)), vt.expand(*wide)
    assert shape_of(v) == list(vt.shape)
    m = v.size()
    gs = data.draw(st.lists(st.integers(-3, 3), min_size=m, max_size=m), label="g")
    gl = v.layout if v.layout.is_injective else Layout.canonical(v.layout.shape)
    v.backward(filled(gl, gs))
    vt.backward(f_order(gs, list(vt.shape)))
    want = xt.grad.numpy().reshape(-1, order="F")
    got = [x.grad[k] for k in range(x.size())]
    assert got == want.tolist()
