"""TiledEvictable (contract-carriers TE-1 .. TE-9, TE-12 .. TE-14): checks in
order, geometry, tile sets, residency metadata and requests, slot access,
factories, release, movement refusal, asynchrony and fault injection."""

import gc
import subprocess
import sys
import threading
import weakref

import pytest

import strideweave as sw
from strideweave import CPU, Generic, FileBacked, Evictable, _C
from strideweave.carriers import tiled_evictable as te_mod
from strideweave.carriers.extension import CarrierDefinition, StorageProvider

from tiled_helpers import F, canonical, cpu_values, full_tensor, numbered, slots, states

TE, TileSet, TileSelection, ResidencyPlan = (sw.TiledEvictable, sw.TileSet, sw.TileSelection,
                                             sw.ResidencyPlan)
I32, B = sw.DType.Int32, sw.DType.Bool


def test_import_paths_yield_the_same_objects():
    for name in ["TiledEvictable", "TileSelection", "TileSet", "ResidencyPlan",
                 "ResidencyPolicy", "AwaitProjection", "AwaitResidency"]:
        assert getattr(sw, name) is getattr(te_mod, name)
    assert sw.carriers.TiledEvictable is sw.TiledEvictable
    assert issubclass(TE, sw.DependentCarrier)


# ---- TE-1 construction ---------------------------------------------------------------

def test_te1_full_primary_seeds_all_primary_and_claims_both():
    p, s = cpu_values([1.0] * 16), CPU(0)
    te = TE(p, s, (2, 2), (2, 2))
    assert te.primary is p and te.secondary is s
    assert p.is_owned() and s.is_owned()
    assert states(te) == [("primary", False)] * 4
    assert te.is_mutable() and te.version == 0 and te.size() == 16


def test_te1_full_secondary_seeds_all_secondary():
    te = TE(CPU(0), cpu_values([2.0] * 8), (2,), (4,))
    assert states(te) == [("secondary", False)] * 2
    assert te[5] == 2.0


def test_te1_both_empty_seeds_all_invalid():
    te = TE(CPU(0), CPU(0), (2,), (2,))
    assert states(te) == [("invalid", False)] * 2
    assert te.valid_tiles == TileSet()
    with pytest.raises(RuntimeError):
        te[0]


@pytest.mark.parametrize("p, s", [(1, CPU(0)), (CPU(0), "x"),
                                  (Evictable(CPU(2), CPU(0)), CPU(0))])
def test_te1_check1_not_a_carrier_or_dependent(p, s):
    with pytest.raises(TypeError):
        TE(p, s, (1,), (1,))


def test_te1_check1_precedes_check2():
    with pytest.raises(TypeError):
        TE(1, 1, (1,), (1,))


def test_te1_check2_same_object():
    c = CPU(0)
    with pytest.raises(ValueError):
        TE(c, c, (1,), (1,))
    assert not c.is_owned()


def test_te1_check3_released_primary_first():
    p, s = CPU(0), CPU(0)
    p.release()
    s.release()
    with pytest.raises(RuntimeError, match="primary"):
        TE(p, s, (1,), (1,))


def test_te1_check4_owned_tier():
    s = CPU(0)
    keep = Evictable(CPU(4), s)  # noqa: F841 (owns s while alive)
    with pytest.raises(RuntimeError, match="owned"):
        TE(CPU(0), s, (1,), (1,))


def test_te1_check5_dtypes_differ():
    with pytest.raises(TypeError, match="dtypes"):
        TE(CPU(0), CPU(0, dtype=I32), (1,), (1,))


@pytest.mark.parametrize("grid, tile, exc", [
    (5, (1,), TypeError), ((1.0,), (1,), TypeError), ((True,), (1,), TypeError),
    ((), (1,), ValueError), ((0,), (1,), ValueError), ((-1,), (1,), ValueError),
    ((1,), (1, 1), ValueError), ((1,), ("a",), TypeError), ((1,), (0,), ValueError),
])
def test_te1_check6_shapes(grid, tile, exc):
    p, s = CPU(0), CPU(0)
    with pytest.raises(exc):
        TE(p, s, grid, tile)
    assert not p.is_owned() and not s.is_owned()


def test_te1_check6_grid_before_tile():
    with pytest.raises(TypeError, match="grid_shape"):
        TE(CPU(0), CPU(0), ("a",), (0,))


def test_te1_check7_size_neither_zero_nor_logical():
    with pytest.raises(ValueError, match="primary"):
        TE(CPU(3), CPU(5), (2,), (2,))
    with pytest.raises(ValueError, match="secondary"):
        TE(CPU(4), CPU(5), (2,), (2,))


def test_te1_check7_dtype_unsupported_by_a_tier():
    # FileBacked has no Bool; Generic does.
    class BoolOnlyEmpty(sw.Carrier):
        def size(self):
            return 0

        def dtype(self):
            return B

        def get_value(self, i):
            raise IndexError

        def _supports_storage_dtype(self, dtype):
            return False

    with pytest.raises(TypeError, match="does not support storage dtype"):
        TE(Generic([], dtype=B), BoolOnlyEmpty(), (1,), (1,))


def test_te1_check8_policy_without_plan():
    p = CPU(0)
    with pytest.raises(TypeError, match="plan"):
        TE(p, CPU(0), (1,), (1,), residency_policy=object())
    assert not p.is_owned()


def test_te1_mutability_captured_from_primary():
    te = TE(CPU(4, mutable=False), CPU(0), (2,), (2,))
    assert not te.is_mutable()
    with pytest.raises(RuntimeError, match="not mutable"):
        te[0] = 1.0


def test_c18_tiled_evictable_is_closed():
    with pytest.raises(TypeError, match="closed carrier implementation"):
        class Sub(TE):
            pass


# ---- TE-2 geometry -----------------------------------------------------------------------

def test_te2_geometry_and_the_example_footprint():
    te = numbered((2, 2), (2, 2), start=0.0)
    assert te.logical_shape == (4, 4) and te.size() == 16
    te.evict(TileSet([(1, 0)]))
    assert te.secondary_tiles == TileSet([(1, 0)])
    # tile (1,0) owns {2, 3, 6, 7}: exactly those slots now read through the
    # secondary, and writing one of them promotes tile (1,0) only.
    te[6] = 60.0
    assert te.tile_state((1, 0)).dirty
    assert te.secondary_tiles == TileSet()
    assert [te[i] for i in (2, 3, 6, 7)] == [2.0, 3.0, 60.0, 7.0]


def test_te2_three_axis_tile_of_every_slot():
    grid, tile = (2, 3, 2), (3, 1, 2)
    te = numbered(grid, tile, start=0.0)
    L = te.logical_shape
    for coord in [(1, 2, 0), (0, 0, 1)]:
        te.evict(TileSet([coord]))
        expect = set()
        for i in range(te.size()):
            x = (i % L[0], (i // L[0]) % L[1], i // (L[0] * L[1]))
            if tuple(x[k] // tile[k] for k in range(3)) == coord:
                expect.add(i)
        got = {i for i in range(te.size()) if (te[i] == float(i))}
        assert got == set(range(te.size()))
        te[min(expect)] = -1.0  # promotes exactly that tile
        assert te.tile_state(coord).location == "primary"
        assert te[min(expect)] == -1.0
        te[min(expect)] = float(min(expect))


# ---- TE-4 / TE-5 value types ------------------------------------------------------------

def test_te4_selection_example_and_properties():
    s = TileSelection(([7, 2], [4, 9]))
    assert s.coordinates == ((7, 4), (2, 4), (7, 9), (2, 9))
    assert s.per_axis == ((7, 2), (4, 9)) and s.rank == 2
    assert s.compact_grid_shape == (2, 2)
    assert s.tile_set == TileSet([(7, 4), (2, 4), (7, 9), (2, 9)])
    assert s == TileSelection([(7, 2), (4, 9)]) and hash(s) == hash(TileSelection([[7, 2], [4, 9]]))
    assert s != TileSelection(([2, 7], [4, 9]))
    with pytest.raises(AttributeError):
        s.rank = 3


@pytest.mark.parametrize("arg, exc", [
    (5, TypeError), ([5], TypeError), ([[1.0]], TypeError), ([[True]], TypeError),
    ([], ValueError), ([[]], ValueError), ([[1, 1]], ValueError), ([[-1]], ValueError),
    ([[1], [2.0]], TypeError),
])
def test_te4_selection_refusals(arg, exc):
    with pytest.raises(exc):
        TileSelection(arg)


def test_te5_tile_set_order_equality_hash():
    s = TileSet([(1, 1), (0, 1), (2, 0)])
    assert s.coordinates == ((2, 0), (0, 1), (1, 1))
    assert s == TileSet(iter([(0, 1), (2, 0), (1, 1)]))
    assert hash(s) == hash(TileSet([(2, 0), (1, 1), (0, 1)]))
    assert len(s) == 3 and (0, 1) in s and (3, 3) not in s
    assert TileSet() == TileSet([]) and TileSet().rank is None
    assert {s: 1}[TileSet([(0, 1), (1, 1), (2, 0)])] == 1


@pytest.mark.parametrize("arg, exc", [
    (5, TypeError), ([5], TypeError), ([(1.0,)], TypeError), ([(1,), (1, 2)], ValueError),
    ([(-1,)], ValueError), ([(1,), (1,)], ValueError),
])
def test_te5_tile_set_refusals(arg, exc):
    with pytest.raises(exc):
        TileSet(arg)


def test_te5_residency_plan():
    a, b = TileSet([(0,)]), TileSet([(1,)])
    p = ResidencyPlan(promote=a, evict=b)
    assert p.promote == a and p.retain == TileSet() and p.evict == b
    assert ResidencyPlan() == ResidencyPlan(None, None, None)
    with pytest.raises(TypeError):
        ResidencyPlan(promote=[(0,)])
    with pytest.raises(ValueError, match="both"):
        ResidencyPlan(promote=a, retain=TileSet([(0,)]))


def test_te5_residency_policy_protocol():
    class P:
        def plan(self, required, purpose):
            return ResidencyPlan()

    assert isinstance(P(), sw.ResidencyPolicy)
    assert not isinstance(object(), sw.ResidencyPolicy)


# ---- TE-6 / TE-7 residency ------------------------------------------------------------

def test_te6_metadata_sets():
    te = numbered((2, 2), (1, 1))
    te.evict(TileSet([(0, 0), (1, 1)]))
    te[1] = 5.0
    assert te.primary_tiles == TileSet([(1, 0), (0, 1)])
    assert te.secondary_tiles == TileSet([(0, 0), (1, 1)])
    assert te.valid_tiles == TileSet([(0, 0), (1, 0), (0, 1), (1, 1)])
    assert te.dirty_tiles == TileSet([(1, 0)])
    st = te.tile_state((1, 0))
    assert (st.location, st.valid, st.dirty) == ("primary", True, True)
    with pytest.raises(Exception):
        st.location = "x"


def test_te7_promote_evict_round_trip_keeps_values_and_version():
    te = numbered((3, 2), (2, 2))
    before = slots(te)
    h = te.evict_async(TileSelection(([0, 2], [1])))
    assert isinstance(h, sw.AwaitResidency) and isinstance(h, sw.AwaitResult)
    assert h.wait() is None and h.done and h.wait() is None
    assert te.secondary_tiles == TileSet([(0, 1), (2, 1)])
    assert slots(te) == before and te.version == 0
    te.promote(TileSet([(0, 1), (2, 1)]))
    assert te.secondary_tiles == TileSet() and te.dirty_tiles == TileSet()
    assert slots(te) == before and te.version == 0
    assert not hasattr(h, "__await__")


def test_te7_satisfied_tiles_are_skipped_and_implicit_promotes_to_zero():
    te = numbered((2,), (2,)).allocate_like(4)
    te.promote(TileSet([(0,)]))
    assert te.tile_state((0,)).location == "primary" and te[0] == 0.0
    te.promote(TileSet([(0,)]))  # already there
    te.evict(TileSet([(1,)]))    # implicit: nothing to evict
    assert te.tile_state((1,)).location == "implicit"


def test_te7_refusals_in_order():
    te = numbered((2,), (2,))
    with pytest.raises(TypeError):
        te.promote([(0,)])
    with pytest.raises(ValueError):
        te.promote(TileSet([(2,)]))
    with pytest.raises(ValueError):
        te.evict(TileSet([(0, 0)]))
    inv = TE(CPU(0), CPU(0), (2,), (2,))
    with pytest.raises(RuntimeError, match="invalid"):
        inv.promote(TileSet([(0,)]))
    te.release()
    with pytest.raises(RuntimeError, match="released"):
        te.promote(5)  # released is checked first


def test_te7_file_backed_secondary():
    te = numbered((2, 2), (2, 3), secondary=FileBacked())
    before = slots(te)
    te.evict(TileSelection(([0, 1], [0, 1])))
    assert te.secondary_tiles == TileSelection(([0, 1], [0, 1])).tile_set
    assert slots(te) == before
    te.promote(TileSelection(([1], [0])))
    assert slots(te) == before


def test_te7_python_tiers_use_their_slot_access():
    made = []

    class Slots(sw.Carrier):
        def __init__(self, n):
            super().__init__()
            self.v = [0.0] * n
            self.released = False
            made.append(self)

        def size(self):
            return len(self.v)

        def dtype(self):
            return F

        def get_value(self, i):
            return self.v[i]

        def set_value(self, i, x):
            self.v[i] = float(x)

        def _is_mutable(self):
            return True

        def allocate_like(self, size, *, mutable=True, dtype=None, empty=False):
            return Slots(size)

        def _release(self):
            self.released = True

    te = TE(cpu_values([float(i) for i in range(8)]), Slots(0), (2,), (4,))
    te.evict(TileSet([(1,)]))
    assert te[5] == 5.0 and te.secondary_tiles == TileSet([(1,)])
    te.promote(TileSet([(1,)]))
    assert slots(te) == [float(i) for i in range(8)]
    te.evict(TileSet([(0,), (1,)]))
    te.release()  # the prototype and every tile carrier made from it
    assert len(made) == 4 and all(c.released for c in made)


# ---- TE-8 asynchrony, pending and pinned --------------------------------------------------

def test_te8_reentrant_hook_sees_pending_tiles_and_release_refused():
    seen = {}

    class Spy(sw.Carrier):
        def __init__(self, n):
            super().__init__()
            self.v = [0.0] * n

        def size(self):
            return len(self.v)

        def dtype(self):
            return F

        def get_value(self, i):
            return self.v[i]

        def set_value(self, i, x):
            if "te" in seen and "done" not in seen:
                seen["done"] = True
                te = seen["te"]
                for what, call in [("write", lambda: te.__setitem__(0, 9.0)),
                                   ("promote", lambda: te.promote(TileSet([(0,)]))),
                                   ("release", te.release)]:
                    try:
                        call()
                    except RuntimeError as e:
                        seen[what] = str(e)
            self.v[i] = x

        def _is_mutable(self):
            return True

        def allocate_like(self, size, *, mutable=True, dtype=None, empty=False):
            return Spy(size)

    te = TE(cpu_values([1.0, 2.0, 3.0, 4.0]), Spy(0), (2,), (2,))
    seen["te"] = te
    te.evict(TileSet([(0,)]))
    assert "pending" in seen["write"] and "pending" in seen["promote"]
    assert "wait" in seen["release"]
    assert not te.is_released() and te[0] == 1.0
    assert te.secondary_tiles == TileSet([(0,)])


def test_te8_many_threads_overlapping_requests_keep_every_value():
    te = numbered((4, 4), (8, 8))
    before = slots(te)
    errors = []
    barrier = threading.Barrier(8)

    def worker(k):
        barrier.wait(30)
        for r in range(30):
            sel = TileSelection(([k % 4, (k + 1) % 4], [r % 4]))
            try:
                h = te.evict_async(sel) if (k + r) % 2 else te.promote_async(sel)
                if r % 3:
                    h.wait()
                # dropping the other handles neither cancels nor blocks
            except RuntimeError as e:
                if "pending" not in str(e) and "pinned" not in str(e):
                    errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert slots(te) == before and te.version == 0
    loc = {s for s, _ in states(te)}
    assert loc <= {"primary", "secondary"}


def test_te8_handles_are_shared_by_waiters_across_threads():
    te = numbered((2,), (2,))
    h = te.evict_async(TileSet([(0,), (1,)]))
    out = []
    ts = [threading.Thread(target=lambda: out.append(h.wait())) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert out == [None] * 4
    with pytest.raises(TypeError):
        sw.AwaitResidency()


fault = pytest.mark.skipif(not _C._fault_injection_enabled(),
                           reason="needs the fault-injection build")


@fault
@pytest.mark.parametrize("skip", [0, 1])
def test_te7_fault_mid_commit_leaves_every_tile_unchanged(skip):
    te = numbered((3, 1), (2, 2))
    te.evict(TileSet([(1, 0)]))
    before_states, before = states(te), slots(te)
    _C._fault_inject("tile_copy", skip, 1)
    try:
        h = te.evict_async(TileSet([(0, 0), (1, 0), (2, 0)]))
    finally:
        pass
    _C._fault_clear()
    with pytest.raises(OSError, match="injected"):
        h.wait()
    with pytest.raises(OSError):
        h.wait()  # the same failure every time
    assert states(te) == before_states and slots(te) == before
    te.evict(TileSet([(0, 0), (1, 0), (2, 0)]))  # retryable
    assert te.secondary_tiles == TileSet([(0, 0), (1, 0), (2, 0)])


@fault
def test_te7_failing_allocation_at_every_step_changes_nothing():
    # Fail the n-th allocation for growing n: the request either fails at
    # once or through its handle, and every failure leaves every tile as it
    # was; once n passes the last allocation the request succeeds.
    failed_in_handle = 0
    for n in range(12):
        te = numbered((4,), (4,))
        before = states(te)
        h = None
        _C._fault_inject("alloc", n, 1)
        try:
            h = te.evict_async(TileSet([(0,), (1,), (2,)]))
            outcome = h.wait()
        except MemoryError:
            outcome = "failed"
            failed_in_handle += h is not None
        finally:
            _C._fault_clear()
        if outcome == "failed":
            assert states(te) == before
            assert slots(te) == [1.0 + i for i in range(16)]
        else:
            assert te.secondary_tiles == TileSet([(0,), (1,), (2,)])
            break
    assert failed_in_handle >= 2  # faults in the middle of the staged copies


def test_te8_interpreter_exit_with_dropped_handles():
    code = (
        "import strideweave as sw\n"
        "p = sw.CPU(64)\n"
        "te = sw.TiledEvictable(p, sw.FileBacked(), (4,), (16,))\n"
        "hs = [te.evict_async(sw.TileSet([(k,)])) for k in range(4)]\n"
        "t = sw.Tensor(te, 0, sw.Layout(sw.Shape(64), sw.Stride(1)))\n"
        "h = te.project(t, sw.TileSelection([[3, 1]]))\n"
        "del hs\n"
        "print('ok')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


# ---- TE-9 slot access ------------------------------------------------------------------

def test_te9_reads_and_writes_by_location():
    te = numbered((2, 2), (1, 2)).allocate_like(8)
    assert te[0] == 0.0 and te.tile_state((0, 0)).location == "implicit"
    te[0] = 0.0  # equal to the constant: nothing materializes
    assert te.tile_state((0, 0)).location == "implicit" and te.version == 1
    te[0] = 3.0
    assert te.tile_state((0, 0)) == te_mod.TileState("primary", True, True)
    assert te[0] == 3.0 and te[2] == 0.0 and te.version == 2
    te.evict(TileSet([(0, 0)]))
    te[2] = 4.0  # secondary: promoted, then written
    assert te.tile_state((0, 0)).location == "primary" and te[0] == 3.0 and te[2] == 4.0
    assert te.version == 3


def test_te9_invalid_tile_refuses_reads_and_writes():
    te = TE(CPU(0), CPU(0), (2,), (2,))
    with pytest.raises(RuntimeError, match="invalid"):
        te[0]
    with pytest.raises(RuntimeError, match="invalid"):
        te[3] = 1.0
    assert te.version == 0


def test_te9_index_checks_first():
    te = numbered((2,), (2,))
    with pytest.raises(IndexError):
        te[4]
    with pytest.raises(TypeError):
        te[0] = "x"
    assert te.version == 0


def test_int32_and_bool_tiles():
    te = TE(cpu_values([1, 0, 0, 0, 5, 6], dtype=I32), CPU(0, dtype=I32), (3,), (2,))
    te.evict(TileSet([(2,)]))
    assert [te[i] for i in range(6)] == [1, 0, 0, 0, 5, 6]
    z = te.new_like([0, 0, 1, 2, 0, 0])
    assert [s for s, _ in states(z)] == ["implicit", "primary", "implicit"]
    b = TE(Generic([True, False], dtype=B), Generic([], dtype=B), (2,), (1,))
    assert b[0] is True and b[1] is False


# ---- TE-12 other surface ------------------------------------------------------------------

def test_te12_surface():
    class P:
        def plan(self, required, purpose):
            return ResidencyPlan()

    pol = P()
    te = numbered((2, 3), (4, 1), policy=pol)
    assert (te.grid_shape, te.tile_shape, te.logical_shape) == ((2, 3), (4, 1), (8, 3))
    assert te.residency_policy is pol and te.dtype() is F
    assert te.supports_storage_dtype(F) and te.supports_storage_dtype(I32)
    assert not TE(CPU(0), FileBacked(), (1,), (1,)).supports_storage_dtype(B)
    with pytest.raises(BufferError, match="DLPack is not supported"):
        te.dlpack_info()
    with pytest.raises(NotImplementedError):
        te.scatter(None, None, None)
    te.release()
    assert te.supports_storage_dtype(I32)


def test_x14_move_from_or_into_refused_naming_both_before_effects():
    te = numbered((2,), (2,))
    t = full_tensor(te)
    dst = CPU(4)
    with pytest.raises(NotImplementedError, match="TiledEvictable.*CPU"):
        sw.move(t, dst)
    assert not te.is_released() and dst.version == 0 and not dst.is_owned()
    other = numbered((2,), (2,))
    with pytest.raises(NotImplementedError, match="CPU.*TiledEvictable"):
        sw.move(sw.Tensor(cpu_values([1.0] * 4), 0, canonical((4,))), other)


def test_x14_legacy_registry_calls_naming_it_fail_runtime_error():
    mv = sw.carriers.move
    calls = [lambda: mv.dispatch_move(TE, CPU), lambda: mv.dispatch_move(CPU, TE),
             lambda: mv.registered_move_operation(TE, CPU, mv.ElementwiseMoveOperation),
             lambda: mv.register_move_operation(CPU, TE, mv.ElementwiseMoveOperation),
             lambda: mv.unregister_move_operation(TE, CPU)]
    for call in calls:
        with pytest.raises(RuntimeError, match="TransferRoute"):
            call()


def test_dispatch_op_refuses_arithmetic_for_a_definition_backed_class():
    te = numbered((2,), (2,))
    for name in ["add", "elementwise_mul", "reduce_sum"]:
        with pytest.raises(NotImplementedError):
            te.dispatch_op(name)
    t = full_tensor(te)
    with pytest.raises(NotImplementedError):
        sw.add(t, t)


# ---- TE-13 factories ------------------------------------------------------------------------

def test_te13_new_like():
    te = numbered((2, 2), (1, 2), secondary=FileBacked())
    n = te.new_like([0, 0, 1, 0, 0, 0, 0, 2], mutable=False)
    assert type(n.primary) is CPU and type(n.secondary) is FileBacked
    assert n.grid_shape == (2, 2) and n.tile_shape == (1, 2)
    # tiles (0,0)={0,2} (1,0)={1,3} (0,1)={4,6} (1,1)={5,7}
    assert [s for s, _ in states(n)] == ["primary", "implicit", "implicit", "primary"]
    assert n.dirty_tiles == TileSet() and not n.is_mutable() and n.version == 0
    assert slots(n) == [0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 2.0]
    with pytest.raises(ValueError):
        te.new_like([1.0] * 7)
    with pytest.raises(TypeError):
        te.new_like(5)


def test_te13_allocate_like():
    te = numbered((2,), (3,))
    a = te.allocate_like(6)
    assert [s for s, _ in states(a)] == ["implicit", "implicit"]
    e = te.allocate_like(6, empty=True)
    assert [s for s, _ in states(e)] == ["invalid", "invalid"]
    with pytest.raises(TypeError):
        te.allocate_like(6.0)
    with pytest.raises(TypeError):
        te.allocate_like(True)
    with pytest.raises(ValueError):
        te.allocate_like(5)
    te.release()
    assert te.allocate_like(6).size() == 6  # works after release


# ---- TE-14 release ----------------------------------------------------------------------------

def test_te14_release_frees_everything_and_is_idempotent():
    p, s = cpu_values([1.0] * 4), CPU(0)
    te = TE(p, s, (2,), (2,))
    te.evict(TileSet([(1,)]))
    t = full_tensor(te)
    assert te.release() is None and te.release() is None
    assert te.is_released() and te.size() == 0
    assert p.is_released() and s.is_released() and not p.is_owned() and not s.is_owned()
    for call in [lambda: te[0], lambda: te.promote(TileSet([(0,)])),
                 lambda: te.evict(TileSet([(0,)])), lambda: te.tile_state((0,)),
                 lambda: te.project(t, TileSelection([[0]]))]:
        with pytest.raises(RuntimeError, match="released"):
            call()


def test_te14_collection_only_relinquishes_the_tiers():
    p, s = cpu_values([1.0] * 4), CPU(0)
    te = TE(p, s, (2,), (2,))
    r = weakref.ref(te)
    del te
    gc.collect()
    assert r() is None
    assert not p.is_owned() and not p.is_released() and p[3] == 1.0
    assert not s.is_owned()


def test_create_and_drop_does_not_leak():
    import tracemalloc

    def once():
        te = numbered((4,), (4,))
        te.evict(TileSet([(1,), (2,)]))
        te.project(full_tensor(te), TileSelection([[2, 0]])).wait()
        te.release()

    for _ in range(20):
        once()
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    live = _C._live_bytes()
    for _ in range(200):
        once()
    gc.collect()
    grown = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    assert grown < 64 * 1024
    assert _C._live_bytes() == live


def test_signatures_are_readable():
    import inspect

    assert list(inspect.signature(TE).parameters) == [
        "primary", "secondary", "grid_shape", "tile_shape", "residency_policy"]
    # an unbound method descriptor shows self first, as CPython's own do
    assert list(inspect.signature(TE.project).parameters) == [
        "self", "tensor", "selection", "destination"]
    assert str(inspect.signature(TE.promote_async)) == "(self, tiles, /)"
    for f in [TE.promote_async, TE.evict_async, TileSet, TileSelection, ResidencyPlan]:
        inspect.signature(f)
