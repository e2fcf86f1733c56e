"""The Python TiledEvictable is the core's own TiledEvictable carrier
(contract-carriers TE-13, TE-14; issue 17): one released state, the core's,
with slot values still reached through the binding's tiers."""

from strideweave import _C

from tiled_helpers import full_tensor, numbered


def test_te14_its_core_carrier_is_the_cores_tiled_evictable_not_a_state_handle():
    te = numbered((2,), (2,))
    # A binding state handle's slots are reached through the batch
    # callbacks; the core's TiledEvictable carrier refuses them and the
    # binding reads and writes through its tiers.
    assert not _C._core_slots_unlocked(te)
    t = full_tensor(te)
    te[3] = 9.0
    assert t.tolist() == [1.0, 2.0, 3.0, 9.0] and te.version == 1
    te.release()
    assert te.is_released() and te.size() == 0
