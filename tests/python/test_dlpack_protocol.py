"""DLPack export protocol (seed: interop-movement, export half; C-16, T-10,
T-11): produced structure and version, argument rules and their check order,
the carrier opt-in through dlpack_info, raw managed-tensor fields read through
ctypes, read-only flag, version tracking, and the absence of any import path.

Consumers (NumPy, PyTorch) are exercised in test_dlpack_consumers.py; capsule
lifetime in test_dlpack_lifetime.py."""

import ctypes

import pytest

import strideweave as sw
from carriers_for_tests import Foreign
from carriers_for_tests import capsule_get_pointer as _get_pointer
from carriers_for_tests import capsule_is_valid as _is_valid

F32 = sw.DType.Float32
I32 = sw.DType.Int32
BOOL = sw.DType.Bool


# ---- raw DLPack 1.0 structures, as a consumer reads them --------------------


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", DELETER),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


def capsule_name(cap):
    for name in ("dltensor", "dltensor_versioned", "used_dltensor", "used_dltensor_versioned"):
        if _is_valid(cap, name.encode()):
            return name
    return None


def read_capsule(cap):
    """(managed struct copy, DLTensor dict) of an unconsumed capsule."""
    name = capsule_name(cap)
    ptr = _get_pointer(cap, name.encode())
    managed = (DLManagedTensorVersioned if name == "dltensor_versioned" else DLManagedTensor).from_address(ptr)
    t = managed.dl_tensor
    fields = {
        "data": t.data or 0,
        "device": (t.device.device_type, t.device.device_id),
        "ndim": t.ndim,
        "dtype": (t.dtype.code, t.dtype.bits, t.dtype.lanes),
        "shape": [t.shape[i] for i in range(t.ndim)],
        "strides": [t.strides[i] for i in range(t.ndim)],
        "byte_offset": t.byte_offset,
    }
    if name == "dltensor_versioned":
        fields["version"] = (managed.version.major, managed.version.minor)
        fields["flags"] = managed.flags
    return fields


# ---- helpers -----------------------------------------------------------------


def slot_value(i, dtype):
    return i * 7 - 3 if dtype is I32 else 1.0 + 0.25 * i


def make_tensor(shape, stride, offset=0, dtype=F32, spare=2, mutable=True):
    layout = sw.Layout(sw.Shape(shape), sw.Stride(stride))
    n = offset + layout.cosize + spare
    carrier = sw.CPU(n, dtype=dtype, mutable=mutable)
    if mutable:
        for i in range(n):
            carrier[i] = slot_value(i, dtype) if dtype is not BOOL else bool(i % 2)
    return sw.Tensor(carrier, offset, layout)


def flat(n=6, dtype=F32, offset=0, mutable=True):
    return make_tensor([n], [1], offset, dtype, mutable=mutable)


class NoOptIn(sw.Carrier):
    """A Python carrier that does not override dlpack_info (C-16 base)."""

    def __init__(self, n, dtype=F32):
        super().__init__()
        self.n, self.dt = n, dtype

    def size(self):
        return self.n

    def dtype(self):
        return self.dt

    def get_value(self, i):
        return 0


def foreign_tensor(info=None, n=6, dtype=F32, offset=0):
    cpu = sw.CPU(n + offset, dtype=dtype)
    return sw.Tensor(Foreign(cpu, info), offset, sw.Layout(sw.Shape([n]), sw.Stride([1])))


# ---- structure and version ---------------------------------------------------


def test_legacy_capsule_without_max_version():
    # Seed: "Fall back to the legacy structure"
    t = flat()
    assert capsule_name(t.__dlpack__()) == "dltensor"
    assert capsule_name(t.__dlpack__(max_version=None)) == "dltensor"


@pytest.mark.parametrize("mv", [(0, 0), (0, 9), [0, 1], (0, 2**70)])
def test_legacy_capsule_for_major_zero(mv):
    assert capsule_name(flat().__dlpack__(max_version=mv)) == "dltensor"


@pytest.mark.parametrize("mv", [(1, 0), (1, 7), (2, 3), [1, 0], [5, 0], (2**70, 0), (1, 2**70)])
def test_versioned_capsule_reports_exactly_1_0(mv):
    # Seed: "Produce a versioned capsule for a 1.x consumer"; producer caps at 1.0
    cap = flat().__dlpack__(max_version=mv)
    assert capsule_name(cap) == "dltensor_versioned"
    assert read_capsule(cap)["version"] == (1, 0)


def test_max_version_accepts_tuple_and_list_subclasses_and_index_objects():
    class Tup(tuple):
        pass

    class Idx:
        def __init__(self, v):
            self.v = v

        def __index__(self):
            return self.v

    t = flat()
    assert capsule_name(t.__dlpack__(max_version=Tup((1, 0)))) == "dltensor_versioned"
    assert capsule_name(t.__dlpack__(max_version=(Idx(1), Idx(0)))) == "dltensor_versioned"
    assert capsule_name(t.__dlpack__(max_version=(Idx(0), Idx(3)))) == "dltensor"


@pytest.mark.parametrize("mv", [1, "1.0", 1.0, {1: 0}, range(2), b"\x01\x00", object()])
def test_max_version_not_tuple_or_list_is_type_error(mv):
    with pytest.raises(TypeError, match="max_version must be None, a tuple or a list"):
        flat().__dlpack__(max_version=mv)


@pytest.mark.parametrize("mv", [(), (1,), [1], (1, 0, 0), [1, 0, 0]])
def test_max_version_needs_exactly_two_elements(mv):
    with pytest.raises(ValueError, match="max_version must have exactly two elements"):
        flat().__dlpack__(max_version=mv)


@pytest.mark.parametrize("mv", [(-1, 0), (1, -1), (0, -1), [-1, 5], (-(2**70), 0), (1, -(2**70))])
def test_max_version_negative_component_is_value_error(mv):
    with pytest.raises(ValueError, match="non-negative"):
        flat().__dlpack__(max_version=mv)


def test_max_version_non_integer_element_fails():
    # The seed leaves the failure unspecified; ours is TypeError.
    with pytest.raises(TypeError, match="integers"):
        flat().__dlpack__(max_version=(1.0, 0))
    with pytest.raises(TypeError, match="integers"):
        flat().__dlpack__(max_version=(True, 0))


# ---- signature ---------------------------------------------------------------


def test_signature_stream_positional_or_keyword_others_keyword_only():
    t = flat()
    assert capsule_name(t.__dlpack__(None)) == "dltensor"
    assert capsule_name(t.__dlpack__(stream=None)) == "dltensor"
    with pytest.raises(TypeError, match="keyword-only"):
        t.__dlpack__(None, (1, 0))
    with pytest.raises(TypeError, match="keyword-only"):
        t.__dlpack__(None, None, (1, 0))
    with pytest.raises(TypeError, match="multiple values for argument 'stream'"):
        t.__dlpack__(None, stream=None)
    with pytest.raises(TypeError, match="unexpected keyword argument 'device'"):
        t.__dlpack__(device=(1, 0))
    with pytest.raises(TypeError):
        t.__dlpack_device__(None)


@pytest.mark.parametrize("stream", [None, 0, 1, -1, 2**80, "stream", object(), (1, 2)])
def test_stream_accepted_in_any_form_and_ignored(stream):
    # Seed: stream "SHALL leave the result identical to omitting it"
    t = flat(offset=2)
    base = read_capsule(t.__dlpack__(max_version=(1, 0)))
    assert read_capsule(t.__dlpack__(stream, max_version=(1, 0))) == base
    assert read_capsule(t.__dlpack__(stream=stream, max_version=(1, 0))) == base
    assert read_capsule(t.__dlpack__(stream)) == {k: v for k, v in base.items() if k not in ("version", "flags")}


# ---- zero-copy fields --------------------------------------------------------


LAYOUTS = [
    ("flat", [6], [1], 0),
    ("flat_offset", [5], [1], 3),
    ("hierarchical", [2, [3, 4]], [1, [2, 6]], 0),
    ("hierarchical_offset", [2, [3, 4]], [1, [2, 6]], 7),
    ("gapped", [2, 3], [1, 4], 2),
    ("row_major", [3, 4], [4, 1], 1),
    ("broadcast", [2, 3], [1, 0], 4),
    ("broadcast_nested", [2, [4, 3]], [1, [0, 2]], 0),
    ("rank6", [2, [2, [2, 2]], [2, 2]], [1, [2, [4, 8]], [16, 32]], 5),
    ("rank0", [], [], 3),
]


def leaves(items):
    out = []
    for x in items:
        out.extend(leaves(x) if isinstance(x, list) else [x])
    return out


@pytest.mark.parametrize("name,shape,stride,offset", LAYOUTS, ids=[c[0] for c in LAYOUTS])
@pytest.mark.parametrize("dtype", [F32, I32], ids=["Float32", "Int32"])
@pytest.mark.parametrize("versioned", [False, True], ids=["legacy", "versioned"])
def test_raw_fields_are_leaf_modes_pointer_and_byte_offset(name, shape, stride, offset, dtype, versioned):
    # Seed: "Flatten a hierarchical layout", "Preserve broadcast strides",
    # "Address the tensor's window"; C-16 CPU device (1, 0); dtype mapping.
    t = make_tensor(shape, stride, offset, dtype)
    assert t.layout.infix() == list(zip(leaves(shape), leaves(stride)))
    cap = t.__dlpack__(max_version=(1, 0) if versioned else None)
    f = read_capsule(cap)
    assert f["data"] == t.carrier.pointer()
    assert f["byte_offset"] == offset * 4
    assert f["device"] == (1, 0)
    assert f["ndim"] == len(leaves(shape))
    assert f["shape"] == leaves(shape)
    assert f["strides"] == leaves(stride)  # in elements, stride 0 kept
    assert f["dtype"] == ((2, 32, 1) if dtype is F32 else (0, 32, 1))
    if versioned:
        assert f["version"] == (1, 0)
        assert f["flags"] == 0
    else:
        assert "flags" not in f


def test_each_export_is_a_fresh_managed_tensor():
    t = flat()
    a, b = t.__dlpack__(), t.__dlpack__()
    assert _get_pointer(a, b"dltensor") != _get_pointer(b, b"dltensor")
    assert read_capsule(a) == read_capsule(b)


# ---- read-only flag (T-10, C-13) -----------------------------------------------


def test_mutable_tensor_versioned_flags_zero():
    # Seed: "Leave a mutable tensor writable"
    assert read_capsule(flat().__dlpack__(max_version=(1, 0)))["flags"] == 0


def test_immutable_carrier_sets_read_only_flag():
    # Seed: "Mark an immutable tensor read-only"
    t = flat(mutable=False)
    assert t.is_mutable() is False
    assert read_capsule(t.__dlpack__(max_version=(1, 0)))["flags"] == 1


def test_owned_carrier_sets_read_only_flag_and_follows_ownership():
    # C-13: an owned carrier is not publicly mutable; the flag follows at export time.
    t = flat()
    token = t.carrier._claim_ownership()
    assert t.is_mutable() is False
    assert read_capsule(t.__dlpack__(max_version=(2, 3)))["flags"] == 1
    t.carrier._begin_owner_access(token)
    try:
        assert t.is_mutable() is True
        assert read_capsule(t.__dlpack__(max_version=(1, 0)))["flags"] == 0
    finally:
        t.carrier._end_owner_access(token)
    t.carrier._relinquish_ownership(token)
    assert read_capsule(t.__dlpack__(max_version=(1, 0)))["flags"] == 0


def test_legacy_export_carries_no_mutability_information():
    # Seed: "Lose the signal on a legacy export": identical legacy structures.
    mut, imm = flat(mutable=True), flat(mutable=False)
    fm = read_capsule(mut.__dlpack__())
    fi = read_capsule(imm.__dlpack__())
    fm.pop("data"), fi.pop("data")
    assert fm == fi
    assert "flags" not in fi


# ---- dl_device and copy --------------------------------------------------------


@pytest.mark.parametrize("dev", [(1, 0), [1, 0]])
def test_dl_device_equal_to_own_device_is_accepted(dev):
    # Seed: "Accept the tensor's own device"
    t = flat()
    assert t.__dlpack_device__() == (1, 0)
    f = read_capsule(t.__dlpack__(dl_device=dev, max_version=(1, 0)))
    assert f["data"] == t.carrier.pointer()


@pytest.mark.parametrize("dev", [(2, 0), (1, 1), (0, 0), (1, -1), (2**70, 0), (1, 2**70), (1, -(2**70))])
def test_dl_device_other_device_is_buffer_error(dev):
    # Seed: "Refuse a cross-device export"; huge components are a mismatch, not OverflowError.
    with pytest.raises(BufferError, match="dl_device"):
        flat().__dlpack__(dl_device=dev)


@pytest.mark.parametrize("dev", ["cpu", 1, 1.0, {1: 0}, object()])
def test_dl_device_not_tuple_or_list_is_type_error(dev):
    with pytest.raises(TypeError, match="dl_device must be None, a tuple or a list"):
        flat().__dlpack__(dl_device=dev)


@pytest.mark.parametrize("dev", [(), (1,), [1], (1, 0, 0)])
def test_dl_device_needs_exactly_two_elements(dev):
    with pytest.raises(ValueError, match="dl_device must have exactly two elements"):
        flat().__dlpack__(dl_device=dev)


def test_dl_device_non_integer_element_fails():
    with pytest.raises(TypeError, match="dl_device elements must be integers"):
        flat().__dlpack__(dl_device=(1.0, 0))


@pytest.mark.parametrize("copy", [True, 1, "yes", [0]])
def test_truthy_copy_is_buffer_error(copy):
    # Seed: "Refuse a copy export"
    with pytest.raises(BufferError, match="copy"):
        flat().__dlpack__(copy=copy)


@pytest.mark.parametrize("copy", [None, False, 0, "", []])
def test_falsy_copy_aliases(copy):
    t = flat()
    assert read_capsule(t.__dlpack__(copy=copy))["data"] == t.carrier.pointer()


def test_copy_truth_test_exception_propagates():
    class Bad:
        def __bool__(self):
            raise ZeroDivisionError("no truth")

    with pytest.raises(ZeroDivisionError, match="no truth"):
        flat().__dlpack__(copy=Bad())


# ---- dtype (seed: only Float32 and Int32) --------------------------------------


def test_bool_cpu_reports_device_but_export_fails_on_dtype():
    # Seed: "Report a device for a non-exportable dtype"
    t = flat(dtype=BOOL)
    assert t.__dlpack_device__() == (1, 0)
    with pytest.raises(BufferError, match="DLPack export supports Float32 and Int32, not Bool"):
        t.__dlpack__()
    with pytest.raises(BufferError, match="Float32 and Int32, not Bool"):
        t.__dlpack__(max_version=(1, 0))


class Opaque(sw.Carrier):
    """A user carrier with legacy opaque storage (D-4) that opts into DLPack."""

    def __init__(self, cpu, dt):
        super().__init__()
        self.cpu, self.dt = cpu, dt

    def size(self):
        return self.cpu.size()

    def dtype(self):
        return self.dt

    def get_value(self, i):
        return self.cpu[i]

    def _supports_storage_dtype(self, d):
        return d is self.dt

    def dlpack_info(self):
        return {"pointer": self.cpu.pointer(), "device_type": 1, "device_id": 0}


@pytest.mark.parametrize("name", ["Floating", "Any"])
def test_opaque_storage_dtype_on_exporting_user_carrier_is_buffer_error(name):
    dt = getattr(sw.DType, name)
    t = sw.Tensor(Opaque(sw.CPU(4), dt), 0, sw.Layout(sw.Shape([4]), sw.Stride([1])))
    assert t.__dlpack_device__() == (1, 0)
    with pytest.raises(BufferError, match=f"supports Float32 and Int32, not {name}"):
        t.__dlpack__()


def test_user_carrier_bool_is_buffer_error():
    t = foreign_tensor(dtype=BOOL)
    with pytest.raises(BufferError, match="not Bool"):
        t.__dlpack__(dl_device=(2, 0))


# ---- carrier opt-in (C-16) -------------------------------------------------------


def test_cpu_dlpack_info_matches_fast_path():
    t = flat()
    assert t.carrier.dlpack_info() == {"pointer": t.carrier.pointer(), "device_type": 1, "device_id": 0}
    assert t.__dlpack_device__() == (1, 0)


def test_generic_refuses_both_calls():
    # Seed: "Reject a non-exporting carrier" (Generic)
    t = sw.Tensor(sw.Generic([1.0, 2.0]), 0, sw.Layout(sw.Shape([2]), sw.Stride([1])))
    with pytest.raises(BufferError, match="DLPack is not supported"):
        t.__dlpack__()
    with pytest.raises(BufferError, match="DLPack is not supported"):
        t.__dlpack_device__()


def test_file_backed_refuses_both_calls():
    # Seed: "Reject a non-exporting carrier" (FileBacked)
    fb = sw.FileBacked()
    fb._allocate(2)
    t = sw.Tensor(fb, 0, sw.Layout(sw.Shape([2]), sw.Stride([1])))
    with pytest.raises(BufferError, match="DLPack is not supported"):
        t.__dlpack__(max_version=(1, 0))
    with pytest.raises(BufferError, match="DLPack is not supported"):
        t.__dlpack_device__()
    fb.release()


def test_python_carrier_without_hook_refuses_both_calls():
    t = sw.Tensor(NoOptIn(3), 0, sw.Layout(sw.Shape([3]), sw.Stride([1])))
    with pytest.raises(BufferError, match="DLPack is not supported"):
        t.__dlpack__()
    with pytest.raises(BufferError, match="DLPack is not supported"):
        t.__dlpack_device__()


def test_foreign_device_reported_and_exported_verbatim():
    # Seed: "Report a foreign device verbatim" (never handed to a consumer)
    t = foreign_tensor(offset=2)
    assert t.__dlpack_device__() == (2, 0)
    f = read_capsule(t.__dlpack__(dl_device=(2, 0), max_version=(1, 0)))
    assert f["device"] == (2, 0)
    assert f["data"] == t.carrier.cpu.pointer()
    assert f["byte_offset"] == 8
    assert f["flags"] == 1  # a Python carrier without _is_mutable is intrinsically immutable (C-2)
    assert read_capsule(t.__dlpack__(dl_device=[2, 0]))["device"] == (2, 0)
    with pytest.raises(BufferError, match="dl_device"):
        t.__dlpack__(dl_device=(1, 0))


def test_hook_exception_propagates_unchanged():
    class Boom(Exception):
        pass

    err = Boom("from the hook")

    def info(self):
        raise err

    t = foreign_tensor(info)
    for call in (t.__dlpack__, t.__dlpack_device__):
        with pytest.raises(Boom) as caught:
            call()
        assert caught.value is err
    # a KeyError or TypeError raised by the hook itself is not re-labelled
    t2 = foreign_tensor(lambda self: {}["pointer"])
    with pytest.raises(KeyError):
        t2.__dlpack__()


@pytest.mark.parametrize("value", [5, None, 1.5, object(), [1, 2], "ab", [("pointer", 1, 2)]])
def test_hook_value_not_convertible_by_dict_is_type_error(value):
    t = foreign_tensor(lambda self: value)
    with pytest.raises(TypeError, match="dlpack_info"):
        t.__dlpack__()
    with pytest.raises(TypeError, match="dlpack_info"):
        t.__dlpack_device__()


def test_hook_value_converted_with_dict():
    def pairs(self):
        return [("device_id", 0), ("pointer", self.cpu.pointer()), ("device_type", 2), ("extra", "ignored")]

    t = foreign_tensor(pairs)
    assert t.__dlpack_device__() == (2, 0)
    assert read_capsule(t.__dlpack__(dl_device=(2, 0)))["data"] == t.carrier.cpu.pointer()


@pytest.mark.parametrize("missing", ["pointer", "device_type", "device_id"])
def test_hook_missing_key_is_key_error(missing):
    def info(self):
        d = {"pointer": self.cpu.pointer(), "device_type": 2, "device_id": 0, "other": 1}
        del d[missing]
        return d

    t = foreign_tensor(info)
    with pytest.raises(KeyError, match=missing):
        t.__dlpack__()
    with pytest.raises(KeyError, match=missing):
        t.__dlpack_device__()


def test_hook_null_pointer_with_elements_is_buffer_error():
    t = foreign_tensor(lambda self: {"pointer": 0, "device_type": 2, "device_id": 0})
    assert t.__dlpack_device__() == (2, 0)
    with pytest.raises(BufferError, match="non-null"):
        t.__dlpack__()


def test_released_cpu_reports_device_but_refuses_export():
    # Seed: a released carrier reporting a null pointer fails; C-21 pointer() is 0.
    t = flat()
    t.carrier.release()
    assert t.carrier.pointer() == 0
    assert t.__dlpack_device__() == (1, 0)
    with pytest.raises(BufferError, match="non-null"):
        t.__dlpack__()
    with pytest.raises(BufferError, match="non-null"):
        t.__dlpack__(max_version=(1, 0), dl_device=(1, 0), copy=False)


# ---- check order -------------------------------------------------------------------


def generic_bool():
    return sw.Tensor(sw.Generic([True, False], dtype=BOOL), 0, sw.Layout(sw.Shape([2]), sw.Stride([1])))


def test_order_carrier_before_dtype():
    # Seed: "a tensor that fails both checks SHALL report the carrier failure"
    with pytest.raises(BufferError, match="DLPack is not supported"):
        generic_bool().__dlpack__()


def test_order_max_version_before_dl_device():
    with pytest.raises(TypeError, match="max_version"):
        flat().__dlpack__(max_version=5, dl_device="x")
    with pytest.raises(ValueError, match="max_version"):
        flat().__dlpack__(max_version=(1,), dl_device=(1,))


def test_order_dl_device_shape_before_carrier():
    with pytest.raises(TypeError, match="dl_device"):
        generic_bool().__dlpack__(dl_device="cpu")
    with pytest.raises(ValueError, match="dl_device"):
        generic_bool().__dlpack__(dl_device=(1,))


def test_order_carrier_before_device_copy_and_dtype():
    with pytest.raises(BufferError, match="DLPack is not supported"):
        generic_bool().__dlpack__(dl_device=(2, 0), copy=True)


def test_order_device_before_copy():
    with pytest.raises(BufferError, match="dl_device"):
        flat().__dlpack__(dl_device=(2, 0), copy=True)


def test_order_copy_before_null_pointer():
    t = flat()
    t.carrier.release()
    with pytest.raises(BufferError, match="copy"):
        t.__dlpack__(copy=True)


def test_order_null_pointer_before_dtype():
    t = flat(dtype=BOOL)
    t.carrier.release()
    with pytest.raises(BufferError, match="non-null"):
        t.__dlpack__()


def test_order_hook_before_device_mismatch():
    t = foreign_tensor(lambda self: {"device_type": 2, "device_id": 0})
    with pytest.raises(KeyError, match="pointer"):
        t.__dlpack__(dl_device=(1, 0))


# ---- multi-subtensor (T-11) --------------------------------------------------------


def test_multi_subtensor_rejected_first_and_untouched():
    # Seed: "Reject a multi-subtensor export"
    t = sw.friendly.scaled_int32([[1, 2], [3, 4]], scale=0.5)
    carriers = [s[1] for s in t._subtensors]
    token = t._version_token()
    versions = [c.version for c in carriers]
    for kwargs in ({}, {"max_version": (1, 0)}, {"max_version": "bad"}, {"dl_device": (9, 9), "copy": True}):
        with pytest.raises(NotImplementedError, match="^DLPack export is not implemented for ScaledInt32 tensors \\(two planes\\); only Float32 and Int32 tensors on one carrier can be exported$"):
            t.__dlpack__(**kwargs)
    with pytest.raises(NotImplementedError, match="^DLPack export is not implemented for ScaledInt32 tensors \\(two planes\\); only Float32 and Int32 tensors on one carrier can be exported$"):
        t.__dlpack_device__()
    assert t._version_token() == token
    assert [c.version for c in carriers] == versions
    assert [c.is_released() for c in carriers] == [False, False]


def test_multi_subtensor_never_consults_carrier_hook():
    calls = []

    def info(self):
        calls.append(1)
        return {"pointer": self.cpu.pointer(), "device_type": 1, "device_id": 0}

    cpu = sw.CPU(4, dtype=I32)
    scale = sw.CPU(1)
    lay = sw.Layout(sw.Shape([4]), sw.Stride([1]))
    one = sw.Layout(sw.Shape([1]), sw.Stride([1]))
    t = sw.Tensor._from_representation(
        sw.DType.ScaledInt32, [(cpu, 0, lay), (scale, 0, one)], [sw.Layout(sw.Shape([4]), sw.Stride([0]))]
    )
    with pytest.raises(NotImplementedError):
        t.__dlpack__()
    with pytest.raises(NotImplementedError):
        t.__dlpack_device__()
    assert calls == []


# ---- version tracking and export-only ------------------------------------------------


def test_export_leaves_version_unchanged():
    # Seed: "Leave the version unchanged across export"
    t = flat()
    t.carrier[0] = 5.0
    before = t.carrier.version
    token = t._version_token()
    for _ in range(3):
        t.__dlpack__()
        t.__dlpack__(max_version=(1, 0))
        t.__dlpack_device__()
    assert t.carrier.version == before
    assert t._version_token() == token


def test_no_import_path():
    # Seed: "Offer no adoption path"
    assert not hasattr(sw, "from_dlpack")
    assert not hasattr(sw._C, "from_dlpack")
    assert not any("dlpack" in name.lower() for name in dir(sw) + dir(sw._C))
    cap = flat().__dlpack__()
    with pytest.raises(TypeError):
        sw.Tensor(cap, 0, sw.Layout(sw.Shape([6]), sw.Stride([1])))
    with pytest.raises(TypeError):
        sw.CPU(cap)
    with pytest.raises(TypeError):
        sw.CPU(6, cap)
    with pytest.raises(TypeError):
        sw.Generic(cap)


def test_signature_as_introspected():
    # Seed: __dlpack__(stream=None, *, max_version=None, dl_device=None, copy=None)
    import inspect

    t = flat()
    params = inspect.signature(t.__dlpack__).parameters
    assert list(params) == ["stream", "max_version", "dl_device", "copy"]
    assert params["stream"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    for name in ("max_version", "dl_device", "copy"):
        assert params[name].kind is inspect.Parameter.KEYWORD_ONLY
    assert all(p.default is None for p in params.values())
    assert list(inspect.signature(t.__dlpack_device__).parameters) == []
