"""Layouts against a brute-force pure-Python reference (L-6, L-8, L-9, L-11,
L-12, L-13, L-14, L-15), with hypothesis: random nested shapes (depth <= 3),
strides including 0 and overlapping ones."""

import itertools
from math import prod

from hypothesis import given, settings, strategies as st

from strideweave import Layout, Shape, Stride

SETTINGS = settings(max_examples=200, deadline=None)

# ---- the reference ---------------------------------------------------------
# A mode tree is a list of children; a child is an int (leaf) or a list.


def leaves(tree):
    out = []
    for c in tree:
        out.extend([c] if isinstance(c, int) else leaves(c))
    return out


def ref_size(tree):
    return prod(leaves(tree))


def ref_cosize(shape, stride):
    return 1 + sum(s * (e - 1) for e, s in zip(leaves(shape), leaves(stride)))


def ref_depth(tree):
    return 1 + max((ref_depth(c) for c in tree if isinstance(c, list)), default=0)


def ref_index(shape, stride, key):
    """L-9 directly from the wording: integers expand first-mode-fastest over
    the children, lists/tuples give one component per child."""
    if isinstance(key, int):
        comps = []
        for c in shape:
            n = c if isinstance(c, int) else ref_size(c)
            comps.append(key % n)
            key //= n
        key = comps
    total = 0
    for c, s, k in zip(shape, stride, key):
        total += k * s if isinstance(c, int) else ref_index(c, s, k)
    return total


def all_indices(shape, stride):
    return [ref_index(shape, stride, k) for k in range(ref_size(shape))]


def ref_injective(shape, stride):
    idx = all_indices(shape, stride)
    return len(set(idx)) == len(idx)


def random_key(draw, shape, k):
    """A nested key equivalent to ordinal k, each level randomly an integer or
    a list (and tuples or lists at random)."""
    if draw(st.booleans()):
        return k
    comps = []
    for c in shape:
        n = c if isinstance(c, int) else ref_size(c)
        sub = k % n
        k //= n
        comps.append(sub if isinstance(c, int) else random_key(draw, c, sub))
    return tuple(comps) if draw(st.booleans()) else comps


# ---- strategies ------------------------------------------------------------


@st.composite
def trees(draw, max_depth=3, max_leaves=5, extents=st.integers(1, 4)):
    """Mode trees with nesting depth <= max_depth and at most max_leaves
    leaves (so brute force stays cheap); nested modes are never empty."""
    budget = [max_leaves]

    def children(depth, min_n):
        out = []
        for _ in range(draw(st.integers(min_n, 4))):
            if budget[0] == 0:
                break
            if depth > 1 and draw(st.booleans()):
                out.append(children(depth - 1, 1))
            else:
                budget[0] -= 1
                out.append(draw(extents))
        return out

    return children(max_depth, 0)


def unflatten(tree, flat):
    it = iter(flat)

    def go(t):
        return [next(it) if isinstance(c, int) else go(c) for c in t]

    return go(tree)


def strides_like(draw, tree):
    """Strides congruent with tree: small (many zeros and overlaps), wide,
    or a shuffled canonical assignment with random gaps and nudges (mostly
    injective, sometimes just not)."""
    ext = leaves(tree)
    kind = draw(st.sampled_from(["small", "wide", "canon"]))
    if kind == "small":
        flat = [draw(st.integers(0, 4)) for _ in ext]
    elif kind == "wide":
        flat = [draw(st.integers(0, 40)) for _ in ext]
    else:
        order = draw(st.permutations(range(len(ext))))
        flat, s = [0] * len(ext), 1
        for i in order:
            flat[i] = s + draw(st.sampled_from([0, 0, 0, -1, 1]))
            s = max(flat[i], 0) * ext[i] * draw(st.sampled_from([1, 1, 2])) or 1
        flat = [max(v, 0) for v in flat]
    return unflatten(tree, flat)


@st.composite
def layouts(draw, max_leaves=5):
    shape = draw(trees(max_leaves=max_leaves))
    stride = strides_like(draw, shape)
    return shape, stride


def make(shape, stride):
    return Layout(Shape(shape), Stride(stride))


def as_tuple(tree):
    return tuple(c if isinstance(c, int) else as_tuple(c) for c in tree)


# ---- properties ------------------------------------------------------------


@SETTINGS
@given(layouts())
def test_L6_L8_facts_match_reference(ls):
    shape, stride = ls
    a = make(shape, stride)
    assert a.size == ref_size(shape)
    assert a.cosize == ref_cosize(shape, stride)
    assert a.depth == ref_depth(shape) == a.shape.depth
    assert len(a) == len(shape)
    assert a.infix() == list(zip(leaves(shape), leaves(stride)))
    assert a.shape.top_level == as_tuple(shape)
    assert a.stride.top_level == as_tuple(stride)
    assert a == make(as_tuple(shape), as_tuple(stride))
    assert hash(a) == hash(make(as_tuple(shape), as_tuple(stride)))


@SETTINGS
@given(layouts())
def test_L11_injectivity_matches_brute_force(ls):
    shape, stride = ls
    a = make(shape, stride)
    assert a.is_injective is ref_injective(shape, stride)


@SETTINGS
@given(layouts(), st.data())
def test_L9_indexing_matches_reference(ls, data):
    shape, stride = ls
    a = make(shape, stride)
    got = [a(k) for k in range(a.size)]
    assert got == all_indices(shape, stride)
    for _ in range(5):
        k = data.draw(st.integers(0, a.size - 1))
        key = random_key(data.draw, shape, k)
        assert a(key) == a.index(key) == Layout.get_index(a, key) == got[k]


@SETTINGS
@given(layouts(), st.data())
def test_L3_L5_modes_and_slices(ls, data):
    shape, stride = ls
    a = make(shape, stride)
    for i, (c, s) in enumerate(zip(shape, stride)):
        want = make([c], [s]) if isinstance(c, int) else make(c, s)
        assert a[i] == want == a[i - len(shape)]
        assert a.shape[i] == want.shape and a.stride[i] == want.stride
    lo = data.draw(st.integers(-5, 5))
    hi = data.draw(st.integers(-5, 5))
    step = data.draw(st.sampled_from([None, 1, 2, -1, -2]))
    sl = slice(lo, hi, step)
    assert a[sl] == make(shape[sl], stride[sl])
    assert a.shape[sl] == Shape(shape[sl])


@SETTINGS
@given(layouts(), st.data())
def test_L14_permute_matches_reference(ls, data):
    shape, stride = ls
    a = make(shape, stride)
    order = data.draw(st.permutations(range(len(shape))))
    p = a.permute(order)
    assert p == make([shape[i] for i in order], [stride[i] for i in order])
    inverse = [order.index(j) for j in range(len(order))]
    assert p.permute(*inverse) == a


@SETTINGS
@given(layouts(max_leaves=3), layouts(max_leaves=3))
def test_L13_concat_append(l1, l2):
    a, b = make(*l1), make(*l2)
    assert a + b == make(l1[0] + l2[0], l1[1] + l2[1])
    if b.is_leaf:
        assert a.append(b) == a + b
    else:
        assert a.append(b) == make(l1[0] + [l2[0]], l1[1] + [l2[1]])
    assert (a + b).is_injective is ref_injective(l1[0] + l2[0], l1[1] + l2[1])


@SETTINGS
@given(layouts(), st.data())
def test_L12_broadcast(ls, data):
    shape, stride = ls

    def widen(tree):
        return [data.draw(st.integers(1, 5)) if isinstance(c, int) and c == 1 else
                c if isinstance(c, int) else widen(c) for c in tree]

    def expect(sh, sd, tg):
        return [0 if isinstance(c, int) and c != t else
                s if isinstance(c, int) else expect(c, s, t)
                for c, s, t in zip(sh, sd, tg)]

    target = widen(shape)
    b = make(shape, stride).broadcast_to(Shape(target))
    assert b == make(target, expect(shape, stride, target))


@SETTINGS
@given(trees(extents=st.integers(1, 5)))
def test_L15_canonical(shape):
    c = Layout.canonical(Shape(shape))
    assert c.shape == Shape(shape)
    assert c.is_injective and c.cosize == c.size
    assert [c(k) for k in range(c.size)] == list(range(c.size))
    flat = leaves(shape)
    assert [s for _, s in c.infix()] == [prod(flat[:i]) for i in range(len(flat))]


def test_L11_exhaustive_small_flat():
    # every 2-leaf layout with extents <= 4 and strides <= 6
    for e1, e2, s1, s2 in itertools.product(range(1, 5), range(1, 5), range(7), range(7)):
        assert make([e1, e2], [s1, s2]).is_injective is ref_injective([e1, e2], [s1, s2])
