"""Contract audit of tensors, views and friendly creation (contract-core G-2, G-3,
T-1..T-14, V-1..V-8, V-10, F-1..F-5): gaps the area tests left open, and
regressions for the defects the audit fixed."""

import gc
import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import strideweave as sw
from strideweave import CPU, DType, Generic, Layout, Shape, Stride, Tensor
from strideweave.friendly import full, ones, scaled_int32, tensor, to_list, zeros


def L(shape, stride):
    return Layout(Shape(shape), Stride(stride))


def over(layout, offset=0):
    """Int32 tensor whose slot i holds i: reading gives the scalar index."""
    n = offset + layout.cosize
    return Tensor(Generic(list(range(n)), dtype=DType.Int32), offset, layout)


class Counting(sw.Carrier):
    """User carrier that counts hook calls; dtype/size are configurable."""

    def __init__(self, dtype, n):
        super().__init__()
        self._dtype, self._n = dtype, n
        self.calls = []

    def size(self):
        self.calls.append("size")
        return self._n

    def dtype(self):
        self.calls.append("dtype")
        return self._dtype

    def get_value(self, i):
        self.calls.append(("get", i))
        return 0


def live():
    gc.collect()
    return sw._C._live_bytes()


# ---- G-2: bool is never an integer, huge ints are domain errors -----------------


@pytest.mark.parametrize(
    "key",
    [
        slice(True, 3),
        slice(0, True),
        slice(False, None),
        (slice(True, 3), slice(None)),
        (slice(None), slice(0, True)),
    ],
)
def test_g2_v5_bool_slice_bounds_are_type_errors(key):
    # G-2: bool is not an integer anywhere, slice start/stop included (V-5 says a
    # non-integer step is a TypeError; Python's normalization would take True as 1).
    t = over(L([5], [1])) if isinstance(key, slice) else over(L([5, 4], [1, 5]))
    with pytest.raises(TypeError, match="must be an integer or None"):
        t[key]


def test_g2_v5_bool_bound_on_nested_mode_is_a_type_error():
    t = over(L([3, [2, 2]], [1, [3, 6]]))
    with pytest.raises(TypeError, match="must be an integer or None"):
        t[:, False:]


def test_g2_v5_integer_like_bounds_still_work():
    class Idx:
        def __init__(self, v):
            self.v = v

        def __index__(self):
            return self.v

    t = over(L([6], [1]))
    assert t[Idx(1):Idx(5):Idx(2)].layout == L([2], [2])
    assert t[Idx(1):Idx(5):Idx(2)].offset == 1


def test_g2_huge_integers_are_domain_errors():
    t = over(L([3, 4], [1, 3]))
    for key in (-(2**70), (0, 2**64), [2**63, 0]):
        with pytest.raises(ValueError):
            t[key]
    with pytest.raises(ValueError, match="step"):
        t[0:3:-(2**70), :]
    v = t[0:3:2**70, :]  # one index (range semantics): the step is never taken
    assert v.layout.shape == Shape([1, 4]) and v.offset == t.offset
    c0, c1 = CPU(4, dtype=DType.Int32), CPU(1)
    with pytest.raises(ValueError, match="subtensor 1: offset \\+ layout.cosize"):
        Tensor._from_representation(
            DType.ScaledInt32, [(c0, 0, L([4], [1])), (c1, 2**70, L([1], [1]))], [L([4], [0])]
        )
    with pytest.raises(ValueError, match="subtensor 0: offset must be >= 0"):
        Tensor._from_representation(DType.Float32, [(CPU(1), -(2**70), L([1], [1]))])


# ---- T-1 check order ------------------------------------------------------------


def test_t1_step3_layout_checked_before_dtype_is_asked():
    c = Counting(DType.Float32, 4)
    with pytest.raises(TypeError, match="layout must be a Layout"):
        Tensor(c, -1, Shape(1))
    assert c.calls == []


def test_t1_step5_offset_checked_before_size_is_asked():
    c = Counting(DType.Float32, 4)
    with pytest.raises(ValueError, match="offset must be >= 0"):
        Tensor(c, -1, L([1], [1]))
    assert c.calls == ["dtype"]


def test_t1_step6_negative_size_before_step7():
    # The size hook reporting -1 fails step 6, not the placement check (step 7).
    c = Counting(DType.Float32, -1)
    with pytest.raises(ValueError, match="size\\(\\) must be >= 0"):
        Tensor(c, 0, L([5], [1]))


def test_t1_success_asks_dtype_and_size_and_reads_nothing():
    c = Counting(DType.Int32, 4)
    t = Tensor(c, 1, L([3], [1]))
    assert c.calls == ["dtype", "size"]
    assert t.dtype() is DType.Int32


# ---- T-4 .. T-7 check order -------------------------------------------------------


def _two_planes(level0=None, level1=None, adjacent=None):
    c0, c1 = CPU(4, dtype=DType.Int32), CPU(1)
    s0 = level0 if level0 is not None else (c0, 0, L([4], [1]))
    s1 = level1 if level1 is not None else (c1, 0, L([1], [1]))
    adj = adjacent if adjacent is not None else [L([4], [0])]
    return Tensor._from_representation(DType.ScaledInt32, [s0, s1], adj)


def test_t4_step2_before_step3_and_step3_before_step4():
    with pytest.raises(ValueError, match="storage schema"):
        Tensor._from_representation(DType.Integer, [(object(), 0, None)] * 3, [1, 2])
    with pytest.raises(ValueError, match="needs 2 subtensors"):
        Tensor._from_representation(DType.ScaledInt32, [(object(), 0, None)])
    with pytest.raises(ValueError, match="adjacent"):
        Tensor._from_representation(
            DType.ScaledInt32, [(object(), 0, None), (object(), 0, None)], []
        )


def test_t4_every_level_before_any_adjacent_layout():
    # T-5 for level 1 (step 4) precedes T-6 (step 5).
    with pytest.raises(ValueError, match="subtensor 1: offset \\+ layout.cosize"):
        _two_planes(level1=(CPU(1), 5, L([1], [1])), adjacent=[Shape(4)])


def test_t5_f_before_g_on_level1():
    c = Counting(DType.Float32, -1)
    with pytest.raises(ValueError, match="size\\(\\) must be >= 0"):
        _two_planes(level1=(c, 0, L([3], [1])))


def test_t5_h_runs_after_g():
    # level 1: a different class AND a placement beyond it -> (g) decides.
    g = Generic([1.0])
    with pytest.raises(ValueError, match="subtensor 1: offset \\+ layout.cosize"):
        _two_planes(level1=(g, 1, L([1], [1])))
    with pytest.raises(TypeError, match="subtensor 1: carrier class"):
        _two_planes(level1=(g, 0, L([1], [1])))


def test_t6_type_before_shape_before_cosize():
    with pytest.raises(TypeError, match="adjacent layout 0 must be a Layout"):
        _two_planes(adjacent=[Stride(0)])
    # wrong shape and too-large cosize: the shape check decides
    with pytest.raises(ValueError, match="adjacent layout 0: shape"):
        _two_planes(adjacent=[L([2, 2], [1, 2])])


def test_t7_scale_plane_size_after_t6():
    c0, c1 = CPU(4, dtype=DType.Int32), CPU(4)
    with pytest.raises(ValueError, match="ScaledInt32"):
        Tensor._from_representation(
            DType.ScaledInt32, [(c0, 0, L([4], [1])), (c1, 0, L([4], [1]))], [L([4], [0])]
        )


# ---- T-9 ------------------------------------------------------------------------


def test_t9_version_token_follows_every_plane():
    t = scaled_int32([[1, 2], [3, 4]], scale=0.5)
    c0, c1 = t._subtensors[0][1], t._subtensors[1][1]
    tok = t._version_token()
    c1[0] = 2.0
    assert t._version_token() == ((id(c0), 0), (id(c1), 1)) != tok
    assert t.version == 0  # t.version is plane 0's carrier


def test_t9_shared_carrier_appears_once():
    c = Counting(DType.Int32, 8)
    c1 = Counting(DType.Float32, 8)
    t = Tensor._from_representation(
        DType.ScaledInt32, [(c, 0, L([4], [1])), (c1, 4, L([1], [1]))], [L([4], [0])]
    )
    assert [cid for cid, _ in t._version_token()] == [id(c), id(c1)]


# ---- V-3: element reads agree with Layout.index (L-9, L-10) ------------------------


def _modes(depth=0):
    leaf = st.integers(1, 3)
    if depth >= 2:
        return leaf
    return st.one_of(leaf, st.lists(st.deferred(lambda: _modes(depth + 1)), min_size=1,
                                    max_size=3))


def _strides(mode, draw):
    if isinstance(mode, list):
        return [_strides(m, draw) for m in mode]
    return draw(st.integers(0, 6))


@st.composite
def layouts(draw):
    shape = draw(st.lists(_modes(1), min_size=0, max_size=3))
    return Layout(Shape(shape), Stride(_strides(shape, draw))), shape


def _keys(mode):
    """Keys for a mode: an integer (possibly out of range), or one component per
    child with an occasional extra or missing one."""
    ints = st.integers(-2, 30)
    if not isinstance(mode, list):
        return ints
    parts = st.tuples(*[_keys(m) for m in mode]).map(list)
    tweaked = parts.flatmap(
        lambda p: st.sampled_from([p, p + [0], p[:-1]]).flatmap(
            lambda q: st.sampled_from([q, tuple(q)])
        )
    )
    return st.one_of(ints, tweaked)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_v3_element_read_equals_layout_index(data):
    layout, shape = data.draw(layouts())
    t = over(layout, offset=2)
    key = data.draw(_keys(shape))
    try:
        expect = ("ok", 2 + layout.index(key))
    except (TypeError, ValueError) as e:
        expect = ("err", type(e))
    try:
        got = ("ok", t[key])
    except (TypeError, ValueError) as e:
        got = ("err", type(e))
    assert got == expect, (layout, key)


# ---- V-5: slice views select exactly the addressed coordinates ----------------------


def _leaf_ordinals(ext, key_entry):
    if isinstance(key_entry, int):
        return [key_entry]
    return list(range(ext))[key_entry]


@settings(max_examples=300, deadline=None)
@given(
    exts=st.lists(st.integers(1, 5), min_size=1, max_size=3),
    strides=st.lists(st.integers(0, 7), min_size=3, max_size=3),
    data=st.data(),
)
def test_v5_flat_slice_view_reads_brute_force_selection(exts, strides, data):
    layout = L(exts, strides[: len(exts)])
    t = over(layout, offset=1)
    key = []
    for e in exts:
        if data.draw(st.booleans()):
            key.append(data.draw(st.integers(0, e - 1)))
        else:
            start = data.draw(st.integers(0, e - 1))
            # Python slice semantics: any stop past start, any positive step
            stop = data.draw(st.integers(start + 1, e + 2))
            step = data.draw(st.integers(1, e + 1))
            key.append(slice(start, stop, step))
    if not any(isinstance(k, slice) for k in key):
        key[0] = slice(None)  # a key without a slice is an element read (V-3)
    v = t[tuple(key)]
    kept = [_leaf_ordinals(e, k) for e, k in zip(exts, key)]
    # first-mode-fastest enumeration of the selected coordinates
    expect = [
        t[tuple(reversed(c))]
        for c in itertools.product(*reversed(kept))
    ]
    assert to_list(v) == expect
    assert v.carrier is t.carrier and v.version == t.version
    assert v.offset == t[tuple(k[0] for k in kept)]  # slot i holds i


# ---- V-5 multi-subtensor: the NotImplementedError belongs to its entry --------------


def test_v5_multi_subtensor_nonzero_start_raises_at_its_entry():
    # V-5 step 2 walks entries left to right; the multi-subtensor rule is the last
    # check of each entry, so entry 0's nonzero start decides before entry 1 is read.
    t = scaled_int32([[1, 2], [3, 4]])
    with pytest.raises(NotImplementedError, match="start at coordinate 0"):
        t[1:2, 5]
    with pytest.raises(NotImplementedError):
        t[1:2, 0.5]
    with pytest.raises(NotImplementedError):
        t[1, (0,)]
    # the entry's own checks still come first
    with pytest.raises(ValueError, match="out of range"):
        t[2, :]
    with pytest.raises(ValueError, match="step"):
        t[1:2:0, 5]
    with pytest.raises(TypeError, match="step"):
        t[1:2:1.0, 5]
    t3 = scaled_int32([[[1], [2]], [[3], [4]]])
    with pytest.raises(ValueError, match="^index 5 is out of range for mode 1 of size 2$"):
        t3[0, 5, :]  # entry 0 is a zero selection; entry 1 is out of range
    with pytest.raises(NotImplementedError, match="^slice key for mode 1: a tensor with 2 planes"):
        t3[0, 1, 0.5:]


def test_v5_multi_subtensor_failures_leave_nothing():
    t = scaled_int32([[1, 2], [3, 4]])
    live0 = live()
    for key in ((1, slice(None)), (slice(None), 1), (slice(1, 2), slice(None))):
        with pytest.raises(NotImplementedError):
            t[key]
    assert live() == live0
    assert [s[1].version for s in t._subtensors] == [0, 0]


# ---- V-7: reshape keeps the ordinal order -------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    exts=st.lists(st.integers(1, 4), min_size=1, max_size=4),
    base=st.integers(0, 3),
    data=st.data(),
)
def test_v7_reshape_of_compatible_layout_keeps_values_in_order(exts, base, data):
    strides, acc = [], base
    for e in exts:
        strides.append(acc if e > 1 else data.draw(st.integers(0, 9)))
        if e > 1:
            acc *= e
    t = over(L(exts, strides), offset=3)
    size = t.size()
    target = data.draw(st.sampled_from([d for d in range(1, size + 1) if size % d == 0]))
    v = sw.reshape(t, Shape([target, [size // target]]))
    assert to_list(v) == to_list(t)
    assert v.offset == 3


# ---- F-3: fills of every dtype ------------------------------------------------------


@pytest.mark.parametrize(
    "dtype,one,value",
    [(DType.Float32, 1.0, -2.5), (DType.Int32, 1, -(2**31)), (DType.Bool, True, True)],
)
def test_f3_fill_values_reach_every_slot(dtype, one, value):
    exts = (3, 5, 7)
    n = 3 * 5 * 7
    assert to_list(ones(*exts, dtype=dtype)) == [one] * n
    assert to_list(full(*exts, value=value, dtype=dtype)) == [value] * n
    assert to_list(zeros(*exts, dtype=dtype)) == [type(one)(0)] * n
    f = full(1, value=value, dtype=dtype)
    assert [f.carrier[i] for i in range(f.carrier.size())] == [value]


def test_f3_full_float32_value_rounds_once():
    t = full(4, value=0.1)
    assert to_list(t) == [tensor([0.1]).item()] * 4


# ---- T-8 / GC: every held reference is visible to the collector -----------------------


def test_t8_gc_sees_every_plane_and_layout():
    t = scaled_int32([[1, 2], [3, 4]], scale=0.5)
    refs = gc.get_referents(t)
    assert gc.is_tracked(t)
    for _, carrier, _, layout in t._subtensors:
        assert any(r is carrier for r in refs) and any(r is layout for r in refs)
    assert any(r is t._adjacent_layouts for r in refs)
    assert any(r is DType.ScaledInt32 for r in refs)


def test_t8_cycle_through_plane1_carrier_is_collected():
    import weakref

    class Keeper(sw.Carrier):
        def __init__(self, dtype, n):
            super().__init__()
            self._dtype, self._n = dtype, n

        def size(self):
            return self._n

        def dtype(self):
            return self._dtype

        def get_value(self, i):
            return 0

    c0, c1 = Keeper(DType.Int32, 4), Keeper(DType.Float32, 1)
    t = Tensor._from_representation(
        DType.ScaledInt32, [(c0, 0, L([4], [1])), (c1, 0, L([1], [1]))], [L([4], [0])]
    )
    c1.back = t  # cycle: t -> c1 -> t, only through plane 1
    refs = [weakref.ref(t), weakref.ref(c1)]
    del t, c0, c1
    gc.collect()
    assert [r() for r in refs] == [None, None]


# ---- V-6: permute reads follow the order ---------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    exts=st.lists(st.integers(1, 4), min_size=1, max_size=4),
    data=st.data(),
)
def test_v6_permuted_view_reads_the_moved_coordinates(exts, data):
    strides = [data.draw(st.integers(0, 5)) for _ in exts]
    t = over(L(exts, strides), offset=1)
    order = data.draw(st.permutations(range(len(exts))))
    v = sw.permute(t, *order)
    assert v.offset == 1 and v.carrier is t.carrier
    for coord in itertools.product(*[range(e) for e in exts]):
        moved = tuple(coord[order[j]] for j in range(len(exts)))
        assert v[moved] == t[coord]
    back = [order.index(i) for i in range(len(exts))]
    assert sw.permute(v, back).layout == t.layout
