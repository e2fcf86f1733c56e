"""Audit of the TiledEvictable sentences (contract-carriers TE-1 .. TE-14)
that test_tiled_evictable.py / test_tiled_project.py left open: the order of
the numbered construction checks and the state after each refusal, and what
a residency request, a write and release() see while a tile copy is in
flight (observed from inside a registered MoveOperation's `_copy`)."""

import pytest

import strideweave as sw
from strideweave import CPU, Evictable, FileBacked, Generic, MoveOperation
from strideweave.carriers.move import registered_move_operation

from tiled_helpers import F, ListCarrier, cpu_values, slots, states

TE, TileSet, TileSelection, ResidencyPlan = (sw.TiledEvictable, sw.TileSet, sw.TileSelection,
                                             sw.ResidencyPlan)
I32, B = sw.DType.Int32, sw.DType.Bool


def unowned(*carriers):
    return not any(c.is_owned() for c in carriers)


# ---- TE-1 order of the checks, and nothing claimed after a refusal -------------------------

def test_te1_check2_precedes_check3_for_one_released_object():
    c = CPU(0)
    c.release()
    with pytest.raises(ValueError, match="different"):
        TE(c, c, (1,), (1,))


def test_te1_check3_released_secondary():
    p, s = CPU(0), CPU(0)
    s.release()
    with pytest.raises(RuntimeError, match="secondary.*released"):
        TE(p, s, (1,), (1,))
    assert unowned(p) and not p.is_released()


def test_te1_check4_precedes_check5():
    s = CPU(0)
    keep = Evictable(CPU(4), s)  # noqa: F841 (owns s while alive)
    p = CPU(0, dtype=I32)
    with pytest.raises(RuntimeError, match="owned"):
        TE(p, s, (1,), (1,))
    assert unowned(p)


def test_te1_check5_precedes_check6():
    p, s = CPU(0), CPU(0, dtype=I32)
    with pytest.raises(TypeError, match="dtypes"):
        TE(p, s, (), (1,))
    assert unowned(p, s)


def test_te1_check6_precedes_check7():
    p, s = CPU(3), CPU(0)
    with pytest.raises(TypeError, match="grid_shape"):
        TE(p, s, ("a",), (1,))
    with pytest.raises(ValueError, match="rank|axes|same"):
        TE(p, s, (2,), (2, 1))
    assert unowned(p, s)


def test_te1_check7_primary_size_before_its_dtype_and_before_secondary():
    class BoolRefusing(sw.Carrier):
        def __init__(self, n):
            super().__init__()
            self.n = n

        def size(self):
            return self.n

        def dtype(self):
            return B

        def get_value(self, i):
            return False

        def _supports_storage_dtype(self, dtype):
            return False

    p, s = BoolRefusing(3), BoolRefusing(0)
    with pytest.raises(ValueError, match="primary"):
        TE(p, s, (2,), (2,))
    with pytest.raises(TypeError, match="does not support storage dtype"):
        TE(BoolRefusing(4), s, (2,), (2,))
    with pytest.raises(TypeError, match="secondary|does not support"):
        TE(Generic([False] * 4, dtype=B), s, (2,), (2,))
    assert unowned(p, s)


def test_te1_check7_precedes_check8():
    p, s = CPU(3), CPU(0)
    with pytest.raises(ValueError, match="primary"):
        TE(p, s, (2,), (2,), residency_policy=object())
    assert unowned(p, s)


def test_te1_tiled_evictable_tier_is_dependent_and_refused():
    inner = TE(CPU(0), CPU(0), (1,), (1,))
    for args in [(inner, CPU(0)), (CPU(0), inner)]:
        with pytest.raises(TypeError):
            TE(*args, (1,), (1,))
    assert not inner.is_owned()


def test_te1_shapes_from_any_finite_iterable():
    te = TE(CPU(0), CPU(0), (g for g in [2, 3]), iter([1, 2]))
    assert te.grid_shape == (2, 3) and te.tile_shape == (1, 2) and te.size() == 12


def test_te1_both_tiers_full_seeds_all_primary():
    te = TE(cpu_values([1.0, 2.0, 3.0, 4.0]), cpu_values([5.0, 6.0, 7.0, 8.0]), (2,), (2,))
    assert states(te) == [("primary", False)] * 2 and slots(te) == [1.0, 2.0, 3.0, 4.0]


# ---- TE-5 ------------------------------------------------------------------------------------

def test_te5_plan_refuses_a_selection_and_tile_sets_are_immutable():
    with pytest.raises(TypeError):
        ResidencyPlan(evict=TileSelection([[0]]))
    with pytest.raises(AttributeError):
        TileSet([(0,)]).coordinates = ()


# ---- TE-7 / TE-8 / TE-9 / TE-14 while a tile copy runs ---------------------------------------

class Tier(ListCarrier):
    """This file's own Python tier class: the moves registered on it below
    touch no other test's class."""


class Inside(MoveOperation):
    """Runs `probe()` once from inside the first tile copy, then copies."""

    probe = None
    seen = None

    def _copy(self, tensor, destination, output, element_count):
        if type(self).probe is not None:
            probe, type(self).probe = type(self).probe, None
            type(self).seen = probe()
        for i in range(element_count):
            destination[i] = tensor.carrier[i]


def attempt(call):
    try:
        return ("ok", call())
    except Exception as e:  # noqa: BLE001 (the probe reports whatever it got)
        return (type(e), str(e))


@pytest.fixture
def inside_tier():
    Inside.probe, Inside.seen = None, None
    with registered_move_operation(Tier, Tier, Inside):
        yield Inside


def evicted_twice():
    """Tiles (0,) and (1,) in private Tier storage, secondary (so the next
    promote runs Inside._copy)."""
    te = TE(Tier([1.0, 2.0, 3.0, 4.0]), Tier(), (2,), (2,))
    te.evict(TileSet([(0,), (1,)]))
    return te


def test_te7_checks_in_order_while_a_tile_is_pending(inside_tier):
    te = evicted_twice()
    inside_tier.probe = lambda: [
        attempt(lambda: te.evict(TileSet([(0,), (5,)]))),    # binding before pending
        attempt(lambda: te.promote([(0,)])),                 # type before binding
        attempt(lambda: te.promote(TileSet([(1,), (0,)]))),  # pending tile in the set
        attempt(lambda: te.evict_async(TileSet([(0,)]))),
        states(te),
    ]
    h = te.promote_async(TileSet([(0,)]))
    assert h.done  # a synchronous legacy copy finishes before the handle returns (TE-8)
    (bind, typ, pend, pend_async, during) = inside_tier.seen
    assert bind[0] is ValueError and typ[0] is TypeError
    assert pend[0] is RuntimeError and "pending" in pend[1]
    assert pend_async[0] is RuntimeError and "pending" in pend_async[1]
    # the refused request moved nothing, not even the tile that was free
    assert during == [("secondary", False), ("secondary", False)]
    assert states(te) == [("primary", False), ("secondary", False)]
    assert slots(te) == [1.0, 2.0, 3.0, 4.0] and te.version == 0


def test_te9_pending_tile_reads_its_value_and_refuses_writes(inside_tier):
    te = evicted_twice()
    inside_tier.probe = lambda: [attempt(lambda: te[1]), attempt(lambda: te.__setitem__(1, 9.0)),
                                 te.version, attempt(lambda: te.__setitem__(2, 9.0))]
    te.promote(TileSet([(0,)]))
    read, write, version, other = inside_tier.seen
    assert read == ("ok", 2.0)
    assert write[0] is RuntimeError and "pending" in write[1] and version == 0
    # a tile outside the request is written normally (promoted first, TE-9)
    assert other == ("ok", None)
    assert te[1] == 2.0 and te[2] == 9.0 and te.version == 1
    assert te.dirty_tiles == TileSet([(1,)])


def test_te14_release_refused_while_a_tile_copy_runs(inside_tier):
    te = evicted_twice()
    p, s = te.primary, te.secondary
    inside_tier.probe = lambda: attempt(te.release)
    te.promote(TileSet([(0,), (1,)]))
    exc, msg = inside_tier.seen
    assert exc is RuntimeError and "wait" in msg
    assert not te.is_released() and not p.is_released() and not s.is_released()
    assert slots(te) == [1.0, 2.0, 3.0, 4.0]
    te.release()
    assert te.is_released() and unowned(p, s)


def test_te9_write_to_a_secondary_tile_whose_promotion_fails_changes_nothing():
    class Fails(MoveOperation):
        def _copy(self, tensor, destination, output, element_count):
            raise OSError("tier unavailable")

    te = evicted_twice()
    with registered_move_operation(Tier, Tier, Fails):
        with pytest.raises(OSError, match="tier unavailable"):
            te[3] = 7.0
    assert states(te) == [("secondary", False), ("secondary", False)]
    assert slots(te) == [1.0, 2.0, 3.0, 4.0] and te.version == 0
    te[3] = 7.0  # retry through the elementwise fallback
    assert te[3] == 7.0 and te.version == 1


def test_te7_evict_skips_invalid_and_implicit_tiles_and_empty_sets_are_no_ops():
    inv = TE(CPU(0), CPU(0), (2,), (2,))
    inv.evict(TileSet([(0,), (1,)]))
    assert states(inv) == [("invalid", False)] * 2
    imp = cpu_values([1.0] * 4)
    z = TE(imp, CPU(0), (2,), (2,)).allocate_like(4)
    z.evict(TileSet([(0,)]))
    z.promote(TileSet())
    assert states(z) == [("implicit", False)] * 2 and z.version == 0


# ---- TE-13 ------------------------------------------------------------------------------------

def test_te13_factories_keep_the_policy_and_use_an_empty_secondary():
    class P:
        def plan(self, required, purpose):
            return ResidencyPlan()

    pol = P()
    te = TE(cpu_values([1.0, 0.0, 0.0, 0.0]), FileBacked(), (2,), (2,), residency_policy=pol)
    n = te.new_like([0.0, 0.0, 1.0, 0.0])
    assert n.residency_policy is pol and n.secondary.size() == 0
    assert type(n.secondary) is FileBacked
    a = te.allocate_like(4)
    assert a.residency_policy is pol and a.grid_shape == (2,) and a.tile_shape == (2,)
    assert te.new_like([0, 0, 1, 0], dtype=I32).dtype() is I32


# ---- TE-10 order of the checks ----------------------------------------------------------------

class CountingPolicy:
    def __init__(self):
        self.calls = 0

    def plan(self, required, purpose):
        self.calls += 1
        return ResidencyPlan()


def projection_case():
    pol = CountingPolicy()
    te = TE(cpu_values([float(i) for i in range(8)]), CPU(0), (2, 2), (1, 2),
            residency_policy=pol)
    return te, pol, sw.Tensor(te, 0, sw.Layout(sw.Shape([2, 4]), sw.Stride([1, 2])))


def test_te10_checks_in_order_and_the_policy_runs_last():
    te, pol, t = projection_case()
    sel = TileSelection([[1], [0, 1]])
    released = CPU(8, dtype=I32)
    released.release()
    bad_layout = sw.Tensor(te, 0, sw.Layout(sw.Shape([2, 4]), sw.Stride([4, 1])))
    cases = [
        (lambda: te.project(bad_layout, TileSet()), ValueError),           # TE-3 first
        (lambda: te.project(t, TileSet([(0, 0)]), destination="x"), TypeError),
        (lambda: te.project(t, TileSelection([[2], [0]]), destination="x"), ValueError),
        (lambda: te.project(t, sel, destination=released), RuntimeError),  # before dtype
        (lambda: te.project(t, sel, destination=CPU(1, mutable=False)), RuntimeError),
        (lambda: te.project(t, sel, destination=CPU(1, dtype=I32)), TypeError),  # before size
        (lambda: te.project(t, sel, destination=CPU(3)), ValueError),
    ]
    for call, exc in cases:
        with pytest.raises(exc):
            call()
    assert pol.calls == 0  # no refusal reached the policy
    assert states(te) == [("primary", False)] * 4 and te.version == 0
    assert te.project(t, sel).wait().carrier.size() == 4 and pol.calls == 1
