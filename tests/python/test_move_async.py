"""Asynchronous movement (seed: "Await results share one completion contract",
"Move submission is eager but does not force host synchronization", "One
asynchronous move publishes at one terminal boundary", "Pending movement
preserves lifetime through completion", "A capsule keeps its producer alive but
not released storage" (move half); architecture.md "Movement", "Pending guard").

Incomplete handles are observed deterministically: `_C._hold_moves(True)` keeps
built-in jobs queued (moves_for_tests.held), or a MoveOperation whose `_copy`
blocks on a threading.Event runs on a helper thread (moves_for_tests.BlockedCopy).
Completion is awaited with wait(), events, barriers or weakref finalizers --
never by sleeping.
"""

import asyncio
import errno
import gc
import json
import threading
import typing
import weakref

import numpy as np
import pytest

import strideweave as sw
from strideweave import _C
from strideweave.carriers.move import registered_move_operation
from measure import settled_live_bytes
from moves_for_tests import (BIG, D, BlockedCopy, L, PyList, held, make_carrier,
                             slot_values, values_of, warm_up)
import child_process

needs_faults = pytest.mark.skipif(not _C._fault_injection_enabled(),
                                  reason="build without -Dfault_injection=true")

# More than one SW_TRANSFER_CHUNK_BYTES (8 MiB) chunk: 12 MiB of Float32.
MULTI_CHUNK = 3 << 20


def cpu_tensor(n=BIG, dtype=D.Float32):
    """A CPU tensor whose slots hold 0.5, 1.5, ... (filled through the DLPack
    alias so big tensors are quick; such writes do not touch the version)."""
    c = sw.CPU(n, dtype=dtype)
    t = sw.Tensor(c, 0, L([n], [1]))
    np.from_dlpack(t)[:] = np.arange(n, dtype=np.float32) + 0.5
    return t, c


def file_tensor(n, values):
    f = sw.FileBacked()
    f._allocate(n)
    with open(f.path, "r+b") as fh:  # direct file writes: no version change
        fh.write(values.astype(np.float32).tobytes())
    return sw.Tensor(f, 0, L([n], [1])), f


def run_python(code, **env_extra):
    return child_process.run_python(code, timeout=120, **env_extra).stdout


def failing_handle():
    """A handle whose _copy raised `err`: (handle, err, source carrier)."""
    err = LookupError("copy failed")

    class Failing(sw.MoveOperation):
        def _copy(self, tensor, destination, output, element_count):
            raise err

    src = PyList([1.0, 2.0])
    with registered_move_operation(PyList, sw.CPU, Failing):
        h = sw.move_async(sw.Tensor(src, 0, L([2], [1])), sw.CPU(2))
    return h, err, src


# ---- AwaitResult / AwaitMove surface -----------------------------------------------------


def test_await_move_subclasses_await_result():
    assert issubclass(sw.AwaitMove, sw.AwaitResult)
    from strideweave.carriers import move as m
    assert m.AwaitMove is sw.AwaitMove and m.AwaitResult is sw.AwaitResult


@pytest.mark.parametrize("name", ["AwaitResult", "AwaitMove"])
def test_handles_are_not_constructible(name):
    with pytest.raises(TypeError):
        getattr(sw, name)()


@pytest.mark.parametrize("name", ["AwaitResult", "AwaitMove"])
def test_handles_are_subscriptable(name):
    cls = getattr(sw, name)
    alias = cls[sw.Tensor]
    assert typing.get_origin(alias) is cls
    assert typing.get_args(alias) == (sw.Tensor,)


def test_no_coroutine_protocol():
    t, c = cpu_tensor(8)
    h = sw.move_async(t, sw.CPU(8))
    for obj in (h, sw.AwaitMove, sw.AwaitResult):
        assert not hasattr(obj, "__await__")
        assert not hasattr(obj, "await")

    async def awaiting():
        return await h

    with pytest.raises(TypeError):
        asyncio.run(awaiting())
    h.wait()


def test_done_is_a_read_only_bool_and_wait_returns_identical_tensor():
    # Seed scenario "Initiate one move" / "Wait for a move more than once".
    t, c = cpu_tensor()
    d = sw.FileBacked()
    with held():
        h = sw.move_async(t, d)
        assert isinstance(h, sw.AwaitMove)
        assert h.done is False  # returned without waiting for the I/O
        with pytest.raises(AttributeError):
            h.done = True
    r = h.wait()
    assert h.done is True
    assert h.wait() is r and h.wait() is r
    assert isinstance(r, sw.Tensor) and r.carrier is d and c.is_released()


def test_failed_handle_raises_the_same_exception_object_every_time():
    # Seed scenario "Fail one asynchronous move".
    h, err, src = failing_handle()
    caught = []
    for _ in range(3):
        with pytest.raises(LookupError) as e:
            h.wait()
        caught.append(e.value)
        assert h.done is True
    assert all(x is err for x in caught)
    assert not src.is_released() and values_of(src) == [1.0, 2.0]


def test_move_is_move_async_wait():
    # move() raises the handle's terminal exception exactly like wait().
    err = LookupError("copy failed")

    class Failing(sw.MoveOperation):
        def _copy(self, tensor, destination, output, element_count):
            raise err

    src = PyList([1.0])
    with registered_move_operation(PyList, sw.CPU, Failing):
        with pytest.raises(LookupError) as e:
            sw.move(sw.Tensor(src, 0, L([1], [1])), sw.CPU(1))
    assert e.value is err and not src.is_released()


def test_python_route_runs_copy_off_the_calling_thread():
    # move_async hands a Python _copy to a binding-owned worker thread.
    seen = []

    class Where(sw.MoveOperation):
        def _copy(self, tensor, destination, output, element_count):
            seen.append(threading.get_ident())
            output[0] = tensor[0]

    src = PyList([3.0])
    with registered_move_operation(PyList, sw.CPU, Where):
        h = sw.move_async(sw.Tensor(src, 0, L([1], [1])), sw.CPU(1))
        assert h.wait().tolist() == [3.0]
    assert len(seen) == 1 and seen[0] != threading.get_ident()


# ---- pending guard --------------------------------------------------------------------------


BUILT_IN = (sw.CPU, sw.Generic, sw.FileBacked)


def assert_source_pending(c, t):
    assert c.is_mutable() is False and t.is_mutable() is False
    assert c.is_owned() is False  # pending does not change ownership
    assert c[1] == t[1]  # reads of a pending source stay allowed
    v = c.version
    with pytest.raises(RuntimeError, match="pending"):
        c[0] = 1.0
    with pytest.raises(RuntimeError, match="pending"):
        t[0] = 1.0
    if type(c) in BUILT_IN:  # on user classes set_value is the user's own hook (C-4/C-5)
        with pytest.raises(RuntimeError, match="pending"):
            c.set_value(0, 1.0)
    with pytest.raises(RuntimeError, match="pending"):
        c._increment_version()
    with pytest.raises(RuntimeError, match="pending"):
        c.release()
    with pytest.raises(RuntimeError, match="pending"):
        c._claim_ownership()
    with pytest.raises(RuntimeError, match="pending"):
        sw.move_async(t, sw.FileBacked())
    assert c.version == v and not c.is_released() and not c.is_owned()


def assert_destination_pending(d, n=1):
    assert d.is_mutable() is False and d.is_owned() is False
    with pytest.raises(RuntimeError, match="pending"):
        d[0]
    if type(d) in BUILT_IN:  # on user classes get_value is the user's own hook
        with pytest.raises(RuntimeError, match="pending"):
            d.get_value(0)
    with pytest.raises(RuntimeError, match="pending"):
        sw.Tensor(d, 0, L([n], [1])).tolist()
    with pytest.raises(RuntimeError, match="pending"):
        d[0] = 1.0
    with pytest.raises(RuntimeError, match="pending"):
        d._increment_version()
    with pytest.raises(RuntimeError, match="pending"):
        d.release()
    with pytest.raises(RuntimeError, match="pending"):
        d._claim_ownership()
    other = sw.Tensor(sw.CPU(n), 0, L([n], [1]))
    with pytest.raises(RuntimeError, match="pending"):
        sw.move_async(other, d)  # as a destination again
    with pytest.raises(RuntimeError, match="pending"):
        sw.move_async(sw.Tensor(d, 0, L([1], [1])), sw.CPU(1))  # as a source
    assert not other.carrier.is_released()
    assert not d.is_released()


@pytest.mark.parametrize("route", ["CPU->FileBacked", "Generic->CPU", "FileBacked->CPU"])
def test_pending_guard_on_built_in_routes(route):
    src_kind, dst_kind = route.split("->")
    values = slot_values(D.Float32, BIG)
    src = make_carrier(src_kind, values, D.Float32)
    t = sw.Tensor(src, 0, L([BIG], [1]))
    d = sw.FileBacked() if dst_kind == "FileBacked" else sw.CPU(BIG)
    sv, dv = src.version, d.version
    with held():
        h = sw.move_async(t, d)
        assert not h.done
        assert_source_pending(src, t)
        assert_destination_pending(d, BIG)
        assert not h.done
    r = h.wait()
    assert r.carrier is d and src.is_released()
    assert src.version == sv and d.version == dv
    assert d.is_mutable() and r[BIG - 1] == values[BIG - 1]
    d[0] = 5.0  # no longer pending
    assert d.version == dv + 1


def test_pending_source_exports_read_only():
    # C-13: a pending carrier answers is_mutable() False, so a versioned export is read-only.
    t, c = cpu_tensor()
    with held():
        h = sw.move_async(t, sw.FileBacked())
        arr = np.from_dlpack(t)
        assert arr.flags.writeable is False
        assert arr[3] == 3.5  # reading the pending source is allowed
        del arr
    h.wait()


@pytest.mark.parametrize("make", [lambda: PyList(slot_values(D.Float32, 4)),
                                  lambda: sw.CPU(4), lambda: sw.Generic([0.0] * 4)],
                         ids=["Py", "CPU", "Generic"])
def test_pending_guard_while_a_python_copy_is_in_progress(make):
    src = make()
    t = sw.Tensor(src, 0, L([4], [1]))
    expected = t.tolist()
    d = PyList()
    with BlockedCopy(t, d) as b:
        assert_source_pending(src, t)
        assert_destination_pending(d, 4)
    assert b.error is None, b.error
    assert b.result.tolist() == expected and b.result.carrier is d
    assert src.is_released() and d.is_mutable()


def test_move_async_blocking_copy_keeps_the_guard_until_commit():
    # A registered Python _copy runs on a worker thread: while it blocks, the
    # move is not done and the guard is active.
    src = PyList([1.0, 2.0])
    t = sw.Tensor(src, 0, L([2], [1]))
    d = sw.CPU(2)
    b = BlockedCopy(t, d, via_move=True)
    with registered_move_operation(PyList, sw.CPU, b.op_class):
        with b:
            assert b.result is None and b.thread != b.worker.ident
            assert_source_pending(src, t)
            assert_destination_pending(d, 2)
    assert b.error is None, b.error
    assert b.result.tolist() == [1.0, 2.0] and src.is_released()


def test_pending_owned_destination_keeps_ownership():
    # Pending does not change ownership: an owned destination used by its owner
    # (this thread holds owner access) stays owned and is not mutable until commit.
    t, c = cpu_tensor()
    d = sw.FileBacked()
    token = d._claim_ownership()
    d._begin_owner_access(token)
    try:
        with held():
            h = sw.move_async(t, d)
            assert d.is_owned() is True and d.is_mutable() is False
            with pytest.raises(RuntimeError, match="pending"):
                d[0] = 1.0
        r = h.wait()
        assert d.is_owned() and d.is_mutable()
        assert r[5] == 5.5
    finally:
        d._end_owner_access(token)
        d._relinquish_ownership(token)


def test_transfer_access_inside_copy():
    # The move's own _copy reads the source and reads/writes the destination;
    # mutating the source is still refused; nothing advances a version.
    seen = {}

    def inside(tensor, destination, output):
        seen["source_read"] = tensor[2]
        destination[0] = 11.0
        seen["destination_read"] = destination[0]
        output[1] = 12.0
        seen["output_read"] = output[1]
        with pytest.raises(RuntimeError, match="pending"):
            tensor.carrier[0] = 99.0
        seen["checked"] = True

    src = PyList([1.0, 2.0, 3.0])
    t = sw.Tensor(src, 0, L([3], [1]))
    d = sw.Generic([0.0] * 3)
    with BlockedCopy(t, d, inside=inside) as b:
        pass
    assert b.error is None, b.error
    assert seen == {"source_read": 3.0, "destination_read": 11.0, "output_read": 12.0,
                    "checked": True}
    assert b.result.tolist() == [1.0, 2.0, 3.0]
    assert d.version == 0 and src.version == 0


def test_destination_read_from_another_thread_during_copy_is_refused():
    # Transfer access belongs to the move's own _copy, not to other threads.
    src = PyList([1.0, 2.0])
    d = sw.CPU(2)
    with BlockedCopy(sw.Tensor(src, 0, L([2], [1])), d):
        with pytest.raises(RuntimeError, match="pending"):
            d[0]


# ---- dropped handles -------------------------------------------------------------------


def test_dropping_an_incomplete_handle_neither_blocks_cancels_nor_releases_early():
    # Seed scenario "Drop a pending handle". Completion is observed through a
    # weakref finalizer on the source carrier: the job keeps the source alive
    # until its commit has released it, so the finalizer fires exactly when
    # the move has finished and let go of everything.
    warm_up()
    d = sw.FileBacked()
    base = settled_live_bytes()
    src = sw.CPU(BIG)
    for i in (0, 1, BIG - 1):
        src[i] = i + 0.25
    gone = threading.Event()
    weakref.finalize(src, gone.set)
    src_ref = weakref.ref(src)
    with held():
        box = [sw.move_async(sw.Tensor(src, 0, L([BIG], [1])), d)]
        del src
        dropper = threading.Thread(target=box.clear)  # drop the last handle reference
        dropper.start()
        dropper.join(30)
        assert not dropper.is_alive(), "dropping the handle blocked"
        gc.collect()
        assert not gone.is_set(), "the move let go of its source before running"
        assert src_ref() is not None and not src_ref().is_released()
        with pytest.raises(RuntimeError, match="pending"):
            d[0]  # the incomplete destination is not exposed
    assert gone.wait(60), "the dropped move never completed"
    assert d.size() == BIG and d.is_mutable()
    assert (d[0], d[1], d[BIG - 1]) == (0.25, 1.25, BIG - 0.75)
    assert d.version == 0
    assert settled_live_bytes() == base


# ---- concurrency ----------------------------------------------------------------------------


def test_eight_threads_wait_on_one_handle():
    # Seed scenario "Wait for a move more than once" (concurrent waiters).
    t, c = cpu_tensor()
    d = sw.FileBacked()
    barrier = threading.Barrier(9)
    results = [None] * 8

    def waiter(k):
        barrier.wait(30)
        results[k] = h.wait()

    with held():
        h = sw.move_async(t, d)
        threads = [threading.Thread(target=waiter, args=(k,)) for k in range(8)]
        for th in threads:
            th.start()
        barrier.wait(30)  # all eight are about to block in wait()
        assert not h.done
    for th in threads:
        th.join(60)
        assert not th.is_alive()
    r = h.wait()
    assert all(x is r for x in results)
    assert r.carrier is d and c.is_released()


def test_eight_threads_see_the_same_failure():
    h, err, src = failing_handle()
    barrier = threading.Barrier(8)
    errors = [None] * 8

    def waiter(k):
        barrier.wait(30)
        try:
            h.wait()
        except LookupError as e:
            errors[k] = e

    threads = [threading.Thread(target=waiter, args=(k,)) for k in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert all(e is err for e in errors)


def test_one_hundred_concurrent_moves_from_several_threads():
    routes = [("CPU", "CPU"), ("CPU", "FileBacked"), ("FileBacked", "CPU"),
              ("Generic", "CPU"), ("CPU", "Generic"), ("Generic", "FileBacked")]
    start = threading.Barrier(5)
    outcomes = {}

    def worker(w):
        start.wait(30)
        pending = []
        for k in range(20):
            n = 1_000 + 997 * ((w * 20 + k) % 40)  # 4 KB .. 160 KB: inline and pooled
            src_kind, dst_kind = routes[(w + k) % len(routes)]
            values = [float(w * 100_000 + k * 1_000 + i % 500) for i in range(n)]
            src = make_carrier(src_kind, values, D.Float32)
            layout = L([n // 2, 2], [2, 1]) if k % 2 else L([n], [1])
            t = sw.Tensor(src, 0, layout)
            picks = (0, t.size() // 2, t.size() - 1)
            expected = [t[i] for i in picks]
            d = (sw.FileBacked() if dst_kind == "FileBacked"
                 else make_carrier(dst_kind, [0.0] * n, D.Float32))
            before = d.version
            pending.append((sw.move_async(t, d), src, d, picks, expected, layout, before))
        outcomes[w] = pending

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(5)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
        assert not th.is_alive()
    assert sum(len(v) for v in outcomes.values()) == 100
    for pending in outcomes.values():
        for h, src, d, picks, expected, layout, before in pending:
            r = h.wait()
            assert r.carrier is d and r.layout == layout and src.is_released()
            assert [r[i] for i in picks] == expected
            assert d.version == before  # a move is not an in-place mutation


# ---- interpreter exit with moves in flight ----------------------------------------------


@pytest.mark.parametrize("keep_handle", [True, False])
def test_interpreter_exit_waits_for_moves_in_flight(keep_handle):
    # The checker is registered before strideweave is imported, so atexit runs
    # it after strideweave's drain: the moves must be complete by then.
    out = run_python(f"""
        import atexit, json
        state = {{}}

        def report():
            try:
                out = {{
                    "released": [c.is_released() for c in state["sources"]],
                    "sizes": [d.size() for d in state["destinations"]],
                    "last": [d[d.size() - 1] for d in state["destinations"]],
                }}
            except Exception as e:
                out = {{"error": repr(e)}}
            print(json.dumps(out), flush=True)

        atexit.register(report)
        import strideweave as sw
        n = 4 << 20  # 16 MiB each: still being written when the script ends
        state["sources"], state["destinations"], handles = [], [], []
        for k in range(3):
            c = sw.CPU(n)
            c[n - 1] = float(k + 1)
            d = sw.FileBacked()
            h = sw.move_async(sw.Tensor(c, 0, sw.Layout(sw.Shape([n]), sw.Stride([1]))), d)
            state["sources"].append(c)
            state["destinations"].append(d)
            if {keep_handle}:
                handles.append(h)
            del h
    """)
    report = json.loads(out.strip().splitlines()[-1])
    assert report == {"released": [True] * 3, "sizes": [4 << 20] * 3,
                      "last": [1.0, 2.0, 3.0]}


@pytest.mark.forks
def test_forked_child_starts_its_own_workers():
    # After fork() the child has none of the parent's threads: its moves must
    # run on a fresh executor rather than wait on threads that do not exist.
    out = run_python("""
        import os
        import strideweave as sw
        n = 1 << 20  # 4 MiB: runs on the worker pool
        def pooled_move(value):
            c = sw.CPU(n)
            c[n - 1] = value
            r = sw.move(sw.Tensor(c, 0, sw.Layout(sw.Shape([n]), sw.Stride([1]))), sw.CPU(n))
            return r[n - 1] == value and c.is_released()
        assert pooled_move(1.0)          # the parent's pool is running now
        pid = os.fork()
        if pid == 0:
            os._exit(0 if pooled_move(2.0) and pooled_move(3.0) else 1)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status), "parent", pooled_move(4.0))
    """)
    assert out.strip().splitlines()[-1] == "child 0 parent True"


# ---- faults ---------------------------------------------------------------------------------


@needs_faults
def test_pwrite_fault_mid_transfer_is_terminal_oserror_cpu_to_file_backed():
    expected = np.arange(MULTI_CHUNK, dtype=np.float32) + 0.5
    t, c = cpu_tensor(MULTI_CHUNK)
    d = sw.FileBacked()
    v = c.version
    _C._fault_inject("pwrite", skip=1)  # the second 8 MiB chunk fails
    h = sw.move_async(t, d)
    with pytest.raises(OSError) as e:
        h.wait()
    _C._fault_clear()
    assert e.value.errno == errno.EIO
    with pytest.raises(OSError) as again:
        h.wait()
    assert again.value is e.value
    assert not c.is_released() and c.version == v
    assert np.array_equal(np.from_dlpack(t), expected)  # source unchanged
    assert d.is_mutable() and not d.is_released() and d.version == 0  # not pending
    # the request can be retried and then succeeds
    r = sw.move(t, d)
    assert r.carrier is d and c.is_released() and d[MULTI_CHUNK - 1] == expected[-1]


@needs_faults
def test_pread_fault_mid_transfer_is_terminal_oserror_file_backed_to_cpu():
    expected = np.arange(MULTI_CHUNK, dtype=np.float32) * 2 - 1
    t, f = file_tensor(MULTI_CHUNK, expected)
    d = sw.CPU(MULTI_CHUNK)
    v = f.version
    _C._fault_inject("pread", skip=1)
    h = sw.move_async(t, d)
    with pytest.raises(OSError) as e:
        h.wait()
    _C._fault_clear()
    assert e.value.errno == errno.EIO
    assert not f.is_released() and f.version == v and f.size() == MULTI_CHUNK
    assert np.array_equal(np.fromfile(f.path, dtype=np.float32), expected)
    assert f[MULTI_CHUNK - 1] == expected[-1]
    assert d.is_mutable() and d.version == 0
    d[0] = 1.0  # usable, not pending
    r = sw.move(t, sw.CPU(MULTI_CHUNK))
    assert np.array_equal(np.from_dlpack(r), expected) and f.is_released()


@needs_faults
def test_fault_on_elementwise_file_route_is_terminal_oserror():
    # Generic -> FileBacked runs the C elementwise loop; its pwrite can fail too.
    n = MULTI_CHUNK
    g = sw.Generic(np.arange(n, dtype=np.float32).tolist())
    t = sw.Tensor(g, 0, L([n], [1]))
    d = sw.FileBacked()
    _C._fault_inject("pwrite", skip=1)
    h = sw.move_async(t, d)
    with pytest.raises(OSError):
        h.wait()
    _C._fault_clear()
    assert not g.is_released() and g.version == 0 and g[n - 1] == n - 1
    assert d.is_mutable()


EFBIG_SCRIPT = """
    import errno, json, resource, signal
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    import numpy as np
    import strideweave as sw
    n = 1 << 20  # 4 MiB of Float32
    c = sw.CPU(n)
    t = sw.Tensor(c, 0, sw.Layout(sw.Shape([n]), sw.Stride([1])))
    np.from_dlpack(t)[:] = np.arange(n, dtype=np.float32)
    d = sw.FileBacked()
    if {presized}:
        d._allocate(n)  # grown before the limit: only the transfer's writes fail
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 16, hard))
    out = {{"where": None}}
    try:
        h = sw.move_async(t, d)
        out["where"] = "handle"
        h.wait()
    except OSError as e:
        out["errno_is_efbig"] = e.errno == errno.EFBIG
        out["type"] = type(e).__name__
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    out["source_live"] = not c.is_released()
    out["source_version"] = c.version
    out["source_values"] = bool(np.array_equal(np.from_dlpack(t),
                                               np.arange(n, dtype=np.float32)))
    out["destination_mutable"] = d.is_mutable()
    out["destination_size"] = d.size()
    print(json.dumps(out))
"""


def test_efbig_write_failure_is_terminal_oserror():
    # issue 6: a real I/O failure -- RLIMIT_FSIZE (SIGXFSZ ignored) makes pwrite fail with EFBIG.
    out = json.loads(run_python(EFBIG_SCRIPT.format(presized=True)).strip().splitlines()[-1])
    assert out == {"where": "handle", "errno_is_efbig": True, "type": "OSError",
                   "source_live": True, "source_version": 0, "source_values": True,
                   "destination_mutable": True, "destination_size": 1 << 20}


def test_efbig_allocation_failure_raises_directly_and_undoes_growth():
    # Growing the allocatable-empty destination fails before submission:
    # move_async raises (no handle) and the destination stays empty.
    out = json.loads(run_python(EFBIG_SCRIPT.format(presized=False)).strip().splitlines()[-1])
    assert out == {"where": None, "errno_is_efbig": True, "type": "OSError",
                   "source_live": True, "source_version": 0, "source_values": True,
                   "destination_mutable": True, "destination_size": 0}


# ---- DLPack capsule outstanding (seed "Do not outlive released storage", move half) --------


def test_move_succeeds_while_a_capsule_is_outstanding():
    t, c = cpu_tensor(16)
    arr = np.from_dlpack(t)  # a real consumer holding the capsule's tensor
    cap = t.__dlpack__(max_version=(1, 0))  # and an unconsumed capsule
    v = c.version
    r = sw.move(t, sw.FileBacked())
    assert r.tolist() == [i + 0.5 for i in range(16)]
    assert c.is_released() and c.pointer() == 0 and c.version == v
    with pytest.raises(BufferError):
        t.__dlpack__()
    with pytest.raises(BufferError):
        np.from_dlpack(t)
    del arr, cap  # deleters run fine; nobody reads the freed memory
    gc.collect()


# ---- leaks -----------------------------------------------------------------------------------


def test_many_moves_leave_no_live_bytes():
    warm_up()
    # The first PyList carrier makes the core's class for PyList, which lives
    # as long as the Python class does (135 bytes): made before the baseline,
    # so the test passes alone as well as after other tests made one.
    PyList([0.0])
    before = settled_live_bytes()
    for i in range(300):
        n = 64 + i % 7
        src = make_carrier(["CPU", "Generic"][i % 2], slot_values(D.Int32, n), D.Int32)
        t = sw.Tensor(src, 0, L([n], [1]))
        kind = i % 3
        if kind == 0:
            r = sw.move(t, sw.CPU(n, dtype=D.Int32))
        elif kind == 1:
            r = sw.move(t, sw.FileBacked(dtype=D.Int32))
            r = sw.move(r, sw.CPU(n, dtype=D.Int32))
        else:
            h = sw.move_async(t, sw.Generic([0] * n, dtype=D.Int32))
            r = h.wait()
            del h
        assert r[n - 1] == slot_values(D.Int32, n)[-1]
        del r, t, src
        if i % 50 == 0:
            h, err, s = failing_handle()
            with pytest.raises(LookupError):
                h.wait()
            del h, err, s
    big, c = cpu_tensor(MULTI_CHUNK)
    sw.move(big, sw.FileBacked())
    del big, c
    assert settled_live_bytes() == before
