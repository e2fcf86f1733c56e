"""Fork while another thread's Evictable transition has moved the values but
not yet installed the result (strideweave/evictable.h, "Fork"; issue 17):
the core finishes that transition in the child, and the child's Evictable
object follows it: `primary`/`secondary` name the tiers the core holds (the
fresh tier the transition made, not the one it replaced), `is_evicted()`
says where the values are, and they read back from there.

Runs in a fresh interpreter with a real os.fork(). The transition's thread
is stopped right after its move committed, at a pause point of the
fault-injection build (with the GIL let go); the parent forks once it is
there and lets it go on afterwards. Nothing sleeps."""

import os

import pytest

from strideweave import _C
import child_process
from child_process import last_json

pytestmark = [
    pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork()"),
    pytest.mark.skipif(not _C._fault_injection_enabled(),
                       reason="build without -Dfault_injection=true"),
    pytest.mark.forks,
]


def run_python(code, timeout=120, **extra):
    return last_json(child_process.run_python(code, timeout=timeout, **extra))


SCENARIO = """
    import json, os, signal, threading
    import strideweave as sw
    from strideweave import _C

    case = os.environ["SW_TEST_CASE"]
    evict = case == "evict"
    n = 8
    values = [i + 0.5 for i in range(n)]
    p = sw.CPU(n)
    for i, v in enumerate(values):
        p[i] = v
    # evict: the secondary is too small, so the evict fills a fresh one;
    # promote: the evict below released the primary, so likewise.
    s = sw.CPU(1 if evict else n)
    e = sw.Evictable(p, s)
    if not evict:
        e.evict()
    old = {"primary": e.primary, "secondary": e.secondary}
    replaced = "secondary" if evict else "primary"
    kept = "primary" if evict else "secondary"

    _C._fault_inject("evictable_moved_pause", 0, 1)
    th = threading.Thread(target=e.evict if evict else e.promote)
    th.start()
    _C._fault_wait_paused()  # the move committed; the result is not installed
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        signal.alarm(30)  # a child that hangs fails the test instead
        out = {}
        try:
            out["evicted"] = e.is_evicted()
            out["replaced"] = getattr(e, replaced) is not old[replaced]
            out["kept"] = getattr(e, kept) is old[kept]
            live = e.secondary if out["evicted"] else e.primary
            out["live_tier_released"] = live.is_released()
            out["values"] = [live[i] for i in range(n)] == values
            # the other way and back again, in the child
            (e.promote if out["evicted"] else e.evict)()
            (e.evict if out["evicted"] else e.promote)()
            live = e.secondary if e.is_evicted() else e.primary
            out["round_trip"] = [live[i] for i in range(n)] == values
        except Exception as ex:  # reported to the test
            out["error"] = repr(ex)
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    data = os.read(r, 65536)
    os.waitpid(pid, 0)
    _C._fault_clear()
    _C._fault_resume()
    th.join()
    live = e.secondary if e.is_evicted() else e.primary
    print(json.dumps({
        "child": json.loads(data) if data else {"error": "the child did not report"},
        "parent": [e.is_evicted(), getattr(e, replaced) is not old[replaced],
                   [live[i] for i in range(n)] == values],
    }))
"""


@pytest.mark.parametrize("case", ["evict", "promote"])
def test_forked_child_follows_a_transition_the_core_finished_there(case):
    # Before the binding followed the core, the child's Evictable still
    # named the replaced tier: a released or too small carrier.
    report = run_python(SCENARIO, SW_TEST_CASE=case)
    evict = case == "evict"
    assert report["child"] == {"evicted": evict, "replaced": True, "kept": True,
                               "live_tier_released": False, "values": True,
                               "round_trip": True}
    assert report["parent"] == [evict, True, True]
