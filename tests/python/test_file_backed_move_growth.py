"""A move into an empty FileBacked grows it to exactly the span it fills
(C-12, C-23: size() is the file length // 4), whichever way the growth is
made: small bulk copies from host memory let their write set the file
length (issue 19), other moves resize first. A failed move leaves the file
empty again; an allocation failure still raises before the move starts."""

import pytest

import strideweave as sw
from strideweave import CPU, FileBacked, Layout, Shape, Stride, Tensor, _C
from strideweave.carriers.move import registered_move_operation

needs_faults = pytest.mark.skipif(not _C._fault_injection_enabled(),
                                  reason="needs a fault-injection build")


def host(values):
    return CPU(1).new_like(values)


@pytest.mark.parametrize("n", [1, 3, 1024, 1 << 18, (1 << 18) + 1])
def test_c23_move_sets_file_length_to_the_span(n):
    src = Tensor(host([float(i % 7) for i in range(n + 5)]), 5, Layout(Shape(n), Stride(1)))
    with sw.no_grad():
        out = sw.move(src, FileBacked())
    f = out.carrier
    assert f.size() == n and f.path.stat().st_size == 4 * n
    assert [f[i] for i in (0, n - 1)] == [5.0, float((n + 4) % 7)]


def test_c23_strided_move_writes_the_whole_span_holes_included():
    # cosize 5 for 3 values: the span, holes and all, is the file
    src = Tensor(host([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), 1, Layout(Shape(3), Stride(2)))
    with sw.no_grad():
        out = sw.move(src, FileBacked())
    f = out.carrier
    assert f.size() == 5 and f.path.stat().st_size == 20
    assert [f[i] for i in range(5)] == [2.0, 3.0, 4.0, 5.0, 6.0]
    assert [out[i] for i in range(3)] == [2.0, 4.0, 6.0]


@needs_faults
@pytest.mark.parametrize("n", [4, 1 << 20])
def test_c23_failed_write_leaves_the_destination_empty(n):
    src = Tensor(CPU(n, empty=True), 0, Layout(Shape(n), Stride(1)))
    d = FileBacked()
    _C._fault_inject("pwrite")
    h = sw.move_async(src, d)
    with pytest.raises(OSError):
        h.wait()
    _C._fault_clear()
    assert d.size() == 0 and d.path.stat().st_size == 0
    assert not src.carrier.is_released()
    with sw.no_grad():
        assert sw.move(src, d).carrier.path.stat().st_size == 4 * n


@needs_faults
@pytest.mark.parametrize("n", [4, 1 << 20])
def test_c23_allocation_failure_still_raises_before_the_move(n):
    src = Tensor(CPU(n, empty=True), 0, Layout(Shape(n), Stride(1)))
    d = FileBacked()
    _C._fault_inject("truncate")
    with pytest.raises(OSError, match="resiz"):
        sw.move_async(src, d)
    _C._fault_clear()
    assert d.size() == 0 and d.path.stat().st_size == 0
    with sw.no_grad():
        assert sw.move(src, d).carrier.size() == n


class ValuesCopy(sw.MoveOperation):
    """A route written in Python: it sees the destination its move grew."""

    seen = []

    def _copy(self, tensor, destination, output, element_count):
        type(self).seen.append((destination.size(), destination.path.stat().st_size))
        for i in range(tensor.size()):
            output[i] = tensor[i]


class FailingCopy(sw.MoveOperation):
    def _copy(self, tensor, destination, output, element_count):
        output[0] = 9.0  # a partial write before the failure
        raise LookupError("copy failed")


@pytest.mark.parametrize("call", [sw.move, sw.move_async])
def test_c23_python_route_finds_its_destination_grown_to_the_span(call):
    # A route written in Python never grows by write: the file has its
    # whole length before the copy starts.
    ValuesCopy.seen.clear()
    t = Tensor(sw.Generic([1.0, 2.0, 3.0, 4.0]), 1, Layout(Shape(3), Stride(1)))
    d = FileBacked()
    with registered_move_operation(sw.Generic, FileBacked, ValuesCopy), sw.no_grad():
        out = call(t, d)
        out = out if isinstance(out, Tensor) else out.wait()
    assert ValuesCopy.seen == [(3, 12)]
    assert out.carrier is d and [d[i] for i in range(3)] == [2.0, 3.0, 4.0]


def test_c23_failed_python_route_leaves_the_destination_empty():
    g = sw.Generic([1.0, 2.0])
    t = Tensor(g, 0, Layout(Shape(2), Stride(1)))
    d = FileBacked()
    with registered_move_operation(sw.Generic, FileBacked, FailingCopy):
        h = sw.move_async(t, d)
        with pytest.raises(LookupError):
            h.wait()
    assert d.size() == 0 and d.path.stat().st_size == 0 and d.version == 0
    assert not g.is_released()


@needs_faults
@pytest.mark.parametrize("n", [4, 1 << 20])
def test_c23_growth_failure_raises_before_the_move_and_records_nothing(n):
    src = Tensor(CPU(n, empty=True), 0, Layout(Shape(n), Stride(1)))
    d = FileBacked()
    with sw.profile() as p:
        _C._fault_inject("truncate")
        with pytest.raises(OSError, match="resiz"):
            sw.move(src, d)  # autograd on: no node is left behind either
        _C._fault_clear()
    assert p.move_events() == ()
    assert d.size() == 0 and d.path.stat().st_size == 0
    assert not src.carrier.is_released() and not d.is_released()
    assert sw.move(src, d).carrier.size() == n


@needs_faults
def test_c23_python_route_growth_failure_raises_before_the_move():
    ValuesCopy.seen.clear()
    t = Tensor(sw.Generic([1.0, 2.0]), 0, Layout(Shape(2), Stride(1)))
    d = FileBacked()
    with registered_move_operation(sw.Generic, FileBacked, ValuesCopy):
        _C._fault_inject("truncate")
        with pytest.raises(OSError, match="resiz"):
            sw.move_async(t, d)
        _C._fault_clear()
        assert ValuesCopy.seen == [] and d.size() == 0 and not t.carrier.is_released()
        with sw.no_grad():
            assert sw.move(t, d).carrier is d
    assert ValuesCopy.seen == [(2, 8)]


class Huge(sw.Carrier):
    """A carrier written in Python that claims more slots than any file holds."""

    def size(self):
        return 1 << 62

    def dtype(self):
        return sw.DType.Float32

    def get_value(self, index):
        return 0.0


def test_c23_a_size_no_file_can_have_raises_before_the_move():
    t = Tensor(Huge(), 0, Layout(Shape(1 << 62), Stride(1)))
    d = FileBacked()
    with sw.profile() as p:
        with pytest.raises(OverflowError, match="exceed the file size limit"):
            sw.move_async(t, d)
    assert p.move_events() == ()
    assert d.size() == 0 and d.path.stat().st_size == 0 and d.version == 0
