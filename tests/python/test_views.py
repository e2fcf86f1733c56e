"""Views: slice indexing, permute, reshape, broadcast_to (contract-core V-1, V-2, V-5..V-8)."""

import gc

import pytest

import strideweave as sw
from strideweave import CPU, DType, Generic, Layout, Shape, Stride, Tensor
from strideweave.friendly import scaled_int32, to_list


def L(shape, stride):
    return Layout(Shape(shape), Stride(stride))


def over(layout, offset=0, extra=0):
    """Int32 tensor whose slot i holds i: reading gives the scalar index."""
    n = offset + layout.cosize + extra
    return Tensor(Generic(list(range(n)), dtype=DType.Int32), offset, layout)


class Probe(sw.Carrier):
    """User carrier that refuses every value access and records attempts."""

    def __init__(self, dtype, n):
        super().__init__()
        self._dtype, self._n, self.calls = dtype, n, []

    def size(self):
        return self._n

    def dtype(self):
        return self._dtype

    def get_value(self, i):
        self.calls.append(("get", i))
        raise AssertionError("read")

    def set_value(self, i, v):
        self.calls.append(("set", i))
        raise AssertionError("write")


def probe_scaled():
    p0, p1 = Probe(DType.Int32, 4), Probe(DType.Float32, 1)
    t = Tensor._from_representation(
        DType.ScaledInt32,
        [(p0, 0, L([2, 2], [1, 2])), (p1, 0, L([1], [1]))],
        [L([2, 2], [0, 0])],
    )
    return t, p0, p1


ALL_VIEWS = [
    ("slice", lambda t: t[0:1, :]),
    ("permute", lambda t: sw.permute(t, 1, 0)),
    ("reshape", lambda t: sw.reshape(t, Shape(4))),
    ("broadcast_to", lambda t: sw.broadcast_to(t, Shape([2, 2]))),
]


# ---- V-1 -------------------------------------------------------------------


@pytest.mark.parametrize("name,view", ALL_VIEWS)
def test_v1_views_share_carriers_and_touch_nothing(name, view):
    p = Probe(DType.Float32, 4)
    t = Tensor(p, 0, L([2, 2], [1, 2]))
    v = view(t)
    assert isinstance(v, Tensor) and v is not t
    assert v.carrier is p and v.dtype() is DType.Float32
    assert p.calls == [] and p.version == 0


@pytest.mark.parametrize("name,view", ALL_VIEWS)
def test_v1_views_over_every_carrier_class(name, view):
    for carrier in (CPU(4), Generic([1.0, 2.0, 3.0, 4.0]), Probe(DType.Float32, 4)):
        v = view(Tensor(carrier, 0, L([2, 2], [1, 2])))
        assert v.carrier is carrier and v.carrier_type() is type(carrier)


@pytest.mark.parametrize("name,view", ALL_VIEWS)
def test_v1_views_copy_write_and_allocate_nothing(name, view):
    cpu = CPU(4)
    cpu[3] = 1.0
    t = Tensor(cpu, 0, L([2, 2], [1, 2]))
    gc.collect()
    live0 = sw._C._live_bytes()
    v = view(t)
    v.size()
    del v
    gc.collect()
    assert sw._C._live_bytes() == live0
    assert cpu.version == 1 and not cpu.is_released()


def test_v1_non_tensor_first_argument():
    for fn, args in (
        (sw.permute, (0,)),
        (sw.reshape, (Shape(1),)),
        (sw.broadcast_to, (Shape(1),)),
    ):
        with pytest.raises(TypeError, match="Tensor"):
            fn(L([1], [1]), *args)
        with pytest.raises(TypeError, match="Tensor"):
            fn(None, "bad second argument")
    with pytest.raises(TypeError):
        sw.permute()


def test_v1_result_validation_errors_propagate():
    cpu = CPU(4)
    t = Tensor(cpu, 0, L([2, 2], [1, 2]))
    cpu.release()  # size 0: the fresh representation fails T-5 (g)
    for _, view in ALL_VIEWS:
        with pytest.raises(ValueError, match="cosize"):
            view(t)


def test_v1_views_keep_the_dtype_and_carrier_objects():
    t = scaled_int32([[1, 2], [3, 4]], scale=0.5)
    for _, view in ALL_VIEWS:
        v = view(t)
        assert v.dtype() is DType.ScaledInt32
        assert [s[1] for s in v._subtensors] == [s[1] for s in t._subtensors]


# ---- V-2 -------------------------------------------------------------------


def test_v2_multi_subtensor_views_touch_only_l0_and_s0():
    t, p0, p1 = probe_scaled()
    for _, view in ALL_VIEWS:
        v = view(t)
        assert v._subtensors[1] == t._subtensors[1]
        assert v._subtensors[0][1] is p0 and v._subtensors[1][1] is p1
        assert len(v._adjacent_layouts) == 1
    assert p0.calls == [] and p1.calls == []


def test_v2_bad_result_representation_raises_t4_error():
    # ScaledInt32 with a scale plane of size 1 but view shapes whose S_0 would reach
    # beyond it cannot arise from the shipped views; a released level-1 carrier can.
    t = scaled_int32([[1, 2], [3, 4]])
    t._subtensors[1][1].release()
    with pytest.raises(ValueError, match="subtensor 1"):
        sw.permute(t, 1, 0)


# ---- V-5 slice indexing ----------------------------------------------------


def test_v5_contract_examples():
    layout = L([5, 10], [1, 5])
    t = over(layout, offset=3)
    v = t[2, 1:9]
    assert v.offset == 3 + 7 and v.layout == L([8], [5])
    v = t[(2, slice(1, 9, 2))]
    assert v.offset == 3 + 7 and v.layout == L([4], [10])
    v = t[2, 1:10:2]  # range(1, 10, 2): five indices, as in Python and NumPy
    assert v.offset == 3 + 7 and v.layout == L([5], [10])
    nested = over(L([10, [2, 3]], [1, [10, 20]]))
    v = nested[0, :]
    assert v.layout == L([[2, 3]], [[10, 20]])
    assert v.layout.shape == Shape([[2, 3]])


def test_v5_view_reads_the_selected_coordinates():
    layout = L([5, 10], [1, 5])
    t = over(layout)
    v = t[2, 1:9:2]
    assert to_list(v) == [t[2, j] for j in range(1, 9, 2)]


def test_v5_bare_slice_is_a_one_entry_tuple():
    t = over(L([5], [2]))
    v = t[1:3]
    assert v.offset == 2 and v.layout == L([2], [2])
    assert t[(slice(1, 3),)].layout == v.layout
    with pytest.raises(ValueError, match="rank"):
        over(L([2, 2], [1, 2]))[0:1]


def test_v5_python_slice_normalization():
    t = over(L([5], [1]))
    v = t[-2:]
    assert v.offset == 3 and v.layout == L([2], [1])
    v = t[0:100]
    assert v.offset == 0 and v.layout == L([5], [1])
    v = t[:4:2]
    assert v.layout == L([2], [2])
    v = t[::1]
    assert v.layout == L([5], [1])


def test_v5_leaf_slice_errors():
    t = over(L([5], [1]))
    with pytest.raises(TypeError, match="step"):
        t[0:4:1.0]
    with pytest.raises(TypeError, match="step"):
        t[0:4:True]
    with pytest.raises(ValueError, match="step"):
        t[0:4:0]
    with pytest.raises(ValueError, match="step"):
        t[4:0:-1]
    with pytest.raises(ValueError):
        t[3:3]
    with pytest.raises(ValueError):
        t[4:2]
    assert t[0:5:2].layout == L([3], [2])  # range(0, 5, 2), not an error
    with pytest.raises(ValueError):
        t[10:]
    with pytest.raises(TypeError):
        t[0.5:2]


def test_v5_integer_entries():
    t = over(L([5, 10], [1, 5]))
    v = t[4, :]
    assert v.offset == 4 and v.layout == L([10], [5])
    for bad in (-1, 5, 2**70):
        with pytest.raises(ValueError):
            t[bad, :]


def test_v5_nested_modes():
    layout = L([10, [2, 3]], [1, [10, 20]])
    t = over(layout)
    v = t[:, 4]  # M.index(4) = 0*10 + 2*20
    assert v.offset == 40 and v.layout == L([10], [1])
    assert to_list(v) == [t[i, 4] for i in range(10)]
    assert t[:, 0:6].layout == L([10, [2, 3]], [1, [10, 20]])
    assert t[:, ::1].layout == t.layout
    for key in ((slice(None), slice(0, 3)), (slice(None), slice(1, None)),
                (slice(None), slice(None, None, 2))):
        with pytest.raises(ValueError, match="nested"):
            t[key]
    with pytest.raises(ValueError):
        t[:, 6]
    with pytest.raises(ValueError):
        t[:, -1]


@pytest.mark.parametrize(
    "key",
    [
        [slice(None), 0],  # a list key
        [0, slice(None)],
        (0, (slice(None),)),  # slice nested deeper
        (slice(None), [0, slice(None)]),
    ],
)
def test_v5_key_forms_type_errors(key):
    t = over(L([10, [2, 3]], [1, [10, 20]]))
    with pytest.raises(TypeError):
        t[key]


def test_v5_entry_type_errors():
    t = over(L([5, 10], [1, 5]))
    for key in ((slice(None), 1.5), (slice(None), True), (slice(None), None), (slice(None), (0,))):
        with pytest.raises(TypeError):
            t[key]


def test_v5_entry_count_checked_before_entries():
    t = over(L([5, 10], [1, 5]))
    with pytest.raises(ValueError, match="rank"):
        t[slice(None), 1.5, 0]


def test_v5_multi_subtensor_contract_examples():
    t = scaled_int32([[1, 2], [3, 4]], scale=0.5)
    v = t[0:1, :]
    assert v.layout == L([1, 2], [1, 2])
    assert v._adjacent_layouts == (L([1, 2], [0, 0]),)
    with pytest.raises(NotImplementedError):
        t[1:2, :]


def test_v5_multi_subtensor_integers_and_offsets():
    t = scaled_int32([[1, 2], [3, 4]], scale=0.5)
    v = t[0, :]
    assert v.layout == L([2], [2]) and v._adjacent_layouts == (L([2], [0]),)
    assert [s[2] for s in v._subtensors] == [0, 0]
    with pytest.raises(NotImplementedError):
        t[1, :]
    with pytest.raises(NotImplementedError):
        t[:, 1:]
    v = t[::2, :]
    assert v.layout == L([1, 2], [2, 2]) and v._adjacent_layouts == (L([1, 2], [0, 0]),)


def test_v5_multi_subtensor_entry_checks_come_first():
    # V-5 step 2 per entry, left to right: an entry's own checks, then the
    # multi-subtensor rule for that entry, then the next entry.
    t = scaled_int32([[1, 2], [3, 4]])
    with pytest.raises(ValueError):
        t[0:1, 5]
    with pytest.raises(TypeError):
        t[0:1, 0.5]
    with pytest.raises(ValueError):
        t[2:3, 0]
    with pytest.raises(NotImplementedError):
        t[1:2, 5]
    with pytest.raises(ValueError, match="rank"):
        t[1:2]


# ---- V-6 permute -----------------------------------------------------------


def test_v6_contract_example():
    t = over(Layout.canonical(Shape([[2, 3], 4, 5])), offset=2)
    v = sw.permute(t, 1, 0, 2)
    assert v.layout.shape == Shape([4, [2, 3], 5])
    assert v.layout == L([4, [2, 3], 5], [6, [1, 2], 24])
    assert v.offset == 2


def test_v6_order_forms():
    t = over(L([2, 3, 4], [1, 2, 6]))
    a = sw.permute(t, 2, 0, 1)
    assert sw.permute(t, [2, 0, 1]).layout == a.layout
    assert sw.permute(t, (2, 0, 1)).layout == a.layout
    assert a.layout == L([4, 2, 3], [6, 1, 2])
    inverse = sw.permute(a, 1, 2, 0)
    assert inverse.layout == t.layout


def test_v6_reads_follow_the_permutation():
    t = over(L([2, 3], [1, 2]))
    v = sw.permute(t, 1, 0)
    assert all(v[j, i] == t[i, j] for i in range(2) for j in range(3))


def test_v6_errors():
    t = over(L([2, 3, 4], [1, 2, 6]))
    with pytest.raises(TypeError):
        sw.permute(t, 0, 1.0, 2)
    with pytest.raises(TypeError):
        sw.permute(t, 0, True, 2)
    with pytest.raises(TypeError):
        sw.permute(t, [0, "1", 2])
    with pytest.raises(TypeError):
        sw.permute(t, "012")
    with pytest.raises(TypeError):
        sw.permute(t, order=(0, 1, 2))
    with pytest.raises(ValueError):
        sw.permute(t, 0, 1)
    with pytest.raises(ValueError):
        sw.permute(t, [0, 1, 2, 3])
    with pytest.raises(ValueError):
        sw.permute(t, 0, 0, 1)
    with pytest.raises(ValueError):
        sw.permute(t, 0, 1, 3)
    with pytest.raises(ValueError):
        sw.permute(t, -1, 0, 1)
    with pytest.raises(ValueError):
        sw.permute(t, 0, 1, 2**70)


def test_v6_rank0_and_rank1():
    t = over(L([], []), offset=1)
    assert sw.permute(t).layout == t.layout
    assert sw.permute(t, ()).layout == t.layout
    with pytest.raises(ValueError):
        sw.permute(t, 0)
    r1 = over(L([3], [2]))
    assert sw.permute(r1, 0).layout == r1.layout


def test_v6_multi_subtensor_example():
    t = scaled_int32([[1, 2], [3, 4]])
    v = sw.permute(t, 1, 0)
    assert v.layout == L([2, 2], [2, 1])
    assert v._adjacent_layouts == (L([2, 2], [0, 0]),)


# ---- V-7 reshape -----------------------------------------------------------


def test_v7_contract_examples():
    t = over(L([2, 3], [2, 4]), offset=1)
    v = sw.reshape(t, Shape([3, [2]]))
    assert v.layout == L([3, [2]], [2, [6]]) and v.offset == 1
    for strides in ([3, 1], [1, 4]):
        with pytest.raises(ValueError, match=r"^reshape needs the tensor's elements evenly spaced in "
                                             r"first-mode-fastest order, and layout Layout\("):
            sw.reshape(over(L([2, 3], strides)), Shape(6))
    v = sw.reshape(over(L([2, 3], [0, 0])), Shape(6))
    assert v.layout == L([6], [0])


def test_v7_reads_keep_ordinal_order():
    t = over(L([2, 3], [1, 2]))
    v = sw.reshape(t, Shape([3, [1, 2]]))
    assert to_list(v) == to_list(t)


def test_v7_extent_one_leaves_are_ignored():
    t = over(L([1, 4, 1], [7, 3, 100]))
    v = sw.reshape(t, Shape(2, 2))
    assert v.layout == L([2, 2], [3, 6])
    t = over(L([1, 1], [5, 9]), offset=2)
    v = sw.reshape(t, Shape([[1]]))
    assert v.layout == L([[1]], [[1]]) and v.offset == 2  # k = 0: b = 1


def test_v7_errors():
    t = over(L([2, 3], [1, 2]))
    for bad in (L([6], [1]), Stride(6), (6,), 6):
        with pytest.raises(TypeError, match=r"^reshape expects a Shape, e\.g\. Shape\(4, 6\), not "
                                            + type(bad).__name__ + "$"):
            sw.reshape(t, bad)
    with pytest.raises(ValueError, match="^reshape to a shape of size 5 is impossible: the tensor has 6 elements$"):
        sw.reshape(t, Shape(5))
    with pytest.raises(TypeError, match="Tensor"):
        sw.reshape(None, Shape(5))
    with pytest.raises(ValueError, match="^reshape to a shape of size 7 is impossible"):
        sw.reshape(over(L([2, 3], [3, 1])), Shape(7))  # size before compatibility


def test_v7_multi_subtensor_example():
    t = scaled_int32([[1, 2], [3, 4]])
    v = sw.reshape(t, Shape(4))
    assert v.layout.stride == Stride([1])
    assert v._adjacent_layouts[0].stride == Stride([0])


# ---- V-8 broadcast_to ------------------------------------------------------


def test_v8_contract_example():
    t = over(L([2, 1], [1, 1]))
    v = sw.broadcast_to(t, Shape([2, 3]))
    assert v.layout == L([2, 3], [1, 0])
    assert v.layout.cosize == 2 and v.size() == 6
    assert to_list(v) == [0, 1, 0, 1, 0, 1]


def test_v8_nested_example():
    t = over(L([2, [1, 3]], [1, [2, 2]]))
    v = sw.broadcast_to(t, Shape([2, [4, 3]]))
    assert v.layout == L([2, [4, 3]], [1, [0, 2]])


def test_v8_errors():
    t = over(L([3], [1]))
    with pytest.raises(TypeError, match=r"^broadcast_to expects a Shape, e\.g\. Shape\(4, 6\), not tuple$"):
        sw.broadcast_to(t, (2, 3))
    with pytest.raises(TypeError, match=r"^broadcast_to expects a Shape, e\.g\. Shape\(4, 6\), not Layout$"):
        sw.broadcast_to(t, L([3], [1]))
    with pytest.raises(ValueError):
        sw.broadcast_to(t, Shape([2, 3]))  # profile differs
    with pytest.raises(ValueError):
        sw.broadcast_to(over(L([2], [1])), Shape(3))  # extent 2 is not 1


def test_v8_multi_subtensor():
    t = scaled_int32([[1], [2]])
    v = sw.broadcast_to(t, Shape([2, 3]))
    assert v.layout == L([2, 3], [1, 0])
    assert v._adjacent_layouts == (L([2, 3], [0, 0]),)
