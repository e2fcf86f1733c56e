"""Moved values (seed: "move relocates values into a caller-supplied carrier",
"Move dispatches on the exact carrier class pair"), checked against t[i]
before the move, for flat, hierarchical, gapped, offset and broadcast
(stride-0) layouts across every ordered pair of CPU, Generic, FileBacked and a
Python-defined carrier, in every dtype both carriers hold.

Each successful move: the result is on the destination at offset 0 with the
source Layout (==), the source carrier is released, neither version changed
(a move is not an in-place mutation), and an allocatable-empty destination
has exactly `cosize` slots. The bulk routes (CPU->FileBacked,
FileBacked->CPU) copy the whole physical span, holes included; elsewhere
holes are unspecified and not asserted.
"""

import itertools

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import strideweave as sw
from moves_for_tests import (D, PyList, L, make_carrier, make_destination, slot_values,
                             values_of)

KINDS = ["CPU", "Generic", "FileBacked", "Py"]
BULK = {("CPU", "FileBacked"), ("FileBacked", "CPU")}
DTYPES = {"Float32": D.Float32, "Int32": D.Int32, "Bool": D.Bool}


def supports(kind, dtype):
    return not (kind == "FileBacked" and dtype is D.Bool)


# name -> (offset, layout, a view function or None). Layouts chosen so that
# size and cosize differ where it matters.
LAYOUTS = {
    "flat": (0, L([6], [1]), None),
    "nested": (0, L([2, [3, 2]], [1, [4, 2]]), None),       # hierarchical, cosize 12
    "gapped": (0, L([3, 2], [2, 8]), None),                 # size 6, cosize 13, holes
    "offset": (5, L([2, 2], [1, 3]), None),                 # window at slot 5
    "broadcast": (0, L([2, 1], [1, 1]),                      # 2 slots, 6 coordinates
                  lambda t: sw.broadcast_to(t, sw.Shape([2, 3]))),
}


CASES = [
    pytest.param(src, dst, dname, lname, id=f"{src}->{dst}-{dname}-{lname}")
    for src, dst in itertools.product(KINDS, KINDS)
    for dname, dtype in DTYPES.items()
    if supports(src, dtype) and supports(dst, dtype)
    for lname in LAYOUTS
]


def source_tensor(kind, dtype, offset, layout, view, extra=3):
    n = offset + layout.cosize + extra  # slots past the span must not matter
    slots = slot_values(dtype, n)
    c = make_carrier(kind, slots, dtype)
    t = sw.Tensor(c, offset, layout)
    if view is not None:
        t = view(t)
    return t, c, slots


def check_move(t, src, slots, dst_kind, dst, bulk):
    expected = [t[i] for i in range(t.size())]
    cosize = t.layout.cosize
    grows = dst.size() == 0
    src_version, dst_version = src.version, dst.version
    r = sw.move(t, dst)
    assert isinstance(r, sw.Tensor)
    assert r.carrier is dst
    assert r.offset == 0
    assert r.layout == t.layout
    assert r.dtype() is t.dtype()
    assert [r[i] for i in range(r.size())] == expected
    assert src.is_released()
    assert src.version == src_version and dst.version == dst_version
    if grows:
        assert dst.size() == cosize
        if dst_kind == "FileBacked":
            assert dst.path.stat().st_size == 4 * cosize
        if dst_kind == "Py":
            assert dst.allocations == [cosize]
    if bulk:
        assert values_of(dst)[:cosize] == slots[t.offset:t.offset + cosize]
    with pytest.raises(RuntimeError, match="released"):
        t[0]
    return r


@pytest.mark.parametrize("src_kind, dst_kind, dname, lname", CASES)
def test_move_values_every_pair_layout_and_dtype(src_kind, dst_kind, dname, lname):
    dtype = DTYPES[dname]
    offset, layout, view = LAYOUTS[lname]
    t, src, slots = source_tensor(src_kind, dtype, offset, layout, view)
    dst = make_destination(dst_kind, t.layout.cosize, dtype)
    check_move(t, src, slots, dst_kind, dst, (src_kind, dst_kind) in BULK)


@pytest.mark.parametrize("src_kind, dst_kind", [("CPU", "FileBacked"), ("FileBacked", "CPU"),
                                                ("CPU", "CPU"), ("Generic", "FileBacked")])
def test_move_destination_larger_than_cosize_is_not_grown(src_kind, dst_kind):
    offset, layout, _ = LAYOUTS["gapped"]
    t, src, slots = source_tensor(src_kind, D.Int32, offset, layout, None)
    n = layout.cosize + 4
    if dst_kind == "FileBacked":
        dst = sw.FileBacked(dtype=D.Int32)
        dst._allocate(n)
    else:
        dst = make_carrier(dst_kind, [-1] * n, D.Int32)
    r = check_move(t, src, slots, dst_kind, dst, (src_kind, dst_kind) in BULK)
    assert dst.size() == n and r.offset == 0


def test_broadcast_two_slots_over_six_coordinates_needs_two_slots():
    # Seed scenario "Move a broadcast view without materializing it".
    for dst in (sw.FileBacked(), PyList(), sw.CPU(2)):
        c = sw.CPU(2)
        c[0], c[1] = 1.5, -2.5
        t = sw.broadcast_to(sw.Tensor(c, 0, L([2, 1], [1, 1])), sw.Shape([2, 3]))
        r = sw.move(t, dst)
        assert dst.size() == 2
        assert r.layout == L([2, 3], [1, 0])
        assert r.tolist() == [1.5, -2.5] * 3


@pytest.mark.parametrize("src_kind, dst_kind", sorted(BULK))
def test_bulk_routes_copy_holes(src_kind, dst_kind):
    # The bulk operations copy cosize slots from the tensor's offset, holes included.
    offset, layout = 3, L([2, 2], [3, 7])  # addresses 0,3,7,10 of 11: 7 holes
    slots = slot_values(D.Float32, offset + layout.cosize)
    src = make_carrier(src_kind, slots, D.Float32)
    dst = make_destination(dst_kind, layout.cosize, D.Float32, fill=99.0)
    sw.move(sw.Tensor(src, offset, layout), dst)
    assert values_of(dst) == slots[offset:]


def test_dispatch_uses_the_registered_bulk_operation_for_cpu_file_backed():
    assert sw.carriers.move.dispatch_move(sw.CPU, sw.FileBacked) is sw.CpuToFileBackedMoveOperation
    assert sw.carriers.move.dispatch_move(sw.FileBacked, sw.CPU) is sw.FileBackedToCpuMoveOperation


def test_round_trip_cpu_file_cpu_keeps_layout_and_values():
    offset, layout, _ = LAYOUTS["nested"]
    t, src, slots = source_tensor("CPU", D.Float32, offset, layout, None)
    expected = t.tolist()
    on_file = sw.move(t, sw.FileBacked())
    back = sw.move(on_file, sw.CPU(layout.cosize))
    assert back.layout == layout and back.tolist() == expected
    assert on_file.carrier.is_released() and src.is_released()


# ---- random hierarchical layouts (hypothesis) -----------------------------------------


@st.composite
def trees(draw, max_depth=3, max_leaves=4):
    budget = [max_leaves]

    def children(depth, min_n):
        out = []
        for _ in range(draw(st.integers(min_n, 3))):
            if budget[0] == 0:
                break
            if depth > 1 and draw(st.booleans()):
                out.append(children(depth - 1, 1))
            else:
                budget[0] -= 1
                out.append(draw(st.integers(1, 3)))
        return out

    return children(max_depth, 1)


def strides_like(draw, tree):
    def go(t):
        return [draw(st.integers(0, 9)) if isinstance(c, int) else go(c) for c in t]

    return go(tree)


@st.composite
def move_cases(draw):
    shape = draw(trees())
    stride = strides_like(draw, shape)
    src_kind, dst_kind = draw(st.sampled_from(KINDS)), draw(st.sampled_from(KINDS))
    dtypes = [d for d in DTYPES.values() if supports(src_kind, d) and supports(dst_kind, d)]
    dtype = draw(st.sampled_from(dtypes))
    offset = draw(st.integers(0, 3))
    return shape, stride, src_kind, dst_kind, dtype, offset


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(move_cases())
def test_move_random_hierarchical_layouts(case):
    shape, stride, src_kind, dst_kind, dtype, offset = case
    layout = L(shape, stride)
    t, src, slots = source_tensor(src_kind, dtype, offset, layout, None, extra=1)
    dst = make_destination(dst_kind, layout.cosize, dtype)
    check_move(t, src, slots, dst_kind, dst, (src_kind, dst_kind) in BULK)
