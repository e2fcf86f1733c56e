"""Minimal differentiable operations and dispatch
(contract-autograd-profiling F-0..F-3, O-9)."""

import inspect

import numpy as np
import pytest

import strideweave as sw
import strideweave.operation as swop
from strideweave import DType, Layout, Shape, Stride, Tensor

F32, I32 = DType.Float32, DType.Int32
KINDS = ["CPU", "Generic", "FileBacked"]


def proto(kind):
    return {"CPU": lambda: sw.CPU(1), "Generic": lambda: sw.Generic([0.0]),
            "FileBacked": lambda: sw.FileBacked()}[kind]()


def carrier(kind, values, dtype=F32):
    return proto(kind).new_like(list(values), dtype=dtype)


def make(values, layout=None, kind="CPU", dtype=F32, offset=0):
    values = list(values)
    if layout is None:
        layout = Layout(Shape(len(values)), Stride(1))
    return Tensor(carrier(kind, [0] * offset + values, dtype), offset, layout)


def logical(t):
    return np.array(t.tolist())


class UserCarrier(sw.Carrier):
    def __init__(self, values):
        super().__init__()
        self.values = list(values)

    def size(self):
        return len(self.values)

    def dtype(self):
        return F32

    def get_value(self, i):
        return self.values[i]

    def new_like(self, values, *, mutable=True, dtype=None):
        return UserCarrier(values)


# ---- import surface and docstrings ----------------------------------------------


def test_import_surface_same_objects():
    for name in ("add", "elementwise_mul", "reduce_sum"):
        assert getattr(sw, name) is getattr(swop, name) is getattr(sw._C, name)
        assert name in sw.__all__ and name in swop.__all__


def test_signatures_and_docstrings():
    assert str(inspect.signature(sw.add)) == "(lhs, rhs)"
    assert str(inspect.signature(sw.elementwise_mul)) == "(lhs, rhs)"
    assert str(inspect.signature(sw.reduce_sum)) == \
        "(tensor, description, *, accumulator_dtype=None)"
    assert str(inspect.signature(sw.CPU(1).dispatch_op)) == "(name, /)"
    import re
    for f in (sw.add, sw.elementwise_mul, sw.reduce_sum, sw.Carrier.dispatch_op):
        assert not re.search(r"\b[A-Z]{1,2}-\d+\b", f.__doc__)


# ---- dispatch_op and O-9 metadata --------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", ["add", "elementwise_mul", "reduce_sum", "broadcast_to"])
def test_dispatch_op_builtins_fresh_with_metadata(kind, name):
    c = proto(kind)
    a, b = c.dispatch_op(name), c.dispatch_op(name)
    assert isinstance(a, sw.Operation) and a is not b
    assert a._operation_name == name
    assert a._dispatch_carrier_class is type(c)


def test_dispatch_op_broadcast_on_user_carrier():
    c = UserCarrier([1.0])
    op = c.dispatch_op("broadcast_to")
    assert isinstance(op, sw.Operation)
    assert op._operation_name == "broadcast_to"
    assert op._dispatch_carrier_class is UserCarrier


@pytest.mark.parametrize("name", ["add", "elementwise_mul", "reduce_sum"])
def test_dispatch_op_user_carrier_not_implemented(name):
    with pytest.raises(NotImplementedError):
        UserCarrier([1.0]).dispatch_op(name)


def test_dispatch_op_unknown_name_and_type():
    with pytest.raises(NotImplementedError):
        sw.CPU(1).dispatch_op("matmul")
    with pytest.raises(NotImplementedError):
        sw.CPU(1).dispatch_op("Add")
    with pytest.raises(TypeError, match="str"):
        sw.CPU(1).dispatch_op(b"add")
    with pytest.raises(TypeError):
        sw.CPU(1).dispatch_op(None)


def test_directly_constructed_has_no_metadata():
    op = type(sw.CPU(1).dispatch_op("add"))()
    assert op._operation_name is None and op._dispatch_carrier_class is None
    with pytest.raises(AttributeError):
        sw.CPU(1).dispatch_op("add")._operation_name = "x"


def test_functions_on_user_carrier_raise_from_dispatch():
    t = Tensor(UserCarrier([1.0, 2.0]), 0, Layout(Shape(2), Stride(1)))
    with pytest.raises(NotImplementedError):
        sw.add(t, t)
    with pytest.raises(NotImplementedError):
        sw.reduce_sum(t, "a -> 1")


# ---- F-1 / F-2 checks in order ---------------------------------------------------------


@pytest.mark.parametrize("fn", [sw.add, sw.elementwise_mul])
def test_binary_checks_in_order(fn):
    x = make([1.0, 2.0])
    with pytest.raises(TypeError, match="lhs must be a Tensor"):
        fn([1.0], 3)
    with pytest.raises(TypeError, match="rhs must be a Tensor"):
        fn(x, 3)
    g = make([1.0, 2.0], kind="Generic")
    with pytest.raises(TypeError, match="carrier"):
        fn(x, g)
    # released lhs before released rhs before shape
    a, b = make([1.0, 2.0]), make([1.0, 2.0, 3.0])
    a.carrier.release()
    b.carrier.release()
    with pytest.raises(RuntimeError, match="lhs"):
        fn(a, b)
    c = make([1.0, 2.0])
    with pytest.raises(RuntimeError, match="rhs"):
        fn(c, b)
    with pytest.raises(ValueError, match="shape"):
        fn(x, make([1.0, 2.0, 3.0]))
    # same extents, different tree
    with pytest.raises(ValueError):
        fn(make([1.0, 2.0], Layout(Shape([2, 1]), Stride([1, 1]))), x)
    b1 = Tensor(sw.CPU(2, dtype=DType.Bool), 0, Layout(Shape(2), Stride(1)))
    with pytest.raises(TypeError, match="Float32 and Int32"):
        fn(x, b1)


@pytest.mark.parametrize("fn", [sw.add, sw.elementwise_mul])
def test_binary_keywords(fn):
    x = make([1.0, 2.0])
    assert fn(lhs=x, rhs=x).tolist() == fn(x, x).tolist()
    with pytest.raises(TypeError):
        fn(x)
    with pytest.raises(TypeError):
        fn(x, x, x)


@pytest.mark.parametrize("kind", KINDS)
def test_add_mul_values_and_result_carrier(kind):
    rng = np.random.default_rng(1)
    av = rng.standard_normal(6).astype(np.float32)
    bv = rng.standard_normal(6).astype(np.float32)
    L = Layout(Shape([2, 3]), Stride([3, 1]))  # row-major: a permuted view
    a = make(av, L, kind)
    b = make(bv, Layout(Shape([2, 3]), Stride([1, 2])), kind)
    s, p = sw.add(a, b), sw.elementwise_mul(a, b)
    la, lb = logical(a).astype(np.float32), logical(b).astype(np.float32)
    assert np.array_equal(logical(s), (la + lb).astype(np.float32))
    assert np.array_equal(logical(p), (la * lb).astype(np.float32))
    for r in (s, p):
        assert type(r.carrier) is type(a.carrier) and r.carrier is not a.carrier
        assert r.offset == 0 and r.layout == Layout(Shape([2, 3]), Stride([1, 2]))
        assert r.dtype() is F32


def test_hierarchical_gapped_offset_inputs():
    L = Layout(Shape([2, [2, 3]]), Stride([13, [1, 4]]))
    n = L.cosize
    vals = list(range(1, n + 1))
    a = make([float(v) for v in vals], L, offset=5)
    b = make([1.0] * 12, Layout(Shape([2, [2, 3]]), Stride([1, [2, 4]])))
    r = sw.add(a, b)
    assert r.layout == Layout(Shape([2, [2, 3]]), Stride([1, [2, 4]]))
    assert np.array_equal(logical(r), logical(a) + 1.0)


def test_broadcast_input_stride_zero():
    x = make([5.0, 7.0], Layout(Shape([4, 2]), Stride([0, 1])))
    r = sw.elementwise_mul(x, x)
    assert logical(r).tolist() == [25.0] * 4 + [49.0] * 4
    assert r.layout == Layout(Shape([4, 2]), Stride([1, 4]))


def test_int32_exact_and_mixed():
    a = make([1, 2, 3], dtype=I32)
    b = make([10, 20, 30], dtype=I32)
    r = sw.add(a, b)
    assert r.dtype() is I32 and r.tolist() == [11, 22, 33]
    assert sw.elementwise_mul(a, b).tolist() == [10, 40, 90]
    m = sw.add(make([16777217], dtype=I32), make([0.0]))
    assert m.dtype() is F32 and m.tolist() == [16777216.0]  # Int32 -> binary32 first
    m2 = sw.elementwise_mul(make([3.0]), make([2], dtype=I32))
    assert m2.dtype() is F32 and m2.tolist() == [6.0]
    assert not r.is_differentiable() and r.autograd_ctx is None


def test_int32_overflow():
    big = make([2**31 - 1], dtype=I32)
    with pytest.raises(OverflowError):
        sw.add(big, make([1], dtype=I32))
    with pytest.raises(OverflowError):
        sw.elementwise_mul(big, make([2], dtype=I32))
    with pytest.raises(OverflowError):
        sw.add(make([-2**31], dtype=I32), make([-1], dtype=I32))
    assert sw.add(make([-2**31 + 1], dtype=I32), make([-1], dtype=I32)).tolist() == [-2**31]


def test_float32_rounding():
    a, b = make([1.0]), make([2.0**-30])
    assert sw.add(a, b).tolist() == [1.0]
    x = make([0.1])
    expect = float(np.float32(0.1) * np.float32(0.1))
    assert sw.elementwise_mul(x, x).tolist() == [expect]


def test_direct_dispatch_behaves_alike():
    op = sw.CPU(1).dispatch_op("add")
    with pytest.raises(TypeError, match="lhs must be a Tensor"):
        op.forward(1, 2)
    with pytest.raises(TypeError):
        op.forward(make([1.0], kind="Generic"), make([1.0], kind="Generic"))
    x = make([1.0, 2.0])
    assert op.forward(x, x).tolist() == [2.0, 4.0]


# ---- F-3 reduce_sum ---------------------------------------------------------------------


def ex_x(kind="CPU"):
    return make([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], Layout(Shape([2, 3]), Stride([1, 2])), kind)


@pytest.mark.parametrize("kind", KINDS)
def test_reduce_sum_contract_example(kind):
    x = ex_x(kind)
    r = sw.reduce_sum(x, "a b -> a")
    assert r.layout == Layout(Shape(2), Stride(1)) and r.tolist() == [9.0, 12.0]
    assert type(r.carrier) is type(x.carrier)
    s = sw.reduce_sum(x, "a b -> 1")
    assert s.layout == Layout(Shape(1), Stride(1)) and s.tolist() == [21.0]
    assert sw.reduce_sum(x, "a b -> b").tolist() == [3.0, 7.0, 11.0]
    t = sw.reduce_sum(x, "a b -> b a")
    assert t.layout == Layout(Shape([3, 2]), Stride([1, 3]))
    assert t.tolist() == [1.0, 3.0, 5.0, 2.0, 4.0, 6.0]


def test_reduce_sum_checks_in_order():
    x = ex_x()
    with pytest.raises(TypeError):
        sw.reduce_sum([1.0], 3)
    with pytest.raises(TypeError, match="description"):
        sw.reduce_sum(x, 3)
    with pytest.raises(TypeError, match="accumulator_dtype"):
        sw.reduce_sum(x, "a b -> 1", accumulator_dtype="Float64")
    with pytest.raises(TypeError, match="accumulator_dtype"):
        sw.reduce_sum(x, "a b -> 1", accumulator_dtype=DType.Floating)
    with pytest.raises(TypeError):
        sw.reduce_sum(x, "a b -> 1", DType.Float64)  # keyword-only
    y = ex_x()
    y.carrier.release()
    with pytest.raises(RuntimeError, match="released"):
        sw.reduce_sum(y, "bad")
    b = Tensor(sw.CPU(2, dtype=DType.Bool), 0, Layout(Shape(2), Stride(1)))
    with pytest.raises(TypeError, match="Float32 and Int32"):
        sw.reduce_sum(b, "bad")
    for bad in ["a b", "a b -> -> a", "a b->a", "a a -> a", "a b -> c", "a b -> a a",
                "(a b) -> 1", "... -> 1", "a b -> 1 a", "a b ->", "-> 1", "a b -> 2"]:
        with pytest.raises(ValueError):
            sw.reduce_sum(x, bad)
    with pytest.raises(ValueError, match="modes"):
        sw.reduce_sum(x, "a -> 1")
    i = make([1, 2], dtype=I32)
    with pytest.raises(TypeError, match="Int32"):
        sw.reduce_sum(i, "a -> 1", accumulator_dtype=DType.Float64)
    with pytest.raises(ValueError):  # grammar before the accumulator checks
        sw.reduce_sum(i, "a b -> 1", accumulator_dtype=DType.Float64)
    with pytest.raises(NotImplementedError):
        sw.reduce_sum(x, "a b -> 1", accumulator_dtype=DType.Int32)
    assert sw.reduce_sum(x, "a   b\t->  1", accumulator_dtype=F32).tolist() == [21.0]


def test_reduce_sum_hierarchical_modes():
    L = Layout(Shape([2, [2, 3]]), Stride([1, [2, 4]]))
    v = np.arange(1.0, 13.0)
    x = make(v, L)
    r = sw.reduce_sum(x, "i j -> j")
    assert r.layout == Layout(Shape([2, 3]), Stride([1, 2]))
    ref = v.reshape(6, 2).sum(axis=1)  # ordinal k = i + 2*j
    assert np.array_equal(logical(r), ref)
    r2 = sw.reduce_sum(x, "i j -> j i")
    assert r2.layout == Layout(Shape([[2, 3], 2]), Stride([[1, 2], 6]))
    # r2 at (j, i) holds x at (i, j): nothing is summed when every mode is kept
    for i in range(2):
        for j in range(6):
            assert r2.tolist()[j + 6 * i] == v[i + 2 * j]


def test_reduce_sum_broadcast_counts_each_coordinate():
    z = make([5.0, 7.0], Layout(Shape([4, 2]), Stride([0, 1])))
    assert sw.reduce_sum(z, "a b -> 1").tolist() == [48.0]
    assert sw.reduce_sum(z, "a b -> b").tolist() == [20.0, 28.0]


def test_reduce_sum_int32_exact_and_overflow():
    i = make([2**30, 2**30 - 1, 1, -5], dtype=I32)
    r = sw.reduce_sum(i, "a -> 1")
    assert r.dtype() is I32 and r.tolist() == [2**31 - 5]
    with pytest.raises(OverflowError):
        sw.reduce_sum(make([2**30, 2**30], dtype=I32), "a -> 1")


def test_reduce_sum_float64_accumulator():
    vals = [1.0] + [2.0**-24] * 1000
    x = make(vals)
    f32 = sw.reduce_sum(x, "a -> 1").tolist()[0]
    f64 = sw.reduce_sum(x, "a -> 1", accumulator_dtype=DType.Float64).tolist()[0]
    assert f32 == 1.0  # each small term is lost in binary32
    assert f64 == float(np.float32(1.0 + 1000 * 2.0**-24))
    r = sw.reduce_sum(x, "a -> 1", accumulator_dtype=DType.Float64)
    assert r.dtype() is F32


# ---- VJPs against finite differences -----------------------------------------------


def fd_grad(f, xs, i, g, eps=1e-3):
    """d<g, f(xs)>/dx_i by central differences, in float64."""
    xs = [np.array(x, dtype=np.float64) for x in xs]
    out = np.zeros_like(xs[i])
    for k in range(xs[i].size):
        p = [x.copy() for x in xs]
        m = [x.copy() for x in xs]
        p[i][k] += eps
        m[i][k] -= eps
        out[k] = (np.dot(g, f(*p)) - np.dot(g, f(*m))) / (2 * eps)
    return out


def test_add_vjp_both_receive_g_and_gradient_layouts():
    La = Layout(Shape([2, 3]), Stride([3, 1]))
    a = make([1.0, 2, 3, 4, 5, 6], La)
    b = make([0.5] * 6, Layout(Shape([2, 3]), Stride([1, 2])), kind="CPU")
    y = sw.add(a, b)
    node = y.autograd_ctx
    assert node._operation_name == "add" and node.inputs() == (a, b)
    g = make([1.0, -2, 3, 0.5, 7, 1], Layout(Shape([2, 3]), Stride([1, 2])))
    ga, gb = node.backward(g)
    assert ga.layout == La and gb.layout == b.layout
    assert ga.offset == 0 and ga.autograd_ctx is None and type(ga.carrier) is sw.CPU
    ref = fd_grad(lambda x, z: x + z, [logical(a), logical(b)], 0, logical(g))
    assert np.allclose(logical(ga), ref, atol=1e-6)
    assert np.array_equal(logical(gb), logical(g))


def test_add_same_tensor_twice():
    x = make([1.0, 2.0])
    y = sw.add(x, x)
    assert y.autograd_ctx.inputs() == (x, x)
    ga, gb = y.autograd_ctx.backward(make([1.0, 3.0]))
    assert ga.tolist() == gb.tolist() == [1.0, 3.0]


@pytest.mark.parametrize("kind", KINDS)
def test_mul_vjp_finite_differences(kind):
    rng = np.random.default_rng(2)
    a = make(rng.standard_normal(4).astype(np.float32), kind=kind)
    b = make(rng.standard_normal(4).astype(np.float32), kind=kind)
    y = sw.elementwise_mul(a, b)
    g = make(rng.standard_normal(4).astype(np.float32), kind=kind)
    ga, gb = y.autograd_ctx.backward(g)
    f = lambda x, z: x * z  # noqa: E731
    xs = [logical(a), logical(b)]
    assert np.allclose(logical(ga), fd_grad(f, xs, 0, logical(g)), atol=1e-3)
    assert np.allclose(logical(gb), fd_grad(f, xs, 1, logical(g)), atol=1e-3)
    assert type(ga.carrier) is type(a.carrier)


def test_mul_vjp_reads_saved_inputs_at_backward_time():
    a, b = make([1.0, 2.0]), make([3.0, 4.0])
    y = sw.elementwise_mul(a, b)
    b.carrier[0] = 10.0  # not detected by backward itself; values are read now
    ga, gb = y.autograd_ctx.backward(make([1.0, 1.0]))
    assert ga.tolist() == [10.0, 4.0] and gb.tolist() == [1.0, 2.0]


def test_mul_vjp_none_for_int32_operand():
    a, b = make([1.0, 2.0]), make([3, 4], dtype=I32)
    y = sw.elementwise_mul(a, b)
    ga, gb = y.autograd_ctx.backward(make([1.0, 2.0]))
    assert gb is None and ga.tolist() == [3.0, 8.0]


def test_vjp_non_injective_operand_gets_canonical_layout():
    z = make([5.0, 7.0], Layout(Shape([4, 2]), Stride([0, 1])))
    s = sw.reduce_sum(z, "a b -> 1")
    (gz,) = s.autograd_ctx.backward(make([1.0]))
    assert gz.layout == Layout(Shape([4, 2]), Stride([1, 4])) and gz.tolist() == [1.0] * 8
    y = sw.add(z, z)
    ga, _ = y.autograd_ctx.backward(make([1.0] * 8, Layout(Shape([4, 2]), Stride([1, 4]))))
    assert ga.layout == Layout(Shape([4, 2]), Stride([1, 4]))


def test_vjp_gapped_operand_gets_cosize_slots():
    L = Layout(Shape(2), Stride(3))
    a = make([1.0, 0.0, 0.0, 2.0], L)
    y = sw.elementwise_mul(a, a)
    ga, _ = y.autograd_ctx.backward(make([1.0, 1.0]))
    assert ga.layout == L and ga.carrier.size() == 4
    assert [ga.carrier[i] for i in range(4)] == [1.0, 0.0, 0.0, 2.0]


def test_reduce_sum_vjp():
    x = ex_x()
    s = sw.reduce_sum(x, "a b -> 1")
    (gx,) = s.autograd_ctx.backward(make([1.0]))
    assert gx.layout == x.layout and gx.tolist() == [1.0] * 6
    r = sw.reduce_sum(x, "a b -> b a")
    g = make(np.arange(1.0, 7.0), r.layout)
    (gx,) = r.autograd_ctx.backward(g)
    ref = fd_grad(lambda v: np.array([v[0], v[2], v[4], v[1], v[3], v[5]]),
                  [logical(x)], 0, logical(g))
    assert np.allclose(logical(gx), ref)
    with pytest.raises(ValueError, match="layout"):
        r.autograd_ctx.backward(make(np.arange(6.0)))
    with pytest.raises(TypeError):
        r.autograd_ctx.backward([1.0])
    dead = make(np.arange(6.0), r.layout)
    dead.carrier.release()
    with pytest.raises(RuntimeError):
        r.autograd_ctx.backward(dead)


def test_vjp_on_released_operand_carrier():
    x = ex_x("FileBacked")
    s = sw.reduce_sum(x, "a b -> a")
    x.carrier.release()
    (gx,) = s.autograd_ctx.backward(make([2.0, 3.0], kind="FileBacked"))
    assert type(gx.carrier) is sw.FileBacked and gx.tolist() == [2.0, 3.0] * 3


def test_no_node_under_no_grad_and_for_int32():
    x = make([1.0, 2.0])
    with sw.no_grad():
        y = sw.add(x, x)
    assert y.autograd_ctx is None
    assert sw.reduce_sum(make([1, 2], dtype=I32), "a -> 1").autograd_ctx is None


def test_backward_without_saved_inputs():
    op = sw.CPU(1).dispatch_op("add")
    with pytest.raises(RuntimeError, match="saved"):
        op.backward(make([1.0]))


def test_int32_partial_sums_exceed_int32_but_result_fits():
    i = make([2**31 - 1, 2**31 - 1, -(2**31), -(2**31) + 10], dtype=I32)
    assert sw.reduce_sum(i, "a -> 1").tolist() == [8]


def test_no_reference_leaks():
    import gc
    import sys
    x = make([1.0, 2.0, 3.0])
    g = make([1.0])

    def cycle():
        s = sw.reduce_sum(sw.elementwise_mul(x, sw.add(x, x)), "a -> 1")
        s.autograd_ctx.backward(g)
        with sw.profile(record_shapes=True) as p:
            sw.add(x, x)
        p.events()

    for _ in range(50):
        cycle()
    gc.collect()
    before = (sys.getrefcount(x), sys.getrefcount(x.carrier), len(gc.get_objects()))
    for _ in range(200):
        cycle()
    gc.collect()
    after = (sys.getrefcount(x), sys.getrefcount(x.carrier), len(gc.get_objects()))
    assert after[:2] == before[:2]
    assert after[2] - before[2] < 50


# ---- with the backward engine: the contract's worked examples ------------------------

needs_engine = pytest.mark.skipif(not hasattr(sw.Tensor, "backward"),
                                  reason="Tensor.backward not built")


def ones(n, kind="CPU"):
    return make([1.0] * n, kind=kind)


@needs_engine
def test_engine_reduce_sum_example():
    x = ex_x()
    sw.reduce_sum(x, "a b -> 1").backward()
    assert x.grad.layout == x.layout and x.grad.tolist() == [1.0] * 6


@needs_engine
def test_engine_add_same_input_twice_gets_2g():
    x = make([1.0, 2.0, 3.0])
    sw.add(x, x).backward(make([1.0, 2.0, 3.0]))
    assert x.grad.tolist() == [2.0, 4.0, 6.0]


@needs_engine
def test_engine_double_example_from_operation_section():
    class Double(sw.Operation):
        def _forward(self, x):
            with sw.no_grad():
                return sw.add(x, x)

        def backward(self, g):
            return (sw.add(g, g),)

    x = make([1.0, 2.0, 3.0])
    op = Double()
    y = op.forward(x)
    assert y.autograd_ctx is op and op.inputs()[0] is x
    y.backward(ones(3))
    assert x.grad.tolist() == [2.0, 2.0, 2.0]


@needs_engine
@pytest.mark.parametrize("kind", KINDS)
def test_engine_broadcast_example(kind):
    x = make([1.0, 2.0, 3.0], Layout(Shape([1, 3]), Stride([1, 1])), kind)
    y = sw.broadcast_to(x, Shape([4, 3]))
    assert y.layout == Layout(Shape([4, 3]), Stride([0, 1])) and y.carrier is x.carrier
    r = sw.reduce_sum(y, "a b -> 1")
    assert r.tolist() == [24.0]
    r.backward()
    assert x.grad.tolist() == [4.0, 4.0, 4.0] and x.grad.layout == x.layout
    assert type(x.grad.carrier) is type(x.carrier)


@needs_engine
def test_engine_saved_version_check_mul():
    a, b = make([1.0, 2.0]), make([3.0, 4.0])
    c = sw.elementwise_mul(a, b)
    a[0] = 10.0
    with pytest.raises(RuntimeError, match="in-place"):
        c.backward(ones(2))
    assert a.grad is None and b.grad is None


@needs_engine
def test_engine_broadcast_aliasing_leaf():
    z = make([5.0, 7.0], Layout(Shape([4, 2]), Stride([0, 1])))
    s = sw.reduce_sum(z, "a b -> 1")
    assert s.tolist() == [48.0]
    s.backward()
    assert z.grad.layout == Layout(Shape([4, 2]), Stride([1, 4]))
    assert z.grad.tolist() == [4.0] * 8


@needs_engine
def test_engine_chain_against_numpy():
    rng = np.random.default_rng(3)
    av = rng.standard_normal(6).astype(np.float32)
    bv = rng.standard_normal(6).astype(np.float32)
    L = Layout(Shape([2, 3]), Stride([1, 2]))
    a, b = make(av, L), make(bv, L)
    s = sw.reduce_sum(sw.elementwise_mul(sw.add(a, b), a), "i j -> 1")
    s.backward()
    # d/da sum((a+b)*a) = 2a + b ; d/db = a
    assert np.allclose(logical(a.grad), 2 * av + bv, atol=1e-6)
    assert np.allclose(logical(b.grad), av, atol=1e-6)
