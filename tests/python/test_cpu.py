"""The CPU carrier (contract-carriers C-3..C-7, C-10, C-11, C-14..C-16,
C-20, C-21)."""

import ctypes
import struct

import pytest

import strideweave as sw
from strideweave import _C
from measure import settled_live_bytes

D = sw.DType


def raw(cpu, nbytes):
    """The bytes at cpu.pointer() (bypassing the carrier)."""
    return ctypes.string_at(cpu.pointer(), nbytes)


# ---- C-20 construction ----------------------------------------------------------


def test_c20_defaults_zeroed_float32():
    c = sw.CPU(4)
    assert c.size() == 4
    assert c.dtype() is D.Float32
    assert [c[i] for i in range(4)] == [0.0] * 4
    assert all(type(c[i]) is float for i in range(4))
    assert c.is_mutable() and not c.is_owned() and not c.is_released()
    assert c.version == 0


@pytest.mark.parametrize("dtype, zero, width", [(D.Float32, 0.0, 4), (D.Int32, 0, 4),
                                                (D.Bool, False, 1)])
def test_c20_dtypes_zero_and_layout(dtype, zero, width):
    c = sw.CPU(3, dtype=dtype)
    assert c.dtype() is dtype
    assert [c[i] for i in range(3)] == [zero] * 3
    assert type(c[0]) is type(zero)
    assert raw(c, 3 * width) == bytes(3 * width)


def test_c20_layout_contiguous_native_order():
    f = sw.CPU(3)
    f[0], f[1], f[2] = 1.5, -2.0, 3.25
    assert raw(f, 12) == struct.pack("=3f", 1.5, -2.0, 3.25)
    i = sw.CPU(2, dtype=D.Int32)
    i[0], i[1] = -7, 2**31 - 1
    assert raw(i, 8) == struct.pack("=2i", -7, 2**31 - 1)
    b = sw.CPU(3, dtype=D.Bool)
    b[0], b[2] = True, True
    assert raw(b, 3) == b"\x01\x00\x01"


def test_c20_size_zero_has_positive_pointer():
    c = sw.CPU(0)
    assert c.size() == 0
    assert c.pointer() > 0


def test_c20_size_index_objects():
    class Idx:
        def __index__(self):
            return 3

    assert sw.CPU(Idx()).size() == 3
    np = pytest.importorskip("numpy")
    assert sw.CPU(np.int64(2)).size() == 2


@pytest.mark.parametrize("bad", ["3", 3.0, None, True, [3]])
def test_c20_size_type_error(bad):
    with pytest.raises(TypeError, match="size"):
        sw.CPU(bad)


def test_c20_size_negative_value_error():
    with pytest.raises(ValueError, match="size"):
        sw.CPU(-1)


def test_c20_huge_size_memory_or_overflow_error():
    before = settled_live_bytes()
    with pytest.raises((MemoryError, OverflowError)):
        sw.CPU(2**62)
    with pytest.raises(OverflowError):
        sw.CPU(2**64)
    assert _C._live_bytes() == before


@pytest.mark.parametrize("bad", ["Float32", None, 1, sw.CPU])
def test_c7_dtype_non_dtype_type_error(bad):
    with pytest.raises(TypeError, match="dtype must be a DType"):
        sw.CPU(1, dtype=bad)


@pytest.mark.parametrize("name", ["Float64", "Int8", "E4M3", "E2M1"])
def test_c7_dtype_unsupported_value_error(name):
    with pytest.raises(ValueError, match=f"does not support storage dtype {name}"):
        sw.CPU(1, dtype=getattr(D, name))


def test_c7_compound_and_category_messages():
    with pytest.raises(ValueError, match="^CPU does not support storage dtype ScaledInt32: it is a compound dtype whose tensors span several carriers, one per plane"):
        sw.CPU(1, dtype=D.ScaledInt32)
    with pytest.raises(ValueError, match="Float32") as info:
        sw.CPU(1, dtype=D.Floating)
    assert "Int32" in str(info.value) and "Bool" in str(info.value)


def test_c7_nothing_allocated_on_failure():
    before = settled_live_bytes()
    for bad in (D.Float64, D.Any, "x"):
        with pytest.raises((TypeError, ValueError)):
            sw.CPU(1000, dtype=bad)
    assert _C._live_bytes() == before


def test_c20_check_order():
    with pytest.raises(TypeError, match="size"):
        sw.CPU("x", dtype="y")  # size before dtype
    with pytest.raises(ValueError, match="size"):
        sw.CPU(-1, dtype=D.Float64)


def test_c20_no_pointer_argument():
    # C-20 / seed "DLPack is export-only": no other way to adopt foreign memory.
    with pytest.raises(TypeError):
        sw.CPU(4, pointer=123)
    with pytest.raises(TypeError):
        sw.CPU(4, 123)  # nor positionally
    with pytest.raises(TypeError):
        sw.CPU(4, None)


def test_c20_keyword_only_arguments():
    with pytest.raises(TypeError):
        sw.CPU(1, False)
    c = sw.CPU(size=2, mutable=False, dtype=D.Int32, empty=True)
    assert c.size() == 2 and not c.is_mutable()


def test_c20_mutable_false():
    c = sw.CPU(2, mutable=False)
    assert c.is_mutable() is False
    assert c._is_mutable() is False
    with pytest.raises(RuntimeError, match="not mutable"):
        c[0] = 1.0
    assert c.version == 0


def test_c20_empty_skips_zeroing_but_works():
    c = sw.CPU(16, empty=True)
    assert c.size() == 16 and c.pointer() > 0
    c[3] = 2.0
    assert c[3] == 2.0


# ---- C-4, C-5, C-9 access ------------------------------------------------------


def test_c4_read_checks():
    c = sw.CPU(2)
    with pytest.raises(TypeError):
        c["0"]
    with pytest.raises(TypeError):
        c.get_value(1.0)
    with pytest.raises(IndexError):
        c[2]
    with pytest.raises(IndexError):
        c.get_value(-1)
    c.release()
    with pytest.raises(RuntimeError, match="released"):
        c[0]
    with pytest.raises(RuntimeError, match="released"):
        c.get_value("x")


def test_c5_write_and_version():
    c = sw.CPU(3, dtype=D.Int32)
    assert c.set_value(0, 4) is None
    c[1] = 5
    assert [c[0], c[1], c[2]] == [4, 5, 0]
    assert c.version == 2
    c[0]  # reads never change the version
    assert c.version == 2


def test_c5_check_order():
    c = sw.CPU(1, mutable=False)
    with pytest.raises(TypeError):
        c["x"] = 1.0
    with pytest.raises(RuntimeError, match="not mutable"):
        c[5] = "bad"
    m = sw.CPU(1, dtype=D.Int32)
    with pytest.raises(IndexError):
        m[5] = "bad"  # range before normalization
    with pytest.raises(TypeError):
        m[0] = "bad"
    with pytest.raises(OverflowError):
        m[0] = 2**31
    with pytest.raises(TypeError):
        m.set_value(0, True)
    with pytest.raises(TypeError):
        m.set_value(0)
    m.release()
    with pytest.raises(RuntimeError, match="released"):
        m["x"] = 1
    assert c.version == 0 and m.version == 0


def test_c9_normalization_failure_changes_nothing():
    c = sw.CPU(1)
    c[0] = 1.5
    with pytest.raises(TypeError):
        c[0] = "2"
    with pytest.raises(OverflowError):
        c[0] = 10**400
    assert c[0] == 1.5 and c.version == 1


def test_c9_float32_rounding_and_bool_rules():
    c = sw.CPU(2)
    c[0] = 0.1
    assert c[0] == struct.unpack("f", struct.pack("f", 0.1))[0]
    c[1] = 1e39
    assert c[1] == float("inf")
    c[0] = True
    assert c[0] == 1.0
    b = sw.CPU(1, dtype=D.Bool)
    b[0] = True
    assert b[0] is True
    for bad in (1, 0, None, 1.0):
        with pytest.raises(TypeError):
            b[0] = bad


def test_c14_pointer_writes_bypass_version():
    c = sw.CPU(1)
    ctypes.c_float.from_address(c.pointer()).value = 7.0
    assert c[0] == 7.0
    assert c.version == 0


# ---- C-6 ------------------------------------------------------------------------


@pytest.mark.parametrize("name, ok", [("Float32", True), ("Int32", True), ("Bool", True),
                                      ("Float64", False), ("Int8", False), ("Any", False),
                                      ("Floating", False), ("ScaledInt32", False)])
def test_c6_supports_storage_dtype(name, ok):
    c = sw.CPU(1, dtype=D.Bool, mutable=False)
    before = settled_live_bytes()
    assert c.supports_storage_dtype(getattr(D, name)) is ok
    token = c._claim_ownership()
    c._begin_owner_access(token)
    c.release()
    assert c.supports_storage_dtype(getattr(D, name)) is ok  # any state
    assert _C._live_bytes() <= before


def test_c6_supports_non_dtype_type_error():
    with pytest.raises(TypeError, match="DType"):
        sw.CPU(1).supports_storage_dtype("Float32")


# ---- C-15, C-21 release --------------------------------------------------------


def test_c15_release_frees_and_keeps_queries():
    before = settled_live_bytes()
    c = sw.CPU(1000, dtype=D.Int32, mutable=False)
    assert _C._live_bytes() >= before + 4000
    assert c.release() is None
    # The slots are freed at release; the small core handle holding the
    # carrier's state (version, released) goes with the object.
    assert _C._live_bytes() < before + 4000
    assert c.release() is None
    assert c.is_released()
    assert c.size() == 0
    assert c.dtype() is D.Int32
    assert c.pointer() == 0
    assert c.version == 0
    assert c.is_mutable() is False and not c.is_owned()
    assert c.dlpack_info() == {"pointer": 0, "device_type": 1, "device_id": 0}
    assert c.supports_storage_dtype(D.Bool)
    with pytest.raises(RuntimeError, match="released"):
        c[0] = 1
    with pytest.raises(RuntimeError, match="released"):
        c._increment_version()
    del c
    assert settled_live_bytes() == before


# ---- C-16 ------------------------------------------------------------------------


def test_c16_dlpack_info_exact():
    c = sw.CPU(3)
    info = c.dlpack_info()
    assert info == {"pointer": c.pointer(), "device_type": 1, "device_id": 0}
    assert type(info) is dict


# ---- C-10, C-11 factories ----------------------------------------------------------


def test_c10_new_like():
    c = sw.CPU(1, dtype=D.Int32)
    n = c.new_like([1, None, 3])
    assert type(n) is sw.CPU
    assert n.dtype() is D.Int32
    assert [n[0], n[1], n[2]] == [1, 0, 3]
    assert n.version == 0 and n.is_mutable()
    assert n.pointer() != c.pointer()
    n[0] = 9
    assert c[0] == 0  # independent storage


def test_c10_new_like_options():
    c = sw.CPU(1)
    n = c.new_like((x for x in [True, 2]), mutable=0, dtype=D.Float32)
    assert [n[0], n[1]] == [1.0, 2.0]
    assert n.is_mutable() is False
    b = c.new_like([True, None], dtype=D.Bool)
    assert b.dtype() is D.Bool and [b[0], b[1]] == [True, False]
    e = c.new_like([])
    assert e.size() == 0 and e.pointer() > 0


def test_c10_new_like_on_released_receiver_never_reads():
    c = sw.CPU(2, dtype=D.Int32)
    c.release()
    n = c.new_like([5, 6])
    assert [n[0], n[1]] == [5, 6] and n.dtype() is D.Int32


def test_c10_new_like_errors():
    c = sw.CPU(1)
    before = settled_live_bytes()
    with pytest.raises(TypeError, match="iterable"):
        c.new_like(5)
    with pytest.raises(TypeError, match="DType"):
        c.new_like([1.0], dtype="Int32")
    with pytest.raises(ValueError):
        c.new_like([1.0], dtype=D.Float64)
    with pytest.raises(TypeError):
        c.new_like([1.0, "x"])
    with pytest.raises(OverflowError):
        c.new_like([2**31], dtype=D.Int32)
    with pytest.raises(TypeError):
        c.new_like([1.0], True)  # mutable is keyword-only
    with pytest.raises(TypeError):
        c.new_like(5, dtype=D.Float64)  # values checked first
    assert _C._live_bytes() == before


def test_c11_allocate_like():
    c = sw.CPU(1, dtype=D.Bool)
    a = c.allocate_like(5)
    assert type(a) is sw.CPU and a.size() == 5 and a.dtype() is D.Bool
    assert [a[i] for i in range(5)] == [False] * 5
    assert a.version == 0 and a.is_mutable()
    b = c.allocate_like(3, mutable=False, dtype=D.Int32, empty=True)
    assert b.size() == 3 and b.dtype() is D.Int32 and not b.is_mutable()
    c.release()
    z = c.allocate_like(0)
    assert z.size() == 0 and z.pointer() > 0


def test_c11_allocate_like_errors():
    c = sw.CPU(1)
    with pytest.raises(TypeError, match="size"):
        c.allocate_like(1.0)
    with pytest.raises(TypeError, match="size"):
        c.allocate_like("1")
    with pytest.raises(ValueError, match="size"):
        c.allocate_like(-1)
    with pytest.raises(ValueError):
        c.allocate_like(1, dtype=D.E5M2)
    with pytest.raises(TypeError):
        c.allocate_like(1, dtype=1)
    with pytest.raises(TypeError, match="size"):
        c.allocate_like("x", dtype=D.E5M2)  # size checked before dtype


# ---- C-18 ------------------------------------------------------------------------


def test_c18_cpu_closed():
    with pytest.raises(TypeError, match="closed carrier implementation"):
        class Sub(sw.CPU):
            pass


# ---- leaks -------------------------------------------------------------------------


def test_leak_create_and_drop_100k_cpu_carriers():
    before = settled_live_bytes()
    for i in range(100_000):
        c = sw.CPU(8, dtype=D.Int32)
        c[i % 8] = i
        if i % 3 == 0:
            c.release()
        if i % 5 == 0:
            n = c.new_like([1, 2, None])
            del n
    del c
    assert _C._live_bytes() == before


def test_c20_size_required():
    with pytest.raises(TypeError):
        sw.CPU()
    with pytest.raises(TypeError):
        sw.CPU(1, 2)  # one positional argument
