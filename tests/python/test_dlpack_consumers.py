"""DLPack export read by real consumers: numpy.from_dlpack and
torch.from_dlpack (seed: interop-movement, export half).

Every logical coordinate is compared: `t[i]` is the first-mode-fastest ordinal
i (contract-core G-4, V-3), so the consumer array is read in Fortran order
(the leaf modes are the consumer's dimensions, first leaf fastest).

The facts asserted in the "observed consumer behaviour" tests are the ones
README.md's "Consumer compatibility" section records (NumPy 2.4, PyTorch
2.13)."""

import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import strideweave as sw

F32 = sw.DType.Float32
I32 = sw.DType.Int32

LAYOUTS = [
    ("flat", [6], [1], 0),
    ("flat_offset", [5], [1], 3),
    ("hierarchical", [2, [3, 4]], [1, [2, 6]], 0),
    ("hierarchical_offset", [2, [3, 4]], [1, [2, 6]], 7),
    ("gapped", [2, 3], [1, 4], 2),
    ("gapped_hierarchical", [[2, 3], 2], [[1, 5], 16], 1),
    ("row_major", [3, 4], [4, 1], 1),
    ("broadcast", [2, 3], [1, 0], 4),
    ("broadcast_nested", [2, [4, 3]], [1, [0, 2]], 3),
    ("rank6", [2, [2, [2, 2]], [2, 2]], [1, [2, [4, 8]], [16, 32]], 5),
    ("extent_one", [1, 3, 1], [0, 2, 9], 1),
    ("rank0", [], [], 3),
]
IDS = [c[0] for c in LAYOUTS]


def leaves(items):
    out = []
    for x in items:
        out.extend(leaves(x) if isinstance(x, list) else [x])
    return out


def slot_value(i, dtype):
    return i * 7 - 3 if dtype is I32 else 1.0 + 0.25 * i


def make_tensor(shape, stride, offset=0, dtype=F32, spare=2):
    layout = sw.Layout(sw.Shape(shape), sw.Stride(stride))
    n = offset + layout.cosize + spare
    carrier = sw.CPU(n, dtype=dtype)
    for i in range(n):
        carrier[i] = slot_value(i, dtype)
    return sw.Tensor(carrier, offset, layout)


def logical_values(t):
    return [t[i] for i in range(t.size())]


def numpy_fortran(a):
    return np.ravel(a, order="F").tolist()


def torch_fortran(x):
    return x.permute(tuple(reversed(range(x.dim())))).reshape(-1).tolist()


# ---- NumPy ----------------------------------------------------------------------


@pytest.mark.parametrize("name,shape,stride,offset", LAYOUTS, ids=IDS)
@pytest.mark.parametrize("dtype", [F32, I32], ids=["Float32", "Int32"])
def test_numpy_reads_every_coordinate(name, shape, stride, offset, dtype):
    # Seed: "Export a supported dtype", "Flatten a hierarchical layout",
    # "Preserve broadcast strides", "Address the tensor's window"
    t = make_tensor(shape, stride, offset, dtype)
    a = np.from_dlpack(t)
    assert a.dtype == (np.float32 if dtype is F32 else np.int32)
    assert a.shape == tuple(leaves(shape))
    assert a.strides == tuple(4 * s for s in leaves(stride))
    assert a.flags.writeable
    # zero-copy: the array starts at the tensor's window in the carrier's memory
    assert a.__array_interface__["data"][0] == t.carrier.pointer() + 4 * offset
    assert numpy_fortran(a) == logical_values(t)
    for i in range(t.size()):
        assert a[np.unravel_index(i, a.shape, order="F")] == t[i]


def test_numpy_hierarchical_multi_index_matches_nested_key():
    t = make_tensor([2, [3, 4]], [1, [2, 6]], 1)
    a = np.from_dlpack(t)
    for i in range(2):
        for j in range(3):
            for k in range(4):
                assert a[i, j, k] == t[[i, [j, k]]]


def test_numpy_broadcast_reads_one_storage_element_per_zero_stride_mode():
    # Seed: "Preserve broadcast strides"
    t = make_tensor([2, 3], [1, 0], 4)
    a = np.from_dlpack(t)
    assert a.strides == (4, 0)
    for col in range(3):
        assert a[:, col].tolist() == [t.carrier[4], t.carrier[5]]


def test_numpy_broadcast_view_via_broadcast_to():
    base = make_tensor([2, 1], [1, 1], 0)
    t = sw.broadcast_to(base, sw.Shape([2, 3]))
    a = np.from_dlpack(t)
    assert a.strides == (4, 0)
    assert numpy_fortran(a) == logical_values(t)


def test_numpy_slice_view_window():
    base = make_tensor([5, 10], [1, 5], 0)
    t = base[2, 1:9:2]
    assert t.offset == 7
    a = np.from_dlpack(t)
    assert a.shape == (4,) and a.strides == (40,)
    assert a.tolist() == logical_values(t)


def test_numpy_writes_visible_through_tensor_and_reverse():
    # Seed: export aliases the carrier's storage; consumer writes bypass the version.
    t = make_tensor([2, [3, 4]], [1, [2, 6]], 5)
    a = np.from_dlpack(t)
    version = t.carrier.version
    a[1, 2, 3] = -8.5
    ordinal = 1 + 2 * 2 + 3 * 6
    assert t[ordinal] == -8.5
    assert t.carrier.version == version  # a foreign write bypasses version tracking
    t[0] = 123.25
    assert a[0, 0, 0] == np.float32(123.25)
    t[[1, [0, 2]]] = 4.0
    assert a[1, 0, 2] == 4.0


def test_numpy_write_through_broadcast_mode_hits_shared_slot():
    t = make_tensor([2, 3], [1, 0], 0)
    a = np.from_dlpack(t)
    a[1, 2] = 9.0
    assert [t[1 + 2 * k] for k in range(3)] == [9.0, 9.0, 9.0]


def test_numpy_versioned_and_legacy_paths():
    t = make_tensor([2, [3, 4]], [1, [2, 6]], 2)

    class Legacy:
        """A wrapper whose __dlpack__ ignores max_version (legacy consumer path)."""

        def __dlpack__(self, stream=None, **kwargs):
            return t.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return t.__dlpack_device__()

    v = np.from_dlpack(t)  # NumPy asks for max_version=(1, 0): versioned
    legacy = np.from_dlpack(Legacy())
    assert numpy_fortran(legacy) == numpy_fortran(v) == logical_values(t)
    assert legacy.__array_interface__["data"][0] == v.__array_interface__["data"][0]
    # Observed NumPy 2.4 behaviour: arrays imported from a legacy capsule are
    # never writable; versioned ones follow the read-only flag.
    assert v.flags.writeable
    assert not legacy.flags.writeable


def test_numpy_accepts_own_device_and_refuses_copy():
    t = make_tensor([4], [1], 0)
    a = np.from_dlpack(t, device="cpu")
    assert a.tolist() == logical_values(t)
    with pytest.raises(BufferError, match="copy"):
        np.from_dlpack(t, copy=True)
    b = np.from_dlpack(t, copy=False)
    assert b.__array_interface__["data"][0] == t.carrier.pointer()


def test_numpy_immutable_carrier_is_read_only():
    # Seed: "Mark an immutable tensor read-only" (a consumer that honors it)
    c = sw.CPU(6, mutable=False)
    t = sw.Tensor(c, 1, sw.Layout(sw.Shape([5]), sw.Stride([1])))
    a = np.from_dlpack(t)
    assert not a.flags.writeable
    assert a.tolist() == [0.0] * 5
    with pytest.raises(ValueError, match="read-only"):
        a[0] = 1.0


def test_numpy_owned_carrier_is_read_only_versioned():
    # C-13: an owned carrier is not publicly mutable at export time.
    t = make_tensor([4], [1], 0)
    token = t.carrier._claim_ownership()
    owned = np.from_dlpack(t)
    assert not owned.flags.writeable
    assert owned.tolist() == logical_values(t)
    t.carrier._relinquish_ownership(token)
    assert np.from_dlpack(t).flags.writeable
    assert not owned.flags.writeable  # decided at export, not later


def test_numpy_rejections_surface_from_export():
    bool_t = sw.Tensor(sw.CPU(2, dtype=sw.DType.Bool), 0, sw.Layout(sw.Shape([2]), sw.Stride([1])))
    with pytest.raises(BufferError, match="Float32 and Int32, not Bool"):
        np.from_dlpack(bool_t)
    gen = sw.Tensor(sw.Generic([1.0]), 0, sw.Layout(sw.Shape([1]), sw.Stride([1])))
    with pytest.raises(BufferError, match="DLPack is not supported"):
        np.from_dlpack(gen)
    multi = sw.friendly.scaled_int32([1, 2])
    with pytest.raises(NotImplementedError, match="DLPack export is not implemented for ScaledInt32 tensors"):
        np.from_dlpack(multi)


def test_export_of_autograd_free_tensor_keeps_version_after_consumer_write():
    # Seed: "Leave the version unchanged across export" / foreign writes bypass it
    t = make_tensor([4], [1], 0)
    token = t._version_token()
    a = np.from_dlpack(t)
    x = torch.from_dlpack(t)
    a[0] = 42.0
    x[1] = 43.0
    assert (t[0], t[1]) == (42.0, 43.0)
    assert t._version_token() == token


# ---- PyTorch -------------------------------------------------------------------


@pytest.mark.parametrize("name,shape,stride,offset", LAYOUTS, ids=IDS)
@pytest.mark.parametrize("dtype", [F32, I32], ids=["Float32", "Int32"])
def test_torch_reads_every_coordinate(name, shape, stride, offset, dtype):
    t = make_tensor(shape, stride, offset, dtype)
    x = torch.from_dlpack(t)
    assert x.dtype == (torch.float32 if dtype is F32 else torch.int32)
    assert x.device.type == "cpu"
    assert tuple(x.shape) == tuple(leaves(shape))
    assert x.stride() == tuple(leaves(stride))
    assert torch_fortran(x) == logical_values(t)


def test_torch_writes_visible_through_tensor_and_reverse():
    t = make_tensor([2, [3, 4]], [1, [2, 6]], 3, I32)
    x = torch.from_dlpack(t)
    x[1, 2, 3] = -77
    assert t[1 + 2 * 2 + 3 * 6] == -77
    t[[0, [1, 1]]] = 55
    assert x[0, 1, 1].item() == 55


def test_torch_versioned_and_legacy_paths():
    t = make_tensor([3, 2], [2, 1], 1)

    class Legacy:
        def __dlpack__(self, stream=None, **kwargs):
            return t.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return t.__dlpack_device__()

    assert torch_fortran(torch.from_dlpack(Legacy())) == logical_values(t)
    assert torch_fortran(torch.from_dlpack(t.__dlpack__())) == logical_values(t)
    assert torch_fortran(torch.from_dlpack(t.__dlpack__(max_version=(1, 0)))) == logical_values(t)


def test_torch_observed_byte_offset_becomes_storage_offset():
    # Observed with PyTorch 2.13: a non-zero byte_offset is honored. The
    # storage starts at DLTensor.data (the carrier's pointer) and the offset
    # becomes storage_offset() in elements; data_ptr() addresses the window.
    t = make_tensor([2, [2, 2]], [1, [2, 4]], 3)
    x = torch.from_dlpack(t)
    assert x.storage_offset() == 3
    assert x.untyped_storage().data_ptr() == t.carrier.pointer()
    assert x.data_ptr() == t.carrier.pointer() + 12
    assert torch_fortran(x) == logical_values(t)


def test_torch_observed_ignores_read_only_flag():
    # Observed with PyTorch 2.13: the read-only flag of a versioned capsule is
    # ignored; the tensor is writable and writes reach the immutable carrier
    # (the flag is advisory, seed). The carrier's version does not move.
    c = sw.CPU(5, mutable=False)
    t = sw.Tensor(c, 1, sw.Layout(sw.Shape([4]), sw.Stride([1])))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # README: "no warning is given"
        x = torch.from_dlpack(t)
        assert x.tolist() == [0.0] * 4
        x[0] = 7.0
    assert c[1] == 7.0
    assert c.version == 0
    assert not np.from_dlpack(t).flags.writeable  # NumPy honors the same flag


def test_observed_consumer_requests():
    # Observed: NumPy 2.4 calls __dlpack__(dl_device=None, copy=None,
    # max_version=(1, 0)) without asking __dlpack_device__(); PyTorch 2.13
    # asks __dlpack_device__() first, then __dlpack__(max_version=(1, 0)).
    t = make_tensor([4], [1], 0)

    class Recorder:
        def __init__(self):
            self.calls = []

        def __dlpack_device__(self):
            self.calls.append("device")
            return t.__dlpack_device__()

        def __dlpack__(self, *args, **kwargs):
            self.calls.append((args, kwargs))
            return t.__dlpack__(*args, **kwargs)

    r = Recorder()
    np.from_dlpack(r)
    assert r.calls == [((), {"dl_device": None, "copy": None, "max_version": (1, 0)})]
    r = Recorder()
    np.from_dlpack(r, device="cpu")
    assert r.calls == [((), {"dl_device": (1, 0), "copy": None, "max_version": (1, 0)})]
    r = Recorder()
    torch.from_dlpack(r)
    assert r.calls == ["device", ((), {"max_version": (1, 0)})]


# ---- property: random hierarchical layouts ---------------------------------------

def _modes(depth):
    leaf = st.tuples(st.integers(1, 3), st.integers(0, 5))
    if depth == 0:
        return leaf
    return st.one_of(leaf, st.lists(_modes(depth - 1), min_size=1, max_size=3))


def _split(modes):
    shape, stride = [], []
    for m in modes:
        if isinstance(m, tuple):
            shape.append(m[0])
            stride.append(m[1])
        else:
            s, d = _split(m)
            shape.append(s)
            stride.append(d)
    return shape, stride


@settings(max_examples=150, deadline=None)
@given(modes=st.lists(_modes(2), min_size=0, max_size=3), offset=st.integers(0, 4),
       dtype=st.sampled_from([F32, I32]))
def test_random_hierarchical_layouts_read_by_numpy_and_torch(modes, offset, dtype):
    # Seed: the exported buffer describes the layout's flattened leaf modes.
    shape, stride = _split(modes)
    t = make_tensor(shape, stride, offset, dtype, spare=0)
    infix = t.layout.infix()
    expected = logical_values(t)
    a = np.from_dlpack(t)
    assert a.shape == tuple(e for e, _ in infix)
    assert a.strides == tuple(4 * s for _, s in infix)
    assert numpy_fortran(a) == expected
    x = torch.from_dlpack(t.__dlpack__(max_version=(1, 0)))
    assert x.stride() == tuple(s for _, s in infix)
    assert torch_fortran(x) == expected
