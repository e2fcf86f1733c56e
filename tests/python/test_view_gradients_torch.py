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


def draw_step(data, dims):
    """One view of a tensor of shape `dims`: (kind, argument)."""
    kind = data.draw(st.sampled_from(["slice", "permute", "reshape", "broadcast"]))
    if kind == "slice":
        return kind, draw_key(data, dims)
    if kind == "permute":
        return kind, data.draw(st.permutations(range(len(dims))))
    if kind == "reshape":
        n = int(np.prod(dims))
        return kind, data.draw(st.sampled_from([[n], [1, n], [n, 1]]))
    return kind, [e if e != 1 else data.draw(st.integers(1, 3)) for e in dims]


def view_both(v, vt, kind, arg):
    """The view on both sides, or None when strideweave's rules refuse it
    (a reshape of elements not evenly spaced) or it is an element read."""
    if kind == "slice":
        return None if all(isinstance(k, int) for k in arg) else (v[arg], vt[arg])
    if kind == "permute":
        return sw.permute(v, *arg), vt.permute(*arg)
    if kind == "broadcast":
        return sw.broadcast_to(v, Shape(arg)), vt.expand(*arg)
    try:
        return sw.reshape(v, Shape(arg)), torch_reshape_f(vt, arg)
    except ValueError:
        return None


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
        kind, arg = draw_step(data, list(vt.shape))
        v, vt = view_both(v, vt, kind, arg) or (v, vt)
    assert shape_of(v) == list(vt.shape)
    m = v.size()
    gs = data.draw(st.lists(st.integers(-3, 3), min_size=m, max_size=m), label="g")
    gl = v.layout if v.layout.is_injective else Layout.canonical(v.layout.shape)
    v.backward(filled(gl, gs))
    vt.backward(f_order(gs, list(vt.shape)))
    want = xt.grad.numpy().reshape(-1, order="F")
    got = [x.grad[k] for k in range(x.size())]
    assert got == want.tolist()
