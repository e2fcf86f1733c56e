"""friendly.tensor(array) for any array (issue 18 item 3): whatever exports
DLPack (PyTorch, JAX), the buffer protocol (NumPy, array.array) or
__array__ is copied so that t[i, j] == a[i, j]; without dtype= the array's
kind picks Float32 / Int32 / Bool, and an integer array whose values do not
fit Int32 is refused with a message naming dtype= (never a silent Float32)."""
import array
import itertools
import sys

import numpy as np
import pytest
import torch

import strideweave as sw
from strideweave import friendly as F

D = sw.DType


def same_logical_values(t, a):
    """t[i, j, ...] == a[i, j, ...] at every coordinate, and the shape."""
    a = np.asarray(a)
    assert t.layout.shape == sw.Shape(list(a.shape))
    for idx in itertools.product(*(range(n) for n in a.shape)):
        assert t[idx] == a[idx].item(), idx
    np.testing.assert_array_equal(np.asarray(t), a)


def test_torch_tensor_is_accepted_issue_example():
    a = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    t = F.tensor(a)
    assert t.dtype() == D.Float32 and type(t.carrier) is sw.CPU
    same_logical_values(t, a.numpy())
    assert torch.equal(torch.from_dlpack(t), a)


@pytest.mark.parametrize("make", [
    lambda b: b.t(),                       # transposed
    lambda b: b[:, ::2],                   # stepped
    lambda b: b[1:, 1:3],                  # sliced, not contiguous
    lambda b: b.flip(0),                   # negative strides on the NumPy side
    lambda b: b[:, :1].expand(4, 5),       # broadcast (stride 0)
    lambda b: b.unsqueeze(1),              # extent-1 mode
], ids=["transpose", "step", "slice", "flip", "expand", "unsqueeze"])
def test_torch_strided_inputs_keep_logical_values(make):
    base = torch.arange(20, dtype=torch.float32).reshape(4, 5)
    a = make(base)
    same_logical_values(F.tensor(a), a.numpy())


@pytest.mark.parametrize("src_dtype", [np.float16, np.float32, np.float64])
def test_float_arrays_become_float32(src_dtype):
    a = (np.arange(6).reshape(2, 3) / 4).astype(src_dtype)
    t = F.tensor(a)
    assert t.dtype() == D.Float32
    same_logical_values(t, a.astype(np.float32))


def test_float64_rounds_to_nearest_float32():
    a = np.array([0.1, 1 / 3, 1e39])
    t = F.tensor(a)
    assert t.tolist() == [float(np.float32(0.1)), float(np.float32(1 / 3)), float("inf")]
    t64 = F.tensor(torch.from_numpy(a))
    assert t64.tolist() == t.tolist()


@pytest.mark.parametrize("src", ["int8", "uint8", "int16", "int32", "int64", "uint32", "uint64"])
def test_integer_arrays_become_int32_when_values_fit(src):
    a = np.array([[0, 1, 100], [2, 3, 127]], dtype=src)
    t = F.tensor(a)
    assert t.dtype() == D.Int32
    same_logical_values(t, a.astype(np.int32))
    tt = F.tensor(torch.from_numpy(a)) if src not in ("uint32", "uint64") else t
    assert tt.dtype() == D.Int32 and tt.tolist() == t.tolist()


@pytest.mark.parametrize("make", [
    lambda: np.array([1, 2 ** 31], dtype=np.int64),
    lambda: np.array([-(2 ** 31) - 1], dtype=np.int64),
    lambda: np.array([2 ** 32], dtype=np.uint64),
    lambda: torch.tensor([0, 2 ** 40]),
], ids=["int64-high", "int64-low", "uint64", "torch-int64"])
def test_integer_overflow_is_refused_naming_dtype(make):
    with pytest.raises(OverflowError, match=r"dtype=DType\.Float32"):
        F.tensor(make())


def test_integer_overflow_converts_when_float32_is_asked_for():
    a = np.array([1, 2 ** 40], dtype=np.int64)
    assert F.tensor(a, dtype=D.Float32).tolist() == [1.0, float(2 ** 40)]
    assert F.tensor(torch.from_numpy(a), dtype=D.Float32).tolist() == [1.0, float(2 ** 40)]


def test_bool_arrays_become_bool():
    a = np.array([[True, False], [False, True]])
    for src in (a, torch.from_numpy(a)):
        t = F.tensor(src)
        assert t.dtype() == D.Bool
        same_logical_values(t, a)
    assert F.tensor(a, dtype=D.Float32).tolist() == [1.0, 0.0, 0.0, 1.0]


def test_array_array_every_typecode():
    assert F.tensor(array.array("d", [0.5, 1.5])).dtype() == D.Float32
    t = F.tensor(array.array("q", [1, -2, 3]))
    assert t.dtype() == D.Int32 and t.tolist() == [1, -2, 3]
    assert F.tensor(array.array("B", [255])).tolist() == [255]


class OnlyArray:
    """An object offering nothing but __array__ (pandas, xarray, ...)."""

    def __init__(self, a):
        self.a = a

    def __array__(self, dtype=None, copy=None):
        return self.a


class LegacyDLPack:
    """A producer older than DLPack 1.0: __dlpack__ takes no max_version."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, stream=None):
        return self.a.__dlpack__()

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_array_interface_only_objects():
    a = np.arange(6, dtype=np.float32).reshape(3, 2)
    same_logical_values(F.tensor(OnlyArray(a)), a)


def test_legacy_dlpack_capsule_is_read():
    a = torch.arange(6, dtype=torch.int32).reshape(2, 3).t()
    t = F.tensor(LegacyDLPack(a))
    assert t.dtype() == D.Int32
    same_logical_values(t, a.numpy())


@pytest.mark.parametrize("wrap", [lambda a: a, LegacyDLPack], ids=["versioned", "legacy"])
def test_dlpack_capsule_is_deleted_after_the_copy(wrap):
    a = torch.arange(1000, dtype=torch.float32)
    before = sys.getrefcount(a)
    for _ in range(5):
        F.tensor(wrap(a))
    # the managed tensor held `a`; its deleter ran once per copy
    assert sys.getrefcount(a) == before


def test_copy_never_aliases_the_source():
    a = torch.zeros(4)
    t = F.tensor(a)
    a[0] = 5.0
    assert t[0] == 0.0
    t[1] = 7.0
    assert a[1] == 0.0


def test_bad_arrays_are_refused_clearly():
    with pytest.raises(TypeError, match="bfloat16"):
        F.tensor(torch.ones(2, dtype=torch.bfloat16))
    with pytest.raises(TypeError, match="complex"):
        F.tensor(torch.ones(2, dtype=torch.complex64))
    with pytest.raises(ValueError, match="single value"):
        F.tensor(torch.tensor(3.0))
    with pytest.raises(ValueError, match="empty levels"):
        F.tensor(torch.zeros(2, 0))
    with pytest.raises(TypeError, match="Int32 value must be an integer"):
        F.tensor(torch.ones(2), dtype=D.Int32)


def test_jax_array_if_installed():
    jnp = pytest.importorskip("jax.numpy")
    a = jnp.arange(6, dtype=jnp.float32).reshape(2, 3)
    same_logical_values(F.tensor(a), np.asarray(a))


def test_large_contiguous_float32_round_trip():
    a = np.random.default_rng(0).standard_normal((512, 300)).astype(np.float32)
    t = F.tensor(a)
    assert t.layout == F.row_major(512, 300)  # the array's own order: one memcpy
    np.testing.assert_array_equal(np.asarray(t), a)
    f = np.asfortranarray(a)
    assert F.tensor(f).layout == F.column_major(512, 300)
    np.testing.assert_array_equal(np.asarray(F.tensor(f)), a)


def test_strideweave_tensors_are_copied_too():
    m = F.tensor([[1.0, 2.0], [3.0, 4.0]])
    row = F.tensor(m[1, :])                  # a view's values, over DLPack
    assert row.tolist() == [3.0, 4.0] and not m.carrier.is_released()
    row[0] = 9.0
    assert m[1, 0] == 3.0                    # a copy, not an alias
    on_file = sw.move(F.tensor([5.0, 6.0]), sw.FileBacked())
    # no DLPack export from a file: __array__ serves the values instead
    assert F.tensor(on_file).tolist() == [5.0, 6.0]


def test_array_classes_are_not_arrays():
    for cls in (np.ndarray, torch.Tensor, sw.Tensor):
        with pytest.raises(ValueError, match="non-empty list or tuple"):
            F.tensor(cls)
