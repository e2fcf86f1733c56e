"""Fork safety of block devices (issue 16 follow-up, architecture.md
"Movement": fork): a pool thread holding a block device's lock mid-transfer
when the process forks does not deadlock the child on that device. The
child ends the inherited move like any other, its carriers are no longer
pending, and new transfers on the same device run.

Runs on a real loop device (loop_device.py; skips with the reason where
none can be made) in a fresh interpreter with a real os.fork(). The pool
thread is stopped inside the transfer, with the device lock held, at a
pause point of the fault-injection build; the parent forks once it is
there, and lets it go on afterwards. Nothing sleeps."""

import pytest

from strideweave import _C
from loop_device import loop_device  # noqa: F401
import child_process
from child_process import last_json

pytestmark = [pytest.mark.skipif(not _C._fault_injection_enabled(),
                                 reason="build without -Dfault_injection=true"),
              pytest.mark.forks]


def run_python(code, timeout=120, **extra):
    return last_json(child_process.run_python(code, timeout=timeout, **extra))


# The move in flight at fork: queued on the worker pool (move_async), or a
# synchronous forward() of the shipped operation on a thread of its own.
STARTERS = {
    "pool": """
        def start(t, dst):
            h = sw.move_async(t, dst)
            return h.wait
    """,
    "thread": """
        import threading

        def start(t, dst):
            out = {}

            def run():
                try:
                    out["result"] = sw.CpuToBlockDeviceMoveOperation().forward(t, dst)
                except Exception as e:  # the parent's report shows it
                    out["error"] = e

            th = threading.Thread(target=run)
            th.start()

            def wait():
                th.join()
                if "error" in out:
                    raise out["error"]
                return out["result"]
            return wait
    """,
}


@pytest.mark.parametrize("starter", sorted(STARTERS))
def test_forked_child_can_use_a_block_device_whose_lock_was_held_at_fork(loop_device, starter):
    # Without the child's fresh device lock the child hangs on its first
    # use of the device (the alarm ends it and the report is missing).
    report = run_python("""
        import json, os, signal
        import strideweave as sw""" + STARTERS[starter] + """
        from strideweave import _C

        def flat(c, n):
            return sw.Tensor(c, 0, sw.Layout(sw.Shape([n]), sw.Stride([1])))

        starter = os.environ["SW_TEST_STARTER"]
        dev = sw.BlockDevice(os.environ["SW_TEST_LOOP"])
        n = 64
        src = sw.CPU(n)
        for i in range(n):
            src[i] = float(i)
        dst = dev.allocate(n, empty=True)
        _C._fault_inject("blockdev_transfer_pause")
        wait = start(flat(src, n), dst)
        _C._fault_wait_paused()  # the pool thread holds the device lock now
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            signal.alarm(30)  # a child deadlocked on the device fails the test
            out = {}
            if starter == "pool":  # the thread's handle is not reachable here
                try:
                    wait()
                    out["wait"] = "returned"
                except RuntimeError as e:
                    out["wait"] = ("forked" if "in flight when the process forked" in str(e)
                                   else str(e))
            try:
                out["source_kept"] = not src.is_released() and src[n - 1] == n - 1.0
                small = sw.CPU(4)
                for i in range(4):
                    small[i] = 10.0 + i
                moved = sw.move(flat(small, 4), dev.allocate(4))  # takes the device lock
                out["moved"] = [moved.carrier[i] for i in range(4)]
                again = sw.move(flat(src, n), dst)  # dst is not pending any more
                out["again"] = again.carrier is dst and dst[n - 1] == n - 1.0
            except Exception as e:
                out["error"] = repr(e)
            os.write(w, json.dumps(out).encode())
            os._exit(0)
        os.close(w)
        data = os.read(r, 65536)
        os.waitpid(pid, 0)
        _C._fault_clear()
        _C._fault_resume()
        moved = wait()
        print(json.dumps({"child": json.loads(data) if data else None,
                          "parent": moved.carrier is dst and dst[n - 1] == n - 1.0}))
    """, SW_TEST_LOOP=loop_device, SW_TEST_STARTER=starter)
    expected = {"source_kept": True, "moved": [10.0, 11.0, 12.0, 13.0], "again": True}
    if starter == "pool":
        expected["wait"] = "forked"
    assert report["child"] == expected
    assert report["parent"] is True
