"""Process lifecycle safety (issue 16, architecture.md "Movement": fork, atexit
drain): a forked child ends the moves and tier transfers it inherited instead
of waiting on threads it does not have; a forked child keeps working FileBacked
storage after its parent exits; the exit drain is bounded and interruptible
for moves waiting on a transfer provider; a failed move gives back the space it
grew an empty FileBacked by.

Each scenario runs in a fresh interpreter (real os.fork(), real
multiprocessing, real interpreter exit) and reports as JSON on stdout. Moves
are held in flight deterministically: the built-in pool hold
(_C._hold_moves), a Python _copy blocked on an Event, or a provider
completion gated by an Event that only the parent sets. Nothing sleeps."""

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

import strideweave as sw
from strideweave import _C
import child_process
from child_process import last_json

needs_faults = pytest.mark.skipif(not _C._fault_injection_enabled(),
                                  reason="build without -Dfault_injection=true")

FORKED = "in flight when the process forked"


env_for = child_process.child_env


def run_python(*parts, timeout=120, **extra):
    """Run the (separately dedented) code parts in a fresh interpreter; its
    last stdout line is JSON."""
    proc = child_process.run_python(*parts, timeout=timeout, **extra)
    return last_json(proc), proc.stderr


# The child's half of every fork scenario: report how an inherited handle
# ends and whether both carriers are usable again, through a pipe.
CHILD_REPORT = """
    import signal

    def child_report(h, src, dst, src_values, write_fd):
        out = {}
        try:
            h.wait()
            out["wait"] = "returned"
        except RuntimeError as e:
            out["wait"] = "RuntimeError"
            out["message"] = str(e)
            try:
                h.wait()
            except RuntimeError as again:
                out["same_error"] = again is e
        except BaseException as e:
            out["wait"] = repr(e)
        out["done"] = h.done
        out["src_mutable"] = src.is_mutable()
        out["dst_mutable"] = dst.is_mutable()
        out["src_values"] = [src[i] for i in range(len(src_values))] == src_values
        try:
            src[0] = src[0]       # writable: no longer pending
            dst[0] = 0.0          # readable and writable
            out["usable"] = True
        except Exception as e:
            out["usable"] = repr(e)
        # a fresh move in the child works
        c = sw.CPU(4)
        r = sw.move(sw.Tensor(c, 0, sw.Layout(sw.Shape([4]), sw.Stride([1]))), sw.FileBacked())
        out["child_move"] = r.carrier.size() == 4 and c.is_released()
        try:
            dst.release()
            src.release()
            out["released"] = True
        except Exception as e:
            out["released"] = repr(e)
        os.write(write_fd, json.dumps(out).encode())
        os.close(write_fd)

    def fork_and_collect(h, src, dst, src_values):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            signal.alarm(30)  # a child that hangs fails the test instead
            os.close(r)
            try:
                child_report(h, src, dst, src_values, w)
            finally:
                os._exit(0)
        os.close(w)
        chunks = []
        while True:
            b = os.read(r, 65536)
            if not b:
                break
            chunks.append(b)
        os.close(r)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        return json.loads(b"".join(chunks))
"""

CHILD_EXPECTED = {"wait": "RuntimeError", "same_error": True, "done": True,
                  "src_mutable": True, "dst_mutable": True, "src_values": True,
                  "usable": True, "child_move": True, "released": True}


def check_child(child):
    message = child.pop("message", "")
    assert FORKED in message
    assert child == CHILD_EXPECTED


# ---- defect 2: a forked child ends the moves it inherited -------------------------------


@pytest.mark.forks
def test_forked_child_ends_an_inherited_provider_move_with_runtime_error():
    # The provider's completion is gated by an Event only the parent sets: at
    # fork() the move is certainly in flight, and the child has no thread
    # that could ever finish it.
    report, _ = run_python("""
        import json, os, threading
        import strideweave as sw
        from extension_for_tests import Pair
    """, CHILD_REPORT, """
        gate = threading.Event()
        p = Pair(gate=gate)
        values = [1.0, 2.0, 3.0, 4.0]
        t, c = p.source(values)
        d = p.B(0, dtype=sw.DType.Float32)
        h = sw.move_async(t, d)
        assert not h.done
        child = fork_and_collect(h, c, d, values)
        gate.set()
        r = h.wait()  # the parent's move is unaffected
        print(json.dumps({"child": child,
                          "parent": [r[i] for i in range(4)] == values and c.is_released()}))
    """)
    assert report["parent"] is True
    check_child(report["child"])


@pytest.mark.forks
def test_forked_child_ends_an_inherited_pool_move_and_leaves_the_shared_file_alone():
    # A built-in CPU -> FileBacked move held in the pool queue at fork(). The
    # child's FileBacked destination is the parent's file: failing the move in
    # the child must not shrink it under the parent's still-running move.
    report, _ = run_python("""
        import json, os
        import numpy as np
        import strideweave as sw
        from strideweave import _C
    """, CHILD_REPORT, """
        n = 1 << 20
        c = sw.CPU(n)
        t = sw.Tensor(c, 0, sw.Layout(sw.Shape([n]), sw.Stride([1])))
        np.from_dlpack(t)[:] = np.arange(n, dtype=np.float32)
        d = sw.FileBacked()
        _C._hold_moves(True)
        h = sw.move_async(t, d)
        assert not h.done
        child = fork_and_collect(h, c, d, [0.0, 1.0, 2.0])
        _C._hold_moves(False)
        r = h.wait()
        ok = (c.is_released() and d.size() == n and
              bool(np.array_equal(np.fromfile(d.path, dtype=np.float32),
                                  np.arange(n, dtype=np.float32))))
        print(json.dumps({"child": child, "parent": ok}))
    """)
    assert report["parent"] is True
    check_child(report["child"])


@pytest.mark.forks
def test_forked_child_ends_an_inherited_python_copy_move():
    # A Python _copy blocked on another thread at fork(): that thread does
    # not exist in the child.
    report, _ = run_python("""
        import json, os
        import strideweave as sw
        from moves_for_tests import BlockedCopy, PyList
        from strideweave.carriers.move import registered_move_operation
    """, CHILD_REPORT, """
        values = [1.0, 2.0, 3.0]
        src = PyList(values)
        t = sw.Tensor(src, 0, sw.Layout(sw.Shape([3]), sw.Stride([1])))
        d = sw.CPU(3)
        b = BlockedCopy(t, d, via_move=True)
        with registered_move_operation(PyList, sw.CPU, b.op_class):
            with b:
                import gc
                (h,) = [o for o in gc.get_objects() if type(o) is sw.AwaitMove and not o.done]
                child = fork_and_collect(h, src, d, values)
        print(json.dumps({"child": child,
                          "parent": b.error is None and [b.result[i] for i in range(3)] == values}))
    """)
    assert report["parent"] is True
    check_child(report["child"])


@pytest.mark.forks
def test_forked_child_ends_an_inherited_tile_transfer():
    # AwaitResidency waiting for a provider completion on the waiter threads.
    report, _ = run_python("""
        import json, os, signal, threading
        import strideweave as sw
        from extension_for_tests import Pair, filled
        gate = threading.Event()
        p = Pair(gate=gate)
        values = [i * 1.5 for i in range(8)]
        te = sw.TiledEvictable(filled(p.A, values), p.B(0, dtype=sw.DType.Float32), (4,), (2,))
        te.evict(sw.TileSet([(i,) for i in range(4)]))
        h = te.promote_async(sw.TileSet([(0,), (1,)]))
        assert not h.done
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            signal.alarm(30)  # a child that hangs fails the test instead
            out = {}
            try:
                h.wait()
                out["wait"] = "returned"
            except RuntimeError as e:
                out["wait"] = "forked" if "in flight when the process forked" in str(e) else str(e)
            try:
                out["locations"] = [te.tile_state((i,)).location for i in range(4)]
                out["values"] = [te[i] for i in range(8)] == values
                p.ab.gate = p.ba.gate = None  # later copies in the child run at once
                te[0] = 7.0  # the tiles are no longer pending: the write promotes tile 0
                out["written"] = te[0] == 7.0
            except Exception as e:
                out["error"] = repr(e)
            os.write(w, json.dumps(out).encode())
            os._exit(0)
        os.close(w)
        child = json.loads(os.read(r, 65536))
        os.waitpid(pid, 0)
        gate.set()
        h.wait()
        print(json.dumps({"child": child,
                          "parent": [te.tile_state((i,)).location for i in range(4)]}))
    """)
    assert report["parent"] == ["primary", "primary", "secondary", "secondary"]
    child = report["child"]
    assert child["wait"] == "forked"
    assert child["locations"] == ["secondary"] * 4 and child["values"] is True
    assert child["written"] is True and "error" not in child


# ---- defect 4: the exit drain is bounded and interruptible -------------------------------

# A provider whose ProviderCompletion.wait() never returns, next to a pool
# move (C on the worker pool) that is still running when the script ends.
# The checker registered before strideweave is imported runs after the drain.
STUCK_PROVIDER = """
    import atexit, json, sys, threading
    state = {}

    def report():
        d = state["pool_destination"]
        print(json.dumps({"pool_move_done": d.size() == state["n"] and
                          d[state["n"] - 1] == 7.0 and state["pool_source"].is_released()}),
              flush=True)

    atexit.register(report)
    import strideweave as sw
    from strideweave.carriers import extension as ext
    from extension_for_tests import Pair

    class NeverDone:
        done = False

        def wait(self):
            threading.Event().wait()  # blocks for good

    p = Pair(submit_hook=lambda request: NeverDone())
    t, c = p.source([1.0, 2.0])
    stuck = sw.move_async(t, p.B(0, dtype=sw.DType.Float32))
    n = state["n"] = 4 << 20
    src = sw.CPU(n)
    src[n - 1] = 7.0
    state["pool_source"] = src
    state["pool_destination"] = sw.FileBacked()
    sw.move_async(sw.Tensor(src, 0, sw.Layout(sw.Shape([n]), sw.Stride([1]))),
                  state["pool_destination"])
"""


def test_exit_drain_gives_up_on_a_stuck_provider_after_the_timeout():
    report, stderr = run_python(STUCK_PROVIDER, timeout=60, STRIDEWEAVE_EXIT_TIMEOUT="0.5")
    assert report == {"pool_move_done": True}  # the pool move was waited for
    lines = [ln for ln in stderr.splitlines() if ln.startswith("strideweave:")]
    assert len(lines) == 1, stderr
    assert "RemoteA -> RemoteB" in lines[0] and "STRIDEWEAVE_EXIT_TIMEOUT" in lines[0]
    assert "FileBacked" not in lines[0]  # the pool move is not abandoned


def test_exit_drain_stops_on_ctrl_c():
    # A huge timeout: only SIGINT can end the drain. The line printed right
    # before the drain comes from a C-level atexit callback (no Python
    # bytecode runs between it and the drain, so the signal cannot be taken
    # by anything else).
    # The child takes Ctrl-C even when this runner was started with SIGINT
    # ignored (a background job of a non-interactive shell), which it inherits.
    code = textwrap.dedent("""
        import signal
        signal.signal(signal.SIGINT, signal.default_int_handler)
    """) + textwrap.dedent(STUCK_PROVIDER) + textwrap.dedent("""
        atexit.register(print, "draining", flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code],
                            env=env_for(STRIDEWEAVE_EXIT_TIMEOUT="3600"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "draining"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert json.loads(out.strip().splitlines()[-1]) == {"pool_move_done": True}
    lines = [ln for ln in err.splitlines() if ln.startswith("strideweave:")]
    assert len(lines) == 1, err
    assert "RemoteA -> RemoteB" in lines[0] and "interrupted" in lines[0]


def test_exit_drain_still_waits_for_a_provider_that_finishes():
    # The bound only applies to providers that do not finish in time.
    report, stderr = run_python("""
        import atexit, json, threading
        state = {}
        atexit.register(lambda: print(json.dumps({
            "released": state["c"].is_released(),
            "values": [state["d"][i] for i in range(2)]}), flush=True))
        import strideweave as sw
        from extension_for_tests import Pair
        gate = threading.Event()
        p = Pair(gate=gate)
        t, state["c"] = p.source([1.0, 2.0])
        state["d"] = p.B(0, dtype=sw.DType.Float32)
        sw.move_async(t, state["d"])
        atexit.register(gate.set)  # opens just before the drain starts
    """, timeout=60, STRIDEWEAVE_EXIT_TIMEOUT="30")
    assert report == {"released": True, "values": [1.0, 2.0]}
    assert "strideweave:" not in stderr


# ---- lesser: a failed move into an empty FileBacked shrinks it back -----------------------


@needs_faults
def test_failed_move_into_an_empty_file_backed_gives_the_space_back():
    import numpy as np
    n = 3 << 20  # two 8 MiB chunks: the second write fails
    c = sw.CPU(n)
    t = sw.Tensor(c, 0, sw.Layout(sw.Shape([n]), sw.Stride([1])))
    np.from_dlpack(t)[:] = np.arange(n, dtype=np.float32)
    d = sw.FileBacked()
    _C._fault_inject("pwrite", skip=1)
    h = sw.move_async(t, d)
    with pytest.raises(OSError) as e:
        h.wait()
    _C._fault_clear()
    assert e.value.errno == errno.EIO
    assert d.size() == 0 and os.path.getsize(d.path) == 0
    assert not c.is_released() and d.is_mutable()
    r = sw.move(t, d)  # grows again for a retry
    assert d.size() == n and r[n - 1] == n - 1


def test_failed_move_into_a_presized_file_backed_keeps_its_size():
    n = 1 << 20
    c = sw.CPU(n)
    t = sw.Tensor(c, 0, sw.Layout(sw.Shape([n]), sw.Stride([1])))
    d = sw.FileBacked()
    d._allocate(n + 5)
    if not _C._fault_injection_enabled():
        pytest.skip("build without -Dfault_injection=true")
    _C._fault_inject("pwrite")
    with pytest.raises(OSError):
        sw.move(t, d)
    _C._fault_clear()
    assert d.size() == n + 5 and os.path.getsize(d.path) == 4 * (n + 5)


# ---- defect 3: a forked child keeps FileBacked after its parent exits ---------------------

# The parent makes FileBacked storage, starts a real multiprocessing fork
# Pool, and exits normally while its worker still runs a task. multiprocessing
# would terminate the worker at exit, so the parent takes its exit hook out
# and keeps the pool object alive; its own exit (Python finalization, then
# the C exit handlers that remove its session directory) is otherwise the
# ordinary one. The worker waits for the parent's death on a pidfd.
POOL_PARENT = """
    import atexit, json, multiprocessing, os, select, sys
    import multiprocessing.util
    import strideweave as sw

    def worker_task(_):
        parent = os.getppid()
        pidfd = os.pidfd_open(parent)
        before = sw.FileBacked()
        before._allocate(3)
        before[1] = 5.0
        print(json.dumps({"worker_dir": str(before.path.parent)}), flush=True)
        select.select([pidfd], [], [])  # the parent has exited
        out = {"worker_dir_kept": before.path.parent.is_dir(),
               "before_file_kept": before.path.exists(),
               "before_value": before[1]}
        try:
            after = sw.FileBacked()
            after._allocate(2)
            c = sw.CPU(4)
            c[3] = 9.0
            r = sw.move(sw.Tensor(c, 0, sw.Layout(sw.Shape([4]), sw.Stride([1]))),
                        sw.FileBacked())
            out["after"] = [after.path.parent == before.path.parent, r[3] == 9.0,
                            r.carrier.path.exists()]
        except Exception as e:
            out["after"] = repr(e)
        print(json.dumps(out), flush=True)
        return True

    mine = sw.FileBacked()
    mine._allocate(1)
    print(json.dumps({"parent_dir": str(mine.path.parent)}), flush=True)
    pool = multiprocessing.get_context("fork").Pool(1)
    result = pool.apply_async(worker_task, (0,))
    atexit.unregister(multiprocessing.util._exit_function)
    import ctypes
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(pool))  # never finalized
    # the worker has made its storage: then exit
    sys.stdin.readline()
"""


def test_pool_worker_keeps_its_file_backed_storage_after_the_parent_exits(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(POOL_PARENT)],
                            env=env_for(TMPDIR=tmp_path), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        parent_dir = json.loads(proc.stdout.readline())["parent_dir"]
        worker_dir = json.loads(proc.stdout.readline())["worker_dir"]
        proc.stdin.write("exit\n")
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
        assert not os.path.exists(parent_dir)  # the parent cleaned up at exit
        # stdout closes once the worker (which holds it too) is gone as well
        report = json.loads(proc.stdout.read().strip().splitlines()[-1])
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()
        proc.stderr.close()
    assert worker_dir != parent_dir
    assert os.path.basename(worker_dir).startswith(".strideweave-filebacked-")
    assert report == {"worker_dir_kept": True, "before_file_kept": True, "before_value": 5.0,
                      "after": [True, True, True]}
