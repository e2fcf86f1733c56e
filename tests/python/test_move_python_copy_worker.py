"""move_async with a MoveOperation whose `_copy` (or `_copy_async`) is written
in Python: the hook runs on a binding-owned worker thread, so move_async
returns before it finishes; the carriers stay pending until the one commit,
a failure in the hook is the handle's terminal failure, dropped handles still
commit, the exit drain waits for it (bounded by STRIDEWEAVE_EXIT_TIMEOUT) and
a forked child ends the copy it inherited. move() keeps running the hook on
its caller (it waits for the result anyway)."""

import textwrap
import threading
import uuid

import numpy as np
import pytest

import strideweave as sw
from strideweave.carriers.move import (registered_move_operation, register_move_operation,
                                       unregister_move_operation)

from moves_for_tests import PyList
import child_process
from child_process import last_json

GATE_SECONDS = 30  # a bound for a broken build, never reached when it works


class Src(PyList):
    """A separate source class so the registered pair is this file's alone."""


def L(n):
    return sw.Layout(sw.Shape(n), sw.Stride(1))


def src_tensor(values):
    c = Src(list(values))
    return sw.Tensor(c, 0, L(len(values))), c


def gated_op(record):
    """An elementwise Python _copy that records its thread, signals `entered`
    and blocks until `go` is set."""
    record.setdefault("entered", threading.Event())
    record.setdefault("go", threading.Event())

    class Gated(sw.MoveOperation):
        def _copy(self, tensor, destination, output, element_count):
            record["thread"] = threading.get_ident()
            record["entered"].set()
            if not record["go"].wait(GATE_SECONDS):
                raise TimeoutError("the test never opened the gate")
            for i in range(element_count):
                output[i] = tensor[i]
    return Gated


def test_move_async_returns_while_a_gated_copy_is_blocked():
    rec = {}
    t, c = src_tensor([1.0, 2.0, 3.0])
    d = sw.CPU(3)
    with registered_move_operation(Src, sw.CPU, gated_op(rec)):
        h = sw.move_async(t, d)                 # returns while the gate is shut
        assert rec["entered"].wait(GATE_SECONDS)
        assert not h.done
        with pytest.raises(RuntimeError, match="pending"):
            c[0] = 5.0                          # the source is pending
        with pytest.raises(RuntimeError, match="pending"):
            d.release()                         # and so is the destination
        rec["go"].set()
        r = h.wait()
    assert r.carrier is d and r.tolist() == [1.0, 2.0, 3.0]
    assert c.is_released() and h.done


def test_python_copy_runs_on_a_thread_other_than_the_caller():
    rec = {}
    rec_sync = {}
    t, _ = src_tensor([4.0])
    t2, _ = src_tensor([5.0])
    with registered_move_operation(Src, sw.CPU, gated_op(rec)):
        rec["go"].set()
        assert sw.move_async(t, sw.CPU(1)).wait().tolist() == [4.0]
    assert rec["thread"] != threading.get_ident()
    # move() waits anyway: its hook keeps running on the caller.
    with registered_move_operation(Src, sw.CPU, gated_op(rec_sync)):
        rec_sync["go"].set()
        assert sw.move(t2, sw.CPU(1)).tolist() == [5.0]
    assert rec_sync["thread"] == threading.get_ident()


def test_copy_exception_is_the_handles_failure_and_the_source_stays():
    err = LookupError("copy failed on the worker")
    started = threading.Event()

    class Failing(sw.MoveOperation):
        def _copy(self, tensor, destination, output, element_count):
            started.set()
            raise err

    t, c = src_tensor([1.0, 2.0])
    d = sw.CPU(2)
    with registered_move_operation(Src, sw.CPU, Failing):
        h = sw.move_async(t, d)                 # no exception here
        for _ in range(2):
            with pytest.raises(LookupError) as e:
                h.wait()
            assert e.value is err
    assert started.is_set() and h.done
    assert not c.is_released() and [c[0], c[1]] == [1.0, 2.0]
    c[0] = 3.0                                  # no longer pending
    d[0] = 1.0
    d.release()


def test_many_threads_each_making_many_python_copy_moves():
    threads, per_thread = 6, 20
    callers = []

    class Plain(sw.MoveOperation):
        def _copy(self, tensor, destination, output, element_count):
            callers.append(threading.current_thread())
            for i in range(element_count):
                output[i] = tensor[i]

    errors = []

    def work(k):
        try:
            moves = []
            for j in range(per_thread):
                t, c = src_tensor([float(k), float(j), float(k * 100 + j)])
                moves.append((sw.move_async(t, sw.CPU(3)), c, [float(k), float(j),
                                                                float(k * 100 + j)]))
            for h, c, want in moves:
                assert h.wait().tolist() == want and c.is_released()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    with registered_move_operation(Src, sw.CPU, Plain):
        workers = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(120)
    assert not errors, errors[0]
    assert not any(w.is_alive() for w in workers)
    assert callers and not any(w in callers for w in workers)  # never on a caller


def test_dropped_handles_still_commit():
    rec = {}
    committed = threading.Event()
    t, c = src_tensor([7.0, 8.0])
    d = sw.CPU(2)
    with registered_move_operation(Src, sw.CPU, gated_op(rec)):
        # the handle is dropped at once; only its done callback is kept
        sw.move_async(t, d).add_done_callback(lambda h: committed.set())
        assert rec["entered"].wait(GATE_SECONDS)
        assert not committed.is_set()
        rec["go"].set()
        assert committed.wait(GATE_SECONDS)
    assert c.is_released() and [d[0], d[1]] == [7.0, 8.0]


# ---- interpreter exit and fork (fresh interpreters) ------------------------------------


def run_python(code, timeout=120, **extra):
    proc = child_process.run_python(code, timeout=timeout, **extra)
    return last_json(proc), proc.stderr


EXIT_PREFIX = """
    import atexit, json, threading
    state = {}
    # registered before strideweave: runs after its exit drain
    atexit.register(lambda: print(json.dumps({
        "released": state["c"].is_released(),
        "values": [state["d"][i] for i in range(2)] if state["c"].is_released() else None,
    }), flush=True))
    import strideweave as sw
    from moves_for_tests import PyList

    class Src(PyList):
        pass

    entered, go = threading.Event(), threading.Event()

    class Gated(sw.MoveOperation):
        def _copy(self, tensor, destination, output, element_count):
            entered.set()
            go.wait()
            for i in range(element_count):
                output[i] = tensor[i]

    from strideweave.carriers.move import register_move_operation
    register_move_operation(Src, sw.CPU, Gated)
    state["c"] = Src([1.0, 2.0])
    state["d"] = sw.CPU(2)
    sw.move_async(sw.Tensor(state["c"], 0, sw.Layout(sw.Shape(2), sw.Stride(1))), state["d"])
    assert entered.wait(30)
"""


def test_exit_waits_for_a_gated_copy_in_flight():
    # The gate opens from an exit hook that runs just before the drain: the
    # drain waits for the copy and its commit.
    report, stderr = run_python(EXIT_PREFIX + """
    atexit.register(go.set)
    """, STRIDEWEAVE_EXIT_TIMEOUT="30")
    assert report == {"released": True, "values": [1.0, 2.0]}
    assert "strideweave:" not in stderr


def test_exit_gives_up_on_a_copy_that_never_finishes_and_names_it():
    report, stderr = run_python(EXIT_PREFIX, timeout=60, STRIDEWEAVE_EXIT_TIMEOUT="0.5")
    assert report == {"released": False, "values": None}
    lines = [ln for ln in stderr.splitlines() if ln.startswith("strideweave:")]
    assert len(lines) == 1, stderr
    assert "Src -> CPU" in lines[0] and "STRIDEWEAVE_EXIT_TIMEOUT" in lines[0]


def test_forked_child_ends_a_python_copy_in_flight_on_the_worker():
    # move_async from the main thread itself: the copy runs on the worker,
    # which does not exist in the child.
    from test_process_lifecycle import CHILD_REPORT, check_child
    report, _ = run_python(textwrap.dedent("""
        import json, os, threading
        import strideweave as sw
        from moves_for_tests import PyList
    """) + textwrap.dedent(CHILD_REPORT) + textwrap.dedent("""
    class Src(PyList):
        pass

    entered, go = threading.Event(), threading.Event()

    class Gated(sw.MoveOperation):
        def _copy(self, tensor, destination, output, element_count):
            entered.set()
            go.wait(30)
            for i in range(element_count):
                output[i] = tensor[i]

    from strideweave.carriers.move import register_move_operation
    register_move_operation(Src, sw.CPU, Gated)
    values = [1.0, 2.0, 3.0]
    src, d = Src(values), sw.CPU(3)
    h = sw.move_async(sw.Tensor(src, 0, sw.Layout(sw.Shape(3), sw.Stride(1))), d)
    assert entered.wait(30) and not h.done
    child = fork_and_collect(h, src, d, values)
    go.set()
    r = h.wait()
    print(json.dumps({"child": child,
                      "parent": [r[i] for i in range(3)] == values and src.is_released()}))
    """))
    assert report["parent"] is True
    check_child(report["child"])


# ---- strideweave.tensorstore ---------------------------------------------------------


def test_tensorstore_move_async_returns_before_the_write_completes():
    tst = pytest.importorskip("strideweave.tensorstore",
                              reason="the tensorstore package cannot be imported")
    from strideweave.tensorstore._carrier import CpuToTensorStoreMoveOperation
    Store = tst.TensorStoreCarrier
    entered, go = threading.Event(), threading.Event()

    class GatedWrite(CpuToTensorStoreMoveOperation):
        def _copy_async(self, tensor, destination, output, element_count):
            entered.set()
            if not go.wait(GATE_SECONDS):
                raise TimeoutError("the test never opened the gate")
            return super()._copy_async(tensor, destination, output, element_count)

    n = 1 << 12
    c = sw.CPU(n)
    t = sw.Tensor(c, 0, L(n))
    np.from_dlpack(t)[:] = np.arange(n, dtype=np.float32)
    dst = Store.create({"kvstore": {"driver": "memory", "path": f"{uuid.uuid4().hex}/"}}, n)
    original = unregister_move_operation(sw.CPU, Store)
    try:
        register_move_operation(sw.CPU, Store, GatedWrite)
        h = sw.move_async(t, dst)
        assert entered.wait(GATE_SECONDS)
        assert not h.done
        with pytest.raises(RuntimeError, match="pending"):
            dst.release()
        go.set()
        r = h.wait()
    finally:
        unregister_move_operation(sw.CPU, Store)
        register_move_operation(sw.CPU, Store, original)
    assert r.carrier is dst and r.carrier[n - 1] == n - 1 and c.is_released()
