"""TiledEvictable.project while a provider's promotion is in flight
(contract-carriers TE-8, TE-10): a residency policy that promotes the
selected tiles makes the projection copy them through the pair's
TransferRoute; when the provider answers with an incomplete
ProviderCompletion, project() returns at once with a handle that is not
done, and the projection completes when the provider does. Also TE-10's
order: the policy's plan() runs before a projection of a pending tile is
refused.

Every provider here is gated by a threading.Event the test opens; nothing
sleeps, and every wait is bounded so that a project() which blocks on the
gate fails the test instead of hanging it."""

import gc
import threading
import weakref

import pytest

import strideweave as sw

from extension_for_tests import TIMEOUT, Pair, filled
import child_process
from child_process import last_json

F = sw.DType.Float32
TE, TileSet, TileSelection, ResidencyPlan = (sw.TiledEvictable, sw.TileSet, sw.TileSelection,
                                             sw.ResidencyPlan)
TILE = 2
# How long project() may take before the test calls it blocked on the gate.
RETURN_BOUND = 10


class PromoteRequired:
    """A residency policy promoting the tiles a projection requires."""

    def __init__(self, raise_=None):
        self.calls = []
        self.raise_ = raise_

    def plan(self, required, purpose):
        self.calls.append((required, purpose))
        if self.raise_ is not None:
            raise self.raise_
        return ResidencyPlan(promote=required)


def values_for(ntiles):
    return [i * 1.5 + 0.25 for i in range(ntiles * TILE)]


def evicted(p, policy, ntiles=4):
    """A TiledEvictable over A (primary) and B (secondary), every tile in
    private B storage (the first eviction copies out of the full A
    prototype slot by slot, so no route runs yet)."""
    te = TE(filled(p.A, values_for(ntiles)), p.B(0, dtype=F), (ntiles,), (TILE,),
            residency_policy=policy)
    te.evict(TileSet([(i,) for i in range(ntiles)]))
    assert locations(te) == ["secondary"] * ntiles
    return te


def locations(te):
    return [te.tile_state((i,)).location for i in range(te.grid_shape[0])]


def values(te):
    return [te[i] for i in range(te.size())]


def full(te):
    return sw.Tensor(te, 0, sw.Layout(sw.Shape(te.size()), sw.Stride(1)))


def expected(ntiles, picks):
    vals = values_for(ntiles)
    return [vals[k * TILE + j] for k in picks for j in range(TILE)]


def result_values(r, n):
    return [r.carrier[i] for i in range(n)]


def bounded(calls, gate):
    """Run each call on its own thread and return their results (an
    exception is re-raised). A call still running after RETURN_BOUND
    seconds fails the test: the gate then opens so that its thread ends."""
    out = [None] * len(calls)
    errors = []

    def run(k):
        try:
            out[k] = calls[k]()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(calls))]
    for th in threads:
        th.start()
    for th in threads:
        th.join(RETURN_BOUND)
    blocked = any(th.is_alive() for th in threads)
    if blocked:
        gate.set()
        for th in threads:
            th.join(TIMEOUT * 5)
    assert not blocked, "project() waited for the provider's incomplete promotion"
    if errors:
        raise errors[0]
    return out


def project_now(te, selection, gate, **kw):
    """te.project(...) that must return while `gate` is still closed, with the
    handle's `done` read right after it returned."""
    h, done = bounded([lambda: (lambda h: (h, h.done))(te.project(full(te), selection, **kw))],
                      gate)[0]
    return h, done


# ---- TE-10 / TE-8: project() does not wait for the provider -------------------------------------

def test_te10_te8_project_returns_before_a_gated_provider_promotion():
    gate = threading.Event()
    p = Pair()
    te = evicted(p, PromoteRequired())
    p.ba.gate = gate
    version = te.version
    h, done = project_now(te, TileSelection([[2, 0]]), gate)
    assert done is False and not h.done
    assert p.ba.submit_count == 2  # both promotions were submitted before project() returned
    # In flight: the tiles are where they were, held by the projection.
    assert locations(te) == ["secondary"] * 4
    with pytest.raises(RuntimeError):
        te[4] = 1.0
    gate.set()
    r = h.wait(TIMEOUT)
    assert h.done and h.wait() is r
    assert result_values(r, 4) == expected(4, [2, 0])
    assert locations(te) == ["primary", "secondary", "primary", "secondary"]
    assert values(te) == values_for(4) and te.version == version
    te[4] = 1.0  # the tiles are free again
    assert te.version == version + 1


def test_te8_project_with_a_synchronous_provider_is_done_on_return():
    p = Pair()
    te = evicted(p, PromoteRequired())
    h = te.project(full(te), TileSelection([[1]]))
    assert h.done
    assert result_values(h.wait(), 2) == expected(4, [1])
    assert locations(te) == ["secondary", "primary", "secondary", "secondary"]


def test_te10_te8_many_threads_project_while_the_provider_is_gated():
    gate = threading.Event()
    p = Pair()
    n = 8
    te = evicted(p, PromoteRequired(), ntiles=n)
    p.ba.gate = gate
    start = threading.Barrier(n)

    def projector(k):
        def call():
            start.wait(TIMEOUT)
            h = te.project(full(te), TileSelection([[k]]))
            return h, h.done
        return call

    out = bounded([projector(k) for k in range(n)], gate)
    assert [done for _, done in out] == [False] * n
    assert locations(te) == ["secondary"] * n
    gate.set()
    for k, (h, _) in enumerate(out):
        assert result_values(h.wait(TIMEOUT), TILE) == expected(n, [k])
    assert locations(te) == ["primary"] * n
    assert values(te) == values_for(n)


def test_te8_dropped_projection_handle_still_completes():
    gate = threading.Event()
    p = Pair()
    te = evicted(p, PromoteRequired())
    p.ba.gate = gate
    d = p.A(4, dtype=F)
    h, done = project_now(te, TileSelection([[1, 3]]), gate, destination=d)
    assert not done
    with pytest.raises(RuntimeError):
        d[0] = 7.0  # the destination stays claimed until the projection is over
    committed = threading.Event()
    weakref.finalize(h, committed.set)
    del h
    gc.collect()
    assert not committed.is_set()  # the work keeps its handle while the provider runs
    gate.set()
    assert committed.wait(TIMEOUT)
    assert [d[i] for i in range(4)] == expected(4, [1, 3])
    assert locations(te) == ["secondary", "primary", "secondary", "primary"]
    d[0] = 7.0  # free again
    te[2] = 1.0


def test_te10_te8_provider_failing_after_project_returned_changes_nothing():
    gate = threading.Event()
    p = Pair()
    te = evicted(p, PromoteRequired())
    p.ba.gate, p.ba.fail = gate, OSError("remote lost the tile")
    before = (locations(te), [te.tile_state((i,)).dirty for i in range(4)], te.version)
    start = len(p.sa.carriers("allocate"))
    h, done = project_now(te, TileSelection([[0, 3]]), gate)
    assert not done
    gate.set()
    with pytest.raises(OSError, match="lost the tile") as first:
        h.wait(TIMEOUT)
    with pytest.raises(OSError) as second:
        h.wait()
    assert first.value is second.value
    assert (locations(te), [te.tile_state((i,)).dirty for i in range(4)], te.version) == before
    assert values(te) == values_for(4)
    # The destination project() made and the fresh tile copies are all released.
    fresh = p.sa.carriers("allocate")[start:]
    assert len(fresh) == 3 and all(c.is_released() for c in fresh)
    p.ba.fail = None
    te.promote(TileSet([(3,)]))  # no pin or pending mark is left
    te[0] = 5.0  # (a write promotes its secondary tile first)
    assert locations(te) == ["primary", "secondary", "secondary", "primary"]


@pytest.mark.parametrize("keep_handle", [True, False])
def test_te8_interpreter_exit_with_a_gated_projection_in_flight(keep_handle):
    # The report is registered before strideweave is imported, so atexit runs
    # it after strideweave's exit wait; the gate opens from an atexit callback
    # registered last (it runs first): the projection is still in flight when
    # the script ends and must have completed by the time the report runs.
    code = f"""
        import atexit, json, threading
        state = {{}}

        def report():
            try:
                te = state["te"]
                out = {{"was_done": state["was_done"],
                        "locations": [te.tile_state((i,)).location for i in range(4)],
                        "values": [te[i] for i in range(8)]}}
                if "h" in state:
                    r = state["h"].wait(5)
                    out["result"] = [r.carrier[i] for i in range(4)]
            except Exception as e:
                out = {{"error": repr(e)}}
            print(json.dumps(out), flush=True)

        atexit.register(report)
        import strideweave as sw
        from extension_for_tests import Pair, filled

        class PromoteRequired:
            def plan(self, required, purpose):
                return sw.ResidencyPlan(promote=required)

        values = [i * 1.5 + 0.25 for i in range(8)]
        gate = threading.Event()
        p = Pair()
        te = sw.TiledEvictable(filled(p.A, values), p.B(0, dtype=sw.DType.Float32), (4,), (2,),
                               residency_policy=PromoteRequired())
        te.evict(sw.TileSet([(i,) for i in range(4)]))
        p.ba.gate = gate
        # A project() that waits for the gate fails fast instead of hanging.
        watchdog = threading.Timer({RETURN_BOUND}, gate.set)
        watchdog.daemon = True
        watchdog.start()
        h = te.project(sw.Tensor(te, 0, sw.Layout(sw.Shape(8), sw.Stride(1))),
                       sw.TileSelection([[3, 1]]))
        state.update(te=te, was_done=h.done)
        watchdog.cancel()
        if {keep_handle}:
            state["h"] = h
        del h
        atexit.register(gate.set)
    """
    report = last_json(child_process.run_python(code, timeout=150))
    vals = values_for(4)
    want = {"was_done": False, "locations": ["secondary", "primary", "secondary", "primary"],
            "values": vals}
    if keep_handle:
        want["result"] = expected(4, [3, 1])
    assert report == want


# ---- TE-10 order: the policy, then the pending refusal ------------------------------------------

def test_te10_policy_plan_runs_before_a_pending_tile_is_refused():
    gate = threading.Event()
    p = Pair()
    pol = PromoteRequired()
    te = evicted(p, pol)
    p.ba.gate = gate
    busy = te.promote_async(TileSet([(1,)]))  # tile 1 pending until the gate opens
    assert not busy.done
    try:
        before = locations(te)
        with pytest.raises(RuntimeError, match="pending"):
            te.project(full(te), TileSelection([[1, 2]]))
        assert pol.calls == [(TileSet([(1,), (2,)]), "projection")]
        # An exception of plan() propagates: it comes first.
        pol.raise_ = KeyError("no plan")
        with pytest.raises(KeyError, match="no plan"):
            te.project(full(te), TileSelection([[1]]))
        # A plan that is no ResidencyPlan: TypeError, before the pending refusal.
        pol.raise_ = None
        pol.plan = lambda required, purpose: "not a plan"
        with pytest.raises(TypeError):
            te.project(full(te), TileSelection([[1]]))
        assert locations(te) == before
        assert p.ba.submit_count == 1  # only the promote_async's copy
    finally:
        gate.set()
    busy.wait(TIMEOUT)
    assert locations(te) == ["secondary", "primary", "secondary", "secondary"]
