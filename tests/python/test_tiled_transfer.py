"""TiledEvictable tile copies through the tier classes' exact-pair movement
(contract-carriers TE-7; spec: TiledEvictable's internal transfers use the
legacy exact-pair movement path): the registered MoveOperation's `_copy`
receives the documented arguments, keeps its source until the set commits,
and a failure anywhere leaves every tile as it was and releases the fresh
copies."""

import pytest

import strideweave as sw
from strideweave import CPU, FileBacked, MoveOperation
from strideweave.carriers.move import dispatch_move, registered_move_operation

from loop_device import loop_device  # noqa: F401 (fixture)
from tiled_helpers import F, cpu_values, slots, states

TE, TileSet = sw.TiledEvictable, sw.TileSet


class TierA(sw.Carrier):
    """A definition-free Python tier over a list; every instance is kept so
    tests can tell which were released."""

    made = []

    def __init__(self, values=()):
        super().__init__()
        self.v = [float(x) for x in values]
        self.dropped = False
        type(self).made.append(self)

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
        return type(self)([0.0] * size)

    def _release(self):
        self.dropped = True


class TierB(TierA):
    made = []


class Recording(MoveOperation):
    """Copies slot by slot and records every call (and what it saw)."""

    calls = []
    fail_on = None  # raise on this call number (1-based)

    def _copy(self, tensor, destination, output, element_count):
        src = tensor.carrier
        record = {"tensor": tensor, "destination": destination, "output": output,
                  "count": element_count, "src_live": not src.is_released(),
                  "autograd": output.autograd_ctx}
        try:
            src.release()
        except RuntimeError as e:
            record["release_refused"] = str(e)
        type(self).calls.append(record)
        if type(self).fail_on == len(type(self).calls):
            raise KeyError("copy failed on purpose")
        for i in range(element_count):
            destination[i] = src[i]


@pytest.fixture
def recording():
    Recording.calls, Recording.fail_on = [], None
    TierA.made, TierB.made = [], []
    with registered_move_operation(TierA, TierB, Recording), \
            registered_move_operation(TierB, TierA, Recording):
        yield Recording


def tiers(n):
    return TierA([float(i + 1) for i in range(n)]), TierB()


def test_te7_first_move_from_full_tier_is_direct_then_registered_copy_runs(recording):
    p, s = tiers(8)
    te = TE(p, s, (2,), (4,))
    te.evict(TileSet([(1,)]))
    # the tile left the construction-time full tier: a direct copy, no move
    assert recording.calls == []
    evicted_store = TierB.made[-1]
    te.promote(TileSet([(1,)]))
    assert len(recording.calls) == 1
    c = recording.calls[0]
    t = c["tensor"]
    assert t.carrier is evicted_store and t.offset == 0
    assert t.layout == sw.Layout(sw.Shape([4]), sw.Stride([1]))
    fresh = c["destination"]
    assert type(fresh) is TierA and fresh is TierA.made[-1]
    assert c["output"].carrier is fresh and c["output"].offset == 0
    assert c["output"].layout == t.layout
    assert c["count"] == 4
    # the source stays live (and pending) while _copy runs; no autograd node
    assert c["src_live"] and "pending" in c["release_refused"]
    assert c["autograd"] is None
    # released only by the commit; the hook's writes advance no version
    assert evicted_store.is_released() and not fresh.is_released()
    assert fresh.version == 0
    assert slots(te) == [float(i + 1) for i in range(8)] and te.version == 0
    assert states(te) == [("primary", False), ("primary", False)]
    # and back again: the (TierA, TierB) entry runs for the private tile
    te.evict(TileSet([(1,)]))
    assert len(recording.calls) == 2 and recording.calls[1]["tensor"].carrier is fresh
    assert type(recording.calls[1]["destination"]) is TierB
    assert fresh.is_released() and slots(te) == [float(i + 1) for i in range(8)]


def test_te7_dirty_primary_tile_evicts_through_registered_copy(recording):
    p, s = tiers(4)
    te = TE(p, s, (2,), (2,))
    te.evict(TileSet([(0,)]))
    te[0] = 10.0  # promotes tile (0,) through the registry, then writes
    assert len(recording.calls) == 1
    assert te.tile_state((0,)).dirty and te.version == 1
    te.evict(TileSet([(0,)]))
    assert len(recording.calls) == 2
    assert te.tile_state((0,)).location == "secondary" and te[0] == 10.0
    assert te.version == 1


def test_te7_copy_failing_mid_set_changes_nothing_and_releases_fresh_copies(recording):
    p, s = tiers(12)
    te = TE(p, s, (3,), (4,))
    all_tiles = TileSet([(0,), (1,), (2,)])
    te.evict(all_tiles)
    old = list(TierB.made[1:])  # one private store per tile (made[0] is the prototype)
    assert len(old) == 3
    before_states, before, before_version = states(te), slots(te), te.version
    recording.fail_on = 2
    h = te.promote_async(all_tiles)
    with pytest.raises(KeyError, match="on purpose"):
        h.wait()
    with pytest.raises(KeyError):
        h.wait()
    assert len(recording.calls) == 2
    assert states(te) == before_states and slots(te) == before
    assert te.version == before_version
    fresh = TierA.made[1:]
    assert len(fresh) == 2 and all(c.is_released() for c in fresh)
    assert not any(c.is_released() for c in old)
    recording.fail_on = None
    te.promote(all_tiles)  # retryable
    assert te.primary_tiles == all_tiles and slots(te) == before
    assert all(c.is_released() for c in old)


def test_te7_copy_returning_a_value_fails_type_error_and_changes_nothing():
    class Returns(MoveOperation):
        def _copy(self, tensor, destination, output, element_count):
            return 1

    TierA.made, TierB.made = [], []
    p, s = tiers(4)
    te = TE(p, s, (2,), (2,))
    te.evict(TileSet([(0,)]))
    before = states(te), slots(te)
    with registered_move_operation(TierB, TierA, Returns):
        with pytest.raises(TypeError, match="must return None"):
            te.promote(TileSet([(0,)]))
    assert (states(te), slots(te)) == before
    assert TierA.made[-1].is_released()


def test_te7_pinned_operation_of_another_class_fails_type_error_and_changes_nothing():
    class Pinned(MoveOperation):
        source_class = CPU

        def _copy(self, tensor, destination, output, element_count):
            raise AssertionError("must not run")

    TierA.made, TierB.made = [], []
    p, s = tiers(4)
    te = TE(p, s, (2,), (2,))
    te.evict(TileSet([(0,)]))
    before = states(te), slots(te)
    with registered_move_operation(TierB, TierA, Pinned):
        with pytest.raises(TypeError, match="Pinned"):
            te.promote(TileSet([(0,)]))
    assert (states(te), slots(te)) == before


def test_te7_unregistered_python_pair_uses_the_elementwise_fallback():
    assert dispatch_move(TierB, TierA) is sw.ElementwiseMoveOperation
    TierA.made, TierB.made = [], []
    p, s = tiers(6)
    te = TE(p, s, (3,), (2,))
    for _ in range(2):
        te.evict(TileSet([(0,), (2,)]))
        te.promote(TileSet([(0,), (2,)]))
    assert slots(te) == [float(i + 1) for i in range(6)]
    assert te.version == 0


@pytest.mark.parametrize("secondary", [lambda: FileBacked(dtype=F), lambda: CPU(0)])
def test_te7_cpu_and_file_backed_tiers_round_trip(secondary):
    values = [float(i) * 0.5 for i in range(64)]
    te = TE(cpu_values(values), secondary(), (4, 2), (4, 2))
    every = TileSet([(i, j) for i in range(4) for j in range(2)])
    for _ in range(3):
        te.evict(every)
        assert te.secondary_tiles == every and slots(te) == values
        te.promote(every)
        assert te.primary_tiles == every and slots(te) == values
    te[5] = 99.0
    te.evict(every)
    assert te[5] == 99.0 and te.version == 1


def test_te7_a_registered_cpu_pair_replaces_the_built_in_copy(recording):
    # (CPU, CPU) has no built-in entry: registering one sends CPU tiles through it
    values = [float(i) for i in range(8)]
    te = TE(cpu_values(values), CPU(0), (2,), (4,))
    te.evict(TileSet([(0,)]))
    with registered_move_operation(CPU, CPU, Recording):
        te.promote(TileSet([(0,)]))
    assert len(recording.calls) == 1 and recording.calls[0]["count"] == 4
    assert type(recording.calls[0]["destination"]) is CPU
    assert slots(te) == values


def test_te7_block_device_tiers_move_through_the_block_operations(loop_device):  # noqa: F811
    # B-10: CPU <-> BlockDeviceCarrier moves only through its block operations
    # (pre-registered, closed to users; other pairs' fallback refuses); a pair of two
    # block carriers has no movement and keeps the slot copy.
    dev = sw.BlockDevice(loop_device)
    values = [float(i) for i in range(32)]
    every = TileSet([(i,) for i in range(4)])
    for primary in (cpu_values(values), dev.allocate(32)):
        if type(primary) is not CPU:
            for i, v in enumerate(values):
                primary[i] = v
        te = TE(primary, dev.allocate(0), (4,), (8,))
        for _ in range(2):
            te.evict(every)
            assert te.secondary_tiles == every and slots(te) == values
            te.promote(every)
            assert te.primary_tiles == every and slots(te) == values
        te.release()
    del te, primary
    import gc

    gc.collect()
    dev.close()
