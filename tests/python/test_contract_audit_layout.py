"""Contract audit of layouts (contract-core G-2, G-4, L-1..L-15).

Tests an independent reviewer added while going through sections 0 and 1
sentence by sentence; each names the contract ID it checks.
"""

import pytest
from hypothesis import given, settings, strategies as st

import strideweave as sw
from strideweave import Layout, Shape, Stride


def test_L11_unenumerable_layout_raises_memory_error_not_a_crash():
    # L-11: three leaves of 2**20 (size 2**60; size * 8 once wrapped to a
    # short buffer that the enumeration overran: segfault), strides
    # 2**39 + {1, 3, 5}: no two leaves collide and the strides interleave,
    # so only an enumeration (2**42 differences, or a record of 2**57
    # bytes) could tell. Refused, never guessed.
    layout = Layout(Shape(2**20, 2**20, 2**20), Stride(2**39 + 1, 2**39 + 3, 2**39 + 5))
    assert layout.size == 2**60
    with pytest.raises(MemoryError, match="above the limit of 256 MiB"):
        layout.is_injective
    # Not cached as an answer: asking again fails the same way.
    with pytest.raises(MemoryError, match="above the limit of 256 MiB"):
        layout.is_injective


def test_L11_three_interleaved_leaves_decided_without_a_record():
    # L-11 exact for any cosize: 4 + 6 == 10 collides among 2**61 + 4
    # coordinates; {4, 6, 9} over {2**40, 2, 2} never does (9 is odd).
    assert Layout(Shape(2, 2**59 + 1, 2), Stride(6, 4, 10)).is_injective is False
    assert Layout(Shape(2**40, 2, 2), Stride(4, 6, 9)).is_injective is True


def test_L11_two_interleaved_leaves_decided_without_enumerating():
    # L-11 exact for any cosize: {3, 2} over extents {2, 2**60 + 1} (cosize
    # 2**61 + 4) never collides (3 * a == 2 * b needs a >= 2); extent 3 does
    # (3 * 2 == 2 * 3).
    assert Layout(Shape(2, 2**60 + 1), Stride(3, 2)).is_injective is True
    assert Layout(Shape(3, 2**60 + 1), Stride(3, 2)).is_injective is False


@pytest.mark.parametrize("obj", [Shape(2, [3, 4], 5), Stride(1, [2, 6], 24),
                                 Layout(Shape(2, [3, 4], 5), Stride(1, [2, 6], 24))])
@pytest.mark.parametrize("key", [slice(True, None), slice(None, False),
                                 slice(0, 2, True), slice(1.0, 2), slice("a", None)])
def test_G2_L3_L5_slice_bounds_must_be_integers(obj, key):
    # G-2: bool is not an integer, so x[True:] is not x[1:]; other keys
    # raise TypeError (L-3).
    with pytest.raises(TypeError, match="slice|integer"):
        obj[key]


def test_L3_slice_bounds_index_objects_and_none_still_work():
    class Idx:
        def __index__(self):
            return 1

    s = Shape(2, [3, 4], 5)
    assert s[Idx():] == s[1:] == Shape([[3, 4], 5])
    assert s[None:Idx()] == Shape(2)
    assert s[::Idx()] == s


# ---- L-11 exactness on adversarial layouts ------------------------------------


def brute_injective(layout):
    seen = set()
    for k in range(layout.size):
        i = layout(k)
        if i in seen:
            return False
        seen.add(i)
    return True


@pytest.mark.parametrize(
    "shape, stride, inj",
    [
        # many extent-1 leaves (more than the 16 decided at construction),
        # with stride 0 or strides that would collide if they counted
        ([1] * 20 + [3] + [1] * 20, [0] * 20 + [2] + [7] * 20, True),
        ([1] * 20 + [3, 2] + [1] * 20, [0] * 20 + [1, 1] + [0] * 20, False),
        ([1] * 20 + [3, 3] + [1] * 20, [5] * 20 + [2, 3] + [1] * 20, True),
        ([1] * 20 + [4, 3] + [1] * 20, [5] * 20 + [2, 3] + [1] * 20, False),
        # extent-1 nested deep inside, stride 0
        ([[1, [1, [1]]], 2, [1]], [[0, [0, [0]]], 0, [0]], False),
        ([[1, [1, [1]]], 2, [1]], [[0, [0, [0]]], 5, [0]], True),
        # stride 0 with extent 1 next to the only real leaf
        ([1, 1, 4, 1], [0, 0, 1, 0], True),
        # huge cosize, small size, interleaved small strides
        ([2, 3, 2], [2**61, 3, 2**61 + 1], True),
        ([2, 3, 2], [2**61, 3, 2**61], False),
        ([3, 3, 2, 2], [2, 3, 2**40, 2**40 + 11], True),
        ([3, 3, 2, 2], [2, 3, 2**40, 2**40 + 10], False),
        ([3, 3, 2, 2], [2, 3, 2**40, 2**40 + 1], False),
        # equal strides, both extents > 1
        ([2, 2], [5, 5], False),
        # interleaved but distinct, more than 16 leaves
        ([3, 3] + [2] * 15, [2, 3] + [9 * 2**i for i in range(15)], True),
        ([4, 3] + [2] * 15, [2, 3] + [12 * 2**i for i in range(15)], False),
    ],
)
def test_L11_adversarial_exact(shape, stride, inj):
    layout = Layout(Shape(shape), Stride(stride))
    assert layout.is_injective is inj
    if layout.size <= 300_000:
        assert brute_injective(layout) is inj


def test_L11_adversarial_rows_are_what_they_claim():
    # The head [3, 3]:[2, 3] reaches 0..10 except 1 and 9, so a last leaf at
    # 2**40 + 10 collides and one at 2**40 + 11 does not.
    a = Layout(Shape(3, 3, 2, 2), Stride(2, 3, 2**40, 2**40 + 10))
    assert a([2, 2, 1, 0]) == a([0, 0, 0, 1]) == 2**40 + 10
    head = {2 * i + 3 * j for i in range(3) for j in range(3)}
    assert head == set(range(11)) - {1, 9}


def test_L11_computed_at_most_once():
    # After the enumeration the answer is cached: asking again allocates
    # nothing, so an armed allocation fault is not hit.
    c = sw._C
    if not c._fault_injection_enabled():
        pytest.skip("build without fault injection")
    a = Layout(Shape(4, 3), Stride(2, 3))  # only enumeration decides
    assert a.is_injective is False
    c._fault_inject("alloc", 0, 1)
    try:
        assert a.is_injective is False
        assert a.is_injective is False
    finally:
        c._fault_clear()


def test_L11_concurrent_first_requests_agree():
    # The enumeration runs without the GIL; racing threads get the same,
    # exact answer.
    import threading

    for head, inj in (([3, 3], True), ([4, 3], False)):
        span = 1 + 2 * (head[0] - 1) + 3 * (head[1] - 1)
        a = Layout(Shape(head + [2] * 15), Stride([2, 3] + [span * 2**i for i in range(15)]))
        results = []
        barrier = threading.Barrier(4)

        def ask():
            barrier.wait()
            results.append(a.is_injective)

        threads = [threading.Thread(target=ask) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results == [inj] * 4


# ---- L-3 / L-5 hash and equality across construction routes -------------------


def test_L3_L5_halves_of_a_layout_equal_and_hash_like_direct_values():
    a = Layout(Shape(2, [3, 4]), Stride(1, [0, 6]))
    assert a.shape == Shape(2, [3, 4]) and hash(a.shape) == hash(Shape(2, [3, 4]))
    assert a.stride == Stride(1, [0, 6]) and hash(a.stride) == hash(Stride(1, [0, 6]))
    assert a[1].shape == a.shape[1] and hash(a[1].shape) == hash(a.shape[1])
    assert a.shape.size == 24
    d = {Shape(2, [3, 4]): "shape", Stride(1, [0, 6]): "stride"}
    assert d[a.shape] == "shape" and d[a.stride] == "stride"
    # a Shape of extent-1 leaves and a Stride of zeros share their numbers
    # in storage, never equality
    assert Shape(1, [1]) != Stride(0, [0])
    assert len({Shape(1, [1]), Stride(0, [0]), Layout(Shape(1, [1]), Stride(0, [0]))}) == 3
    # routes to the same Layout agree
    b = Layout.canonical(Shape(2, [3, 4]))
    c = Layout(Shape(2, [3, 4]), Stride(1, [2, 6]))
    d2 = (Layout(Shape(2), Stride(1)).append(Layout(Shape(3, 4), Stride(2, 6))))
    e = Layout(Shape([[3, 4], 2]), Stride([[2, 6], 1])).permute(1, 0)
    assert b == c == d2 == e
    assert len({hash(x) for x in (b, c, d2, e)}) == 1


@pytest.mark.parametrize("key", [0, 1, -1, -3, slice(None), slice(1, None), slice(None, None, -1),
                                 slice(0, 3, 2), slice(5, 9)])
def test_L5_item_is_layout_of_shape_item_and_stride_item(key):
    a = Layout(Shape(2, [3, 4], 5), Stride(1, [2, 6], 24))
    assert a[key] == Layout(a.shape[key], a.stride[key])


# ---- G-2 bool is never an integer, everywhere a layout takes one ---------------


def test_G2_bool_rejected_everywhere():
    from strideweave.friendly import column_major, row_major

    a = Layout(Shape(2, [3, 4]), Stride(1, [2, 6]))
    with pytest.raises(ValueError):
        Shape(2, True)
    with pytest.raises(ValueError):
        Stride(False)
    with pytest.raises(TypeError):
        a[True]
    with pytest.raises(TypeError):
        Shape(2, 3)[False]
    with pytest.raises(TypeError):
        a(True)
    with pytest.raises(TypeError):
        a([False, 0])
    with pytest.raises(TypeError):
        a.index([1, [True, 0]])
    with pytest.raises(TypeError):
        Layout.get_index(a, False)
    with pytest.raises(TypeError):
        a.permute(True, 0)
    with pytest.raises(TypeError):
        a.permute([1, False])
    with pytest.raises(ValueError, match="^extents must be positive integers$"):
        column_major(True)
    with pytest.raises(ValueError, match="^extents must be positive integers$"):
        row_major(2, True)


def test_G2_beyond_int64_overflow_for_values_ordinary_errors_for_keys():
    # values of a Shape / Stride / Layout: OverflowError
    with pytest.raises(OverflowError):
        Shape([[2**64]])
    with pytest.raises(OverflowError):
        Stride(1, [2**63])
    with pytest.raises(OverflowError, match="size"):
        Layout(Shape(2**31), Stride(1)) + Layout(Shape(2**32), Stride(0))
    with pytest.raises(OverflowError, match="cosize"):
        Layout(Shape(2), Stride(2**62)).append(Layout(Shape(2, 2), Stride(2**62, 1)))
    # keys: ordinary domain errors
    a = Layout(Shape(2, 3), Stride(1, 2))
    with pytest.raises(IndexError):
        a[2**64]
    with pytest.raises(IndexError):
        Shape(2, 3)[-(2**64)]
    with pytest.raises(ValueError):
        a.permute(2**64, 0)
    with pytest.raises(ValueError):
        Layout.get_index(a, [0, 2**64])
    assert a[2**64:] == Layout(Shape(), Stride())


# ---- L-11 property: more than 16 leaves (decided on first request) ------------

@st.composite
def many_leaf_layouts(draw):
    n = draw(st.integers(17, 28))
    ext = [draw(st.sampled_from([1, 1, 1, 2, 2, 3])) for _ in range(n)]
    while True:  # keep brute force cheap
        size = 1
        for e in ext:
            size *= e
        if size <= 2048:
            break
        ext[ext.index(max(ext))] = 1
    stride = [draw(st.one_of(st.integers(0, 6), st.integers(0, 300),
                             st.just(2**50))) for _ in range(n)]
    # wrap a random run of leaves into a nested mode
    i = draw(st.integers(0, n - 1))
    j = draw(st.integers(i + 1, n))
    nest = lambda xs: xs[:i] + [xs[i:j]] + xs[j:]  # noqa: E731
    return nest(ext), nest(stride)


@settings(max_examples=300, deadline=None)
@given(many_leaf_layouts())
def test_L11_many_leaves_matches_brute_force(ls):
    shape, stride = ls
    layout = Layout(Shape(shape), Stride(stride))
    assert layout.is_injective is brute_injective(layout)


# ---- L-1 / L-7 wording not covered elsewhere ----------------------------------


def test_L1_several_items_each_is_a_top_level_mode():
    # "Otherwise each item is one top-level mode": a list among several items
    # is a nested mode, not the list of modes.
    assert Shape([2, 3], 4) == Shape([[2, 3], 4])
    assert len(Shape([2, 3], 4)) == 2
    assert Shape([2, 3], 4)[0] == Shape(2, 3)
    assert Stride((1, 2), 0) == Stride([[1, 2], 0])
    # exactly one list whose only element is a list: one nested mode
    assert len(Shape([[2, 3]])) == 1 and Shape([[2, 3]]).depth == 2


def test_L7_node_is_an_enum_with_the_contract_values():
    import enum

    from strideweave import Node
    from strideweave.layout import Node as LayoutNode

    assert Node is LayoutNode
    assert issubclass(Node, enum.Enum)
    assert [(m.name, m.value) for m in Node] == [("Leaf", 1), ("Push", 2), ("Pop", 3)]


def test_G4_ordinals_are_first_mode_fastest_mixed_radix():
    # G-4: ordinal k names coordinate (k mod 2, (k div 2) mod 3, k div 6) for
    # extents (2, 3, 4); strides 1, 10, 100 make the digits visible.
    a = Layout(Shape(2, [3, 4]), Stride(1, [10, 100]))
    want = [i + 10 * j + 100 * m for m in range(4) for j in range(3) for i in range(2)]
    assert [a(k) for k in range(a.size)] == want
    assert [a.index(k) for k in range(a.size)] == want
