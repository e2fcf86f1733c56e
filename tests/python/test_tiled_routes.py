"""TiledEvictable tile copies between definition-backed tiers (contract-carriers
TE-7 "routes if definition-backed", TE-8): the exact pair's TransferRoute is
prepared and submitted like a public move of the tile's (n):(1) span, without
autograd and without releasing the source until the set commits; a provider's
incomplete ProviderCompletion leaves the AwaitResidency pending until the
waiter threads commit the whole set. Fallback and refusal follow X-14."""

import gc
import threading
import time

import pytest

import strideweave as sw
from strideweave import CPU
from strideweave.carriers import extension as ext

from extension_for_tests import TIMEOUT, BackgroundCompletion, Pair, filled, span_copier
import child_process

F = sw.DType.Float32
TE, TileSet = sw.TiledEvictable, sw.TileSet
TILES, TILE = 4, 2
VALUES = [i * 1.5 + 0.25 for i in range(TILES * TILE)]


def all_tiles():
    return TileSet([(i,) for i in range(TILES)])


def tiles(*ks):
    return TileSet([(k,) for k in ks])


def locations(te):
    return [te.tile_state((i,)).location for i in range(TILES)]


def values(te):
    return [te[i] for i in range(te.size())]


def evicted(p):
    """A TiledEvictable over A (primary) and B (secondary) whose tiles all sit
    in private tile-sized B storage (the first eviction copies out of the full
    A prototype slot by slot; every later copy is tile-sized)."""
    te = TE(filled(p.A, VALUES), p.B(0, dtype=F), (TILES,), (TILE,))
    te.evict(all_tiles())
    assert locations(te) == ["secondary"] * TILES
    p.ab.submit_count = p.ba.submit_count = 0
    p.ab.prepare_count = p.ba.prepare_count = 0
    p.ab.requests.clear()
    p.ba.requests.clear()
    return te


def snapshot(te):
    return locations(te), [te.tile_state((i,)).dirty for i in range(TILES)], te.version


def fresh_since(store, start):
    """Carriers the store allocated after the first `start` allocations."""
    return store.carriers("allocate")[start:]


def wait_for(cond):
    deadline = time.monotonic() + TIMEOUT
    while not cond():
        assert time.monotonic() < deadline, "condition never became true"
        time.sleep(0.005)


# ---- TE-7 synchronous routes ---------------------------------------------------------

def test_te7_promote_runs_the_exact_pairs_route_with_the_tile_span():
    p = Pair()
    te = evicted(p)
    old = [r for r in p.sb.carriers("allocate")[-TILES:]]
    h = te.promote_async(tiles(0, 2))
    assert h.done  # synchronous submit(): terminal on return (TE-8)
    assert h.wait() is None
    assert p.ba.submit_count == 2 and p.ab.submit_count == 0
    for r in p.ba.requests:
        assert r.layout.shape == sw.Shape([TILE]) and r.layout.stride == sw.Stride([1])
        assert r.physical_span == TILE and r.tensor.offset == 0
        assert type(r.tensor.carrier) is p.B and type(r.destination) is p.A
    assert p.ba.grad_in_prepare == [False, False]
    assert locations(te) == ["primary", "secondary", "primary", "secondary"]
    assert values(te) == VALUES
    # The old secondary copies of the moved tiles are released at commit only.
    assert [c.is_released() for c in old] == [True, False, True, False]
    assert te.version == 0 and te.dirty_tiles == TileSet()


def test_te7_evict_runs_the_reverse_route_and_keeps_values():
    p = Pair()
    te = evicted(p)
    te.promote(all_tiles())
    te[3] = 99.0  # tile 1 dirty
    te.evict(tiles(1, 3))
    assert p.ab.submit_count == 2
    assert locations(te) == ["primary", "secondary", "primary", "secondary"]
    assert values(te) == VALUES[:3] + [99.0] + VALUES[4:]
    assert all(type(r.destination) is p.B for r in p.ab.requests)


def test_te7_route_prepare_runs_without_autograd_even_when_enabled():
    p = Pair()
    te = evicted(p)
    assert sw.is_grad_enabled()
    te.promote(tiles(1))
    assert p.ba.grad_in_prepare == [False]
    assert sw.is_grad_enabled()


def test_te7_source_stays_live_while_submit_runs():
    seen = []

    def submit(request):
        seen.append((request.tensor.carrier.is_released(), request.tensor.carrier[0]))
        span_copier(request)()
        return None

    p = Pair(submit_hook=submit)
    te = evicted(p)
    te.promote(tiles(0, 1))
    assert seen == [(False, VALUES[0]), (False, VALUES[2])]


def test_te7_submit_failure_changes_nothing_and_releases_fresh_copies():
    calls = []

    def submit(request):
        calls.append(request)
        if len(calls) == 2:
            raise OSError("remote refused the second tile")
        span_copier(request)()

    p = Pair(submit_hook=submit)
    te = evicted(p)
    before, start = snapshot(te), len(p.sa.carriers("allocate"))
    h = te.promote_async(tiles(0, 1, 2))
    with pytest.raises(OSError, match="second tile"):
        h.wait()
    assert snapshot(te) == before and values(te) == VALUES
    fresh = fresh_since(p.sa, start)
    assert len(fresh) == 2 and all(c.is_released() for c in fresh)
    te.promote(tiles(0, 1, 2))  # the tiles are usable again
    assert values(te) == VALUES


def test_te7_prepare_wrong_result_is_a_type_error_with_nothing_changed():
    p = Pair(prepare_hook=lambda request: "not a PreparedTransfer")
    te = evicted(p)
    before = snapshot(te)
    with pytest.raises(TypeError, match="PreparedTransfer or Unsupported"):
        te.promote(tiles(0))
    assert snapshot(te) == before and values(te) == VALUES


# ---- X-14 fallback and refusal ------------------------------------------------------

def test_te7_no_route_with_both_fallbacks_copies_elementwise():
    p = Pair(routes=(), fallback=(True, True))
    te = evicted(p)
    te.promote(all_tiles())
    assert locations(te) == ["primary"] * TILES and values(te) == VALUES
    te.evict(tiles(2))
    assert p.ab.prepare_count == 0 and p.ba.prepare_count == 0
    assert values(te) == VALUES


@pytest.mark.parametrize("fallback", [(False, False), (True, False), (False, True)])
def test_te7_no_route_without_both_fallbacks_refuses_with_nothing_changed(fallback):
    p = Pair(routes=("ab",), fallback=fallback)  # no B->A route
    te = TE(p.A(0, dtype=F), filled(p.B, VALUES), (TILES,), (TILE,))
    te.promote(all_tiles())  # full B prototype: the slot copy
    te.evict(all_tiles())     # A->B route
    assert p.ab.submit_count == TILES
    before, start = snapshot(te), len(p.sa.carriers("allocate"))
    h = te.promote_async(tiles(0, 1))
    with pytest.raises(NotImplementedError, match="element-by-element fallback"):
        h.wait()
    assert snapshot(te) == before and values(te) == VALUES
    # Refused before any storage was allocated or any provider called.
    assert fresh_since(p.sa, start) == [] and p.ba.prepare_count == 0


def test_te7_refusal_comes_before_any_other_tile_is_copied():
    p = Pair(routes=("ab",))
    te = TE(p.A(0, dtype=F), filled(p.B, VALUES), (TILES,), (TILE,))
    te.promote(tiles(0, 1))  # full B prototype: slot copies; tiles 2, 3 stay there
    te.evict(tiles(0))       # tile 0: private B storage
    before, start = snapshot(te), len(p.sa.carriers("allocate"))
    with pytest.raises(NotImplementedError):
        te.promote(tiles(2, 0))  # tile 2 copies slot by slot, tile 0 has no route
    assert snapshot(te) == before and values(te) == VALUES
    assert fresh_since(p.sa, start) == []


class _Scripted:
    """A residency policy whose plan() returns `next`."""
    next = sw.ResidencyPlan()

    def plan(self, required, purpose):
        return self.next


@pytest.mark.parametrize("how", ["promote", "promote_async", "write"])
def test_x14_refusal_after_a_policy_moved_the_tile_out_of_its_full_tier(how):
    # Issue 17 regression: tile 0 leaves the full B prototype and comes back
    # to B storage of its own through the policy's moves inside projections;
    # bringing it back must still be refused before anything is allocated.
    p = Pair(routes=("ab",))  # no B->A route, no fallback
    policy = _Scripted()
    te = TE(p.A(0, dtype=F), filled(p.B, VALUES), (TILES,), (TILE,), residency_policy=policy)
    whole = sw.Tensor(te, 0, sw.Layout(sw.Shape([TILES * TILE]), sw.Stride([1])))
    policy.next = sw.ResidencyPlan(promote=tiles(0))
    te.project(whole, sw.TileSelection([[1]])).wait()  # slot copy out of the full B
    policy.next = sw.ResidencyPlan(evict=tiles(0))
    te.project(whole, sw.TileSelection([[1]])).wait()  # A->B route
    policy.next = sw.ResidencyPlan()
    assert locations(te) == ["secondary"] * TILES and p.ab.submit_count == 1
    before, start = snapshot(te), len(p.sa.carriers("allocate"))
    with pytest.raises(NotImplementedError, match="element-by-element fallback"):
        if how == "promote":
            te.promote(tiles(0))
        elif how == "write":
            te[0] = 5.0
        else:
            h = te.promote_async(tiles(0))
            assert h.progress == (0, 0)
            h.wait()
    assert snapshot(te) == before and values(te) == VALUES
    assert fresh_since(p.sa, start) == [] and p.ba.prepare_count == 0


def test_te7_definition_free_and_defined_tiers_do_not_mix():
    p = Pair()
    te = TE(filled(p.A, VALUES), CPU(0, dtype=F), (TILES,), (TILE,))
    te.evict(all_tiles())  # out of the full A prototype: slot copy
    before = snapshot(te)
    with pytest.raises(NotImplementedError, match="without a CarrierDefinition"):
        te.promote(tiles(0))  # CPU -> A has no movement
    assert snapshot(te) == before and values(te) == VALUES


def test_te7_route_unsupported_falls_back_when_both_allow():
    p = Pair(fallback=(True, True), unsupported=lambda r: "not today")
    te = evicted(p)
    te.promote(tiles(0, 3))
    assert p.ba.prepare_count == 2 and p.ba.submit_count == 0
    assert locations(te) == ["primary", "secondary", "secondary", "primary"]
    assert values(te) == VALUES


def test_te7_route_unsupported_without_fallback_refuses():
    p = Pair(unsupported=lambda r: "not today")
    te = evicted(p)
    before, start = snapshot(te), len(p.sa.carriers("allocate"))
    with pytest.raises(NotImplementedError, match="not today"):
        te.promote(tiles(0, 3))
    assert p.ba.submit_count == 0
    assert snapshot(te) == before and values(te) == VALUES
    assert all(c.is_released() for c in fresh_since(p.sa, start))


# ---- TE-8 provider completions ----------------------------------------------------------

def test_te8_incomplete_completion_leaves_handle_and_tiles_pending():
    gate = threading.Event()
    p = Pair(gate=gate)
    te = evicted(p)
    h = te.promote_async(tiles(0, 1))
    assert not h.done
    assert locations(te) == ["secondary"] * TILES
    with pytest.raises(RuntimeError, match="pending"):
        te[0] = 1.0
    with pytest.raises(RuntimeError, match="pending"):
        te.evict_async(tiles(1))
    with pytest.raises(RuntimeError, match="wait"):
        te.release()
    assert not h.done
    gate.set()
    assert h.wait() is None and h.done
    assert locations(te) == ["primary", "primary", "secondary", "secondary"]
    assert values(te) == VALUES
    te[0] = 7.0
    assert te[0] == 7.0


def test_te8_wait_from_many_threads_sees_one_result():
    gate = threading.Event()
    p = Pair(gate=gate)
    te = evicted(p)
    h = te.promote_async(all_tiles())
    results, errors = [], []

    def waiter():
        try:
            results.append(h.wait())
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=waiter) for _ in range(16)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join(TIMEOUT)
    assert errors == [] and results == [None] * 16
    assert h.wait() is None
    assert locations(te) == ["primary"] * TILES and values(te) == VALUES


def test_te8_dropped_handle_still_commits_on_the_waiter_thread():
    gate = threading.Event()
    p = Pair(gate=gate)
    te = evicted(p)
    te.promote_async(tiles(1, 2))  # handle dropped at once
    gc.collect()
    assert locations(te)[1:3] == ["secondary", "secondary"]
    gate.set()
    wait_for(lambda: locations(te)[1:3] == ["primary", "primary"])
    assert values(te) == VALUES
    te.release()  # nothing pending any more


def test_te8_set_commits_only_when_every_completion_is_done():
    gates = [threading.Event(), threading.Event()]
    completions = []

    def submit(request):
        c = BackgroundCompletion(span_copier(request), gates[len(completions)])
        completions.append(c)
        return c

    p = Pair(submit_hook=submit)
    te = evicted(p)
    h = te.promote_async(tiles(0, 3))
    assert len(completions) == 2
    gates[0].set()
    assert completions[0].finished.wait(TIMEOUT)
    time.sleep(0.05)  # let a waiter thread see the first completion
    assert not h.done and locations(te) == ["secondary"] * TILES
    gates[1].set()
    h.wait()
    assert locations(te) == ["primary", "secondary", "secondary", "primary"]
    assert values(te) == VALUES


@pytest.mark.parametrize("failing", [0, 1])
def test_te8_failing_completion_changes_nothing_and_releases_fresh_copies(failing):
    gate = threading.Event()
    made = []

    def submit(request):
        fail = OSError("remote lost the tile") if len(made) == failing else None
        c = BackgroundCompletion(span_copier(request), gate, fail)
        made.append(c)
        return c

    p = Pair(submit_hook=submit)
    te = evicted(p)
    old = p.sb.carriers("allocate")[-TILES:]
    before, start = snapshot(te), len(p.sa.carriers("allocate"))
    h = te.promote_async(tiles(0, 1))
    gate.set()
    with pytest.raises(OSError, match="lost the tile") as first:
        h.wait()
    with pytest.raises(OSError) as second:
        h.wait()
    assert first.value is second.value
    assert snapshot(te) == before and values(te) == VALUES
    fresh = fresh_since(p.sa, start)
    assert len(fresh) == 2 and all(c.is_released() for c in fresh)
    assert not any(c.is_released() for c in old)
    te.evict(tiles(0))  # the tiles are free again
    te.release()


def test_te8_completion_with_a_bad_shape_fails_the_handle():
    class NoWait:
        done = False

    p = Pair(submit_hook=lambda request: NoWait())
    te = evicted(p)
    before = snapshot(te)
    h = te.promote_async(tiles(0))
    with pytest.raises(TypeError, match="wait"):
        h.wait()
    assert snapshot(te) == before and values(te) == VALUES


def test_te8_write_promotes_through_a_completion_on_the_calling_thread():
    gate = threading.Event()
    p = Pair(gate=gate)
    te = evicted(p)
    timer = threading.Timer(0.05, gate.set)
    timer.start()
    te[2] = 5.0  # promotes tile 1 and waits for its completion here
    timer.join()
    assert locations(te)[1] == "primary" and te[2] == 5.0 and te[3] == VALUES[3]


def run_python(code):
    proc = child_process.run_python(code, timeout=150)
    assert "Exception ignored" not in proc.stderr, proc.stderr
    return proc.stdout


@pytest.mark.parametrize("keep_handle", [True, False])
def test_te8_interpreter_exit_with_a_pending_completion(keep_handle):
    # The report is registered before strideweave, so atexit runs it after
    # strideweave's drain; the gate opens from the callback registered last,
    # i.e. before the drain: the set is still pending when the script ends
    # and must be committed by the time the report runs.
    out = run_python(f"""
        import atexit, threading
        state = {{}}

        def report():
            te = state["te"]
            print([te.tile_state((i,)).location for i in range(2)], flush=True)

        atexit.register(report)
        import strideweave as sw
        from extension_for_tests import Pair, filled, D
        gate = threading.Event()
        p = Pair(gate=gate)
        te = sw.TiledEvictable(filled(p.A, [1.0, 2.0, 3.0, 4.0]), p.B(0, dtype=D.Float32),
                               (2,), (2,))
        te.evict(sw.TileSet([(0,), (1,)]))
        h = te.promote_async(sw.TileSet([(1,)]))
        assert not h.done
        state["te"] = te
        if {keep_handle}:
            state["h"] = h
        del h
        atexit.register(gate.set)
    """)
    assert out.strip().splitlines()[-1] == "['secondary', 'primary']"


fault = pytest.mark.skipif(not sw._C._fault_injection_enabled(),
                           reason="needs the fault-injection build")


@fault
def test_te8_fault_after_a_started_completion_waits_for_it_then_changes_nothing():
    gate = threading.Event()
    p = Pair(gate=gate)
    te = evicted(p)
    before, start = snapshot(te), len(p.sa.carriers("allocate"))
    sw._C._fault_inject("tile_copy", 1, 1)  # the second tile's copy fails
    try:
        h = te.promote_async(tiles(0, 1))
    finally:
        sw._C._fault_clear()
    # The first tile's provider still writes its fresh storage: the request
    # stays open (nothing released under it) until that completion is done.
    assert p.ba.submit_count == 1 and not h.done
    assert snapshot(te) == before
    gate.set()
    with pytest.raises(OSError, match="injected"):
        h.wait()
    assert snapshot(te) == before and values(te) == VALUES
    assert all(c.is_released() for c in fresh_since(p.sa, start))
    te.promote(tiles(0, 1))
    assert values(te) == VALUES


def test_te8_concurrent_requests_from_many_threads_on_separate_tiles():
    gate = threading.Event()
    p = Pair(gate=gate, keep=False)
    many = 8
    te = TE(filled(p.A, [float(i) for i in range(many * TILE)]), p.B(0, dtype=F), (many,),
            (TILE,))
    te.evict(TileSet([(i,) for i in range(many)]))
    handles, errors = [None] * many, []

    def request(k):
        try:
            handles[k] = te.promote_async(tiles(k))
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=request, args=(k,)) for k in range(many)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    assert errors == [] and not any(h.done for h in handles)
    gate.set()
    assert [h.wait() for h in handles] == [None] * many
    assert [te.tile_state((i,)).location for i in range(many)] == ["primary"] * many
    assert values(te) == [float(i) for i in range(many * TILE)]
    del handles
    gc.collect()
    te.release()
