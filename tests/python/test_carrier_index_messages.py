"""Out-of-range carrier indices are reported as the caller passed them.

An index past 64 bits used to be clamped before the range check, so
`CPU(8)[2**64]` said "carrier index 9223372036854775807 is out of range".
Every carrier's index path (subscript, get_value, set_value) goes through
the same check; each is exercised here.
"""

import gc
import re

import pytest

import strideweave as sw
from strideweave import CPU, Evictable, FileBacked, Generic
from carriers_for_tests import Foreign
from loop_device import loop_device  # noqa: F401
from tiled_helpers import numbered

HUGE = [2**64, 2**63, -(2**63) - 1, -(2**64), 2**100]


class Huge:
    """An index object whose __index__ is past 64 bits (and counts calls)."""

    def __init__(self, value):
        self.value = value
        self.calls = 0

    def __index__(self):
        self.calls += 1
        return self.value


def carriers():
    yield "CPU", CPU(8)
    yield "Generic", Generic([0.0] * 8)
    yield "FileBacked", FileBacked()
    yield "Evictable", Evictable(CPU(8), CPU(8))
    yield "TiledEvictable", numbered((2,), (4,))
    yield "Foreign", Foreign(CPU(8))


def accesses(carrier):
    yield "subscript", lambda i: carrier[i]
    if isinstance(carrier, Foreign):  # its own get_value hook; no set_value hook
        return
    yield "get_value", lambda i: carrier.get_value(i)
    yield "setitem", lambda i: carrier.__setitem__(i, 1.0)
    yield "set_value", lambda i: carrier.set_value(i, 1.0)


def expected(value, name, size):
    return "^" + re.escape(f"carrier index {value} is out of range for a {name} carrier of size {size}") + "$"


@pytest.mark.parametrize("value", HUGE)
def test_huge_index_is_reported_as_passed_on_every_carrier(value):
    for name, carrier in carriers():
        for how, access in accesses(carrier):
            with pytest.raises(IndexError, match=expected(value, name, carrier.size())):
                access(value)
            obj = Huge(value)
            with pytest.raises(IndexError, match=expected(value, name, carrier.size())):
                access(obj)
            assert obj.calls == 1, (name, how)  # __index__ runs once
    gc.collect()


def test_issue_example_cpu8_index_2_to_64():
    with pytest.raises(IndexError, match=r"^carrier index 18446744073709551616 is out of range for a CPU carrier of size 8$"):
        CPU(8)[2**64]


def test_in_range_of_int64_indices_keep_their_message():
    for value in (8, -1, 2**63 - 1, -(2**63)):
        with pytest.raises(IndexError, match=expected(value, "CPU", 8)):
            CPU(8)[value]


def test_block_device_carrier_index_is_reported_as_passed(loop_device):
    dev = sw.BlockDevice(loop_device)
    c = dev.allocate(2)
    for value in HUGE:
        with pytest.raises(IndexError, match=expected(value, "BlockDeviceCarrier", 2)):
            c[value]
        with pytest.raises(IndexError, match=expected(value, "BlockDeviceCarrier", 2)):
            c[value] = 1.0
    c.release()
    del c
    gc.collect()
    dev.close()
