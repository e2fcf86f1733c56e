"""Seed: "Export changes neither version tracking nor gradient tracking" —
with real consumers (NumPy, PyTorch)."""

import numpy as np
import torch

import strideweave as sw
from strideweave import Layout, Shape, Stride


def leaf(values):
    t = sw.Tensor(sw.CPU(len(values)), 0, Layout(Shape(len(values)), Stride(1)))
    np.from_dlpack(t)[:] = values
    return t


def ones(n):
    return leaf([1.0] * n)


def test_export_leaves_version_ctx_and_grad_unchanged_and_records_no_node():
    x = leaf([1.0, 2.0, 3.0])
    y = sw.elementwise_mul(x, x)
    node, version = y.autograd_ctx, y.carrier.version
    for export in (np.from_dlpack, torch.from_dlpack, lambda t: t.__dlpack__()):
        export(y)
        export(x)
    assert y.autograd_ctx is node and x.autograd_ctx is None
    assert y.grad is None and x.grad is None
    assert y.carrier.version == version and x.carrier.version == 0
    assert node.inputs() == (x, x)


def test_non_leaf_exports_and_backward_traverses_the_same_graph():
    x = leaf([1.0, 2.0, 3.0])
    y = sw.elementwise_mul(x, x)
    seen = np.from_dlpack(y).copy()
    assert seen.tolist() == [1.0, 4.0, 9.0]
    y.backward(ones(3))
    assert x.grad.tolist() == [2.0, 4.0, 6.0]


def test_gradient_tensor_is_exportable():
    x = leaf([1.0, 2.0, 3.0])
    sw.reduce_sum(sw.elementwise_mul(x, x), "a -> 1").backward()
    assert np.from_dlpack(x.grad).tolist() == [2.0, 4.0, 6.0]
    assert torch.from_dlpack(x.grad).tolist() == [2.0, 4.0, 6.0]


def test_miss_a_foreign_write_during_backward():
    # A consumer writes through an exported buffer that a recorded
    # elementwise_mul saved; backward succeeds and sees the new values.
    a = leaf([1.0, 2.0, 3.0])
    b = leaf([10.0, 20.0, 30.0])
    c = sw.elementwise_mul(a, b)
    before = (a.carrier.version, b.carrier.version)
    tokens = c.autograd_ctx.input_versions()
    np.from_dlpack(a)[:] = [5.0, 6.0, 7.0]      # bypasses every mutation entry point
    torch.from_dlpack(b)[0] = -1.0
    assert (a.carrier.version, b.carrier.version) == before
    assert c.autograd_ctx.input_versions() == tokens
    c.autograd_ctx.validate_input_versions()   # no in-place error
    c.backward(ones(3))
    assert b.grad.tolist() == [5.0, 6.0, 7.0]   # d(a*b)/db = a, as modified
    assert a.grad.tolist() == [-1.0, 20.0, 30.0]
