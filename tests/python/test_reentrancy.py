"""User code that runs inside an entry point (conversion hooks, __bool__,
carrier hooks) cannot make the C code use freed memory or a stale length:
every such test crashed the interpreter or exported a dangling pointer
before the fix."""

import gc

import numpy as np
import pytest

import strideweave as sw
from strideweave import CPU, FileBacked, Generic
from strideweave.friendly import tensor

F, I32 = sw.DType.Float32, sw.DType.Int32


class ClearsItsContainers:
    """An integer whose __index__ empties every list that holds it: the
    framework's private copy of the values included, if it is a list."""

    def __init__(self, value):
        self.value = value

    def __index__(self):
        for ref in gc.get_referrers(self):
            if isinstance(ref, list):
                ref.clear()
        return self.value

    def __float__(self):
        self.__index__()
        return float(self.value)


def evil_values(n=64):
    return [ClearsItsContainers(i) for i in range(n)]


def test_generic_values_mutated_by_a_conversion_hook():
    g = Generic(evil_values(), dtype=I32)
    assert g.size() == 64 and [g[i] for i in (0, 1, 63)] == [0, 1, 63]


@pytest.mark.parametrize("make", [lambda: CPU(1, dtype=I32), lambda: FileBacked(dtype=I32),
                                  lambda: Generic([0], dtype=I32)])
def test_new_like_values_mutated_by_a_conversion_hook(make):
    c = make().new_like(evil_values())
    assert c.size() == 64 and c[63] == 63


def test_friendly_tensor_with_layout_values_mutated_by_a_conversion_hook():
    layout = sw.Layout(sw.Shape(64), sw.Stride(1))
    t = tensor(evil_values(), dtype=I32, layout=layout)
    assert t.tolist() == list(range(64))


def test_friendly_tensor_nested_values_mutated_by_a_conversion_hook():
    t = tensor([evil_values(8), evil_values(8)], dtype=I32)
    assert sorted(t.tolist()) == sorted(list(range(8)) * 2)


def test_defined_carrier_new_like_values_mutated_by_a_conversion_hook():
    import struct
    from strideweave.carriers.extension import CarrierDefinition, StorageProvider

    class Bytes(sw.Carrier):
        pass
    sw.register_carrier_definition(Bytes, CarrierDefinition(StorageProvider(
        lambda c, d: d is I32, lambda c: len(c.buf) // 4,
        lambda c, n: setattr(c, "buf", bytearray(4 * n)), lambda c: None,
        lambda c, i: struct.unpack_from("<i", c.buf, 4 * i)[0],
        lambda c, i, v: struct.pack_into("<i", c.buf, 4 * i, v))))
    made = Bytes(1, dtype=I32).new_like(evil_values())
    assert made.size() == 64 and made[63] == 63


# ---- export reads its pointer after the last piece of user code -------------


class ReleasesOnBool:
    def __init__(self, carrier):
        self.carrier = carrier

    def __bool__(self):
        self.carrier.release()
        return False


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_dlpack_copy_argument_that_releases_the_carrier(max_version):
    t = tensor([1.0, 2.0, 3.0])
    with pytest.raises(BufferError, match="released"):
        t.__dlpack__(max_version=max_version, copy=ReleasesOnBool(t.carrier))
    assert t.carrier.is_released()


def test_dlpack_mutability_hook_that_releases_the_carrier():
    backing = CPU(4)

    class Foreign(sw.Carrier):
        def size(self):
            return backing.size()

        def dtype(self):
            return backing.dtype()

        def get_value(self, i):
            return backing[i]

        def _is_mutable(self):
            self.release()  # user code in the middle of an export
            return True

        def dlpack_info(self):
            return {"pointer": backing.pointer(), "device_type": 1, "device_id": 0}

    t = sw.Tensor(Foreign(), 0, sw.Layout(sw.Shape(4), sw.Stride(1)))
    with pytest.raises(BufferError, match="released"):
        t.__dlpack__(max_version=(1, 0))


def test_dlpack_still_exports_when_the_copy_argument_is_harmless():
    t = tensor([1.0, 2.0])

    class No:
        def __bool__(self):
            return False

    a = np.from_dlpack(t, copy=None)
    assert a.tolist() == [1.0, 2.0]
    capsule = t.__dlpack__(max_version=(1, 0), copy=No())
    assert capsule is not None
