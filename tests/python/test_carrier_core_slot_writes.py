"""Value writes into carriers written in Python go through the core too
(issue 17): the core checks the carrier's state under its lock, lets go of
it, and calls the binding back, which writes each slot with the carrier's own
checked write (state and hooks before each), once, in order. Each slot write
steps the version as C-5 says and the core adds no step of its own, so a
batch of n writes leaves the version n higher, as n writes from Python do.
A hook's exception comes out as it was raised, the slots before it written.

Here the writes are a TiledEvictable's tile copies into a store its Python
tier class made. Guards: these hold on the code before the change too (the
binding then wrote slot by slot itself); they pin that routing the writes
through the core changes nothing a user sees."""

import pytest

import strideweave as sw
from strideweave import _C

from carriers_for_tests import state_seen_from_a_thread
from tiled_helpers import ListCarrier

TE, TileSet = sw.TiledEvictable, sw.TileSet


class Tier(ListCarrier):
    """Logs (slot, value, version seen) of every set_value of every
    instance, keeps every store it makes, runs `on_write`."""

    log = []
    made = []
    on_write = None

    def set_value(self, i, x):
        type(self).log.append((i, x, self.version))
        if type(self).on_write:
            type(self).on_write(self, i)
        super().set_value(i, x)

    def allocate_like(self, size, *, mutable=True, dtype=None, empty=False):
        made = super().allocate_like(size)
        type(self).made.append(made)
        return made


@pytest.fixture(autouse=True)
def fresh_log():
    Tier.log, Tier.made, Tier.on_write = [], [], None
    yield


def evicted_tile_one():
    """A TiledEvictable over Tier tiers (2 tiles of 4), tile 1 evicted."""
    te = TE(Tier([float(i + 1) for i in range(8)]), Tier(), (2,), (4,))
    assert _C._core_slots_unlocked(te.primary)
    te.evict(TileSet([(1,)]))
    return te


def test_each_slot_is_written_once_in_order_and_steps_the_version_once():
    te = evicted_tile_one()
    assert Tier.log == [(0, 5.0, 0), (1, 6.0, 1), (2, 7.0, 2), (3, 8.0, 3)]
    assert Tier.made[-1].version == 4  # four writes, four steps, none on top
    assert te.tile_state((1,)).location == "secondary"
    assert [te[i] for i in range(8)] == [float(i + 1) for i in range(8)]
    assert te.version == 0


def test_a_hooks_exception_comes_out_as_it_was_raised_the_slots_before_written():
    raised = RuntimeError("slot 2 refused on purpose")
    stores = []

    def fail(carrier, i):
        stores.append(carrier)
        if i == 2:
            raise raised

    te = TE(Tier([float(i + 1) for i in range(8)]), Tier(), (2,), (4,))
    Tier.on_write = fail
    with pytest.raises(RuntimeError) as e:
        te.evict(TileSet([(1,)]))
    assert e.value is raised
    assert Tier.log == [(0, 5.0, 0), (1, 6.0, 1), (2, 7.0, 2)]  # nothing after it
    assert stores[0].v[:2] == [5.0, 6.0] and stores[0].version == 2
    assert te.tile_state((1,)).location == "primary" and te.version == 0


def test_a_write_hook_may_use_its_carrier_from_another_thread():
    seen = []
    look_from_a_thread = state_seen_from_a_thread(seen)

    Tier.on_write = look_from_a_thread
    evicted_tile_one()
    assert seen == [(1, False)]
