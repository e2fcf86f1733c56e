"""Fork safety of synchronous tier work (issue 16 follow-up, architecture.md
"Movement": fork): a synchronous Evictable.evict()/promote(), a synchronous
TiledEvictable.promote(), and a projection's tile pins, running on another
thread when the process forks, do not leave the child's carriers pending or
pinned forever. The child ends them like the moves it inherited: the tiers
stay where they were, and the same operation works again in the child.

Each scenario runs in a fresh interpreter with a real os.fork(). The work is
held in flight deterministically: the transfer provider's completion is gated
by an Event only the parent sets, and the parent forks once the provider was
submitted (an Event set by the submit hook). Nothing sleeps."""

import os

import pytest
import child_process
from child_process import last_json

pytestmark = [pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork()"),
              pytest.mark.forks]


def run_python(*parts, timeout=120):
    return last_json(child_process.run_python(*parts, timeout=timeout))


# A gated provider pair, a helper thread running the synchronous work, and a
# fork once the provider holds the copy: the child's report comes back
# through a pipe, then the parent opens the gate and lets the work finish.
SCAFFOLD = """
    import json, os, select, signal, threading
    import strideweave as sw
    from extension_for_tests import BackgroundCompletion, Pair, filled, span_copier

    gate = threading.Event()
    submitted = threading.Event()

    def gated_submit(request):
        completion = BackgroundCompletion(span_copier(request), gate)
        submitted.set()
        return completion

    p = Pair(submit_hook=gated_submit)

    def open_gates_in_child():
        p.ab.submit_hook = p.ba.submit_hook = None  # later copies run at once

    def report_of(pid, r):
        # The child may hang inside os.fork() itself (its after-fork hooks),
        # before it could arm an alarm: the parent bounds the wait.
        ready, _, _ = select.select([r], [], [], 30)
        if not ready:
            os.kill(pid, signal.SIGKILL)
        raw = os.read(r, 65536) if ready else b""
        os.waitpid(pid, 0)
        return json.loads(raw or b'{"error": "the child did not report (hung)"}')

    def fork_during(work, child):
        out = {}

        def run():
            try:
                out["result"] = work()
            except Exception as e:  # reported to the test
                out["error"] = repr(e)

        th = threading.Thread(target=run)
        th.start()
        assert submitted.wait(60), "the provider was never submitted"
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            signal.alarm(30)  # a child that hangs fails the test instead
            try:
                report = child()
            except Exception as e:
                report = {"error": repr(e)}
            os.write(w, json.dumps(report).encode())
            os._exit(0)
        os.close(w)
        report = report_of(pid, r)
        gate.set()
        th.join()
        return report, out
"""


def test_forked_child_ends_a_synchronous_evictable_evict_of_another_thread():
    report = run_python(SCAFFOLD, """
        values = [i * 0.5 for i in range(6)]
        e = sw.Evictable(filled(p.A, values), p.B(0, dtype=sw.DType.Float32))

        def child():
            out = {"evicted": e.is_evicted(), "values": [e[i] for i in range(6)] == values}
            open_gates_in_child()
            e.evict()  # not pending any more: the child can evict on its own
            out["evicted_after"] = e.is_evicted()
            e.promote()
            out["round_trip"] = [e[i] for i in range(6)] == values
            return out

        child_report, out = fork_during(e.evict, child)
        print(json.dumps({"child": child_report, "parent": out,
                          "parent_evicted": e.is_evicted()}))
    """)
    assert report["child"] == {"evicted": False, "values": True, "evicted_after": True,
                               "round_trip": True}
    assert "error" not in report["parent"] and report["parent_evicted"] is True


def test_forked_child_ends_a_synchronous_evictable_promote_of_another_thread():
    report = run_python(SCAFFOLD, """
        values = [1.0, 2.0, 3.0, 4.0]
        e = sw.Evictable(filled(p.A, values), p.B(0, dtype=sw.DType.Float32))
        p.ab.submit_hook = None
        e.evict()
        p.ab.submit_hook = gated_submit

        def child():
            out = {"evicted": e.is_evicted()}
            open_gates_in_child()
            e.promote()
            out["values"] = [e[i] for i in range(4)] == values
            return out

        child_report, out = fork_during(e.promote, child)
        print(json.dumps({"child": child_report, "parent": out,
                          "parent_values": [e[i] for i in range(4)] == values}))
    """)
    assert report["child"] == {"evicted": True, "values": True}
    assert "error" not in report["parent"] and report["parent_values"] is True


def test_forked_child_ends_a_synchronous_tile_promote_of_another_thread():
    report = run_python(SCAFFOLD, """
        values = [i * 1.5 for i in range(8)]
        te = sw.TiledEvictable(filled(p.A, values), p.B(0, dtype=sw.DType.Float32), (4,), (2,))
        p.ab.submit_hook = None
        te.evict(sw.TileSet([(i,) for i in range(4)]))

        def child():
            out = {"locations": [te.tile_state((i,)).location for i in range(4)],
                   "values": [te[i] for i in range(8)] == values}
            open_gates_in_child()
            te[0] = 7.0  # not pending any more: the write promotes tile 0
            out["written"] = te[0] == 7.0
            te.promote(sw.TileSet([(1,)]))
            out["promoted"] = te.tile_state((1,)).location
            return out

        child_report, out = fork_during(lambda: te.promote(sw.TileSet([(0,), (1,)])), child)
        print(json.dumps({"child": child_report, "parent": out,
                          "parent_locations": [te.tile_state((i,)).location for i in range(4)]}))
    """)
    assert report["child"] == {"locations": ["secondary"] * 4, "values": True,
                               "written": True, "promoted": "primary"}
    assert "error" not in report["parent"]
    assert report["parent_locations"] == ["primary", "primary", "secondary", "secondary"]


def test_forked_child_ends_a_tile_promote_stopped_inside_a_provider_callback():
    # The window of an intermittent hang, held open: the promoting thread is
    # stopped inside a storage-provider callback -- inside the recording
    # store's lock -- at the moment the main thread forks. The child ends the
    # inherited promote inside os.fork() (releasing the fresh tile copies
    # through the same provider) and then works on its own: nothing it needs
    # may still be held by a thread it does not have. The promoting thread
    # goes on only once fork() has begun (a before-fork hook releases its
    # gate, a lock: no Python code runs there), and it needs the GIL to leave
    # the callback, which fork() holds from there on unless it waits.
    report = run_python(SCAFFOLD, """
        in_callback = threading.Event()
        fork_began = threading.Lock()
        fork_began.acquire()

        class StopOnceInside(list):
            armed = True

            def append(self, item):
                if self.armed and submitted.is_set():
                    self.armed = False
                    in_callback.set()
                    fork_began.acquire(timeout=60)
                super().append(item)

        values = [i * 1.5 for i in range(8)]
        te = sw.TiledEvictable(filled(p.A, values), p.B(0, dtype=sw.DType.Float32), (4,), (2,))
        p.ab.submit_hook = None
        te.evict(sw.TileSet([(i,) for i in range(4)]))
        p.sa.calls = StopOnceInside(p.sa.calls)  # the primary's store: the fresh copies
        os.register_at_fork(before=fork_began.release)

        out = {}
        th = threading.Thread(target=lambda: out.update(
            result=te.promote(sw.TileSet([(0,), (1,)]))))
        th.start()
        assert in_callback.wait(60), "the promote never reached the provider"
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            signal.alarm(30)  # a child that hangs fails the test instead
            try:
                open_gates_in_child()
                te[0] = 7.0
                child = {"written": te[0] == 7.0,
                         "values": [te[i] for i in range(1, 8)] == values[1:]}
                te.promote(sw.TileSet([(1,)]))
                child["promoted"] = te.tile_state((1,)).location
            except Exception as e:
                child = {"error": repr(e)}
            os.write(w, json.dumps(child).encode())
            os._exit(0)
        os.close(w)
        child = report_of(pid, r)
        gate.set()
        th.join()
        print(json.dumps({"child": child, "parent": out,
                          "parent_locations": [te.tile_state((i,)).location for i in range(4)]}))
    """)
    assert report["child"] == {"written": True, "values": True, "promoted": "primary"}
    assert report["parent"] == {"result": None}
    assert report["parent_locations"] == ["primary", "primary", "secondary", "secondary"]


def test_forked_child_drops_the_tile_pins_of_a_projection_of_another_thread():
    # The policy promotes the selected tiles, so the projection holds its
    # pins while a gated promote runs inside it.
    report = run_python(SCAFFOLD, """
        class PromoteSelected:
            def plan(self, required, purpose):
                return sw.ResidencyPlan(promote=required)

        values = [i * 1.5 for i in range(8)]
        te = sw.TiledEvictable(filled(p.A, values), p.B(0, dtype=sw.DType.Float32), (4,), (2,),
                               residency_policy=PromoteSelected())
        p.ab.submit_hook = None
        te.evict(sw.TileSet([(i,) for i in range(4)]))
        t = sw.Tensor(te, 0, sw.Layout(sw.Shape([8]), sw.Stride([1])))

        def child():
            out = {"states": [(te.tile_state((i,)).location, te.tile_state((i,)).valid)
                              for i in range(4)]}
            open_gates_in_child()
            te[2] = 9.0  # tile 1 is neither pinned nor pending any more
            out["written"] = te[2] == 9.0
            te.evict(sw.TileSet([(1,)]))
            out["evicted"] = te.tile_state((1,)).location
            return out

        def work():
            return te.project(t, sw.TileSelection([[1, 2]])).wait().tolist()

        child_report, out = fork_during(work, child)
        print(json.dumps({"child": child_report, "parent": out}))
    """)
    assert report["child"]["states"] == [["secondary", True]] * 4
    assert report["child"]["written"] is True and report["child"]["evicted"] == "secondary"
    assert report["parent"] == {"result": [3.0, 4.5, 6.0, 7.5]}
