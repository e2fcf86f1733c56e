"""TiledEvictable.project (contract-carriers TE-3, TE-10, TE-11): full-Tensor
checks, the mapping formula on 1-, 2- and 3-axis grids, destinations, the
residency policy, pins, failure, and the gather node's sparse gradients."""

import itertools
import random
import threading

import numpy as np
import pytest

import strideweave as sw
from strideweave import CPU, Generic, FileBacked, _C

from tiled_helpers import F, canonical, cpu_values, full_tensor, numbered, slots, states

TE, TileSet, TileSelection, ResidencyPlan = (sw.TiledEvictable, sw.TileSet, sw.TileSelection,
                                             sw.ResidencyPlan)


def expected(te, tensor, selection):
    """The projection by the TE-10 formula, one compact coordinate at a time."""
    tile = te.tile_shape
    L = te.logical_shape
    shape = [len(a) * t for a, t in zip(selection.per_axis, tile)]
    out = []
    for rev in itertools.product(*[range(e) for e in reversed(shape)]):
        c = tuple(reversed(rev))
        s = [selection.per_axis[k][c[k] // tile[k]] * tile[k] + c[k] % tile[k]
             for k in range(len(c))]
        j, mul = 0, 1
        for k in range(len(s)):
            j += s[k] * mul
            mul *= L[k]
        out.append(te[tensor.offset + tensor.layout(j)])
    return shape, out


def check_projection(te, tensor, selection, **kw):
    before = (slots(te), te.version, tensor.layout, tensor.offset)
    h = te.project(tensor, selection, **kw)
    assert isinstance(h, sw.AwaitProjection) and isinstance(h, sw.AwaitResult)
    r = h.wait()
    assert h.wait() is r and h.done
    shape, values = expected(te, tensor, selection)
    assert r.offset == 0 and r.layout == canonical(shape)
    flat = [r.carrier[i] for i in range(len(values))]
    assert flat == values
    assert (slots(te), te.version, tensor.layout, tensor.offset) == before
    return r


# ---- TE-10 mapping ---------------------------------------------------------------------

@pytest.mark.parametrize("grid, tile, per_axis", [
    ((5,), (3,), [[4, 0, 2]]),
    ((5,), (1,), [[3]]),
    ((3, 4), (2, 3), [[2, 0], [3, 1, 2]]),
    ((3, 4), (1, 2), [[1], [0, 3, 2, 1]]),
    ((2, 3, 2), (2, 1, 3), [[1, 0], [2, 0], [1]]),
    ((2, 3, 2), (3, 2, 1), [[0, 1], [1, 2, 0], [1, 0]]),
])
def test_te10_every_compact_coordinate_follows_the_formula(grid, tile, per_axis):
    te = numbered(grid, tile)
    t = full_tensor(te)
    sel = TileSelection(per_axis)
    r1 = check_projection(te, t, sel)
    # the same selection again, and its axes in another order
    r2 = check_projection(te, t, sel)
    assert r2 is not r1 and r2.carrier is not r1.carrier
    check_projection(te, t, TileSelection([list(reversed(a)) for a in per_axis]))


def test_te10_mixed_locations_and_within_tile_permuted_layout():
    # grid (2,1) of (2,2) tiles, transposed inside each tile: TE-3 passes.
    te = numbered((2, 1), (2, 2))
    lay = sw.Layout(sw.Shape([[2, 2], 2]), sw.Stride([[4, 2], 1]))
    t = sw.Tensor(te, 0, lay)
    te.evict(TileSet([(1, 0)]))
    check_projection(te, t, TileSelection([[1, 0], [0]]))
    z = te.allocate_like(8)
    z[1] = 7.0
    check_projection(z, sw.Tensor(z, 0, lay), TileSelection([[0, 1], [0]]))


def test_te10_python_tiers_take_the_slot_path():
    vals = [float(i) for i in range(24)]
    te = TE(Generic(vals), Generic([]), (2, 3), (2, 2))
    t = full_tensor(te)
    check_projection(te, t, TileSelection([[1], [2, 0]]))
    dst = Generic([0.0] * 17)
    r = check_projection(te, t, TileSelection([[1, 0], [1, 2]]), destination=dst)
    assert r.carrier is dst and not dst.is_owned()


def test_te10_file_backed_primary_grows_an_empty_destination():
    p = FileBacked()
    p._allocate(8)
    for i in range(8):
        p[i] = float(i)
    te = TE(p, CPU(0), (4,), (2,))
    dst = FileBacked()
    r = check_projection(te, full_tensor(te), TileSelection([[3, 1]]), destination=dst)
    assert r.carrier is dst and dst.size() == 4


# ---- TE-3 -----------------------------------------------------------------------------------

def test_te3_refusals():
    te = numbered((2, 2), (2, 2))
    other = numbered((2, 2), (2, 2))
    sel = TileSelection([[0], [0]])
    with pytest.raises(TypeError):
        te.project(5, sel)
    with pytest.raises(TypeError):
        te.project(full_tensor(other), sel)
    with pytest.raises(ValueError):
        te.project(sw.Tensor(te, 0, canonical((16,))), sel)          # mode count
    with pytest.raises(ValueError):
        te.project(sw.Tensor(te, 0, canonical((2, 8))), sel)         # mode sizes
    with pytest.raises(ValueError, match="tile footprints"):
        te.project(sw.Tensor(te, 0, sw.Layout(sw.Shape([4, 4]), sw.Stride([1, 0]))), sel)
    with pytest.raises(ValueError, match="tile footprints"):      # transposed: spans tiles
        te.project(sw.Tensor(te, 0, sw.Layout(sw.Shape([4, 4]), sw.Stride([4, 1]))), sel)
    small = numbered((2, 2), (1, 1))
    with pytest.raises(ValueError, match="tile footprints"):      # remaps tiles
        small.project(sw.Tensor(small, 0, sw.Layout(sw.Shape([2, 2]), sw.Stride([2, 1]))),
                      sel)
    t = full_tensor(te)
    te.release()
    with pytest.raises(RuntimeError, match="released"):
        te.project(t, sel)


def test_te10_selection_and_destination_refusals_change_nothing():
    te = numbered((2, 2), (2, 2))
    t = full_tensor(te)
    sel = TileSelection([[1], [0, 1]])
    with pytest.raises(TypeError):
        te.project(t, TileSet([(0, 0)]))
    with pytest.raises(ValueError):
        te.project(t, TileSelection([[2], [0]]))
    with pytest.raises(ValueError):
        te.project(t, TileSelection([[0]]))
    released = CPU(8)
    released.release()
    owned = CPU(8)
    keep = sw.Evictable(CPU(2), owned)  # noqa: F841
    cases = [(Generic([0.0] * 8), TypeError), (sw.Evictable(CPU(8), CPU(0)), TypeError),
             ("x", TypeError), (released, RuntimeError), (owned, RuntimeError),
             (CPU(8, mutable=False), RuntimeError), (CPU(8, dtype=sw.DType.Int32), TypeError),
             (CPU(7), ValueError)]
    for dst, exc in cases:
        with pytest.raises(exc):
            te.project(t, sel, destination=dst)
    assert states(te) == [("primary", False)] * 4 and te.version == 0
    assert check_projection(te, t, sel, destination=CPU(9)).carrier.size() == 9


# ---- policy and pins ---------------------------------------------------------------------------

class Recorder:
    def __init__(self, plan=None, raise_=None):
        self.calls = []
        self.result = plan if plan is not None else ResidencyPlan()
        self.raise_ = raise_

    def plan(self, required, purpose):
        self.calls.append((required, purpose))
        if self.raise_:
            raise self.raise_
        return self.result


def test_te10_policy_gets_the_tile_set_and_its_plan_is_applied():
    pol = Recorder(ResidencyPlan(promote=TileSet([(1,), (2,)]), evict=TileSet([(0,)])))
    te = numbered((4,), (2,), policy=pol)
    te.evict(TileSet([(1,), (3,)]))
    sel = TileSelection([[3, 0]])
    check_projection(te, full_tensor(te), sel)
    assert pol.calls == [(sel.tile_set, "projection")]
    assert [s for s, _ in states(te)] == ["secondary", "primary", "primary", "secondary"]


@pytest.mark.parametrize("result, exc", [
    (None, TypeError), ("plan", TypeError),
    (ResidencyPlan(evict=TileSet([(9,)])), ValueError),
    (ResidencyPlan(retain=TileSet([(0, 0)])), ValueError),
])
def test_te10_bad_plans_refused_before_work(result, exc):
    pol = Recorder()
    pol.result = result
    te = numbered((4,), (2,), policy=pol)
    with pytest.raises(exc):
        te.project(full_tensor(te), TileSelection([[1]]))
    assert te.primary_tiles == TileSelection([[0, 1, 2, 3]]).tile_set


def test_te10_policy_exceptions_propagate():
    te = numbered((4,), (2,), policy=Recorder(raise_=KeyError("nope")))
    with pytest.raises(KeyError):
        te.project(full_tensor(te), TileSelection([[1]]))


def test_te10_pinned_tiles_refuse_writes_and_requests_during_the_gather():
    seen = {}

    class Spy(sw.Carrier):
        def __init__(self, vals):
            super().__init__()
            self.v = list(vals)

        def size(self):
            return len(self.v)

        def dtype(self):
            return F

        def get_value(self, i):
            if "te" in seen and "write" not in seen and seen["te"].dirty_tiles == TileSet():
                te = seen["te"]
                for what, call in [("write", lambda: te.__setitem__(0, 5.0)),
                                   ("evict", lambda: te.evict(TileSet([(0,)]))),
                                   ("release", te.release)]:
                    try:
                        call()
                        seen[what] = "ok"
                    except RuntimeError as e:
                        seen[what] = str(e)
            return self.v[i]

        def set_value(self, i, x):
            self.v[i] = x

        def _is_mutable(self):
            return True

        def allocate_like(self, size, *, mutable=True, dtype=None, empty=False):
            return Spy([0.0] * size)

    te = TE(Spy([1.0, 2.0, 3.0, 4.0]), CPU(0), (2,), (2,))
    t = full_tensor(te)
    seen["te"] = te
    r = te.project(t, TileSelection([[0]])).wait()
    assert "pinned" in seen["write"] and "pinned" in seen["evict"] and "wait" in seen["release"]
    assert [r.carrier[i] for i in range(2)] == [1.0, 2.0]
    te[0] = 9.0  # unpinned again
    assert te[0] == 9.0


fault = pytest.mark.skipif(not _C._fault_injection_enabled(),
                           reason="needs the fault-injection build")


@fault
def test_te10_failure_goes_to_every_wait_and_changes_nothing():
    pol = Recorder(ResidencyPlan(promote=TileSet([(1,)])))
    te = numbered((4,), (2,), policy=pol)
    te.evict(TileSet([(1,)]))
    before = states(te)
    live = _C._live_bytes()
    _C._fault_inject("tile_gather", 0, 1)
    try:
        h = te.project(full_tensor(te), TileSelection([[1, 2]]))
    finally:
        _C._fault_clear()
    with pytest.raises(OSError, match="injected") as e1:
        h.wait()
    with pytest.raises(OSError) as e2:
        h.wait()
    assert e1.value is e2.value or type(e1.value) is type(e2.value)
    assert states(te) == before
    del h
    assert _C._live_bytes() <= live  # the default destination was released


def test_concurrent_projections_from_many_threads():
    te = numbered((8, 8), (4, 4))
    t = full_tensor(te)
    errors = []

    def worker(k):
        rnd = random.Random(k)
        for _ in range(20):
            sel = TileSelection([rnd.sample(range(8), 3), rnd.sample(range(8), 2)])
            try:
                r = te.project(t, sel).wait()
                if [r.carrier[i] for i in range(0, 96, 17)] != expected(te, t, sel)[1][0:96:17]:
                    errors.append("values")
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    assert not errors


# ---- TE-11 gather node --------------------------------------------------------------------------

def test_te11_one_node_saving_the_source_and_no_node_without_grad():
    te = numbered((3, 2), (2, 2))
    x = full_tensor(te)
    y = te.project(x, TileSelection([[2, 0], [1]])).wait()
    node = y.autograd_ctx
    assert isinstance(node, sw.Operation) and node.inputs()[0] is x
    with sw.no_grad():
        z = te.project(x, TileSelection([[2, 0], [1]])).wait()
    assert z.autograd_ctx is None
    i32 = TE(cpu_values([1, 2], dtype=sw.DType.Int32), CPU(0, dtype=sw.DType.Int32), (2,), (1,))
    w = i32.project(full_tensor(i32), TileSelection([[1]])).wait()
    assert w.carrier[0] == 2


@pytest.mark.parametrize("grid, tile, per_axis", [
    ((4,), (3,), [[3, 1]]),
    ((3, 4), (2, 2), [[2, 0], [3, 1, 0]]),
    ((2, 2, 3), (1, 2, 2), [[1], [0, 1], [2, 0]]),
])
def test_te11_gradient_matches_finite_differences(grid, tile, per_axis):
    rnd = np.random.default_rng(7)
    te = numbered(grid, tile)
    x = full_tensor(te)
    sel = TileSelection(per_axis)
    y = te.project(x, sel).wait()
    n = y.layout.size
    w = rnd.standard_normal(n).astype(np.float32)
    cot = sw.Tensor(cpu_values([float(v) for v in w]), 0, y.layout)
    y.backward(cot)
    g = x.grad
    assert type(g.carrier) is TE and g.layout == x.layout and g.offset == x.offset
    assert g.carrier.grid_shape == grid and g.carrier.tile_shape == tile

    def loss():
        with sw.no_grad():
            r = te.project(x, sel).wait()
        return float(np.dot(w.astype(np.float64), [r.carrier[i] for i in range(n)]))

    h = 0.5
    for slot in random.Random(1).sample(range(te.size()), min(12, te.size())):
        base = te[slot]
        te[slot] = base + h
        up = loss()
        te[slot] = base - h
        down = loss()
        te[slot] = base
        fd = (up - down) / (2 * h)
        assert g.carrier[slot] == pytest.approx(fd, rel=1e-4, abs=1e-4)
    touched = sel.tile_set
    for coord in itertools.product(*[range(e) for e in grid]):
        loc = g.carrier.tile_state(coord).location
        assert loc == ("primary" if coord in touched else "implicit")


def test_te11_two_gradients_sum_into_one_carrier_of_the_same_configuration():
    te = numbered((4,), (2,))
    x = full_tensor(te)
    a = te.project(x, TileSelection([[0, 1]])).wait()
    b = te.project(x, TileSelection([[1]])).wait()
    a.backward(sw.Tensor(cpu_values([1.0, 2.0, 3.0, 4.0]), 0, a.layout))
    b.backward(sw.Tensor(cpu_values([10.0, 20.0]), 0, b.layout))
    g = x.grad.carrier
    assert type(g) is TE and g.grid_shape == (4,)
    assert [g[i] for i in range(8)] == [1.0, 2.0, 13.0, 24.0, 0, 0, 0, 0]
    assert [g.tile_state((k,)).location for k in range(4)] == [
        "primary", "primary", "implicit", "implicit"]


def test_te11_backward_checks_the_saved_version():
    te = numbered((2,), (2,))
    x = full_tensor(te)
    y = te.project(x, TileSelection([[1]])).wait()
    te[0] = 5.0  # the source changed after the projection read it
    with pytest.raises(RuntimeError):
        y.backward(sw.Tensor(cpu_values([1.0, 1.0]), 0, y.layout))
    assert x.grad is None


def test_te11_handles_are_not_operands():
    te = numbered((2,), (2,))
    h = te.project(full_tensor(te), TileSelection([[1]]))
    with pytest.raises(TypeError):
        sw.add(h, h)
    assert not isinstance(h, sw.Operation)


def test_project_argument_binding():
    te = numbered((2,), (2,))
    t = full_tensor(te)
    sel = TileSelection([[1]])
    r = te.project(selection=sel, tensor=t, destination=CPU(2)).wait()
    assert r.carrier[0] == 3.0
    for bad in [lambda: te.project(t), lambda: te.project(t, sel, None, 1),
                lambda: te.project(t, sel, tensor=t), lambda: te.project(t, sel, dest=None)]:
        with pytest.raises(TypeError):
            bad()
