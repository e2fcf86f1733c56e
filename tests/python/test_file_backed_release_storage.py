"""Releasing a FileBacked carrier (explicitly, or as the source of a move)
removes its file at once; the last close, where the file system frees the
storage, runs off the caller's path for files under 1 MiB and for a moved
source of any size (other released files of 1 MiB or more are closed on the
caller; a new file waits for a moved source's close), and is done before
fork() returns and before the interpreter exits.

The background close is held deterministically at a pause point
(fault-injection builds), so the tests see a released descriptor still open
and then fork or exit meanwhile. Nothing sleeps."""

import os
import sys

import pytest

import strideweave as sw
from strideweave import CPU, FileBacked, Layout, Shape, Stride, Tensor, _C
import child_process
from child_process import last_json

needs_faults = pytest.mark.skipif(not _C._fault_injection_enabled(),
                                  reason="needs a fault-injection build")
needs_proc = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"),
                                reason="reads /proc/self/fd")


def cpu_tensor(n, fill):
    return Tensor(CPU(1).new_like([fill] * n), 0, Layout(Shape(n), Stride(1)))


def test_c23_moved_source_file_is_gone_and_its_name_free_at_once():
    with sw.no_grad():
        t = sw.move(cpu_tensor(8, 2.5), FileBacked())
        src = t.carrier
        p = src.path
        assert p.exists()
        back = sw.move(t, CPU(8, empty=True))
    assert src.is_released() and not p.exists()
    assert [back.carrier[i] for i in range(8)] == [2.5] * 8
    # the name can be used again straight away, and stays
    g = FileBacked(p.name)
    g._allocate(2)
    g[1] = 7.0
    assert g.path.exists() and g[1] == 7.0
    g.release()
    assert not p.exists()


def test_c23_many_released_files_leave_other_files_intact():
    with sw.no_grad():
        keep = sw.move(cpu_tensor(4, 1.0), FileBacked())
        for i in range(200):
            t = sw.move(cpu_tensor(4, float(i)), FileBacked())
            assert sw.move(t, CPU(4, empty=True)).carrier[3] == float(i)
        # a file created while earlier releases may still be closing
        late = sw.move(cpu_tensor(4, 3.0), FileBacked())
    assert [keep.carrier[i] for i in range(4)] == [1.0] * 4
    assert [late.carrier[i] for i in range(4)] == [3.0] * 4
    keep.carrier[0] = 9.0
    assert keep.carrier[0] == 9.0


# In a fresh interpreter: `held(d)` counts this process's descriptors of
# deleted files in the session directory `d`, i.e. released storage not
# yet given back to the file system.
PRELUDE = """
    import json, os

    def held(d):
        n = 0
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue
            n += target.startswith(d + "/") and target.endswith(" (deleted)")
        return n
"""

RELEASE_WITH_CLOSE_HELD = """
    import strideweave as sw
    from strideweave import CPU, FileBacked, Layout, Shape, Stride, Tensor, _C

    # Two files of 512 KiB: below the size a release closes on the caller,
    # and together a batch the background close takes at once.
    n = 1 << 17
    _C._fault_inject("file_reclaim_pause")
    paths = []
    with sw.no_grad():
        for _ in range(2):
            t = sw.move(Tensor(CPU(n, empty=True), 0, Layout(Shape(n), Stride(1))), FileBacked())
            d = str(t.carrier.path.parent)
            paths.append(t.carrier.path)
            back = sw.move(t, CPU(n, empty=True))
    _C._fault_wait_paused()  # the background close stopped before closing them
    before = held(d)
    gone = not any(p.exists() for p in paths)
"""


def run_python(*parts):
    return last_json(child_process.run_python(*parts, timeout=120))


@needs_faults
@needs_proc
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork()")
@pytest.mark.forks
def test_c23_released_storage_is_freed_before_fork_returns():
    out = run_python(PRELUDE, RELEASE_WITH_CLOSE_HELD, """
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.write(w, str(held(d)).encode())
            os._exit(0)
        os.close(w)
        child = int(os.read(r, 100))
        os.waitpid(pid, 0)
        parent = held(d)
        _C._fault_resume()
        print(json.dumps({"before": before, "gone": gone, "child": child, "parent": parent}))
    """)
    # released: the name is gone at once, the storage was still held ...
    assert out["before"] == 2 and out["gone"]
    # ... and fork() gave it back first: neither process holds it
    assert out["child"] == 0 and out["parent"] == 0


@needs_faults
@needs_proc
def test_c23_released_storage_is_freed_before_interpreter_exit():
    # The report is registered before strideweave is imported, so it runs
    # after strideweave's own exit hook, still inside the interpreter.
    out = run_python(PRELUDE, """
        import atexit
        state = {}
        atexit.register(lambda: print(json.dumps(dict(state, at_exit=held(state["d"])))))
    """, RELEASE_WITH_CLOSE_HELD, """
        state.update(d=d, before=before, gone=gone)
        # exit with the background close still stopped
    """)
    assert out["before"] == 2 and out["gone"]
    assert out["at_exit"] == 0


@needs_proc
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sets RLIMIT_NOFILE")
def test_c23_waiting_descriptors_never_cost_a_new_file_its_descriptor():
    # Released small files whose descriptors wait to be closed in a batch
    # must not make FileBacked() fail at the descriptor limit.
    out = run_python(PRELUDE, """
        import resource
        import strideweave as sw
        from strideweave import CPU, FileBacked, Layout, Shape, Stride, Tensor

        with sw.no_grad():
            for i in range(8):
                t = sw.move(Tensor(CPU(4, empty=True), 0, Layout(Shape(4), Stride(1))),
                            FileBacked())
                sw.move(t, CPU(4, empty=True))
        probe = FileBacked()
        d = str(probe.path.parent)
        waiting = held(d)
        top = max(int(fd) for fd in os.listdir("/proc/self/fd"))
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (top + 1, hard))
        made = [FileBacked() for _ in range(5)]
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        print(json.dumps({"waiting": waiting, "made": len(made), "left": held(d)}))
    """)
    assert out["waiting"] == 8  # batched: still open before the limit was hit
    assert out["made"] == 5 and out["left"] == 0


@needs_faults
@needs_proc
def test_c23_released_file_of_a_mebibyte_or_more_is_closed_before_release_returns():
    # release() gives a large file's storage back on the caller: freed in
    # the background it was still being returned while the next large write
    # ran. The background close is held, so only a close on the caller frees it.
    out = run_python(PRELUDE, """
        import strideweave as sw
        from strideweave import CPU, FileBacked, Layout, Shape, Stride, Tensor, _C

        n = 1 << 18  # 1 MiB of Float32
        _C._fault_inject("file_reclaim_pause")
        with sw.no_grad():
            t = sw.move(Tensor(CPU(n, empty=True), 0, Layout(Shape(n), Stride(1))), FileBacked())
        d = str(t.carrier.path.parent)
        path = t.carrier.path
        t.carrier.release()
        print(json.dumps({"held": held(d), "gone": not path.exists()}))
        _C._fault_resume()
    """)
    assert out["gone"] and out["held"] == 0


@needs_faults
@needs_proc
def test_c23_moved_large_source_is_freed_off_the_caller_and_before_the_next_file():
    # A move's released source of 1 MiB or more: the name is gone when the
    # move returns, its storage is freed in the background (the move's
    # caller does not pay for it), and a new file is made only once it is
    # freed, so the two never run side by side. The background close is
    # held: the new file's creation frees it itself.
    out = run_python(PRELUDE, """
        import strideweave as sw
        from strideweave import CPU, FileBacked, Layout, Shape, Stride, Tensor, _C

        n = 1 << 18  # 1 MiB of Float32
        _C._fault_inject("file_reclaim_pause")
        with sw.no_grad():
            t = sw.move(Tensor(CPU(n, empty=True), 0, Layout(Shape(n), Stride(1))), FileBacked())
            d = str(t.carrier.path.parent)
            path = t.carrier.path
            back = sw.move(t, CPU(n, empty=True))
        after_move = held(d)
        gone = not path.exists()
        fresh = FileBacked()
        after_new_file = held(d)
        print(json.dumps({"after_move": after_move, "gone": gone,
                          "after_new_file": after_new_file}))
        _C._fault_resume()
    """)
    assert out["gone"] and out["after_move"] == 1
    assert out["after_new_file"] == 0


@needs_faults
@needs_proc
def test_c23_large_read_runs_beside_a_pending_close_and_large_write_waits_for_it():
    # Freeing a moved source's storage is kept away from the next large
    # write (it slowed that write down), but a read does not wait for it:
    # waiting made every 1-4 MiB FileBacked -> CPU move pay for freeing the
    # previous move's source. The background close is held, so a close
    # shows up as done only if the caller did it while waiting.
    out = run_python(PRELUDE, """
        import strideweave as sw
        from strideweave import CPU, FileBacked, Layout, Shape, Stride, Tensor, _C

        n = 1 << 18  # 1 MiB of Float32
        def filled(v):
            c = CPU(1).new_like([v] * n)
            return sw.move(Tensor(c, 0, Layout(Shape(n), Stride(1))), FileBacked())
        with sw.no_grad():
            a, b = filled(1.0), filled(2.0)
            late = FileBacked()  # made now: creating a file waits for pending closes
            d = str(a.carrier.path.parent)
            _C._fault_inject("file_reclaim_pause")
            sw.move(a, CPU(n, empty=True))
            after_first = held(d)
            back = sw.move(b, CPU(n, empty=True))  # a 1 MiB read
            after_read = held(d)
            ok = back.carrier[0] == 2.0 and back.carrier[n - 1] == 2.0
            src = Tensor(CPU(1).new_like([3.0] * n), 0, Layout(Shape(n), Stride(1)))
            w = sw.move(src, late)  # a 1 MiB write
            after_write = held(d)
            ok = ok and w.carrier[n - 1] == 3.0
        print(json.dumps({"first": after_first, "read": after_read, "write": after_write,
                          "ok": bool(ok)}))
        _C._fault_resume()
    """)
    assert out["ok"]
    assert out["first"] == 1
    assert out["read"] == 2  # the read left the first source's close pending
    assert out["write"] == 0  # the large write closed both before writing
