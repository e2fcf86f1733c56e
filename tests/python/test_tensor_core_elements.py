"""Element reads and writes through the core for every carrier whose slots
the core holds (issue 17).

`t[c]`, `item()` and `tolist()` of a tensor on CPU, Generic, FileBacked,
BlockDeviceCarrier or Evictable read through the core (one
sw_tensor_read_values for a whole tensor), and `t[c] = v` is the carrier's
state check, the value's conversion, then one core sw_tensor_set. What
changes is how often the storage is read; the words of every refusal are
the ones the carrier's own slot access gives (`c[slot]`, `c[slot] = v`).

Fail on the code before this change: the two one-read tests (a tolist of
an Evictable over a file or of a BlockDeviceCarrier read every slot on its
own). The rest are guards of what must not change.
"""

import gc
import numbers

import pytest

import strideweave as sw
from strideweave import _C, CPU, FileBacked, Generic, Layout, Shape, Stride, Tensor

from loop_device import loop_device, loop_device_unavailable  # noqa: F401
from moves_for_tests import held

F, I32 = sw.DType.Float32, sw.DType.Int32

needs_faults = pytest.mark.skipif(not _C._fault_injection_enabled(),
                                  reason="needs the fault-injection build")


class Releasing:
    """A real number whose conversion releases `carrier` first."""

    def __init__(self, carrier, value):
        self.carrier, self.value = carrier, value

    def __float__(self):
        self.carrier.release()
        gc.collect()
        return float(self.value)

    def __index__(self):
        self.carrier.release()
        gc.collect()
        return int(self.value)


numbers.Real.register(Releasing)


def flat(carrier, n):
    return Tensor(carrier, 0, Layout(Shape(n), Stride(1)))


def file_of(values, dtype=F):
    f = FileBacked(dtype=dtype)
    f._allocate(len(values))
    for i, v in enumerate(values):
        f[i] = v
    return f


def block_of(dev, values):
    c = dev.allocate(len(values))
    for i, v in enumerate(values):
        c[i] = v
    return c


MAKERS = {
    "cpu": lambda vals: sw.friendly.tensor(vals, dtype=F).carrier,
    "generic": lambda vals: Generic(list(vals), dtype=F),
    "file": file_of,
    "evictable": lambda vals: sw.Evictable(file_of(vals), CPU(len(vals), dtype=F)),
}


def outcome(fn):
    """(exception type, message) of fn(), or ("ok", its result)."""
    try:
        return ("ok", fn())
    except Exception as e:  # noqa: BLE001 - the type is what is compared
        return (type(e), str(e))


def write(target, key, value):
    target[key] = value


# ---- one read of every value ----------------------------------------------------


@needs_faults
def test_tolist_of_an_evictable_over_a_file_is_one_read():
    values = [float(k) for k in range(8)]
    t = flat(MAKERS["evictable"](values), 8)
    _C._fault_inject("pread", 1, 1)  # a second read of the file would fail
    try:
        assert t.tolist() == values
    finally:
        _C._fault_clear()


@needs_faults
def test_tolist_of_a_block_device_carrier_is_one_read(loop_device):
    values = [float(k) for k in range(8)]
    with sw.BlockDevice(loop_device) as dev:  # closed once its carriers are gone
        t = flat(block_of(dev, values), 8)
        _C._fault_inject("pread", 1, 1)  # a second read of the device would fail
        try:
            assert t.tolist() == values
        finally:
            _C._fault_clear()


# ---- guards: versions and words -------------------------------------------------


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_an_element_write_steps_the_version_once(kind):
    c = MAKERS[kind]([1.0, 2.0, 3.0])
    t = Tensor(c, 1, Layout(Shape(2), Stride(1)))
    before = c.version
    inner = c.primary.version if kind == "evictable" else None
    t[1] = 7.5
    assert c.version == before + 1 and t[1] == 7.5 and c[2] == 7.5
    if kind == "evictable":  # the write went to the primary, counted there once too
        assert c.primary.version == inner + 1


def test_a_block_device_element_write_steps_the_version_once(loop_device):
    with sw.BlockDevice(loop_device) as dev:
        c = block_of(dev, [1.0, 2.0, 3.0])
        before = c.version
        flat(c, 3)[2] = 4.0
        assert c.version == before + 1 and c[2] == 4.0


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_element_refusals_read_as_the_carriers_own(kind):
    # Each pair: the tensor's element access and the carrier's slot access
    # in the same state, which must fail alike.
    def pair(prepare, access):
        results = []
        for via_tensor in (True, False):
            c = MAKERS[kind]([1.0, 2.0, 3.0])
            t = flat(c, 3)
            prepare(c)
            results.append(outcome(lambda: access(t if via_tensor else c, c)))
        assert results[0] == results[1] and results[0][0] != "ok", results

    pair(lambda c: None, lambda x, c: write(x, 0, "x"))  # C-9 type refusal
    pair(lambda c: None, lambda x, c: write(x, 0, Releasing(c, 2.0)))
    pair(lambda c: c.release(), lambda x, c: x[1])
    pair(lambda c: c.release(), lambda x, c: write(x, 1, 2.0))
    if kind == "evictable":
        pair(lambda c: c.evict(), lambda x, c: x[1])
        pair(lambda c: c.evict(), lambda x, c: write(x, 1, 2.0))


def test_int32_element_write_refusals_read_as_the_carriers_own():
    for value in (2**31, -(2**31) - 1, 1.5, True):
        got = []
        for via_tensor in (True, False):
            c = sw.friendly.tensor([1, 2, 3], dtype=I32).carrier
            got.append(outcome(lambda: write(flat(c, 3) if via_tensor else c, 0, value)))
        assert got[0] == got[1], (value, got)


def test_an_immutable_carrier_refuses_element_writes_in_its_words():
    for make in (lambda: Generic([1.0, 2.0], dtype=F, mutable=False),
                 lambda: CPU(2, dtype=F, mutable=False)):
        c = make()
        assert outcome(lambda: write(flat(c, 2), 0, 1.0)) == outcome(lambda: write(c, 0, 1.0))
        assert c.version == 0


def empty_file(n):
    f = FileBacked(dtype=F)
    f._allocate(n)
    return f


def test_a_pending_destination_refuses_element_access_in_its_words():
    n = 1 << 15  # queued on the pool, so it can be held
    for make in (lambda: CPU(n, dtype=F), lambda: empty_file(n)):
        src, dst = flat(CPU(n, dtype=F), n), make()
        t = flat(dst, n)
        with held():
            h = sw.move_async(src, dst)
            assert outcome(lambda: t[0]) == outcome(lambda: dst[0])
            assert outcome(lambda: t[0])[0] is RuntimeError
            assert outcome(lambda: write(t, 0, 1.0)) == outcome(lambda: write(dst, 0, 1.0))
            assert outcome(lambda: t.tolist()) == outcome(lambda: dst[0])
        h.wait()


@needs_faults
def test_a_faulted_block_device_refuses_element_access_in_its_words(loop_device):
    with sw.BlockDevice(loop_device) as dev:
        c = block_of(dev, [1.0, 2.0])
        _C._fault_inject("pwrite", 0, 1)
        try:
            with pytest.raises(OSError):
                c[1] = 2.0
        finally:
            _C._fault_clear()
        assert dev.is_faulted()
        t = flat(c, 2)
        for access in (lambda x: x[0], lambda x: write(x, 0, 3.0)):
            assert outcome(lambda: access(t)) == outcome(lambda: access(c))
            assert outcome(lambda: access(t))[0] is RuntimeError
        assert outcome(lambda: t.tolist()) == outcome(lambda: c[0])
        one = Tensor(c, 1, Layout(Shape(1), Stride(1)))
        assert outcome(lambda: one.item()) == outcome(lambda: c[1])
