"""Friendly CPU creation and access (contract-core F-1..F-5, V-10)."""

import gc
import math
import re
import struct
import sys

import pytest

import strideweave as sw
from strideweave import CPU, DType, Generic, Layout, Shape, Stride, Tensor
from strideweave.friendly import (
    arange,
    column_major,
    row_major,
    full,
    item,
    ones,
    scaled_int32,
    tensor,
    to_list,
    zeros,
)


def L(shape, stride):
    return Layout(Shape(shape), Stride(stride))


def exact(msg):
    return "^" + re.escape(msg) + "$"


def live():
    gc.collect()
    return sw._C._live_bytes()




# ---- G-1 ---------------------------------------------------------------------


def test_g1_friendly_names():
    import strideweave.friendly as f

    for name in ("tensor", "zeros", "ones", "full", "arange", "scaled_int32", "item", "to_list"):
        assert getattr(f, name) is getattr(sw._C, name)


# ---- F-1 ---------------------------------------------------------------------


FACTORIES = {
    "tensor": lambda dtype, one: tensor([one, one], dtype=dtype),
    "tensor_layout": lambda dtype, one: tensor([one, one], layout=L([2], [1]), dtype=dtype),
    "zeros": lambda dtype, one: zeros(2, dtype=dtype),
    "ones": lambda dtype, one: ones(2, dtype=dtype),
    "full": lambda dtype, one: full(2, value=one, dtype=dtype),
}
ONE = {DType.Float32: 1.0, DType.Int32: 1, DType.Bool: True}


@pytest.mark.parametrize("name", sorted(FACTORIES))
@pytest.mark.parametrize("dtype", [DType.Float32, DType.Int32, DType.Bool])
def test_f1_fresh_mutable_exact_cpu_storage(name, dtype):
    t = FACTORIES[name](dtype, ONE[dtype])
    assert type(t.carrier) is CPU and t.carrier_type() is CPU
    assert t.offset == 0 and t.is_mutable() is True and t.version == 0
    assert t.dtype() is dtype
    assert t.carrier.size() == t.layout.cosize
    u = FACTORIES[name](dtype, ONE[dtype])
    assert u.carrier is not t.carrier


def test_f1_default_dtype_is_float32():
    for t in (tensor([1.0]), zeros(1), ones(1), full(1, value=1), arange(1)):
        assert t.dtype() is DType.Float32


def test_f1_dtype_errors():
    for call in (
        lambda d: tensor([1.0], dtype=d),
        lambda d: zeros(2, dtype=d),
        lambda d: ones(2, dtype=d),
        lambda d: full(2, value=1, dtype=d),
        lambda d: arange(2, dtype=d),
    ):
        with pytest.raises(TypeError):
            call("Float32")
        with pytest.raises(TypeError):
            call(None)
        for bad in (DType.Float64, DType.Any, DType.Floating, DType.ScaledInt32, DType.Int8):
            with pytest.raises(ValueError):
                call(bad)


def test_f1_dtype_is_keyword_only():
    with pytest.raises(TypeError):
        tensor([1.0], None, DType.Float32)
    with pytest.raises(TypeError):
        arange(3, DType.Int32)
    # zeros/ones/full take extents positionally, so a positional DType is an extent
    with pytest.raises(ValueError, match=exact("extents must be positive integers")):
        zeros(2, DType.Int32)


@pytest.mark.parametrize("fn", [zeros, ones, lambda *e, **kw: full(*e, value=1.0, **kw)])
def test_f1_extent_checks_come_first(fn):
    with pytest.raises(ValueError, match=exact("at least one extent is required")):
        fn()
    with pytest.raises(ValueError, match=exact("at least one extent is required")):
        fn(dtype="not a dtype")
    for bad in ((0,), (2, -1), (2.0,), (True,), ("2",), (None,), ((2, 3),)):
        with pytest.raises(ValueError, match=exact("extents must be positive integers")):
            fn(*bad)
        with pytest.raises(ValueError, match=exact("extents must be positive integers")):
            fn(*bad, dtype="not a dtype")


def test_f1_extents_overflow():
    with pytest.raises(OverflowError):
        zeros(2**64)
    with pytest.raises(OverflowError):
        zeros(2**32, 2**32)


def test_f1_conversion_errors_leave_nothing():
    live0 = live()
    with pytest.raises(TypeError):
        tensor([1.0, "x"])
    with pytest.raises(TypeError):
        tensor([1, 2], dtype=DType.Bool)
    with pytest.raises(OverflowError):
        tensor([1, 2**31], dtype=DType.Int32)
    with pytest.raises(OverflowError):
        full(3, value=2**40, dtype=DType.Int32)
    with pytest.raises(TypeError):
        full(3, value=None)
    with pytest.raises(OverflowError):
        tensor([10**400])
    assert live() == live0


# ---- F-2 tensor ----------------------------------------------------------------


def test_f2_contract_example():
    t = tensor([[1.0, 2.0], [3.0, 4.0]])
    assert t.layout == Layout(Shape([2, 2]), Stride([1, 2]))
    assert t[1, 0] == 3.0 and t[0, 1] == 2.0
    assert to_list(t) == [1.0, 3.0, 2.0, 4.0]
    assert t.dtype() is DType.Float32


def test_f2_row_major_layout_example():
    t = tensor([1.0, 2.0, 3.0, 4.0], layout=row_major(2, 2))
    assert [t[0, 0], t[1, 0], t[0, 1], t[1, 1]] == [1.0, 2.0, 3.0, 4.0]
    assert t.layout == row_major(2, 2)


def test_f2_nested_values_land_at_coordinates():
    vals = [[[i + 10 * j + 100 * k for k in range(4)] for j in range(3)] for i in range(2)]
    t = tensor(vals, dtype=DType.Int32)
    assert t.layout == column_major(2, 3, 4) == Layout.canonical(Shape(2, 3, 4))
    assert all(t[i, j, k] == vals[i][j][k] for i in range(2) for j in range(3) for k in range(4))
    assert tensor((1, 2, 3), dtype=DType.Int32).layout == L([3], [1])
    assert tensor([(True,), (False,)], dtype=DType.Bool).layout == L([2, 1], [1, 2])


def test_f2_layout_holes_zero_and_values_by_ordinal():
    layout = L([2, 3], [1, 4])  # holes at 2, 3, 6, 7
    t = tensor(range(6), layout=layout, dtype=DType.Int32)
    cpu = t.carrier
    assert cpu.size() == 10
    assert [cpu[i] for i in range(10)] == [0, 1, 0, 0, 2, 3, 0, 0, 4, 5]
    assert to_list(t) == list(range(6))
    t = tensor([True] * 6, layout=layout, dtype=DType.Bool)
    assert [t.carrier[i] for i in (2, 3)] == [False, False]
    t = tensor([1.5] * 6, layout=layout)
    assert t.carrier[2] == 0.0


def test_f2_shared_slot_later_value_wins():
    t = tensor([1, 2, 3, 4, 5, 6], layout=L([2, 3], [1, 0]), dtype=DType.Int32)
    assert t.carrier.size() == 2
    assert [t.carrier[0], t.carrier[1]] == [5, 6]


def test_f2_layout_values_consumed_once_by_list():
    seen = []

    def gen():
        for i in range(3):
            seen.append(i)
            yield float(i)

    t = tensor(gen(), layout=L([3], [1]))
    assert seen == [0, 1, 2] and to_list(t) == [0.0, 1.0, 2.0]


def test_f2_layout_check_first_before_values():
    class Boom:
        def __iter__(self):
            raise AssertionError("values touched")

    for bad in (Shape(2), "layout", 3, Stride(1)):
        msg = exact("layout must be a Layout, e.g. Layout(Shape(4), Stride(1)), not "
                    + type(bad).__name__)
        with pytest.raises(TypeError, match=msg):
            tensor(Boom(), layout=bad)
        with pytest.raises(TypeError, match=msg):
            tensor(Boom(), layout=bad, dtype="bad dtype")


def test_f2_dtype_checked_before_values():
    class Boom:
        def __iter__(self):
            raise AssertionError("values touched")

    with pytest.raises(TypeError):
        tensor(Boom(), layout=L([1], [1]), dtype=1)
    with pytest.raises(ValueError):
        tensor(Boom(), dtype=DType.Float64)


def test_f2_with_layout_value_errors():
    with pytest.raises(TypeError):
        tensor(5, layout=L([1], [1]))

    def bad():
        yield 1.0
        raise KeyError("iter")

    with pytest.raises(KeyError):
        tensor(bad(), layout=L([2], [1]))
    def msg(n, size):
        return exact(f"got {n} value{'' if n == 1 else 's'} for a layout of size {size}; "
                     "give exactly one value per element")
    with pytest.raises(ValueError, match=msg(2, 3)):
        tensor([1.0, 2.0], layout=L([3], [1]))
    with pytest.raises(ValueError, match=msg(4, 3)):
        tensor([1.0] * 4, layout=L([3], [1]))
    with pytest.raises(ValueError, match=msg(0, 1)):
        tensor([], layout=L([1], [1]))
    with pytest.raises(ValueError, match=msg(1, 2)):
        tensor([1.0], layout=L([2], [1]))


def test_f2_rank0_layout():
    t = tensor([7.0], layout=L([], []))
    assert t.size() == 1 and item(t) == 7.0


def test_f2_without_layout_errors():
    nonempty = exact("values must be a non-empty list or tuple")
    for bad in ([], (), 5, "ab", range(3), iter([1.0]), None):
        with pytest.raises(ValueError, match=nonempty):
            tensor(bad)
    empty = exact("values must not contain empty levels")
    for bad in ([[]], [[], []], [[1.0], []], [[[]]], [([],)]):
        with pytest.raises(ValueError, match=empty):
            tensor(bad)
    rect = exact("values must be rectangular across every level")
    for bad in ([[1.0, 2.0], [3.0]], [[1.0], 2.0], [1.0, [2.0]], [[1.0, 2.0], [3.0, [4.0]]],
                [[[1.0]], [[1.0, 2.0]]]):
        with pytest.raises(ValueError, match=rect):
            tensor(bad)


def test_f2_structure_checked_before_conversion():
    with pytest.raises(ValueError, match="rectangular"):
        tensor([["x", 1.0], [2.0]])


def test_f2_self_referential_values_do_not_hang():
    a = [1.0]
    a[0] = a
    with pytest.raises(RecursionError):
        tensor(a)


def test_f2_float32_rounding():
    t = tensor([0.1, 1e39, -1e39])
    assert t[0] == struct.unpack("f", struct.pack("f", 0.1))[0]
    assert t[1] == math.inf and t[2] == -math.inf


# ---- F-3 zeros, ones, full -----------------------------------------------------


def test_f3_zeros_ones_full_values():
    assert zeros(2, 3).layout == column_major(2, 3) == Layout.canonical(Shape(2, 3))
    assert zeros(2, 3, 4).layout == column_major(2, 3, 4)
    assert to_list(zeros(2, 3)) == [0.0] * 6
    assert to_list(zeros(2, dtype=DType.Int32)) == [0, 0]
    assert to_list(zeros(2, dtype=DType.Bool)) == [False, False]
    assert to_list(ones(2, dtype=DType.Int32)) == [1, 1]
    assert to_list(ones(3)) == [1.0] * 3
    assert to_list(ones(1, 2, dtype=DType.Bool)) == [True, True]
    assert to_list(full(2, 2, value=2.5)) == [2.5] * 4
    assert to_list(full(3, value=-7, dtype=DType.Int32)) == [-7] * 3
    assert to_list(full(2, value=True, dtype=DType.Bool)) == [True, True]
    types = {type(v) for v in to_list(ones(2, dtype=DType.Int32))}
    assert types == {int}
    assert {type(v) for v in to_list(ones(2, dtype=DType.Bool))} == {bool}


def test_f3_full_requires_value_keyword():
    with pytest.raises(TypeError):
        full(2, 3)
    with pytest.raises(TypeError):
        full(2, valu=1.0)
    with pytest.raises(TypeError):
        zeros(2, value=1.0)


def test_f3_extents_are_integer_like():
    class Idx:
        def __index__(self):
            return 3

    assert zeros(Idx()).size() == 3


# ---- F-4 arange ----------------------------------------------------------------


def test_f4_arange():
    t = arange(4)
    assert to_list(t) == [0.0, 1.0, 2.0, 3.0]
    assert t.layout == column_major(4) and t.dtype() is DType.Float32
    t = arange(3, dtype=DType.Int32)
    assert to_list(t) == [0, 1, 2] and t.dtype() is DType.Int32
    assert to_list(arange(1)) == [0.0]
    assert arange(count=2).size() == 2


def test_f4_arange_errors():
    msg = exact("extents must be positive integers")
    for bad in (0, -1, 2.0, True, "3", None):
        with pytest.raises(ValueError, match=msg):
            arange(bad)
    with pytest.raises(ValueError, match="Bool"):
        arange(3, dtype=DType.Bool)
    with pytest.raises(ValueError, match=msg):
        arange(0, dtype=DType.Bool)  # count first
    with pytest.raises(TypeError):
        arange()
    with pytest.raises(TypeError):
        arange(2, 3)


# ---- F-5 scaled_int32 ------------------------------------------------------------


def test_f5_contract_example():
    t = scaled_int32([[1, 2], [3, 4]], scale=0.5)
    assert t.dtype() is DType.ScaledInt32
    assert t.size() == 4
    assert t.layout == Layout(Shape([2, 2]), Stride([1, 2]))
    assert t.carrier.dtype() is DType.Int32
    assert t.carrier_type() is CPU
    assert t._subtensors[1][2:] == (0, Layout(Shape([1]), Stride([1])))
    assert t._subtensors[1][1][0] == 0.5
    assert t._adjacent_layouts == (Layout(Shape([2, 2]), Stride([0, 0])),)
    with pytest.raises(NotImplementedError):
        t[0]
    with pytest.raises(NotImplementedError):
        t[0] = 1
    with pytest.raises(NotImplementedError):
        item(t)
    assert t.is_mutable() is False
    assert len(t._version_token()) == 2
    v = t[0:1, :]
    assert v.layout == Layout(Shape([1, 2]), Stride([1, 2]))
    assert v._adjacent_layouts[0] == Layout(Shape([1, 2]), Stride([0, 0]))
    with pytest.raises(NotImplementedError):
        t[1:2, :]
    r = sw.reshape(t, Shape(4))
    assert r.layout.stride == Stride([1]) and r._adjacent_layouts[0].stride == Stride([0])
    p = sw.permute(t, 1, 0)
    assert p.layout == Layout(Shape([2, 2]), Stride([2, 1]))


def test_f5_plane0_values_and_defaults():
    t = scaled_int32([[1, 2], [3, 4]])
    c0, c1 = t._subtensors[0][1], t._subtensors[1][1]
    assert [c0[i] for i in range(4)] == [1, 3, 2, 4]
    assert c1.size() == 1 and c1[0] == 1.0 and c1.dtype() is DType.Float32
    assert type(c1) is CPU


def test_f5_with_layout():
    t = scaled_int32([1, 2, 3, 4], layout=row_major(2, 2), scale=2)
    assert t.layout == row_major(2, 2)
    assert t._adjacent_layouts == (L([2, 2], [0, 0]),)
    assert t._subtensors[1][1][0] == 2.0


def test_f5_same_errors_as_tensor():
    with pytest.raises(TypeError, match=exact("layout must be a Layout, e.g. "
                                              "Layout(Shape(4), Stride(1)), not Shape")):
        scaled_int32([1], layout=Shape(1))
    with pytest.raises(ValueError, match="rectangular"):
        scaled_int32([[1, 2], [3]])
    with pytest.raises(TypeError):
        scaled_int32([1.5, 2])  # Int32 conversion
    with pytest.raises(TypeError):
        scaled_int32([1], scale="x")
    with pytest.raises(TypeError):
        scaled_int32([1], dtype=DType.Int32)  # no dtype keyword
    live0 = live()
    with pytest.raises(TypeError):
        scaled_int32([1, 2], scale=None)
    assert live() == live0


# ---- V-10 item / to_list -------------------------------------------------------


def test_v10_item():
    assert item(tensor([2.5])) == 2.5
    assert tensor([[7]], dtype=DType.Int32).item() == 7
    cpu = CPU(3, dtype=DType.Int32)
    cpu[2] = 9
    assert item(Tensor(cpu, 2, L([], []))) == 9
    assert Tensor(cpu, 2, L([1, [1]], [5, [6]])).item() == 9
    assert cpu.version == 1


def test_v10_item_errors():
    with pytest.raises(TypeError):
        item([1.0])
    with pytest.raises(TypeError):
        to_list([1.0])
    msg = exact("item requires a tensor with exactly one element, and this one has 2; "
                "use tolist() for several")
    with pytest.raises(ValueError, match=msg):
        item(zeros(2))
    with pytest.raises(ValueError, match=msg):
        zeros(2, 1).item()
    cpu = CPU(2)
    t = Tensor(cpu, 0, L([2], [1]))
    cpu.release()
    with pytest.raises(ValueError, match=msg):
        item(t)  # size check before any read
    with pytest.raises(RuntimeError):
        to_list(t)


def test_v10_item_read_after_release():
    cpu = CPU(1)
    t = Tensor(cpu, 0, L([1], [1]))
    cpu.release()
    with pytest.raises(RuntimeError):
        item(t)
    with pytest.raises(RuntimeError):
        t.tolist()


def test_v10_to_list_flat_ordinal_order():
    t = tensor([[1, 2, 3], [4, 5, 6]], dtype=DType.Int32)
    assert to_list(t) == t.tolist() == [1, 4, 2, 5, 3, 6]
    assert to_list(sw.permute(t, 1, 0)) == [1, 2, 3, 4, 5, 6]
    lst = to_list(t)
    lst.append(0)
    assert to_list(t) == [1, 4, 2, 5, 3, 6]  # a new list each time
    nested = Tensor(Generic(list(range(24)), dtype=DType.Int32), 0, L([2, [3, 4]], [1, [2, 6]]))
    assert to_list(nested) == list(range(24))
    r = Tensor(Generic(list(range(24)), dtype=DType.Int32), 0, L([2, [3, 4]], [12, [4, 1]]))
    assert to_list(r) == [r[k] for k in range(24)]


def test_v10_multi_subtensor():
    t = scaled_int32([1, 2])
    with pytest.raises(NotImplementedError, match=r"two planes and cannot be read with item\(\)"):
        item(t)
    with pytest.raises(NotImplementedError, match=r"cannot be converted with tolist\(\) or to_list\(\)"):
        to_list(t)
    single = scaled_int32([1])
    with pytest.raises(NotImplementedError):
        item(single)  # multi-subtensor check before the size check


def test_v10_no_carrier_or_version_change():
    t = tensor([1.0, 2.0])
    to_list(t)
    item(t[0:1])
    assert t.version == 0 and not t.carrier.is_released()


# ---- leaks -----------------------------------------------------------------------


def test_friendly_factories_do_not_leak():
    for _ in range(200):
        tensor([[1.0, 2.0], [3.0, 4.0]])
        scaled_int32([[1, 2], [3, 4]])
    live0 = live()
    dt = DType.Int32
    rc = sys.getrefcount(dt)
    for _ in range(20_000):
        t = tensor([[1, 2], [3, 4]], dtype=dt)
        to_list(t)
        s = scaled_int32([[1, 2], [3, 4]], scale=0.5)
        a = arange(8, dtype=dt)
        f = full(2, 2, value=3, dtype=dt)
        o = ones(2, dtype=dt)
        del t, s, a, f, o
    assert live() == live0
    assert sys.getrefcount(dt) == rc
