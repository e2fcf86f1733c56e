"""friendly.tensor(values) for buffer-protocol objects (issue 10 item 5, F-2
extended): a numeric buffer is copied with the logical values of its
nested-list form values.tolist(), converted by the same rules, never aliased.
A dense buffer keeps its memory order as the layout (issue 18 item 3); the
dtype inferred without dtype= is tested in test_usability_arrays_in.py."""
import array

import numpy as np
import pytest
import torch

import strideweave as sw
from strideweave import friendly as F

D = sw.DType


def same_as_nested(a, dtype=D.Float32):
    t = F.tensor(a, dtype=dtype)
    ref = F.tensor(np.asarray(a).tolist(), dtype=dtype)
    assert t.layout.shape == ref.layout.shape
    assert t.tolist() == ref.tolist()  # the same value at every coordinate
    assert t.offset == 0 and type(t.carrier) is sw.CPU and t.carrier.is_mutable()
    return t


def test_f2_arange_reshaped_lands_like_nested_lists():
    a = np.arange(6).reshape(2, 3)
    t = same_as_nested(a)
    assert t.layout == F.row_major(2, 3)  # a C-order array keeps its order
    assert t[1, 0] == 3.0 and t[0, 2] == 2.0
    np.testing.assert_array_equal(np.asarray(t), a.astype(np.float32))


def test_f2_issue_example_one_dimensional():
    t = F.tensor(np.arange(6))
    assert t.tolist() == [0, 1, 2, 3, 4, 5] and t.dtype() == D.Int32
    assert t.layout == F.column_major(6)


@pytest.mark.parametrize("np_dtype", ["int8", "uint8", "int16", "uint16", "int32", "uint32",
                                      "int64", "uint64", "float16", "float32", "float64"])
def test_f2_every_numeric_format_to_float32(np_dtype):
    a = (np.arange(12) - (0 if np_dtype.startswith("u") else 5)).astype(np_dtype).reshape(3, 4)
    same_as_nested(a)


@pytest.mark.parametrize("np_dtype", ["int8", "uint16", "int32", "int64", "uint64"])
def test_f2_integers_to_int32(np_dtype):
    same_as_nested(np.arange(8, dtype=np_dtype).reshape(2, 2, 2), D.Int32)


def test_f2_bool():
    a = np.array([[True, False, True], [False, False, True]])
    same_as_nested(a, D.Bool)
    t = same_as_nested(a, D.Float32)  # as bools in a list: 1.0 / 0.0
    assert t.tolist() == [1.0, 0.0, 0.0, 0.0, 1.0, 1.0]


@pytest.mark.parametrize("view", ["transpose", "step", "reverse", "fortran", "broadcast"])
def test_f2_strided_and_non_contiguous_buffers(view):
    base = np.arange(24, dtype=np.float64).reshape(4, 6)
    a = {"transpose": base.T, "step": base[::2, 1::2], "reverse": base[::-1, ::-2],
         "fortran": np.asfortranarray(base),
         "broadcast": np.broadcast_to(np.arange(3.0), (4, 3))}[view]
    same_as_nested(a)


def test_f2_non_native_byte_order():
    other = ">" if np.little_endian else "<"
    a = np.arange(-3, 3, dtype=other + "i4").reshape(2, 3)
    same_as_nested(a, D.Int32)
    f = np.linspace(-1, 1, 5).astype(other + "f8")
    same_as_nested(f)


def test_f2_float_rounding_matches_nested_form():
    a = np.array([0.1, 1e40, -1e40, 3.4028235677973366e38, np.nan, np.inf, 2.0 ** -149 / 3])
    t = F.tensor(a)
    ref = F.tensor(a.tolist())
    got, want = t.tolist(), ref.tolist()
    assert [repr(x) for x in got] == [repr(x) for x in want]


def test_f2_large_integers_round_once_to_float32():
    a = np.array([2 ** 53 + 1, 2 ** 63 - 1, 2 ** 24 + 1, -(2 ** 62) - 3], dtype=np.int64)
    same_as_nested(a)
    same_as_nested(np.array([2 ** 64 - 1, 2 ** 63 + 2 ** 39 + 1], dtype=np.uint64))


def test_f2_other_buffer_exporters():
    assert F.tensor(array.array("i", [1, 2, 3]), dtype=D.Int32).tolist() == [1, 2, 3]
    assert F.tensor(memoryview(array.array("d", [0.5, 1.5]))).tolist() == [0.5, 1.5]
    assert F.tensor(bytes([1, 2, 255])).tolist() == [1, 2, 255]
    assert F.tensor(torch.arange(4).reshape(2, 2).numpy()).tolist() == [0, 2, 1, 3]


def test_f2_copies_never_aliases():
    a = np.arange(4, dtype=np.float32)
    t = F.tensor(a)
    a[0] = 100.0
    assert t[0] == 0.0
    t[1] = -1.0
    assert a[1] == 1.0
    assert not np.shares_memory(np.asarray(t), a)


def test_f2_zero_dimensional_array_is_value_error():
    with pytest.raises(ValueError, match="non-empty list or tuple"):
        F.tensor(np.array(3.0))


def test_f2_empty_level_is_value_error():
    with pytest.raises(ValueError, match="empty levels"):
        F.tensor(np.zeros((2, 0)))
    with pytest.raises(ValueError, match="empty levels"):
        F.tensor(np.zeros(0))


@pytest.mark.parametrize("dtype", [D.Float32, D.Int32, D.Bool])
def test_f2_complex_is_type_error(dtype):
    with pytest.raises(TypeError, match="complex"):
        F.tensor(np.array([1 + 2j, 3j]), dtype=dtype)
    with pytest.raises(TypeError, match="complex"):
        F.tensor(np.array([1 + 2j], dtype=np.complex64))


def test_f2_conversions_refused_like_the_nested_form():
    cases = [(np.array([1.5, 2.0]), D.Int32, TypeError),
             (np.array([True]), D.Int32, TypeError),
             (np.array([1, 0]), D.Bool, TypeError),
             (np.array([0.0]), D.Bool, TypeError),
             (np.array([2 ** 31]), D.Int32, OverflowError),
             (np.array([-(2 ** 31) - 1]), D.Int32, OverflowError),
             (np.array([2 ** 64 - 1], dtype=np.uint64), D.Int32, OverflowError)]
    for a, dtype, exc in cases:
        with pytest.raises(exc) as ours:
            F.tensor(a, dtype=dtype)
        with pytest.raises(exc) as nested:
            F.tensor(a.tolist(), dtype=dtype)
        assert str(ours.value).split(",")[0].split(" not ")[0] == \
            str(nested.value).split(",")[0].split(" not ")[0]


def test_f2_argument_checks_still_come_first():
    a = np.arange(3)
    with pytest.raises(TypeError, match="layout must be a Layout"):
        F.tensor(a, layout=3)
    with pytest.raises(TypeError):
        F.tensor(a, dtype="float32")
    with pytest.raises(ValueError):
        F.tensor(a, dtype=D.ScaledInt32)


def test_f2_with_layout_still_takes_a_flat_iterable():
    t = F.tensor(np.array([1.0, 2.0, 3.0, 4.0]), layout=F.row_major(2, 2))
    assert t[1, 0] == 2.0 and t[0, 1] == 3.0  # value k at ordinal k, as for a list


def test_f2_non_numeric_buffers_follow_f2():
    with pytest.raises(ValueError, match="non-empty list or tuple"):
        F.tensor(np.array(["a", "b"]))
    with pytest.raises(ValueError, match="non-empty list or tuple"):
        F.tensor(np.array([(1, 2.0)], dtype=[("a", "i4"), ("b", "f4")]))


def test_f2_large_buffer_round_trip():
    a = np.random.default_rng(0).standard_normal((300, 200))
    t = F.tensor(a)
    np.testing.assert_array_equal(np.asarray(t), a.astype(np.float32))
