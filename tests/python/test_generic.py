"""The Generic carrier (contract-carriers C-6, C-7, C-10, C-11, C-15, C-16,
C-18, C-19)."""

import pytest

import strideweave as sw
from strideweave import _C
from measure import settled_live_bytes

D = sw.DType


def values(c):
    return [c[i] for i in range(c.size())]


def test_c19_defaults():
    g = sw.Generic([1, 2.5, True])
    assert g.dtype() is D.Float32
    assert values(g) == [1.0, 2.5, 1.0]
    assert all(type(v) is float for v in values(g))
    assert g.is_mutable() and g.version == 0 and not g.is_owned()


def test_c19_copies_values():
    src = [1.0, 2.0]
    g = sw.Generic(src)
    src[0] = 99.0
    src.append(3.0)
    assert values(g) == [1.0, 2.0]


@pytest.mark.parametrize("it", [(1, 2), range(1, 3), (x for x in [1, 2]), {1: "a", 2: "b"}])
def test_c19_any_iterable(it):
    assert values(sw.Generic(it, dtype=D.Int32)) == [1, 2]


def test_c19_empty():
    g = sw.Generic([])
    assert g.size() == 0


@pytest.mark.parametrize("bad", [5, None, 1.0])
def test_c19_values_not_iterable_type_error(bad):
    with pytest.raises(TypeError, match="iterable"):
        sw.Generic(bad)


def test_c19_iteration_error_propagates():
    def gen():
        yield 1.0
        raise KeyError("stop")

    with pytest.raises(KeyError):
        sw.Generic(gen())


@pytest.mark.parametrize("dtype, vals, expected", [
    (D.Int32, [1, -2, 2**31 - 1], [1, -2, 2**31 - 1]),
    (D.Bool, [True, False], [True, False]),
    (D.Float32, [0.5, -1], [0.5, -1.0]),
])
def test_c19_dtypes(dtype, vals, expected):
    g = sw.Generic(vals, dtype=dtype)
    assert g.dtype() is dtype
    assert values(g) == expected
    assert [type(v) for v in values(g)] == [type(e) for e in expected]


def test_c19_dtype_keyword_only():
    with pytest.raises(TypeError):
        sw.Generic([1.0], D.Float32)


@pytest.mark.parametrize("bad", ["Float32", 1, None])
def test_c7_dtype_type_error(bad):
    with pytest.raises(TypeError, match="dtype must be a DType"):
        sw.Generic([1.0], dtype=bad)


@pytest.mark.parametrize("dtype", [D.Float64, D.Int8, D.ScaledInt32, D.Any, D.Integer])
def test_c7_dtype_value_error(dtype):
    with pytest.raises(ValueError, match=f"does not support storage dtype {dtype.name}"):
        sw.Generic([1.0], dtype=dtype)


@pytest.mark.parametrize("dtype, bad, exc", [
    (D.Float32, None, TypeError),       # None rejected (not new_like)
    (D.Float32, "1", TypeError),
    (D.Float32, 10**400, OverflowError),
    (D.Int32, True, TypeError),
    (D.Int32, 1.0, TypeError),
    (D.Int32, 2**31, OverflowError),
    (D.Int32, -(2**31) - 1, OverflowError),
    (D.Bool, 1, TypeError),
    (D.Bool, None, TypeError),
])
def test_c9_normalization_errors(dtype, bad, exc):
    before = settled_live_bytes()
    with pytest.raises(exc):
        sw.Generic([0, bad] if dtype is not D.Bool else [False, bad], dtype=dtype)
    assert _C._live_bytes() == before


def test_c19_check_order():
    with pytest.raises(TypeError, match="iterable"):
        sw.Generic(5, dtype=D.Float64)  # values iterable before dtype
    with pytest.raises(ValueError, match="Float64"):
        sw.Generic([None], dtype=D.Float64)  # dtype before normalization


def test_c19_fixed_size_not_allocatable():
    g = sw.Generic([])
    assert not hasattr(g, "_allocate")


def test_c4_c5_access():
    g = sw.Generic([1.0, 2.0])
    g[0] = 3.0
    assert g.set_value(1, 4) is None
    assert values(g) == [3.0, 4.0]
    assert g.get_value(1) == 4.0
    assert g.version == 2
    with pytest.raises(IndexError):
        g[2]
    with pytest.raises(IndexError):
        g[-1] = 1.0
    with pytest.raises(TypeError):
        g[None]
    with pytest.raises(TypeError):
        g[0] = "x"
    assert g.version == 2


def test_c19_immutable():
    g = sw.Generic([1.0], mutable=False)
    assert not g.is_mutable()
    with pytest.raises(RuntimeError, match="not mutable"):
        g[0] = 2.0
    with pytest.raises(RuntimeError, match="not mutable"):
        g.set_value(0, 2.0)
    assert g[0] == 1.0 and g.version == 0


@pytest.mark.parametrize("name, ok", [("Float32", True), ("Int32", True), ("Bool", True),
                                      ("Float64", False), ("E8M0", False),
                                      ("Integer", False), ("ScaledInt32", False)])
def test_c6_supports(name, ok):
    g = sw.Generic([1], dtype=D.Int32)
    assert g.supports_storage_dtype(getattr(D, name)) is ok
    g.release()
    assert g.supports_storage_dtype(getattr(D, name)) is ok


def test_c15_release():
    before = settled_live_bytes()
    g = sw.Generic([1.0] * 100, dtype=D.Float32)
    assert _C._live_bytes() >= before + 400
    assert g.release() is None
    # The slots are freed at release; the small core handle holding the
    # carrier's state (version, released) goes with the object.
    assert _C._live_bytes() < before + 400
    assert g.release() is None
    assert g.size() == 0 and g.dtype() is D.Float32 and g.is_released()
    with pytest.raises(RuntimeError, match="released"):
        g[0]
    with pytest.raises(RuntimeError, match="released"):
        g[0] = 1.0
    with pytest.raises(BufferError, match="DLPack is not supported"):
        g.dlpack_info()
    del g
    assert settled_live_bytes() == before


def test_c16_no_dlpack():
    with pytest.raises(BufferError, match="DLPack is not supported"):
        sw.Generic([1.0]).dlpack_info()
    assert not hasattr(sw.Generic([1.0]), "pointer")


def test_c10_new_like():
    g = sw.Generic([1.0, 2.0])
    g.release()
    n = g.new_like([3, None])
    assert type(n) is sw.Generic
    assert values(n) == [3.0, 0.0]
    assert n.version == 0 and n.is_mutable()
    i = g.new_like([True, None], dtype=D.Bool, mutable=False)
    assert values(i) == [True, False] and not i.is_mutable()
    with pytest.raises(TypeError, match="iterable"):
        g.new_like(3)
    with pytest.raises(ValueError):
        g.new_like([1], dtype=D.Float64)
    with pytest.raises(TypeError):
        g.new_like([1], dtype=D.Int32.name)


def test_c11_allocate_like_always_zero():
    g = sw.Generic([1], dtype=D.Int32)
    for empty in (False, True):
        a = g.allocate_like(4, empty=empty)
        assert type(a) is sw.Generic and a.dtype() is D.Int32
        assert values(a) == [0, 0, 0, 0]
    b = g.allocate_like(2, dtype=D.Bool, mutable=False)
    assert values(b) == [False, False] and not b.is_mutable()
    with pytest.raises(TypeError):
        g.allocate_like(None)
    with pytest.raises(ValueError):
        g.allocate_like(-3)
    g.release()
    assert g.allocate_like(1).size() == 1


def test_c18_generic_closed():
    with pytest.raises(TypeError, match="closed carrier implementation"):
        class Sub(sw.Generic):
            pass


def test_leak_create_and_drop_100k_generic_carriers():
    before = settled_live_bytes()
    for i in range(100_000):
        g = sw.Generic((i, 1, 2), dtype=D.Int32)
        g[0] = 5
        if i % 4 == 0:
            g.release()
        if i % 7 == 0:
            a = g.allocate_like(3)
            del a
    del g
    assert _C._live_bytes() == before
