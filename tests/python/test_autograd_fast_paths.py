"""The host-memory fast paths of the minimal operations and the autograd
engine (exact CPU/Generic Float32 carriers): non-flat layouts walk their
slots like sw_layout_index, values round as in the general path, an
accumulation into .grad is one mutation, and a cotangent the engine reuses
as storage is one nothing else can reach."""

import numpy as np
import pytest

import strideweave as sw
from strideweave import DType as D
from strideweave import Layout, Shape, Stride, Tensor


def L(shape, stride):
    return Layout(Shape(*shape) if isinstance(shape, tuple) else Shape(shape),
                  Stride(*stride) if isinstance(stride, tuple) else Stride(stride))


def host(values, layout, offset=0, kind=sw.CPU):
    n = offset + layout.cosize
    c = sw.CPU(n, dtype=D.Float32) if kind is sw.CPU else sw.Generic([0.0] * n, dtype=D.Float32)
    t = Tensor(c, offset, layout)
    for k, v in enumerate(values):
        t[k] = float(v)
    return t


def vals(t):
    return [t[k] for k in range(t.size())]


def f32(values):
    return [float(np.float32(v)) for v in values]


LAYOUTS = [
    (L(6, 1), 0),                  # flat
    (L(6, 2), 1),                  # strided, with an offset
    (L((2, 3), (3, 1)), 0),        # permuted
    (L((2, 3), (1, 2)), 3),        # flat, with an offset
    (L((2, 3), (1, 4)), 0),        # holes between the columns
    (L((3, 1, 2), (1, 7, 3)), 2),  # an extent-1 leaf, still flat
    (L((3, 1, 2), (2, 0, 6)), 0),  # strided with an extent-1 leaf
]
PAIRS = [(a, b) for a in LAYOUTS for b in LAYOUTS if a[0].shape == b[0].shape]


def desc(layout):
    return " ".join("abc"[: len(layout.shape)]) + " -> 1"


@pytest.mark.parametrize("kind", [sw.CPU, sw.Generic])
@pytest.mark.parametrize("la,lb", PAIRS)
def test_mul_and_add_forward_backward_on_any_layout(kind, la, lb):
    rng = np.random.default_rng(1)
    av = rng.standard_normal(6).astype(np.float32)
    bv = rng.standard_normal(6).astype(np.float32)
    lay_a, off_a = la
    lay_b, off_b = lb
    a = host(av, lay_a, off_a, kind)
    b = host(bv, lay_b, off_b, kind)
    m = sw.elementwise_mul(a, b)
    s = sw.add(a, b)
    assert type(m.carrier) is kind and type(s.carrier) is kind
    assert vals(m) == f32(av * bv) and vals(s) == f32(av + bv)
    loss = sw.reduce_sum(sw.add(m, s), desc(lay_a))
    loss.backward()
    assert vals(a.grad) == f32(bv + np.float32(1)) and vals(b.grad) == f32(av + np.float32(1))
    assert a.grad.layout == lay_a and type(a.grad.carrier) is kind


@pytest.mark.parametrize("layout,offset", LAYOUTS)
def test_reduce_sum_to_one_sums_in_ordinal_order(layout, offset):
    v = np.array([1e8, 1.0, -1e8, 3.5, 1.0, 0.25], dtype=np.float32)
    t = host(v, layout, offset)
    acc = np.float32(0)
    for x in v:
        acc = np.float32(acc + x)
    assert vals(sw.reduce_sum(t, desc(layout))) == [float(acc)]
    wide = sw.reduce_sum(t, desc(layout), accumulator_dtype=D.Float64)
    assert vals(wide) == [float(np.float32(sum(float(x) for x in v)))]


def test_accumulation_into_grad_is_one_mutation_and_respects_the_layout():
    x = host([1.0, 2.0, 3.0], L(3, 1))
    w = host([4.0, 5.0, 6.0], L(3, 1))
    holes = Tensor(sw.CPU(7, dtype=D.Float32), 1, L(3, 2))
    for i in range(7):
        holes.carrier[i] = -1.0
    x.grad = holes
    before = holes.carrier.version
    sw.reduce_sum(sw.elementwise_mul(x, w), "a -> 1").backward()
    assert x.grad is holes and holes.carrier.version == before + 1
    assert [holes.carrier[i] for i in range(7)] == [-1.0, 3.0, -1.0, 4.0, -1.0, 5.0, -1.0]
    sw.reduce_sum(sw.elementwise_mul(x, w), "a -> 1").backward()
    assert holes.carrier.version == before + 2 and vals(holes) == [7.0, 9.0, 11.0]


def test_a_cotangent_the_backward_keeps_is_not_reused_as_storage():
    kept = []

    class Keep(sw.Operation):
        def _forward(self, x):
            return host(vals(x), x.layout)

        def backward(self, g):
            out = host(vals(g), self.inputs()[0].layout)
            kept.append(out)
            return (out,)

    x = host([1.0, 2.0], L(2, 1))
    y = Keep().forward(x)
    sw.reduce_sum(y, "a -> 1").backward()
    assert vals(x.grad) == [1.0, 1.0]
    assert x.grad.carrier is not kept[0].carrier
    kept[0][0] = 9.0
    assert vals(x.grad) == [1.0, 1.0]


def test_retained_intermediate_grad_is_independent_of_the_cotangent_passed_on():
    x = host([1.0, 2.0, 3.0], L(3, 1))
    w = host([2.0, 2.0, 2.0], L(3, 1))
    m = sw.elementwise_mul(x, w)
    m.retain_grad()
    sw.reduce_sum(m, "a -> 1").backward()
    assert vals(m.grad) == [1.0, 1.0, 1.0] and vals(x.grad) == [2.0, 2.0, 2.0]
    assert m.grad.carrier is not x.grad.carrier and m.grad.carrier is not w.grad.carrier
