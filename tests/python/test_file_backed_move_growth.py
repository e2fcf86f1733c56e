"""A move into an empty FileBacked grows it to exactly the span it fills
(C-12, C-23: size() is the file length // 4), whichever way the growth is
made: small bulk copies from host memory let their write set the file
length (issue 19), other moves resize first. A failed move leaves the file
empty again; an allocation failure still raises before the move starts."""

import pytest

import strideweave as sw
from strideweave import CPU, FileBacked, Layout, Shape, Stride, Tensor, _C

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
