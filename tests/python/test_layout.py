"""Layouts: contract-core section 1 (G-2, G-4, L-1 .. L-15), example based.

Property tests against a brute-force reference are in test_layout_props.py.
"""

import sys

import pytest

import strideweave as sw
from strideweave import Layout, Node, Shape, Stride
from strideweave.friendly import column_major, row_major


class Idx:
    """A non-int integer (G-2): has __index__."""

    def __init__(self, v):
        self.v = v

    def __index__(self):
        return self.v


def lay(shape, stride):
    return Layout(Shape(shape), Stride(stride))


# ---- L-1 Shape construction ---------------------------------------------


def test_L1_forms_are_equal():
    assert Shape(2, [3, 4]) == Shape([2, [3, 4]]) == Shape((2, (3, 4)))
    assert Shape(5) == Shape([5]) == Shape((5,))
    assert len(Shape([[2, 3]])) == 1
    assert Shape([[2, 3]]).top_level == ((2, 3),)


def test_L1_empty_shape():
    s = Shape()
    assert len(s) == 0 and s.size == 1 and s.depth == 1
    assert s == Shape([]) == Shape(())
    assert s.top_level == ()


def test_L1_shape_of_shape_is_equal():
    s = Shape(2, [3, 4])
    assert Shape(s) == s


def test_L1_mixed_tuple_list_nesting():
    assert Shape([2, (3, [4, 5])]) == Shape(2, [3, (4, 5)])
    assert Shape([2, (3, [4, 5])]).depth == 3


@pytest.mark.parametrize("bad", [0, -1, -(2**70)])
def test_L1_extent_below_one(bad):
    with pytest.raises(ValueError, match="extents must be integers >= 1"):
        Shape(bad)
    with pytest.raises(ValueError, match="extents must be integers >= 1"):
        Shape([2, [3, bad]])


@pytest.mark.parametrize("bad", [True, False, 2.0, "3", None, Shape(2), Stride(1), {1}])
def test_L1_element_not_integer_nor_sequence(bad):
    with pytest.raises(ValueError, match="Shape elements must be integers or lists/tuples"):
        Shape([2, bad])
    with pytest.raises(ValueError, match="Shape elements must be integers or lists/tuples"):
        Shape(2, [3, bad])


@pytest.mark.parametrize("bad", [True, 2.0, "3", None])
def test_L1_single_non_integer_item(bad):
    with pytest.raises(ValueError, match="Shape elements"):
        Shape(bad)


def test_L1_L2_single_item_of_the_other_class():
    with pytest.raises(ValueError, match="Shape elements.*not strideweave.Stride"):
        Shape(Stride(2))
    with pytest.raises(ValueError, match="Stride elements.*not strideweave.Shape"):
        Stride(Shape(2))
    with pytest.raises(ValueError, match="Shape elements.*not strideweave.Layout"):
        Shape(lay([2], [1]))


def test_L1_nested_shape_among_items():
    with pytest.raises(ValueError, match="not strideweave.Shape"):
        Shape(2, Shape(3))


@pytest.mark.parametrize("empty", [[], ()])
def test_L1_empty_nested(empty):
    with pytest.raises(ValueError, match="nested modes must not be empty"):
        Shape([2, empty])
    with pytest.raises(ValueError, match="nested modes must not be empty"):
        Shape(2, empty)
    with pytest.raises(ValueError, match="nested modes must not be empty"):
        Shape([[2, [3, empty]]])


def test_L1_no_keywords():
    with pytest.raises(TypeError, match="no keyword arguments"):
        Shape(extents=3)


def test_L1_self_referencing_list_is_an_error_not_a_crash():
    a = [2]
    a.append(a)
    with pytest.raises(ValueError, match="nested too deeply"):  # the one depth limit
        Shape(a)


# ---- G-2 integers -----------------------------------------------------------


def test_G2_index_objects_are_integers():
    np = pytest.importorskip("numpy")
    assert Shape(np.int64(3), [Idx(4), np.uint8(2)]) == Shape(3, [4, 2])
    assert Stride(Idx(0), np.int32(7)) == Stride(0, 7)
    lay_ = column_major(2, 3)
    assert lay_(Idx(4)) == 4
    assert lay_([np.int64(1), Idx(2)]) == 5
    assert column_major(np.int16(2), Idx(3)) == column_major(2, 3)


def test_G2_index_raising_propagates():
    class Boom:
        def __index__(self):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        Shape(Boom())


def test_G2_extent_beyond_int64_overflows():
    with pytest.raises(OverflowError, match="exceeds signed 64 bits"):
        Shape(2**63)
    with pytest.raises(OverflowError, match="exceeds signed 64 bits"):
        Stride([1, [2**64]])
    assert Shape(2**63 - 1).size == 2**63 - 1
    assert Stride(2**63 - 1) == Stride([2**63 - 1])


def test_G2_size_beyond_int64_overflows():
    with pytest.raises(OverflowError, match="size exceeds signed 64 bits"):
        Shape(2**32, 2**32)
    with pytest.raises(OverflowError, match="size exceeds signed 64 bits"):
        Shape(2**32, [2**31, 1])
    with pytest.raises(OverflowError):
        Shape(2**31, 2**31, 2)  # exactly 2**63
    assert Shape(2**31, 2**31).size == 2**62


def test_G2_cosize_beyond_int64_overflows():
    with pytest.raises(OverflowError, match="cosize exceeds signed 64 bits"):
        lay([3], [2**62])
    with pytest.raises(OverflowError):
        lay([2, 2], [2**62, 2**62])
    assert lay([2], [2**62]).cosize == 2**62 + 1
    assert lay([1], [2**63 - 1]).cosize == 1


def test_G2_oversized_key_is_a_domain_error():
    with pytest.raises(ValueError, match=f"^index {2**80} is out of range for a layout of size 6$"):
        column_major(2, 3)(2**80)
    with pytest.raises(ValueError, match=f"^index {2**80} is out of range for mode 0 of size 2$"):
        column_major(2, 3)([2**80, 0])
    with pytest.raises(ValueError, match=f"^index -{2**80} is out of range for mode 0 of size 2: "
                                         "indices run from 0 to 1 and do not wrap around$"):
        column_major(2, 3)([-(2**80), 0])


# ---- L-2 Stride ---------------------------------------------------------------


def test_L2_forms():
    assert Stride(1, [2, 6]) == Stride([1, [2, 6]]) == Stride((1, (2, 6)))
    assert Stride(0) == Stride([0])
    assert len(Stride()) == 0 and Stride().depth == 1
    s = Stride(1, [2, 6])
    assert Stride(s) == s


@pytest.mark.parametrize("bad", [-1, -(2**70)])
def test_L2_negative(bad):
    with pytest.raises(ValueError, match="Stride values must be integers >= 0"):
        Stride([1, [bad]])


@pytest.mark.parametrize("bad", [True, 1.0, "1", None, Stride(1), Shape(1)])
def test_L2_non_integer(bad):
    with pytest.raises(ValueError, match="Stride elements must be integers or lists/tuples"):
        Stride([1, bad])


def test_L2_empty_nested():
    with pytest.raises(ValueError, match="Stride nested modes must not be empty"):
        Stride([1, []])
    with pytest.raises(TypeError, match="no keyword"):
        Stride(x=1)


# ---- L-3 queries ----------------------------------------------------------------


def test_L3_len_top_level_depth_size():
    s = Shape(2, [3, 4])
    assert len(s) == 2
    assert s.top_level == (2, (3, 4))
    assert s.depth == 2
    assert s.size == 24
    assert Shape(2, 3).depth == 1
    assert Shape([[[2]], 3]).depth == 3
    assert Stride(1, [2, [6]]).depth == 3
    assert Stride(1, [2, 6]).top_level == (1, (2, 6))


def test_L3_item():
    s = Shape(2, [3, 4])
    assert s[0] == Shape([2])
    assert s[1] == Shape(3, 4)
    assert s[-1] == Shape(3, 4)
    assert s[-2] == Shape(2)
    assert Shape([[2, [3, 4]]])[0] == Shape(2, [3, 4])
    assert Stride(1, [2, 6])[1] == Stride(2, 6)
    assert Stride(1, [2, 6])[0] == Stride([1])
    assert s[Idx(1)] == Shape(3, 4)


@pytest.mark.parametrize("i", [2, -3, 100, 2**80])
def test_L3_item_out_of_range(i):
    with pytest.raises(IndexError):
        Shape(2, [3, 4])[i]
    with pytest.raises(IndexError):
        Stride(2, [3, 4])[i]
    with pytest.raises(IndexError):
        Shape()[0]


def test_L3_slices():
    s = Shape(2, [3, 4], 5)
    assert s[0:2] == Shape(2, [3, 4])
    assert s[1:] == Shape([[3, 4], 5])
    assert s[:0] == Shape()
    assert s[5:9] == Shape()
    assert s[::-1] == Shape(5, [3, 4], 2)
    assert s[::2] == Shape(2, 5)
    assert Stride(1, [2, 6], 24)[1:2] == Stride([[2, 6]])


@pytest.mark.parametrize("key", ["a", 1.0, None, True, (0,), [0]])
def test_L3_other_keys(key):
    with pytest.raises(TypeError, match="indices must be integers or slices"):
        Shape(2, 3)[key]
    with pytest.raises(TypeError, match="indices must be integers or slices"):
        Stride(2, 3)[key]


def test_L3_iteration():
    s = Shape(2, [3, 4])
    assert list(s) == [Shape(2), Shape(3, 4)]
    assert list(Stride(1, [2, 6])) == [Stride(1), Stride(2, 6)]
    assert list(Shape()) == []


def test_L3_equality_is_class_and_value():
    assert Shape(2, 3) != Stride(2, 3)
    assert Shape(2, 3) != [2, 3]
    assert Shape(2, 3) != (2, 3)
    assert Shape(2, [3]) != Shape(2, 3)
    assert Shape([2, 3]) != Shape([[2, 3]])
    assert Shape(2, 3) != Shape(3, 2)
    assert not (Shape(2, 3) != Shape([2, 3]))
    assert Stride(0, 1) == Stride([0, 1])
    assert Stride(0) != Shape(1)


def test_L3_hash_consistent():
    assert hash(Shape(2, [3, 4])) == hash(Shape((2, (3, 4))))
    assert hash(Stride(1, [2])) == hash(Stride([1, [2]]))
    d = {Shape(2, 3): "a", Stride(2, 3): "b"}
    assert d[Shape([2, 3])] == "a" and d[Stride([2, 3])] == "b"
    assert len({Shape(2, [3]), Shape([2, (3,)]), Shape(2, 3)}) == 2


@pytest.mark.parametrize("obj", [Shape(2, 3), Stride(1, 2), lay([2], [1])])
def test_L3_L5_immutable(obj):
    with pytest.raises(AttributeError):
        obj.size = 5
    with pytest.raises(AttributeError):
        obj.new_attr = 5
    with pytest.raises(AttributeError):
        del obj.depth
    with pytest.raises(AttributeError):
        del obj.anything


def test_L3_repr_evaluable():
    for obj in [Shape(2, [3, 4]), Shape(), Shape([[2]]), Stride(1, [2, 6]), Stride(),
                Shape([2, [3, [4, 5]], 6])]:
        assert repr(obj) == str(obj)
        assert eval(repr(obj), vars(sw)) == obj
    assert repr(Shape(2, [3, 4])) == "Shape([2, [3, 4]])"
    assert repr(Stride()) == "Stride([])"


# ---- L-4 / L-5 Layout ---------------------------------------------------------


def test_L4_checks():
    shape_msg = r"^Layout expects a Shape as its shape, e\.g\. Layout\(Shape\(4, 6\), Stride\(1, 4\)\), not "
    stride_msg = r"^Layout expects a Stride as its stride, e\.g\. Layout\(Shape\(4, 6\), Stride\(1, 4\)\), not "
    with pytest.raises(ValueError, match=shape_msg + "list$"):
        Layout([2], Stride(1))
    with pytest.raises(ValueError, match=shape_msg + "Stride$"):
        Layout(Stride(2), Stride(1))
    with pytest.raises(ValueError, match=stride_msg + "list$"):
        Layout(Shape(2), [1])
    with pytest.raises(ValueError, match=stride_msg + "Shape$"):
        Layout(Shape(2), Shape(1))
    # shape checked before stride
    with pytest.raises(ValueError, match=shape_msg + "int$"):
        Layout(1, 2)
    with pytest.raises(ValueError, match="not congruent"):
        Layout(Shape([2, [3, 4]]), Stride([1, 2, 6]))
    with pytest.raises(ValueError, match="not congruent"):
        Layout(Shape(2, 3), Stride(1))
    with pytest.raises(ValueError, match="not congruent"):
        Layout(Shape([[2], 3]), Stride([2, [3]]))


def test_L4_call_forms():
    a = Layout(Shape(2), Stride(1))
    assert Layout(shape=Shape(2), stride=Stride(1)) == a
    assert Layout(Shape(2), stride=Stride(1)) == a
    with pytest.raises(TypeError):
        Layout(Shape(2))
    with pytest.raises(TypeError):
        Layout(Shape(2), Stride(1), Stride(1))
    with pytest.raises(TypeError):
        Layout(Shape(2), Stride(1), shape=Shape(2))
    with pytest.raises(TypeError):
        Layout(Shape(2), bogus=Stride(1))


def test_L5_basics():
    a = lay([2, [3, 4]], [1, [2, 6]])
    assert a.shape == Shape([2, [3, 4]])
    assert a.stride == Stride([1, [2, 6]])
    assert a.depth == 2
    assert len(a) == 2
    assert not a.is_leaf
    assert lay([], []).is_leaf
    assert lay([5], [1]).is_leaf
    assert not lay([[5]], [[1]]).is_leaf
    assert not lay([5, 1], [1, 1]).is_leaf


def test_L5_items_iteration_slices():
    a = lay([2, [3, 4], 5], [1, [2, 6], 24])
    assert a[1] == Layout(a.shape[1], a.stride[1]) == lay([3, 4], [2, 6])
    assert a[0] == lay([2], [1])
    assert a[-1] == lay([5], [24])
    assert a[1:] == Layout(a.shape[1:], a.stride[1:])
    assert list(a) == [a[0], a[1], a[2]]
    with pytest.raises(IndexError):
        a[3]
    with pytest.raises(TypeError, match="indices must be integers or slices"):
        a["x"]


def test_L5_equality_hash_repr():
    a = lay([2, 3], [1, 0])
    assert a == lay((2, 3), (1, 0))
    assert a != lay([2, 3], [1, 2])
    assert a != Shape(2, 3)
    assert hash(a) == hash(lay((2, 3), (1, 0)))
    assert repr(a) == str(a) == "Layout(Shape([2, 3]), Stride([1, 0]))"
    b = lay([2, [3, [4]]], [1, [2, [6]]])
    assert eval(repr(b), vars(sw)) == b
    assert repr(lay([], [])) == "Layout(Shape([]), Stride([]))"


# ---- L-6 size and cosize --------------------------------------------------------


@pytest.mark.parametrize(
    "shape, stride, size, cosize",
    [
        ([2, 3], [1, 4], 6, 10),
        ([2, 3], [1, 0], 6, 2),
        ([2, [3, 4]], [1, [2, 6]], 24, 24),
        ([], [], 1, 1),
    ],
)
def test_L6_table(shape, stride, size, cosize):
    a = lay(shape, stride)
    assert a.size == a.shape.size == size
    assert a.cosize == cosize


# ---- L-7 profile, L-8 infix ------------------------------------------------------


def test_L7_profile():
    want = [Node.Leaf, Node.Push, Node.Leaf, Node.Leaf, Node.Pop]
    a = lay([2, [3, 4]], [1, [2, 6]])
    b = lay([7, [8, 9]], [0, [0, 0]])
    assert a.profile == want and b.profile == want
    assert all(type(n) is Node for n in a.profile)
    assert lay([], []).profile == []
    p = a.profile
    p.append(1)
    assert a.profile == want  # fresh list each time
    assert a.profile is not a.profile
    assert lay([[2]], [[1]]).profile == [Node.Push, Node.Leaf, Node.Pop]


def test_L8_infix():
    a = lay([2, [3, 4]], [1, [2, 6]])
    assert a.infix() == [(2, 1), (3, 2), (4, 6)]
    assert lay([], []).infix() == []
    x = a.infix()
    x.clear()
    assert a.infix() == [(2, 1), (3, 2), (4, 6)]


# ---- L-9 / L-10 indexing ---------------------------------------------------------

A = lay([2, [3, 4]], [1, [10, 100]])
B = lay([3, 4], [2, 10])


def test_L9_examples():
    assert A([1, [2, 3]]) == A([1, 11]) == A(23) == 321
    assert A((1, (2, 3))) == 321
    assert B(5) == 14
    assert B((0, 0)) == 0
    assert B([2, 1]) == 14
    e = lay([], [])
    assert e.index(0) == e.index([]) == e(0) == e(()) == 0


def test_L9_three_spellings_agree():
    for k in range(A.size):
        assert A(k) == A.index(k) == Layout.get_index(A, k)
    assert Layout.get_index(A, [1, [2, 3]]) == A.index([1, [2, 3]]) == 321


def test_L9_nested_integer_expansion_deeper():
    c = lay([2, [3, [2, 2]]], [1, [2, [6, 12]]])
    assert [c(k) for k in range(c.size)] == list(range(24))
    assert c([1, [2, 3]]) == 1 + 2 * 2 + 6 + 12
    assert c([1, [2, [1, 1]]]) == 1 + 4 + 6 + 12
    assert c([1, 11]) == c([1, [2, 3]])


def test_L10_get_index_non_layout_first():
    with pytest.raises(ValueError, match="must be a Layout"):
        Layout.get_index(Shape(2), 0)
    with pytest.raises(ValueError, match="must be a Layout"):
        Layout.get_index(None, True)  # checked before the key
    with pytest.raises(TypeError):
        Layout.get_index(A)


@pytest.mark.parametrize("key", [True, 1.0, None, "0", [0, True], [1, [2, None]], [1, [2.0, 3]]])
def test_L10_type_errors(key):
    with pytest.raises(TypeError, match="an index must be an integer or a list/tuple of indices, e.g. layout"):
        A(key)
    with pytest.raises(TypeError, match="an index must be an integer or a list/tuple of indices, e.g. layout"):
        A.index(key)
    with pytest.raises(TypeError, match="an index must be an integer or a list/tuple of indices, e.g. layout"):
        Layout.get_index(A, key)


@pytest.mark.parametrize(
    "key, match",
    [
        ([[0], 0], r"^mode 0 has no sub-modes, so its index must be an integer, not \[0\]$"),
        ([0, [0, [1]]], r"^mode \(1, 1\) has no sub-modes, so its index must be an integer"),
        ([0], r"^index \[0\] has 1 component but the layout has 2 modes; give one index per "
              r"mode, or one integer for the whole layout$"),
        ([0, 0, 0], "^index \\[0, 0, 0\\] has 3 components but the layout has 2 modes"),
        ([0, [0]], r"^index \[0\] has 1 component but mode 1 has 2 sub-modes; give one index "
                   r"per sub-mode, or one integer for the whole mode$"),
        ([0, [0, 0, 0]], "has 3 components but mode 1 has 2 sub-modes"),
        ([], "^index \\[\\] has 0 components but the layout has 2 modes"),
        (24, "^index 24 is out of range for a layout of size 24$"),
        (-1, "^index -1 is out of range for a layout of size 24: indices run from 0 to 23 "
             "and do not wrap around$"),
        ([2, 0], "^index 2 is out of range for mode 0 of size 2$"),
        ([-1, 0], "^index -1 is out of range for mode 0 of size 2: indices run from 0 to 1"),
        ([0, 12], "^index 12 is out of range for mode 1 of size 12$"),
        ([0, [3, 0]], r"^index 3 is out of range for mode \(1, 0\) of size 3$"),
        ([0, [0, 4]], r"^index 4 is out of range for mode \(1, 1\) of size 4$"),
        ([0, [0, -1]], r"^index -1 is out of range for mode \(1, 1\) of size 4: "),
    ],
)
def test_L10_value_errors(key, match):
    with pytest.raises(ValueError, match=match):
        A(key)
    with pytest.raises(ValueError, match=match):
        Layout.get_index(A, key)


def test_L10_no_negative_wraparound():
    for key, where in (([3, 0], "mode 0 of size 3"), (12, "a layout of size 12")):
        with pytest.raises(ValueError, match=f"^index {key[0] if isinstance(key, list) else key} "
                                             f"is out of range for {where}$"):
            B(key)
    for key, where, last in ((-1, "a layout of size 12", 11), ([0, -4], "mode 1 of size 4", 3)):
        with pytest.raises(ValueError, match=f"^index -[14] is out of range for {where}: indices "
                                             f"run from 0 to {last} and do not wrap around$"):
            B(key)
    with pytest.raises(ValueError):
        lay([], [])(1)
    with pytest.raises(ValueError):
        lay([], [])([0])


def test_L10_depth_first_order():
    # the first bad component decides the exception type
    with pytest.raises(TypeError):
        A([True, [9, 9]])
    with pytest.raises(ValueError):
        A([9, [True, 0]])


def test_L9_call_arity():
    with pytest.raises(TypeError):
        A()
    with pytest.raises(TypeError):
        A(0, 1)
    with pytest.raises(TypeError):
        A(key=0)


# ---- L-11 injectivity -------------------------------------------------------------


@pytest.mark.parametrize(
    "shape, stride, inj",
    [
        ([2, 3], [1, 4], True),
        ([4, 2], [0, 1], False),
        ([4, 2], [1, 1], False),
        ([3, 3], [2, 3], True),
        ([4, 3], [2, 3], False),
        ([1, 4], [0, 1], True),
        ([], [], True),
        ([2, [3, 4]], [1, [2, 6]], True),
        ([2, [3, 4]], [1, [2, 5]], False),
        ([3, 3, 2], [2, 3, 10000], True),
        ([3, 3, 2], [2, 2, 10000], False),
        ([5], [0], False),
        ([1], [0], True),
    ],
)
def test_L11_table(shape, stride, inj):
    a = lay(shape, stride)
    assert a.is_injective is inj
    assert a.is_injective is inj  # cached answer, same value


def test_L11_huge_cosize_needs_no_big_bitmap():
    # sorted strides dominate: decided without enumerating
    a = lay([2, 2, 2], [1, 2**40, 2**61])
    assert a.is_injective is True
    assert lay([2, 3], [2**61, 2**59]).is_injective is True
    assert lay([2, 3], [2**61, 2**60]).is_injective is False  # (1,0)~(0,2)
    # overlapping strides, huge cosize, small size: exact by sorting indices
    c = lay([3, 3, 2], [2, 3, 2**62])
    assert c.is_injective is True
    d = lay([4, 3, 2], [2, 3, 2**62])
    assert d.is_injective is False  # (3,0,.)~(0,2,.)


# ---- L-12 broadcast ---------------------------------------------------------------


def test_L12_examples():
    a = lay([2, [1, 3]], [1, [2, 2]])
    assert a.broadcast_to(Shape([2, [4, 3]])) == lay([2, [4, 3]], [1, [0, 2]])
    assert a.broadcast_to(Shape([2, [1, 3]])) == a
    with pytest.raises(ValueError, match="profile"):
        lay([3], [1]).broadcast_to(Shape([2, 3]))


def test_L12_errors():
    a = lay([1, [2, 1]], [5, [1, 7]])
    with pytest.raises(TypeError, match=r"^broadcast_to expects a Shape, e\.g\. Shape\(4, 6\), not list$"):
        a.broadcast_to([1, [2, 1]])
    with pytest.raises(TypeError, match=r"^broadcast_to expects a Shape, e\.g\. Shape\(4, 6\), not Layout$"):
        a.broadcast_to(a)
    with pytest.raises(ValueError, match="profile"):
        a.broadcast_to(Shape(1, 2, 1))
    with pytest.raises(ValueError, match="profile"):
        a.broadcast_to(Shape([1, [2, [1]]]))
    with pytest.raises(ValueError, match="only extent 1 widens"):
        a.broadcast_to(Shape([1, [3, 1]]))
    b = a.broadcast_to(Shape([6, [2, 9]]))
    assert b == lay([6, [2, 9]], [0, [1, 0]])
    assert b.size == 108 and b.cosize == 2 and not b.is_injective


# ---- L-13 concat / append ------------------------------------------------------------


def test_L13_examples():
    a = lay([1, 2], [0, 1])
    b = lay([3, 4], [2, 6])
    assert (a + b).shape == Shape(1, 2, 3, 4)
    assert (a + b).stride == Stride(0, 1, 2, 6)
    assert Layout.concat(a, b) == a.concat(b) == a + b
    assert Layout.append(a, b).shape == Shape(1, 2, [3, 4])
    assert a.append(b).stride == Stride(0, 1, [2, 6])
    leaf = lay([7], [3])
    assert a.append(leaf) == a + leaf == lay([1, 2, 7], [0, 1, 3])
    empty = lay([], [])
    assert a.append(empty) == a + empty == empty + a == a
    assert empty.append(b) == lay([[3, 4]], [[2, 6]])
    nested1 = lay([[3, 4]], [[2, 6]])
    assert a.append(nested1) == lay([1, 2, [[3, 4]]], [0, 1, [[2, 6]]])


@pytest.mark.parametrize("other", [Shape(2), 3, None, [1]])
def test_L13_non_layout(other):
    a = lay([1, 2], [0, 1])
    with pytest.raises(TypeError):
        a + other
    with pytest.raises(TypeError):
        other + a
    with pytest.raises(TypeError, match="must be a Layout"):
        a.concat(other)
    with pytest.raises(TypeError, match="must be a Layout"):
        a.append(other)
    with pytest.raises(TypeError):
        Layout.concat(other, a)
    with pytest.raises(TypeError):
        Layout.append(other, a)


def test_L13_cosize_overflow():
    a = lay([3], [2**61])
    with pytest.raises(OverflowError):
        a + a + a


# ---- L-14 permute ---------------------------------------------------------------------


def test_L14_example_and_forms():
    a = lay([2, [3, 4], 5], [1, [2, 6], 24])
    want = lay([[3, 4], 2, 5], [[2, 6], 1, 24])
    assert a.permute(1, 0, 2) == want
    assert a.permute([1, 0, 2]) == want
    assert a.permute((1, 0, 2)) == want
    assert Layout.permute(a, 1, 0, 2) == want
    assert Layout.permute(a, [1, 0, 2]) == want
    assert a.permute(Idx(1), Idx(0), 2) == want
    assert a.permute(2, 0, 1).permute(1, 2, 0) == a  # inverse restores
    assert lay([], []).permute() == lay([], [])
    assert lay([], []).permute([]) == lay([], [])
    assert lay([4], [1]).permute(0) == lay([4], [1])


@pytest.mark.parametrize("args", [(1.0, 0, 2), (True, 0, 2), ((1, None, 2),), ("abc",), (None,), ([0, 1, [2]],)])
def test_L14_type_errors(args):
    a = lay([2, [3, 4], 5], [1, [2, 6], 24])
    with pytest.raises(TypeError, match="permute order"):
        a.permute(*args)


@pytest.mark.parametrize(
    "args, match",
    [((0, 1), "entries for a layout of rank 3"), ((0, 1, 2, 3), "entries"), ((), "entries"),
     ((0, 0, 1), "repeats"), ((0, 1, 3), "outside"), ((0, -1, 2), "outside"),
     (([0, 1, 2**70],), "outside"), ((0,), "^permute order has 1 entry for a layout of rank 3; name every top-level mode once$")],
)
def test_L14_value_errors(args, match):
    a = lay([2, [3, 4], 5], [1, [2, 6], 24])
    with pytest.raises(ValueError, match=match):
        a.permute(*args)


# ---- L-15 canonical and flat builders ------------------------------------------------------


def test_L15_canonical():
    assert Layout.canonical(Shape([2, [3, 4]])).stride == Stride([1, [2, 6]])
    assert Layout.canonical(Shape([4, 2])).stride == Stride([1, 4])
    assert Layout.canonical(Shape()) == Layout(Shape(), Stride())
    c = Layout.canonical(Shape([2, [3, [2, 5]], 3]))
    assert c.shape == Shape([2, [3, [2, 5]], 3])
    assert c.is_injective and c.cosize == c.size
    assert all(c(k) == k for k in range(c.size))


@pytest.mark.parametrize("bad", [[2, 3], (2,), Stride(1), lay([2], [1]), 3, None])
def test_L15_canonical_non_shape(bad):
    with pytest.raises(TypeError, match=r"^canonical expects a Shape, e\.g\. Shape\(4, 6\), not "
                                        + type(bad).__name__ + "$"):
        Layout.canonical(bad)


def test_L15_canonical_overflow():
    with pytest.raises(OverflowError):
        Shape(2**40, 2**40)
    c = Layout.canonical(Shape(2**61, 1, 2))
    assert c.stride == Stride(1, 2**61, 2**61)
    assert c.cosize == c.size == 2**62


def test_L15_flat_builders():
    assert column_major(2, 3, 4) == Layout.canonical(Shape(2, 3, 4))
    assert column_major(2, 3, 4).stride == Stride(1, 2, 6)
    assert row_major(2, 3, 4).stride == Stride(12, 4, 1)
    assert row_major(2, 3, 4).shape == Shape(2, 3, 4)
    assert row_major(5) == column_major(5) == lay([5], [1])
    assert row_major(2, 1, 3).stride == Stride(3, 3, 1)
    assert row_major(2, 3).is_injective
    assert sw.friendly.column_major is column_major


@pytest.mark.parametrize("fn", [column_major, row_major])
def test_L15_flat_builder_errors(fn):
    with pytest.raises(ValueError, match="^at least one extent is required$"):
        fn()
    for bad in (0, -3, 2.0, True, None, "2", [2], (2, 3)):
        with pytest.raises(ValueError, match="^extents must be positive integers$"):
            fn(2, bad)
    with pytest.raises(OverflowError):
        fn(2**63)
    with pytest.raises(OverflowError):
        fn(2**40, 2**40)


# ---- leaks ---------------------------------------------------------------------------


def test_leaks_flat_over_100k_layouts():
    live = sw._C._live_bytes
    shape = Shape(2, [3, 4])
    stride = Stride(1, [2, 6])
    for _ in range(1000):  # warm caches (Node members, small ints)
        Layout(shape, stride).profile
    before_bytes = live()
    before_refs = sys.getrefcount(shape), sys.getrefcount(stride)
    for i in range(100_000):
        s = Shape(2, [3, i % 7 + 1])
        t = Stride(1, [2, i % 5])
        a = Layout(s, t)
        b = Layout(shape, stride)
        a.shape, a.stride, a[1], a + b, Shape(shape), a.is_injective
        a(i % a.size)
        del s, t, a, b
    assert live() == before_bytes
    assert (sys.getrefcount(shape), sys.getrefcount(stride)) == before_refs


def test_leaks_error_paths():
    live = sw._C._live_bytes
    before = live()
    for _ in range(2000):
        for bad in (lambda: Shape(2, 0), lambda: Stride([1, [-1]]),
                    lambda: Shape(2**32, 2**32), lambda: lay([2, 2], [2**62, 2**62]),
                    lambda: A([0, [9, 0]]), lambda: A.permute(0, 0),
                    lambda: lay([3], [1]).broadcast_to(Shape(4)),
                    lambda: row_major(2, 0)):
            with pytest.raises((ValueError, OverflowError)):
                bad()
    assert live() == before


def test_fault_injection_alloc_failure_raises_memoryerror():
    c = sw._C
    if not c._fault_injection_enabled():
        pytest.skip("build without fault injection")
    before = c._live_bytes()
    c._fault_inject("alloc", 0, 1)
    try:
        with pytest.raises(MemoryError):
            Shape(2, 3)
    finally:
        c._fault_clear()
    a = lay([4, 3], [2, 3])  # undecided until enumerated
    c._fault_inject("alloc", 0, 1)
    try:
        with pytest.raises(MemoryError):
            a.is_injective
    finally:
        c._fault_clear()
    assert a.is_injective is False  # not cached as a failure
    del a
    assert c._live_bytes() == before


def test_L3_L5_pickle_and_copy_roundtrip():
    import copy
    import pickle

    for obj in [Shape(2, [3, 4]), Shape(), Stride(1, [0, 6]), lay([2, [3, 4]], [1, [2, 6]]),
                lay([], [])]:
        assert pickle.loads(pickle.dumps(obj)) == obj
        assert copy.copy(obj) == obj and copy.deepcopy(obj) == obj


def test_L11_large_enumeration():
    # about 300k coordinates whose small strides interleave, so the
    # sorted-stride rule cannot decide: exact enumeration, checked by numpy
    np = pytest.importorskip("numpy")
    for head_ext, inj in (([3, 3], True), ([4, 3], False)):
        span = 1 + 2 * (head_ext[0] - 1) + 3 * (head_ext[1] - 1)
        shape = head_ext + [2] * 15
        stride = [2, 3] + [span * 2**i for i in range(15)]
        a = lay(shape, stride)
        idx = np.zeros(1, dtype=np.int64)
        for e, s_ in zip(shape, stride):
            idx = (idx[None, :] + (np.arange(e) * s_)[:, None]).ravel()
        assert len(idx) == a.size
        assert (len(np.unique(idx)) == a.size) is inj
        assert a.is_injective is inj
