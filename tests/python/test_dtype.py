"""DType descriptors (contract-core D-1..D-8) and storage dtype helpers
(contract-carriers C-7, C-8; C-9 through the `_slot_roundtrip` test aid)."""

import copy
import fractions
import gc
import pickle
import struct
import tracemalloc

import pytest

import strideweave as sw
from strideweave import _C
from strideweave.carriers.dtype import (
    accepts_storage_dtype,
    storage_zero,
    validate_storage_dtype,
)

D = sw.DType

# D-3 table: name -> (kind class, supertype name, bits)
GRAPH = [
    ("Any", sw.DTypeCategory, None, None),
    ("Floating", sw.DTypeCategory, "Any", None),
    ("Integer", sw.DTypeCategory, "Any", None),
    ("Bool", sw.SimpleDType, "Any", 8),
    ("Int32", sw.SimpleDType, "Integer", 32),
    ("Int8", sw.SimpleDType, "Integer", 8),
    ("Float32", sw.SimpleDType, "Floating", 32),
    ("Float64", sw.SimpleDType, "Floating", 64),
    ("E8M0", sw.SimpleDType, "Floating", 8),
    ("E5M2", sw.SimpleDType, "Floating", 8),
    ("E4M3", sw.SimpleDType, "Floating", 8),
    ("E3M2", sw.SimpleDType, "Floating", 6),
    ("E2M3", sw.SimpleDType, "Floating", 6),
    ("E2M1", sw.SimpleDType, "Floating", 4),
    ("ScaledInt32", sw.CompoundDType, "Any", None),
]
NAMES = [row[0] for row in GRAPH]
ALL = [getattr(D, n) for n in NAMES]
HOST = (D.Float32, D.Int32, D.Bool)


# ---- D-1 identity -----------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_d1_singleton_through_every_path(name):
    d = getattr(D, name)
    assert D.from_name(name) is d
    assert type(d).from_name(name) is d
    assert copy.copy(d) is d
    assert copy.deepcopy(d) is d
    assert copy.deepcopy([d, {"k": d}])[1]["k"] is d
    for proto in range(pickle.HIGHEST_PROTOCOL + 1):
        assert pickle.loads(pickle.dumps(d, protocol=proto)) is d


def test_d1_equality_is_identity_and_hash_identity_based():
    for a in ALL:
        for b in ALL:
            assert (a == b) is (a is b)
            assert (a != b) is (a is not b)
    assert D.Float32 != "Float32"
    assert len({hash(d) for d in ALL}) == len(ALL)
    assert hash(D.Float32) == hash(D.from_name("Float32"))
    assert {D.Int32: 1}[D.from_name("Int32")] == 1


def test_d1_pickle_is_by_name():
    data = pickle.dumps(D.Float32, protocol=2)
    assert b"Float32" in data


@pytest.mark.parametrize("name", NAMES)
def test_d1_name_and_value(name):
    d = getattr(D, name)
    assert d.name == name
    assert d.value == name


@pytest.mark.parametrize(
    "d, text",
    [
        (D.Float32, "SimpleDType('Float32')"),
        (D.Any, "DTypeCategory('Any')"),
        (D.ScaledInt32, "CompoundDType('ScaledInt32')"),
        (D.Integer, "DTypeCategory('Integer')"),
        (D.E2M1, "SimpleDType('E2M1')"),
    ],
)
def test_d1_repr(d, text):
    assert repr(d) == text


@pytest.mark.parametrize("attr", ["name", "value", "supertype", "bits", "other"])
def test_d1_setting_attribute_raises_attribute_error(attr):
    with pytest.raises(AttributeError):
        setattr(D.Float32, attr, 1)
    with pytest.raises(AttributeError):
        delattr(D.Float32, attr)
    assert D.Float32.name == "Float32"


def test_d1_compound_attributes_immutable():
    with pytest.raises(AttributeError):
        D.ScaledInt32.simple_types = ()
    with pytest.raises(AttributeError):
        del D.ScaledInt32.num_carriers


@pytest.mark.parametrize("cls", [D, sw.SimpleDType, sw.DTypeCategory, sw.CompoundDType])
def test_d1_rebinding_class_attribute_raises_type_error(cls):
    with pytest.raises(TypeError, match="immutable"):
        cls.Float32 = D.Int32
    with pytest.raises(TypeError, match="immutable"):
        del cls.Float32
    with pytest.raises(TypeError, match="immutable"):
        cls.NewName = D.Int32
    assert D.Float32 is D.from_name("Float32")


# ---- D-2 kinds and hierarchy --------------------------------------------------


@pytest.mark.parametrize("name, kind, sup, bits", GRAPH)
def test_d2_d3_kind_supertype_bits(name, kind, sup, bits):
    d = getattr(D, name)
    assert isinstance(d, D)
    assert type(d) is kind
    kinds = [sw.DTypeCategory, sw.SimpleDType, sw.CompoundDType]
    assert sum(isinstance(d, k) for k in kinds) == 1
    assert d.is_category() is (kind is sw.DTypeCategory)
    assert d.is_simple() is (kind is sw.SimpleDType)
    assert d.is_compound() is (kind is sw.CompoundDType)
    assert d.supertype is (None if sup is None else getattr(D, sup))
    if bits is None:
        assert not hasattr(d, "bits")
    else:
        assert type(d.bits) is int and d.bits == bits


def test_d2_supertypes_nearest_first():
    assert D.Float32.supertypes() == (D.Floating, D.Any)
    assert D.Int8.supertypes() == (D.Integer, D.Any)
    assert D.Bool.supertypes() == (D.Any,)
    assert D.ScaledInt32.supertypes() == (D.Any,)
    assert D.Any.supertypes() == ()
    assert type(D.Any.supertypes()) is tuple


@pytest.mark.parametrize("a", ALL, ids=NAMES)
@pytest.mark.parametrize("b", ALL, ids=NAMES)
def test_d2_is_subtype_of_definition(a, b):
    assert a.is_subtype_of(b) is (a is b or b in a.supertypes())


@pytest.mark.parametrize("other", ["Float32", None, 1, sw.SimpleDType, object()])
def test_d2_is_subtype_of_non_dtype_type_error(other):
    with pytest.raises(TypeError, match="DType"):
        D.Float32.is_subtype_of(other)


def test_d4_is_opaque_storage_only_any_and_floating():
    for d in ALL:
        assert d.is_opaque_storage() is (d is D.Any or d is D.Floating)


# ---- D-5, D-6 compound -----------------------------------------------------------


def test_d5_d6_scaled_int32_planes():
    c = D.ScaledInt32
    assert c.simple_types == (D.Int32, D.Float32)
    assert type(c.simple_types) is tuple
    assert c.num_carriers == 2
    assert all(isinstance(t, sw.SimpleDType) for t in c.simple_types)


@pytest.mark.parametrize("d", [x for x in ALL if not x.is_compound()])
def test_d5_compound_attributes_only_on_compounds(d):
    assert not hasattr(d, "simple_types")
    assert not hasattr(d, "num_carriers")


def test_d4_storage_schema_helper():
    assert D.Float32._storage_schema() == (D.Float32,)
    assert D.Any._storage_schema() == (D.Any,)
    assert D.Floating._storage_schema() == (D.Floating,)
    assert D.ScaledInt32._storage_schema() == (D.Int32, D.Float32)
    with pytest.raises(ValueError, match="Integer"):
        D.Integer._storage_schema()


# ---- D-3, D-8 lookup and registry ---------------------------------------------------


def test_d3_class_attributes_reachable_through_subclasses():
    for name in NAMES:
        assert getattr(sw.SimpleDType, name) is getattr(D, name)
        assert getattr(sw.CompoundDType, name) is getattr(D, name)


def test_d8_registered_order_and_kinds():
    assert D.registered() == tuple(ALL)
    assert sw.DTypeCategory.registered() == (D.Any, D.Floating, D.Integer)
    assert sw.SimpleDType.registered() == tuple(
        d for d in ALL if type(d) is sw.SimpleDType
    )
    assert sw.CompoundDType.registered() == (D.ScaledInt32,)
    assert type(D.registered()) is tuple


@pytest.mark.parametrize("bad", [None, 1, b"Float32", D.Float32, ["Float32"]])
def test_d8_from_name_non_str_type_error(bad):
    with pytest.raises(TypeError, match="str"):
        D.from_name(bad)


@pytest.mark.parametrize(
    "name",
    # D-8 exact name: an embedded NUL must not truncate the comparison.
    ["", "float32", "Float16", "Float32 ", "\ud800", "Float32\x00", "Int32\x00junk"],
)
def test_d8_from_name_unknown_lookup_error(name):
    with pytest.raises(LookupError):
        D.from_name(name)


@pytest.mark.parametrize(
    "cls, name",
    [
        (sw.SimpleDType, "Any"),
        (sw.SimpleDType, "ScaledInt32"),
        (sw.DTypeCategory, "Float32"),
        (sw.CompoundDType, "Int32"),
    ],
)
def test_d8_from_name_wrong_kind_lookup_error(cls, name):
    with pytest.raises(LookupError, match=name):
        cls.from_name(name)


def test_d8_from_name_right_kind_on_subclass():
    assert sw.SimpleDType.from_name("Int8") is D.Int8
    assert sw.DTypeCategory.from_name("Integer") is D.Integer
    assert sw.CompoundDType.from_name("ScaledInt32") is D.ScaledInt32


@pytest.mark.parametrize("cls", [D, sw.DTypeCategory, sw.SimpleDType, sw.CompoundDType])
def test_d8_calling_descriptor_class_type_error(cls):
    with pytest.raises(TypeError):
        cls()
    with pytest.raises(TypeError):
        cls("Float32")
    with pytest.raises(TypeError):
        cls.__new__(cls)


@pytest.mark.parametrize("cls", [D, sw.DTypeCategory, sw.SimpleDType, sw.CompoundDType])
def test_d8_no_registration_by_subclassing(cls):
    with pytest.raises(TypeError):
        type("Mine", (cls,), {})


def test_g1_same_objects_through_carriers_path():
    assert sw.carriers.DType is sw.DType
    assert sw.carriers.SimpleDType is sw.SimpleDType
    assert sw.carriers.DTypeCategory is sw.DTypeCategory
    assert sw.carriers.CompoundDType is sw.CompoundDType
    assert sw.carriers.dtype.DType is sw.DType


# ---- C-8 helpers / C-7 messages ----------------------------------------------------


@pytest.mark.parametrize("d", HOST)
def test_c8_validate_returns_dtype(d):
    assert validate_storage_dtype(d, carrier="CPU", accepted=HOST) is d


@pytest.mark.parametrize("bad", [None, "Float32", 1, float, sw.SimpleDType])
def test_c7_validate_non_dtype_type_error(bad):
    with pytest.raises(TypeError, match="dtype must be a DType"):
        validate_storage_dtype(bad, carrier="CPU", accepted=HOST)


@pytest.mark.parametrize("d", [D.Float64, D.Int8, D.E2M1, D.E8M0])
def test_c7_validate_unsupported_simple_value_error(d):
    with pytest.raises(
        ValueError, match=f"CPU does not support storage dtype {d.name}"
    ):
        validate_storage_dtype(d, carrier="CPU", accepted=HOST)


def test_c7_validate_compound_message():
    with pytest.raises(ValueError, match="^Generic does not support storage dtype ScaledInt32: it is a compound dtype whose tensors span several carriers, one per plane"):
        validate_storage_dtype(D.ScaledInt32, carrier="Generic", accepted=HOST)


@pytest.mark.parametrize("d", [D.Any, D.Floating, D.Integer])
def test_c7_validate_category_names_accepted_dtypes(d):
    with pytest.raises(ValueError) as info:
        validate_storage_dtype(d, carrier="FileBacked", accepted=(D.Float32, D.Int32))
    msg = str(info.value)
    assert "category" in msg
    assert "Float32" in msg and "Int32" in msg
    assert "FileBacked" in msg


def test_c8_validate_carrier_only_names_the_carrier():
    class MyCarrier:
        pass

    with pytest.raises(ValueError, match="MyCarrier does not support"):
        validate_storage_dtype(D.Bool, carrier=MyCarrier, accepted=(D.Float32,))
    with pytest.raises(ValueError, match="MyCarrier does not support"):
        validate_storage_dtype(D.Bool, carrier=MyCarrier(), accepted=(D.Float32,))


def test_c8_validate_identity_membership_only():
    with pytest.raises(ValueError):
        validate_storage_dtype(D.Float32, carrier="X", accepted=(D.Floating,))
    with pytest.raises(ValueError):
        validate_storage_dtype(D.Float32, carrier="X", accepted=())


def test_c8_validate_keyword_only_and_required():
    with pytest.raises(TypeError):
        validate_storage_dtype(D.Float32, "CPU", HOST)
    with pytest.raises(TypeError, match="carrier"):
        validate_storage_dtype(D.Float32, accepted=HOST)
    with pytest.raises(TypeError, match="accepted"):
        validate_storage_dtype(D.Float32, carrier="CPU")
    with pytest.raises(TypeError, match="accepted"):
        validate_storage_dtype(D.Float32, carrier="CPU", accepted=("Float32",))
    with pytest.raises(TypeError, match="accepted"):
        validate_storage_dtype(D.Float32, carrier="CPU", accepted=5)


def test_c8_accepts_storage_dtype_identity_membership():
    assert accepts_storage_dtype(D.Float32, HOST) is True
    assert accepts_storage_dtype(D.Float64, HOST) is False
    assert accepts_storage_dtype(D.Float32, (D.Floating, D.Any)) is False
    assert accepts_storage_dtype("Float32", HOST) is False
    assert accepts_storage_dtype(D.Bool, [D.Bool]) is True
    assert accepts_storage_dtype(D.Bool, ()) is False


@pytest.mark.parametrize("d", ALL, ids=NAMES)
def test_c8_storage_zero(d):
    z = storage_zero(d)
    if d is D.Float32:
        assert type(z) is float and z == 0.0
    elif d is D.Int32:
        assert type(z) is int and z == 0
    elif d is D.Bool:
        assert z is False
    else:
        assert z is None


def test_c8_helpers_no_leak():
    def churn():
        for _ in range(2000):
            try:
                validate_storage_dtype(D.ScaledInt32, carrier="CPU", accepted=HOST)
            except ValueError:
                pass
            validate_storage_dtype(D.Int32, carrier="CPU", accepted=list(HOST))
            accepts_storage_dtype(D.Int32, HOST)
            D.Float32.supertypes()
            D.registered()
            _C._slot_roundtrip(D.Float32, 2**60 + 1)
            for dt, bad in ((D.Int32, 2**40), (D.Float32, "x"), (D.Bool, 1)):
                try:
                    _C._slot_roundtrip(dt, bad)
                except (TypeError, OverflowError):
                    pass

    churn()
    gc.collect()

    tracemalloc.start()
    churn()
    first = tracemalloc.get_traced_memory()[0]
    churn()
    second = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert second - first < 64 * 1024


# ---- C-9 normalization (through the _slot_roundtrip test aid) -----------------------


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


rt = _C._slot_roundtrip


@pytest.mark.parametrize(
    "value, expected",
    [
        (0.1, f32(0.1)),
        (1, 1.0),
        (True, 1.0),
        (False, 0.0),
        (-2.5, -2.5),
        (2**24 + 1, 16777216.0),  # tie -> even
        (2**24 + 3, 16777220.0),  # tie -> even (up)
        (fractions.Fraction(1, 3), f32(1 / 3)),
        (float("inf"), float("inf")),
        (float("-inf"), float("-inf")),
        (1e300, float("inf")),
        (-1e300, float("-inf")),
        (2**128 - 2**103, float("inf")),  # exact tie above FLT_MAX -> inf
        (2**128 - 2**103 - 1, 3.4028234663852886e38),  # below the tie -> FLT_MAX
        (3.4028235e38, 3.4028234663852886e38),
        (-(2**200), float("-inf")),
        (1e-50, 0.0),
    ],
)
def test_c9_float32_rounding(value, expected):
    got = rt(D.Float32, value)
    assert type(got) is float
    assert got == expected


def test_c9_float32_nan():
    got = rt(D.Float32, float("nan"))
    assert got != got


def test_c9_float32_big_ints_round_once():
    # 2**60 + 2**36 + 1 is just above the binary32 halfway point between
    # 2**60 and its successor; rounding through an intermediate double would
    # land exactly on the tie and go down (double rounding).
    n = 2**60 + 2**36 + 1
    assert rt(D.Float32, n) == float(2**60 + 2**37)
    assert rt(D.Float32, -n) == -float(2**60 + 2**37)
    assert rt(D.Float32, 2**60 + 2**36) == float(2**60)  # exact tie -> even


def test_c9_float32_numpy_scalars():
    np = pytest.importorskip("numpy")
    assert rt(D.Float32, np.float32(0.1)) == f32(0.1)
    assert rt(D.Float32, np.float64(0.5)) == 0.5
    assert rt(D.Float32, np.int64(7)) == 7.0
    # numbers.Integral goes through its exact value, rounded once (C-9).
    assert rt(D.Float32, np.int64(2**60 + 2**36 + 1)) == float(2**60 + 2**37)
    assert rt(D.Float32, np.float16(0.5)) == 0.5
    with pytest.raises(TypeError, match="Float32"):
        rt(D.Float32, np.True_)  # not a numbers.Real


@pytest.mark.parametrize("bad", ["1.0", None, 1j, [1.0], object()])
def test_c9_float32_non_real_type_error(bad):
    with pytest.raises(TypeError, match="Float32"):
        rt(D.Float32, bad)


def test_c9_float32_int_too_big_for_double_overflow_error():
    with pytest.raises(OverflowError):
        rt(D.Float32, 10**400)
    with pytest.raises(OverflowError):
        rt(D.Float32, -(10**400))


class Idx:
    def __index__(self):
        return 42


@pytest.mark.parametrize(
    "value, expected", [(0, 0), (-1, -1), (2**31 - 1, 2**31 - 1), (-(2**31), -(2**31)), (Idx(), 42)]
)
def test_c9_int32_accepts_index_objects(value, expected):
    got = rt(D.Int32, value)
    assert type(got) is int and got == expected


@pytest.mark.parametrize("bad", [True, False, 1.0, "1", None, fractions.Fraction(1, 1)])
def test_c9_int32_type_error(bad):
    with pytest.raises(TypeError, match="Int32"):
        rt(D.Int32, bad)


@pytest.mark.parametrize("bad", [2**31, -(2**31) - 1, 10**30, -(10**100)])
def test_c9_int32_range_overflow_error(bad):
    with pytest.raises(OverflowError, match="Int32"):
        rt(D.Int32, bad)


def test_c9_bool_exactly_true_false():
    assert rt(D.Bool, True) is True
    assert rt(D.Bool, False) is False
    for bad in (0, 1, 1.0, None, "True"):
        with pytest.raises(TypeError, match="Bool"):
            rt(D.Bool, bad)


@pytest.mark.parametrize("d", [D.Float64, D.Any, D.ScaledInt32, D.Int8])
def test_c9_no_host_slot_for_other_dtypes(d):
    with pytest.raises(ValueError, match=d.name):
        rt(d, 0)


def test_c9_float32_other_reals_rounded_once():
    # C-9: any real is rounded to the nearest binary32 once. 1 + 2**-24 +
    # 2**-80 lies just above the tie between 1 and 1 + 2**-23; rounding it
    # through a double first lands exactly on the tie and goes to even (1.0).
    from fractions import Fraction

    import numpy as np

    above = Fraction(1) + Fraction(1, 2**24) + Fraction(1, 2**80)
    below = Fraction(1) + Fraction(1, 2**24) - Fraction(1, 2**80)
    tie = Fraction(1) + Fraction(1, 2**24)
    assert _C._slot_roundtrip(D.Float32, above) == 1 + 2**-23
    assert _C._slot_roundtrip(D.Float32, below) == 1.0
    assert _C._slot_roundtrip(D.Float32, tie) == 1.0
    assert _C._slot_roundtrip(D.Float32, -above) == -(1 + 2**-23)
    assert _C._slot_roundtrip(D.Float32, Fraction(3, 4)) == 0.75
    ld = np.longdouble(1) + np.longdouble(2.0**-24) + np.longdouble(2.0**-60)
    if ld > np.longdouble(1 + 2**-24):  # longdouble wider than double here
        assert _C._slot_roundtrip(D.Float32, ld) == 1 + 2**-23


def test_c9_float32_real_without_float_comparison_still_accepted():
    # C-9: a numbers.Real whose comparisons do not support float operands is
    # still taken through float(); only the exactness refinement is skipped.
    import numbers

    class Opaque(numbers.Real):
        def __float__(self):
            return 0.1

        def __lt__(self, other):
            return NotImplemented

        __le__ = __lt__

        def _no(self, *args):
            raise AssertionError("not used")

        __abs__ = __add__ = __ceil__ = __eq__ = __floor__ = __floordiv__ = _no
        __mod__ = __mul__ = __neg__ = __pos__ = __pow__ = __radd__ = _no
        __rfloordiv__ = __rmod__ = __rmul__ = __round__ = __rpow__ = _no
        __rtruediv__ = __truediv__ = __trunc__ = _no
        __hash__ = object.__hash__

    expected = struct.unpack("f", struct.pack("f", 0.1))[0]
    assert _C._slot_roundtrip(D.Float32, Opaque()) == expected
