"""Large moves (past the size where one span is copied by several threads,
and past the inline bound of synchronous moves): values exact in every
direction, for move() on the caller and move_async on the pool, and a file
failure part way leaves the source live and unchanged."""

import numpy as np
import pytest

import strideweave as sw
from strideweave import CPU, FileBacked, Layout, Shape, Stride, Tensor, _C

N = (24 << 20) // 4 + 1001  # 24 MiB and change: several huge-page parts


def filled(n=N):
    t = Tensor(CPU(n, empty=True), 0, Layout(Shape(n), Stride(1)))
    a = np.from_dlpack(t)
    a[:] = np.arange(n, dtype=np.float32)
    del a
    return t


def values(t):
    if isinstance(t.carrier, CPU):
        return np.from_dlpack(t).copy()
    return np.from_dlpack(sw.move(t, CPU(N, empty=True))).copy()


@pytest.mark.parametrize("how", ["move", "move_async"])
def test_large_moves_keep_every_value(how):
    ref = np.arange(N, dtype=np.float32)
    go = sw.move if how == "move" else (lambda t, d: sw.move_async(t, d).wait())
    with sw.no_grad():
        t = go(filled(), CPU(N, empty=True))
        assert np.array_equal(np.from_dlpack(t), ref)
        f = go(t, FileBacked())
        assert f.carrier.size() == N
        back = go(f, CPU(N, empty=True))
        assert np.array_equal(np.from_dlpack(back), ref)


def test_large_move_with_an_offset_layout_covering_its_span():
    # A transposed dense layout: elementwise, but it covers its span.
    rows, cols = 1024, N // 1024
    n = rows * cols
    src = filled(n)
    layout = Layout(Shape(rows, cols), Stride(cols, 1))
    t = Tensor(src.carrier, 0, layout)
    expect = np.from_dlpack(t).copy()
    with sw.no_grad():
        out = sw.move(t, CPU(n, empty=True))
    assert np.array_equal(np.from_dlpack(out), expect)


@pytest.mark.skipif(not _C._fault_injection_enabled(), reason="needs the fault-injection build")
@pytest.mark.parametrize("fault", ["pwrite", "pread"])
def test_large_move_failing_part_way_leaves_the_source(fault):
    ref = np.arange(N, dtype=np.float32)
    with sw.no_grad():
        src = filled() if fault == "pwrite" else sw.move(filled(), FileBacked())
        dst = FileBacked() if fault == "pwrite" else CPU(N, empty=True)
        _C._fault_inject(fault, 1, 1)
        try:
            with pytest.raises(OSError, match="injected"):
                sw.move(src, dst)
        finally:
            _C._fault_clear()
        assert np.array_equal(values(src), ref)
