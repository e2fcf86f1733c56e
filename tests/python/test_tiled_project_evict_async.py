"""TiledEvictable.project and what follows it (contract-carriers TE-8,
TE-10): the policy's evictions after a projection copy through the pair's
TransferRoute; a provider that finishes that copy later (a gated
ProviderCompletion) holds up neither the projection's handle nor the
process's other moves, whose commits share one completion thread. And a
_start call whose submission fails after its copies ran reports what the
provider raised and keeps nothing of it.

Every provider here is gated by a threading.Event the test opens; nothing
sleeps, every wait is bounded, and the gates open in `finally` so that a
blocked thread ends."""

import gc
import threading
import weakref

import numpy as np
import pytest

import strideweave as sw
from strideweave import _C

from extension_for_tests import TIMEOUT, Pair, filled

F = sw.DType.Float32
TE, TileSet, TileSelection, ResidencyPlan = (sw.TiledEvictable, sw.TileSet, sw.TileSelection,
                                             sw.ResidencyPlan)
TILE = 2
NTILES = 4

needs_faults = pytest.mark.skipif(not _C._fault_injection_enabled(),
                                  reason="needs a build with fault injection")


class PromoteAndEvict:
    """Promotes the tiles a projection requires and evicts `evict`."""

    def __init__(self, evict=()):
        self.evict = evict

    def plan(self, required, purpose):
        return ResidencyPlan(promote=required, evict=TileSet(list(self.evict)))


def values_for(ntiles):
    return [i * 1.5 + 0.25 for i in range(ntiles * TILE)]


def evicted(p, policy):
    """Every tile in private B storage (the first eviction copies slot by
    slot, no route runs)."""
    te = TE(filled(p.A, values_for(NTILES)), p.B(0, dtype=F), (NTILES,), (TILE,),
            residency_policy=policy)
    te.evict(TileSet([(i,) for i in range(NTILES)]))
    return te


def locations(te):
    return [te.tile_state((i,)).location for i in range(NTILES)]


def full(te):
    return sw.Tensor(te, 0, sw.Layout(sw.Shape(te.size()), sw.Stride(1)))


def test_te10_plan_eviction_through_a_gated_provider_blocks_neither_handle_nor_moves():
    promote_gate, evict_gate = threading.Event(), threading.Event()
    p = Pair()
    policy = PromoteAndEvict()
    te = evicted(p, policy)
    te.promote(TileSet([(0,)]))  # tile 0 in private A storage, through the B->A route
    assert locations(te) == ["primary", "secondary", "secondary", "secondary"]
    policy.evict = [(0,)]
    p.ba.gate, p.ab.gate = promote_gate, evict_gate
    # The old A copy of tile 0 goes when its eviction commits.
    released = threading.Event()

    def release(c):
        released.set()
        c.buf = None

    p.sa.override["release"] = release
    try:
        h = te.project(full(te), TileSelection([[2]]))
        assert not h.done  # the promotion of tile 2 waits for its gate
        promote_gate.set()
        # The projection commits on the completion thread, which then starts
        # the eviction of tile 0; its copy waits for evict_gate, the handle
        # must not.
        r = h.wait(TIMEOUT)
        assert [r.carrier[i] for i in range(TILE)] == values_for(NTILES)[2 * TILE:3 * TILE]
        # Another move of the process commits on the same completion thread.
        src = sw.Tensor(sw.CPU(8, dtype=F), 0, sw.Layout(sw.Shape(8), sw.Stride(1)))
        for i in range(8):
            src[i] = float(i)
        m = sw.move_async(src, sw.FileBacked(dtype=F))
        moved = m.wait(TIMEOUT)
        assert [moved[i] for i in range(8)] == [float(i) for i in range(8)]
        assert not released.is_set() and not evict_gate.is_set()
        with pytest.raises(RuntimeError):
            te[0] = 1.0  # tile 0 is pending in the eviction
    finally:
        promote_gate.set()
        evict_gate.set()
    assert released.wait(TIMEOUT), "the policy's eviction never committed"
    assert p.ab.submit_count == 1  # one copy, through the gated provider
    assert p.ab.completions[0].wait() is None
    assert locations(te) == ["secondary", "secondary", "primary", "secondary"]
    assert [te[i] for i in range(te.size())] == values_for(NTILES)


def test_te10_plan_eviction_issued_by_project_does_not_block_project():
    # No promotion: the projection commits on project()'s own thread, which
    # only issues the eviction.
    evict_gate = threading.Event()
    p = Pair()
    policy = PromoteAndEvict()
    te = evicted(p, policy)
    te.promote(TileSet([(0,), (2,)]))
    policy.evict = [(0,)]
    p.ab.gate = evict_gate
    out, errors = [], []

    def project():
        try:
            h = te.project(full(te), TileSelection([[2]]))
            out.append((h, h.done))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    th = threading.Thread(target=project)
    th.start()
    th.join(TIMEOUT)
    blocked = th.is_alive()
    evict_gate.set()
    th.join(TIMEOUT)
    assert not blocked, "project() waited for the provider's eviction copy"
    assert not errors
    h, done = out[0]
    assert done
    assert np.array_equal(np.array([h.wait()[i] for i in range(TILE)], dtype=np.float32),
                          np.array(values_for(NTILES)[2 * TILE:3 * TILE], dtype=np.float32))


class RemoteLost(Exception):
    pass


class Marker:
    pass


def outcome(call):
    """The exception of call() or of waiting for the handle it returned."""
    try:
        h = call()
        h.wait(TIMEOUT)
    except BaseException as e:  # noqa: BLE001 - the test looks at it
        return e
    return None


@needs_faults
@pytest.mark.parametrize("how", ["project", "promote_async"])
def test_te8_failed_submission_after_copies_reports_the_providers_error_and_keeps_nothing(how):
    p = Pair()
    te = evicted(p, PromoteAndEvict())
    version = te.version
    markers = []

    def submit_hook(request):
        m = Marker()
        markers.append(weakref.ref(m))
        raise RemoteLost("remote lost the tile", m)

    p.ba.submit_hook = submit_hook
    _C._fault_inject("tile_submit")
    if how == "project":
        exc = outcome(lambda: te.project(full(te), TileSelection([[1]])))
    else:
        exc = outcome(lambda: te.promote_async(TileSet([(1,)])))
    _C._fault_clear()
    assert p.ba.submit_count == 1 and len(markers) == 1  # the copy ran, then submission failed
    # The caller sees the first failure, the provider's own exception.
    assert isinstance(exc, RemoteLost), repr(exc)
    assert locations(te) == ["secondary"] * NTILES and te.version == version
    del exc
    gc.collect()
    assert markers[0]() is None, "an exception the provider raised is still kept somewhere"
    # The carrier works as before.
    p.ba.submit_hook = None
    te.promote(TileSet([(1,)]))
    assert locations(te) == ["secondary", "primary", "secondary", "secondary"]
