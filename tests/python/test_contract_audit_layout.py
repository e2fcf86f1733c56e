"""Contract audit of layouts (contract-core G-2, G-4, L-1..L-15).

Tests an independent reviewer added while going through sections 0 and 1
sentence by sentence; each names the contract ID it checks.
"""

import pytest

import strideweave as sw
from strideweave import Layout, Shape, Stride


def test_l11_unenumerable_layout_raises_memory_error_not_a_crash():
    # L-11: size 2**61 + 2 with strides {3, 2} cannot be decided without
    # enumerating, and no record for 2**61 indices can be made. size * 8
    # wrapped to 16 bytes and the enumeration overran that buffer (segfault).
    layout = Layout(Shape(2, 2**60 + 1), Stride(3, 2))
    assert layout.size == 2**61 + 2
    with pytest.raises(MemoryError, match="out of memory enumerating"):
        layout.is_injective
    # Not cached as an answer: asking again fails the same way.
    with pytest.raises(MemoryError, match="out of memory enumerating"):
        layout.is_injective


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
