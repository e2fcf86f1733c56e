"""Tensor representation, construction and element access (contract-core T-1..T-14, V-3, V-4)."""

import gc
import sys
import tracemalloc
import weakref

import pytest

import strideweave as sw
from strideweave import CPU, DType, Generic, Layout, Shape, Stride, Tensor
from moves_for_tests import BIG, held


def L(shape, stride):
    return Layout(Shape(shape), Stride(stride))


def int_carrier(n):
    """Generic Int32 carrier whose slot i holds i, so t[key] reads back the scalar index."""
    return Generic(list(range(n)), dtype=DType.Int32)


class Probe(sw.Carrier):
    """User carrier that records (and refuses) every value access."""

    def __init__(self, dtype, n, mutable=True):
        super().__init__()
        self._dtype = dtype
        self._n = n
        self._mutable = mutable
        self.calls = []

    def size(self):
        return self._n

    def dtype(self):
        return self._dtype

    def get_value(self, index):
        self.calls.append(("get", index))
        raise AssertionError("value read")

    def set_value(self, index, value):
        self.calls.append(("set", index))
        raise AssertionError("value write")

    def _is_mutable(self):
        self.calls.append("is_mutable")
        return self._mutable


class Fixed(sw.Carrier):
    """User carrier with a configurable dtype() and size()."""

    def __init__(self, dtype, size):
        super().__init__()
        self._dtype = dtype
        self._size = size

    def size(self):
        if isinstance(self._size, BaseException):
            raise self._size
        return self._size

    def dtype(self):
        if isinstance(self._dtype, BaseException):
            raise self._dtype
        return self._dtype

    def get_value(self, index):
        return 0


def scaled_parts(n0=4, n1=1, cls=CPU):
    c0 = cls(n0, dtype=DType.Int32) if cls is CPU else cls(DType.Int32, n0)
    c1 = cls(n1, dtype=DType.Float32) if cls is CPU else cls(DType.Float32, n1)
    return c0, c1


def scaled(cls=CPU):
    c0, c1 = scaled_parts(cls=cls)
    return Tensor._from_representation(
        DType.ScaledInt32,
        [(c0, 0, L([2, 2], [1, 2])), (c1, 0, L([1], [1]))],
        [L([2, 2], [0, 0])],
    )


# ---- T-1 -------------------------------------------------------------------


def test_t1_builds_one_subtensor_tensor():
    cpu = CPU(10)
    layout = L([2, 3], [1, 2])
    t = Tensor(cpu, 4, layout)
    assert t.carrier is cpu
    assert t.offset == 4 and type(t.offset) is int
    assert t.layout is layout
    assert t.dtype() is DType.Float32
    assert t._adjacent_layouts == ()
    assert t._subtensors == ((DType.Float32, cpu, 4, layout),)


def test_t1_keywords_and_integer_like_offset():
    class Idx:
        def __index__(self):
            return 2

    cpu = CPU(10)
    t = Tensor(carrier=cpu, offset=Idx(), layout=L([3], [1]))
    assert t.offset == 2


@pytest.mark.parametrize("carrier", [object(), None, 5, [1.0]])
def test_t1_step1_carrier_not_a_carrier(carrier):
    with pytest.raises(TypeError, match="carrier"):
        Tensor(carrier, 0, L([1], [1]))


def test_t1_step1_checked_before_offset_and_layout():
    with pytest.raises(TypeError, match="carrier"):
        Tensor(object(), 1.5, None)


@pytest.mark.parametrize("offset", [1.0, True, False, "0", None])
def test_t1_step2_offset_not_integer(offset):
    with pytest.raises(TypeError, match="offset"):
        Tensor(CPU(4), offset, L([1], [1]))


def test_t1_step2_checked_before_layout():
    with pytest.raises(TypeError, match="offset"):
        Tensor(CPU(4), 1.5, None)


@pytest.mark.parametrize("layout", [None, Shape(2), Stride(1), (2, 1)])
def test_t1_step3_layout_not_layout(layout):
    with pytest.raises(TypeError, match="layout"):
        Tensor(CPU(4), 0, layout)


@pytest.mark.parametrize("dtype", [DType.Integer, DType.ScaledInt32])
def test_t1_step4_no_one_entry_schema(dtype):
    with pytest.raises(ValueError, match=f"^a carrier of dtype {dtype.name} cannot hold a Tensor's "
                                         "values directly"):
        Tensor(Fixed(dtype, 4), 0, L([1], [1]))


def test_t1_step4_checked_before_offset_sign():
    with pytest.raises(ValueError, match="^a carrier of dtype Integer cannot hold a Tensor's values"):
        Tensor(Fixed(DType.Integer, 4), -1, L([1], [1]))


def test_t1_step5_negative_offset():
    with pytest.raises(ValueError, match="offset"):
        Tensor(CPU(4), -1, L([1], [1]))
    with pytest.raises(ValueError, match="offset"):
        Tensor(CPU(4), -(2**80), L([1], [1]))


def test_t1_step5_checked_before_carrier_size():
    with pytest.raises(ValueError, match="offset must be >= 0"):
        Tensor(Fixed(DType.Float32, -1), -1, L([1], [1]))


def test_t1_step6_negative_carrier_size():
    with pytest.raises(ValueError, match="size"):
        Tensor(Fixed(DType.Float32, -1), 0, L([1], [1]))


def test_t1_step7_placement_beyond_carrier():
    cpu = CPU(10)
    Tensor(cpu, 0, L([2, 3], [1, 4]))  # cosize 10 fits exactly
    Tensor(cpu, 9, L([3], [0]))  # broadcast: cosize 1
    with pytest.raises(ValueError, match="cosize"):
        Tensor(cpu, 1, L([2, 3], [1, 4]))
    with pytest.raises(ValueError, match="cosize"):
        Tensor(cpu, 10, L([], []))


def test_t1_oversized_offset_is_a_domain_error():
    with pytest.raises(ValueError):
        Tensor(CPU(4), 2**63, L([1], [1]))
    with pytest.raises(ValueError):
        Tensor(CPU(4), 2**100, L([1], [1]))


def test_t1_carrier_exceptions_propagate():
    with pytest.raises(ZeroDivisionError):
        Tensor(Fixed(ZeroDivisionError("d"), 4), 0, L([1], [1]))
    with pytest.raises(KeyError):
        Tensor(Fixed(DType.Float32, KeyError("s")), 0, L([1], [1]))


def test_t1_released_carrier_fails_only_by_step7():
    cpu = CPU(4)
    cpu.release()
    with pytest.raises(ValueError, match="cosize"):
        Tensor(cpu, 0, L([1], [1]))


def test_t1_reads_no_value():
    p = Probe(DType.Float32, 6)
    t = Tensor(p, 0, L([2, 3], [1, 2]))
    assert p.calls == []
    assert t.size() == 6


def test_t1_opaque_storage_dtype():
    t = Tensor(Fixed(DType.Any, 3), 0, L([3], [1]))
    assert t.dtype() is DType.Any
    assert t._subtensors[0][0] is DType.Any
    t = Tensor(Fixed(DType.Floating, 3), 0, L([3], [1]))
    assert t.dtype() is DType.Floating
    assert not t.is_differentiable()


# ---- T-3 -------------------------------------------------------------------


def test_t3_properties():
    cpu = CPU(8, dtype=DType.Int32)
    layout = L([2, [2, 2]], [1, [2, 4]])
    t = Tensor(cpu, 0, layout)
    assert t.carrier is cpu
    assert t.offset == 0
    assert t.layout == layout
    assert t.dtype() is DType.Int32
    assert t.size() == 8
    assert t.carrier_type() is CPU
    assert t.version == 0
    assert t.is_mutable() is True
    assert t.is_differentiable() is False


def test_t3_is_differentiable_only_float32():
    assert Tensor(CPU(1), 0, L([1], [1])).is_differentiable() is True
    assert Tensor(CPU(1, dtype=DType.Bool), 0, L([1], [1])).is_differentiable() is False
    assert scaled().is_differentiable() is False


def test_t3_carrier_type_for_user_class():
    p = Probe(DType.Float32, 2)
    assert Tensor(p, 0, L([2], [1])).carrier_type() is Probe


def test_t3_properties_are_read_only():
    t = Tensor(CPU(2), 0, L([2], [1]))
    for name in ("carrier", "offset", "layout", "version", "_subtensors", "_adjacent_layouts"):
        with pytest.raises(AttributeError):
            setattr(t, name, None)


# ---- T-4 .. T-7 ------------------------------------------------------------


def test_t4_one_triple_equals_t1():
    cpu = CPU(6)
    layout = L([2, 3], [1, 2])
    t = Tensor._from_representation(DType.Float32, [(cpu, 0, layout)])
    assert t.carrier is cpu and t.offset == 0 and t.layout is layout
    assert t.dtype() is DType.Float32 and t._adjacent_layouts == ()
    t = Tensor._from_representation(DType.Float32, iter([(cpu, 1, L([5], [1]))]), ())
    assert t.offset == 1


def test_t4_builds_compound_tensor():
    t = scaled()
    assert t.dtype() is DType.ScaledInt32
    assert t.size() == 4
    assert t.carrier.dtype() is DType.Int32
    assert len(t._subtensors) == 2
    assert t._subtensors[0][0] is DType.Int32
    assert t._subtensors[1][0] is DType.Float32
    assert t._adjacent_layouts == (L([2, 2], [0, 0]),)


def test_t4_step1_type_errors():
    cpu = CPU(1)
    with pytest.raises(TypeError, match="logical_dtype"):
        Tensor._from_representation("Float32", [(cpu, 0, L([1], [1]))])
    with pytest.raises(TypeError):
        Tensor._from_representation(DType.Float32, 5)
    with pytest.raises(TypeError):
        Tensor._from_representation(DType.Float32, [(cpu, 0, L([1], [1]))], 5)
    with pytest.raises(TypeError, match="3-tuple"):
        Tensor._from_representation(DType.Float32, [[cpu, 0, L([1], [1])]])
    with pytest.raises(TypeError, match="3-tuple"):
        Tensor._from_representation(DType.Float32, [(cpu, 0)])
    # step 1 runs before step 2
    with pytest.raises(TypeError, match="3-tuple"):
        Tensor._from_representation(DType.Integer, [1])


def test_t4_iterable_exceptions_propagate():
    def boom():
        yield (CPU(1), 0, L([1], [1]))
        raise KeyError("boom")

    with pytest.raises(KeyError):
        Tensor._from_representation(DType.Float32, boom())


def test_t4_step2_no_storage_schema():
    with pytest.raises(ValueError, match="storage schema"):
        Tensor._from_representation(DType.Integer, [(CPU(1), 0, L([1], [1]))])


def test_t4_step3_counts():
    c0, c1 = scaled_parts()
    with pytest.raises(ValueError, match="subtensors"):
        Tensor._from_representation(DType.ScaledInt32, [(c0, 0, L([4], [1]))])
    with pytest.raises(ValueError, match="subtensors"):
        Tensor._from_representation(
            DType.Float32, [(CPU(1), 0, L([1], [1])), (CPU(1), 0, L([1], [1]))]
        )
    with pytest.raises(ValueError, match="adjacent"):
        Tensor._from_representation(
            DType.ScaledInt32, [(c0, 0, L([4], [1])), (c1, 0, L([1], [1]))]
        )
    with pytest.raises(ValueError, match="adjacent"):
        Tensor._from_representation(DType.Float32, [(CPU(1), 0, L([1], [1]))], [L([1], [1])])


def _scaled_with(level0=None, level1=None, adjacent=None):
    c0, c1 = scaled_parts()
    s0 = level0 if level0 is not None else (c0, 0, L([4], [1]))
    s1 = level1 if level1 is not None else (c1, 0, L([1], [1]))
    adj = adjacent if adjacent is not None else [L([4], [0])]
    return Tensor._from_representation(DType.ScaledInt32, [s0, s1], adj)


def test_t5_valid_baseline():
    assert _scaled_with().size() == 4


@pytest.mark.parametrize("level", [0, 1])
def test_t5_each_check_names_its_level(level):
    c0, c1 = scaled_parts()
    carrier = c0 if level == 0 else c1
    good = (carrier, 0, L([4], [1]) if level == 0 else L([1], [1]))
    cases = [
        ((object(), 0, good[2]), TypeError, "carrier"),  # (a)
        ((c1 if level == 0 else c0, 0, good[2]), ValueError, "dtype"),  # (b)
        ((carrier, 0.0, good[2]), TypeError, "offset"),  # (c)
        ((carrier, True, good[2]), TypeError, "offset"),  # (c) bool
        ((carrier, -1, good[2]), ValueError, "offset"),  # (d)
        ((carrier, 0, Shape(4)), TypeError, "layout"),  # (e)
        ((carrier, 1, good[2]), ValueError, "cosize"),  # (g)
    ]
    for entry, exc, word in cases:
        kwargs = {"level0": entry} if level == 0 else {"level1": entry}
        with pytest.raises(exc, match=rf"subtensor {level}: .*{word}"):
            _scaled_with(**kwargs)


def test_t5_f_negative_size():
    c0, _ = scaled_parts()
    bad = Fixed(DType.Float32, -1)
    with pytest.raises(ValueError, match="size"):
        Tensor._from_representation(DType.Float32, [(bad, 0, L([1], [1]))])


def test_t5_checks_run_in_order_within_a_level():
    c0, c1 = scaled_parts()
    # (b) before (c): wrong dtype and bad offset -> ValueError about dtype
    with pytest.raises(ValueError, match="dtype"):
        _scaled_with(level0=(c1, "x", L([4], [1])))
    # (c) before (e)
    with pytest.raises(TypeError, match="offset"):
        _scaled_with(level0=(c0, "x", None))
    # (d) before (e)
    with pytest.raises(ValueError, match="offset"):
        _scaled_with(level0=(c0, -1, None))
    # (e) before (g)
    with pytest.raises(TypeError, match="layout"):
        _scaled_with(level0=(c0, 100, None))


def test_t5_levels_checked_in_ascending_order():
    c0, c1 = scaled_parts()
    with pytest.raises(TypeError, match="subtensor 0"):
        _scaled_with(level0=(object(), 0, None), level1=(object(), 0, None))


def test_t5_h_carrier_class_must_match_level0():
    c0 = CPU(4, dtype=DType.Int32)
    g1 = Generic([1.0])
    with pytest.raises(TypeError, match="subtensor 1: carrier class"):
        _scaled_with(level0=(c0, 0, L([4], [1])), level1=(g1, 0, L([1], [1])))


def test_t5_h_a_subclass_is_a_different_class():
    class Sub(Probe):
        pass

    p0 = Probe(DType.Int32, 4)
    p1 = Sub(DType.Float32, 1)
    with pytest.raises(TypeError, match="subtensor 1: carrier class"):
        _scaled_with(level0=(p0, 0, L([4], [1])), level1=(p1, 0, L([1], [1])))
    # same user class on both planes is fine
    p1 = Probe(DType.Float32, 1)
    t = _scaled_with(level0=(p0, 0, L([4], [1])), level1=(p1, 0, L([1], [1])))
    assert t.carrier_type() is Probe


def test_t6_adjacent_layout_checks():
    with pytest.raises(TypeError, match="adjacent layout 0"):
        _scaled_with(adjacent=[Shape(4)])
    with pytest.raises(ValueError, match="adjacent layout 0: shape"):
        _scaled_with(adjacent=[L([2, 2], [0, 0])])
    with pytest.raises(ValueError, match="adjacent layout 0: cosize"):
        _scaled_with(adjacent=[L([4], [1])])  # reaches index 3, level 1 has size 1


def test_t6_adjacent_index_read_as_ordinal_of_next_level():
    c0 = CPU(4, dtype=DType.Int32)
    c1 = CPU(2)
    # level 1 size 2 (two scales) but ScaledInt32 demands size 1: T-6 passes, T-7 fails
    with pytest.raises(ValueError, match="ScaledInt32"):
        Tensor._from_representation(
            DType.ScaledInt32,
            [(c0, 0, L([4], [1])), (c1, 0, L([2], [1]))],
            [L([4], [0])],
        )


def test_t7_runs_only_after_t6():
    c0 = CPU(4, dtype=DType.Int32)
    c1 = CPU(2)
    with pytest.raises(ValueError, match="adjacent layout 0: shape"):
        Tensor._from_representation(
            DType.ScaledInt32,
            [(c0, 0, L([4], [1])), (c1, 0, L([2], [1]))],
            [L([2, 2], [0, 0])],
        )


def test_t7_scale_plane_may_have_holes_but_size_one():
    c0 = CPU(4, dtype=DType.Int32)
    c1 = CPU(3)
    t = Tensor._from_representation(
        DType.ScaledInt32,
        [(c0, 0, L([4], [1])), (c1, 2, L([[1]], [[5]]))],
        [L([4], [0])],
    )
    assert t._subtensors[1][2] == 2


# ---- T-8 .. T-12 -----------------------------------------------------------


def test_t8_strong_references_and_no_release_on_discard():
    cpu = CPU(3)
    ref = weakref.ref(cpu)
    t = Tensor(cpu, 0, L([3], [1]))
    u = Tensor(cpu, 1, L([2], [1]))  # shared with another tensor
    del cpu
    gc.collect()
    assert ref() is not None
    del t, u
    gc.collect()
    assert ref() is None


def test_t8_discarding_does_not_release():
    cpu = CPU(3)
    t = Tensor(cpu, 0, L([3], [1]))
    del t
    gc.collect()
    assert not cpu.is_released()
    cpu[0] = 1.0


def test_t9_version_follows_carrier():
    cpu = CPU(3)
    t = Tensor(cpu, 0, L([3], [1]))
    assert t.version == 0
    cpu[1] = 2.0
    assert t.version == cpu.version == 1
    t[2] = 3.0
    assert t.version == cpu.version == 2


def test_t9_version_token():
    cpu = CPU(3)
    t = Tensor(cpu, 0, L([3], [1]))
    tok = t._version_token()
    assert tok == ((id(cpu), 0),)
    assert Tensor(cpu, 1, L([2], [1]))._version_token() == tok
    cpu[0] = 1.0
    assert t._version_token() == ((id(cpu), 1),) != tok
    s = scaled()
    c0, c1 = s._subtensors[0][1], s._subtensors[1][1]
    assert s._version_token() == ((id(c0), 0), (id(c1), 0))


def test_t9_version_token_lists_distinct_carriers_once():
    p0 = Probe(DType.Int32, 4)
    p1 = Probe(DType.Float32, 1)
    t = _scaled_with(level0=(p0, 0, L([4], [1])), level1=(p1, 0, L([1], [1])))
    assert [c for c, _ in t._version_token()] == [id(p0), id(p1)]


def test_t10_mutability():
    assert Tensor(CPU(1), 0, L([1], [1])).is_mutable() is True
    assert Tensor(CPU(1, mutable=False), 0, L([1], [1])).is_mutable() is False
    cpu = CPU(1)
    t = Tensor(cpu, 0, L([1], [1]))
    cpu.release()
    assert t.is_mutable() is cpu.is_mutable()


def test_t10_multi_subtensor_is_not_mutable_without_asking():
    p0 = Probe(DType.Int32, 4)
    p1 = Probe(DType.Float32, 1)
    t = _scaled_with(level0=(p0, 0, L([4], [1])), level1=(p1, 0, L([1], [1])))
    assert t.is_mutable() is False
    assert p0.calls == [] and p1.calls == []


def test_t11_multi_subtensor_boundary_touches_no_carrier():
    p0 = Probe(DType.Int32, 4)
    p1 = Probe(DType.Float32, 1)
    t = _scaled_with(level0=(p0, 0, L([4], [1])), level1=(p1, 0, L([1], [1])))
    with pytest.raises(NotImplementedError, match="ScaledInt32 tensor has two planes and cannot be read element by element"):
        t[0]
    with pytest.raises(NotImplementedError, match="cannot be read element by element"):
        t["not a key"]  # the multi-subtensor check comes first
    with pytest.raises(NotImplementedError, match="ScaledInt32 tensor has two planes and cannot be written element by element"):
        t[0] = 1
    with pytest.raises(NotImplementedError, match="cannot be written element by element"):
        t[0:1] = 1
    with pytest.raises(NotImplementedError, match=r"two planes and cannot be read with item\(\)"):
        t.item()
    with pytest.raises(NotImplementedError, match=r"two planes and cannot be converted with tolist\(\) or to_list\(\)"):
        t.tolist()
    assert p0.calls == [] and p1.calls == []
    assert t.version == 0


def test_t11_queries_work_on_multi_subtensor():
    t = scaled()
    assert t.size() == 4 and t.dtype() is DType.ScaledInt32
    assert t.carrier_type() is CPU
    assert "ScaledInt32" in repr(t)


def test_t12_plane_accessors():
    t = scaled()
    subs = t._subtensors
    assert isinstance(subs, tuple) and len(subs) == 2
    assert subs[0][0] is DType.Int32 and subs[0][2:] == (0, L([2, 2], [1, 2]))
    assert subs[1][0] is DType.Float32 and subs[1][2:] == (0, L([1], [1]))
    assert subs[0][1] is t.carrier
    assert isinstance(t._adjacent_layouts, tuple)


# ---- T-14 ------------------------------------------------------------------


def test_t14_repr_survives_refusing_hooks_and_release():
    p = Probe(DType.Float32, 6)
    layout = L([2, 3], [1, 2])
    t = Tensor(p, 0, layout)
    r = repr(t)  # the hook refuses: a marker, never an exception
    assert "Float32" in r and "Probe" in r and "offset=0" in r and repr(layout) in r
    assert "<values unavailable: value read>" in r
    assert all(call[0] == "get" for call in p.calls if call != "is_mutable")
    cpu = CPU(6)
    t = Tensor(cpu, 2, L([4], [1]))
    cpu.release()
    r = repr(t)
    assert "CPU" in r and "offset=2" in r and repr(L([4], [1])) in r and "released" in r


def test_t14_no_len_not_iterable():
    t = Tensor(CPU(3), 0, L([3], [1]))
    with pytest.raises(TypeError):
        len(t)
    with pytest.raises(TypeError):
        iter(t)
    with pytest.raises(TypeError):
        list(t)
    with pytest.raises(TypeError):
        for _ in t:
            pass


def test_t14_identity_equality_and_hash():
    cpu = CPU(3)
    a = Tensor(cpu, 0, L([3], [1]))
    b = Tensor(cpu, 0, L([3], [1]))
    assert a == a and not (a == b) and a != b
    assert hash(a) == hash(a)
    assert {a: 1}[a] == 1 and b not in {a: 1}


def test_t14_weak_references():
    t = Tensor(CPU(3), 0, L([3], [1]))
    r = weakref.ref(t)
    assert r() is t
    del t
    gc.collect()
    assert r() is None


def test_tensor_participates_in_gc_cycles():
    class Holder(sw.Carrier):
        def __init__(self):
            super().__init__()

        def size(self):
            return 4

        def dtype(self):
            return DType.Float32

        def get_value(self, i):
            return 0.0

    h = Holder()
    t = Tensor(h, 0, L([4], [1]))
    h.tensor = t  # cycle: carrier -> tensor -> carrier
    r = weakref.ref(t)
    del h, t
    gc.collect()
    assert r() is None


def test_tensor_type_is_final():
    with pytest.raises(TypeError):

        class Sub(Tensor):  # noqa: F841
            pass


# ---- V-3 element read ------------------------------------------------------


def test_v3_read_first_mode_fastest():
    t = Tensor(int_carrier(6), 0, L([2, 3], [1, 2]))
    assert [t[i] for i in range(6)] == [0, 1, 2, 3, 4, 5]
    t = Tensor(int_carrier(6), 0, L([2, 3], [3, 1]))  # row-major
    assert [t[i] for i in range(6)] == [0, 3, 1, 4, 2, 5]


def test_v3_l9_examples():
    a = L([2, [3, 4]], [1, [10, 100]])
    t = Tensor(int_carrier(a.cosize), 0, a)
    assert t[1, [2, 3]] == t[[1, [2, 3]]] == t[(1, (2, 3))] == 321
    assert t[1, 11] == 321
    assert t[23] == 321
    b = L([3, 4], [2, 10])
    t = Tensor(int_carrier(b.cosize + 5), 5, b)
    assert t[5] == 5 + 14
    assert t[0, 0] == t[(0, 0)] == 5
    r0 = Tensor(int_carrier(3), 2, L([], []))
    assert r0[0] == r0[[]] == r0[()] == 2


def test_v3_negative_and_out_of_range_are_value_errors():
    t = Tensor(int_carrier(12), 0, L([3, 4], [1, 3]))
    for key in (-1, 12, 2**70, (3, 0), (0, -1), [0, 4]):
        with pytest.raises(ValueError):
            t[key]


@pytest.mark.parametrize("key", [True, 1.0, "0", None, (0, 1.5), (True, 0), [0, [None]]])
def test_v3_key_type_errors(key):
    t = Tensor(int_carrier(12), 0, L([3, 4], [1, 3]))
    with pytest.raises(TypeError):
        t[key]


def test_v3_type_check_precedes_range_check():
    t = Tensor(int_carrier(12), 0, L([3, 4], [1, 3]))
    with pytest.raises(TypeError):
        t[99, True]


def test_v3_structure_errors():
    t = Tensor(int_carrier(24), 0, L([2, [3, 4]], [1, [2, 6]]))
    with pytest.raises(ValueError):
        t[[0, 1], [0, 0]]  # list where a leaf needs an integer
    with pytest.raises(ValueError):
        t[0, [0, 0], 0]  # extra component
    with pytest.raises(ValueError):
        t[(0,)]  # missing component
    with pytest.raises(ValueError):
        t[0, [0]]  # nested: missing
    with pytest.raises(ValueError):
        t[0, 12]  # nested integer out of its size
    assert t[1, 11] == 1 + 2 * 2 + 6 * 3


def test_v3_read_after_release_propagates_carrier_error():
    cpu = CPU(3)
    t = Tensor(cpu, 0, L([3], [1]))
    cpu.release()
    with pytest.raises(RuntimeError, match="released"):
        t[0]


def test_v3_reads_values_through_user_carrier():
    class Seq(sw.Carrier):
        def size(self):
            return 10

        def dtype(self):
            return DType.Int32

        def get_value(self, i):
            return i * 100

    t = Tensor(Seq(), 3, L([2], [2]))
    assert t[0] == 300 and t[1] == 500


# ---- V-4 element write -----------------------------------------------------


def test_v4_write_goes_to_carrier_and_bumps_version():
    cpu = CPU(10, dtype=DType.Int32)
    t = Tensor(cpu, 1, L([3, 3], [1, 3]))
    t[2, 1] = 7
    assert cpu[1 + 2 + 3] == 7
    assert cpu.version == 1
    t[4] = 9
    assert cpu[1 + 1 + 3] == 9 and cpu.version == 2


def test_v4_stride0_alias_writes_shared_slot():
    cpu = CPU(2)
    t = Tensor(cpu, 0, L([2, 3], [1, 0]))
    t[1, 2] = 5.0
    assert cpu[1] == 5.0
    assert [t[1, j] for j in range(3)] == [5.0, 5.0, 5.0]


def test_v4_key_errors():
    t = Tensor(CPU(6), 0, L([2, 3], [1, 2]))
    with pytest.raises(TypeError, match="slice"):
        t[0:1] = 1.0
    with pytest.raises(TypeError, match="slice"):
        t[0, 0:1] = 1.0
    with pytest.raises(TypeError):
        t[0.5] = 1.0
    with pytest.raises(TypeError):
        t[True] = 1.0
    with pytest.raises(ValueError):
        t[-1] = 1.0
    with pytest.raises(ValueError):
        t[2, 0] = 1.0
    assert t.version == 0


def test_v4_carrier_rules_apply():
    cpu = CPU(3, mutable=False)
    t = Tensor(cpu, 0, L([3], [1]))
    with pytest.raises(RuntimeError):
        t[0] = 1.0
    cpu = CPU(3, dtype=DType.Int32)
    t = Tensor(cpu, 0, L([3], [1]))
    with pytest.raises(TypeError):
        t[0] = "x"
    with pytest.raises(OverflowError):
        t[0] = 2**31
    assert cpu.version == 0
    cpu.release()
    with pytest.raises(RuntimeError):
        t[0] = 1


def test_v4_delete_is_a_type_error():
    t = Tensor(CPU(3), 0, L([3], [1]))
    with pytest.raises(TypeError):
        del t[0]


# ---- leaks -----------------------------------------------------------------


def test_no_leak_creating_and_dropping_100k_tensors():
    cpu = CPU(16)
    layout = L([4, 4], [1, 4])
    for _ in range(1000):  # warm caches
        Tensor(cpu, 0, layout)
        sw.friendly.zeros(2, 2)
    gc.collect()
    live0 = sw._C._live_bytes()
    rc_cpu, rc_layout = sys.getrefcount(cpu), sys.getrefcount(layout)
    tracemalloc.start()
    snap0 = tracemalloc.take_snapshot()
    for _ in range(100_000):
        t = Tensor(cpu, 0, layout)
        t.size()
        z = sw.friendly.zeros(2, 2)
        del t, z
    gc.collect()
    snap1 = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(s.size_diff for s in snap1.compare_to(snap0, "filename"))
    assert grown < 64 * 1024
    assert sw._C._live_bytes() == live0
    assert sys.getrefcount(cpu) == rc_cpu
    assert sys.getrefcount(layout) == rc_layout


def test_no_leak_on_failed_construction():
    cpu = CPU(4)
    layout = L([8], [1])
    gc.collect()
    live0 = sw._C._live_bytes()
    rc = sys.getrefcount(cpu), sys.getrefcount(layout)
    for _ in range(10_000):
        with pytest.raises(ValueError):
            Tensor(cpu, 0, layout)
        with pytest.raises(ValueError):
            sw.friendly.tensor([[1.0], [2.0, 3.0]])
    gc.collect()
    assert sw._C._live_bytes() == live0
    assert (sys.getrefcount(cpu), sys.getrefcount(layout)) == rc


def test_dlpack_methods_are_in_the_method_table():
    assert "__dlpack__" in Tensor.__dict__ and "__dlpack_device__" in Tensor.__dict__


# ---- argument forms ----------------------------------------------------------


def test_t1_argument_parsing():
    cpu, layout = CPU(2), L([2], [1])
    assert Tensor(cpu, offset=0, layout=layout).carrier is cpu
    with pytest.raises(TypeError, match="missing required argument 'layout'"):
        Tensor(cpu, 0)
    with pytest.raises(TypeError, match="missing"):
        Tensor()
    with pytest.raises(TypeError, match="positional"):
        Tensor(cpu, 0, layout, 1)
    with pytest.raises(TypeError, match="multiple values"):
        Tensor(cpu, 0, layout, offset=0)
    with pytest.raises(TypeError, match="unexpected keyword"):
        Tensor(cpu, 0, layout, dtype=DType.Float32)


def test_t4_argument_parsing():
    cpu = CPU(1)
    t = Tensor._from_representation(
        logical_dtype=DType.Float32, subtensors=[(cpu, 0, L([1], [1]))], adjacent_layouts=[]
    )
    assert t.carrier is cpu
    with pytest.raises(TypeError):
        Tensor._from_representation(DType.Float32)


def test_v4_write_through_user_carrier_hook():
    class Store(sw.Carrier):
        def __init__(self):
            super().__init__()
            self.slots = {}

        def size(self):
            return 8

        def dtype(self):
            return DType.Int32

        def get_value(self, i):
            return self.slots.get(i, 0)

        def set_value(self, i, v):
            self.slots[i] = v

        def _is_mutable(self):
            return True

    s = Store()
    t = Tensor(s, 2, L([2, 3], [1, 2]))
    t[1, 2] = 5
    assert s.slots == {2 + 1 + 4: 5}
    assert t[1, 2] == 5 and t.version == 1


def test_views_and_access_do_not_leak():
    cpu = CPU(16)
    t = Tensor(cpu, 0, L([4, 4], [1, 4]))
    for _ in range(100):
        t[1:3, :], sw.permute(t, 1, 0), sw.reshape(t, Shape(16)), t.tolist()
    gc.collect()
    live0 = sw._C._live_bytes()
    rc = sys.getrefcount(cpu)
    for _ in range(20_000):
        t[1:3, ::2]
        sw.permute(t, [1, 0])
        sw.reshape(t, Shape([2, 8]))
        sw.broadcast_to(t, Shape(4, 4))
        t[1, 2] = 1.0
        t[3]
        t.tolist()
        for bad in (lambda: t[5, 0], lambda: t[0:9, :], lambda: sw.permute(t, 0, 0)):
            try:
                bad()
            except ValueError:
                pass
    gc.collect()
    assert sw._C._live_bytes() == live0
    assert sys.getrefcount(cpu) == rc


def _alloc_fault_sweep(call, limit=64):
    """Fail the n-th core allocation for n = 0, 1, ... until `call` succeeds; every
    failure must raise MemoryError and leave no live allocation (G-3)."""
    c = sw._C
    assert c._fault_injection_enabled()
    for skip in range(limit):
        gc.collect()
        before = c._live_bytes()
        c._fault_inject("alloc", skip, 1)
        try:
            result = call()
        except MemoryError:
            result = None
        finally:
            c._fault_clear()
        gc.collect()
        if result is not None:
            return skip
        assert c._live_bytes() == before
    raise AssertionError("call never succeeded")


def test_g3_allocation_failures_in_views_leave_nothing():
    t = Tensor(CPU(16), 0, L([4, 4], [1, 4]))
    s = sw.friendly.scaled_int32([[1, 2], [3, 4]])
    for call in (
        lambda: t[1:3, :],
        lambda: sw.permute(t, 1, 0),
        lambda: sw.reshape(t, Shape(16)),
        lambda: sw.broadcast_to(t, Shape(4, 4)),
        lambda: s[0:1, :],
        lambda: sw.permute(s, 1, 0),
        lambda: sw.reshape(s, Shape(4)),
        lambda: sw.broadcast_to(s, Shape(2, 2)),
    ):
        assert _alloc_fault_sweep(call) >= 1


def test_g3_allocation_failures_in_factories_leave_nothing():
    f = sw.friendly
    for call in (
        lambda: f.tensor([[1.0, 2.0], [3.0, 4.0]]),
        lambda: f.tensor([1, 2, 3], layout=L([3], [2]), dtype=DType.Int32),
        lambda: f.zeros(2, 3),
        lambda: f.ones(2, dtype=DType.Bool),
        lambda: f.full(3, value=2.0),
        lambda: f.arange(5, dtype=DType.Int32),
        lambda: f.scaled_int32([[1, 2], [3, 4]], scale=0.5),
    ):
        assert _alloc_fault_sweep(call) >= 1


# ---- carrier guards seen through a Tensor (T-10, V-3, V-4, C-13) -----------------

def test_t10_v4_pending_source_is_read_only_through_tensor():
    # A real move held queued (_C._hold_moves) keeps its source pending.
    n = BIG
    cpu = CPU(n)
    t = Tensor(cpu, 0, L([n], [1]))
    with held():
        h = sw.move_async(t, sw.FileBacked())
        assert t.is_mutable() is False
        assert t[1] == 0.0  # reads of a pending source stay allowed
        with pytest.raises(RuntimeError, match="pending"):
            t[1] = 2.0
        assert t.version == 0
    h.wait()
    assert cpu.is_released() and t.version == 0


def test_v3_pending_destination_refuses_reads_through_tensor():
    n = BIG
    cpu = CPU(n)
    t = Tensor(cpu, 0, L([n], [1]))
    with held():
        h = sw.move_async(Tensor(Generic([1.0] * n), 0, L([n], [1])), cpu)
        with pytest.raises(RuntimeError, match="pending"):
            t[0]
        with pytest.raises(RuntimeError, match="pending"):
            t.tolist()
        assert "<values unavailable: pending move>" in repr(t)  # repr does not wait
        assert t[0:2].size() == 2  # views read nothing
    h.wait()
    assert t[0] == 1.0


def test_t10_v4_owned_carrier():
    cpu = CPU(3)
    t = Tensor(cpu, 0, L([3], [1]))
    token = cpu._claim_ownership()
    try:
        assert t.is_mutable() is False
        assert t[0] == 0.0
        with pytest.raises(RuntimeError):
            t[0] = 1.0
        cpu._begin_owner_access(token)
        try:
            assert t.is_mutable() is True
            t[0] = 1.0
        finally:
            cpu._end_owner_access(token)
    finally:
        cpu._relinquish_ownership(token)
    assert t[0] == 1.0 and t.version == 1


def test_v3_key_mutated_by_index_hook_is_safe():
    key = []

    class Evil:
        def __index__(self):
            key.clear()
            return 0

    key.extend([Evil(), 1])
    t = Tensor(Generic(list(range(6)), dtype=DType.Int32), 0, L([2, 3], [1, 2]))
    assert t[key] == 2  # the walk uses a snapshot of the key
