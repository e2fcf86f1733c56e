"""The core's completion thread keeps one Python thread state for its life.

Moves on the core's pool commit on its completion thread, which runs the
binding's commit (and the AwaitMove's done callbacks) with the GIL. The
thread makes its Python thread state at its first commit and keeps it: a
`threading.local` a done callback sets there is still there in the next
commit's callbacks (a thread state made per commit would start each commit
with an empty one). Commits keep their outcome and values either way, and a
forked child's completion thread makes its own.
"""

import os
import signal
import threading

import pytest

import strideweave as sw
from moves_for_tests import BIG, L, held


def moves_on_the_pool(k):
    """k moves of BIG slots (on the pool, not inline), held until all are submitted."""
    handles = []
    with held():
        for i in range(k):
            c = sw.CPU(BIG)
            c[BIG - 1] = float(i)
            handles.append(sw.move_async(sw.Tensor(c, 0, L(BIG, 1)), sw.FileBacked()))
    return handles


def test_done_callbacks_on_the_completion_thread_share_one_thread_state():
    local = threading.local()
    seen = []

    def count(handle):
        local.n = getattr(local, "n", 0) + 1
        seen.append((threading.get_ident(), local.n))

    with held():  # submitted and given callbacks before any of them runs
        handles = []
        for i in range(8):
            c = sw.CPU(BIG)
            c[BIG - 1] = float(i)
            h = sw.move_async(sw.Tensor(c, 0, L(BIG, 1)), sw.FileBacked())
            h.add_done_callback(count)
            handles.append(h)
    results = [h.wait() for h in handles]
    assert [r[BIG - 1] for r in results] == [float(i) for i in range(8)]
    assert len(seen) == 8
    main = threading.get_ident()
    on_core = [n for ident, n in seen if ident != main]
    assert on_core, "no callback ran on the core's completion thread"
    # One thread state: the counter of that thread's local keeps growing.
    assert on_core == list(range(on_core[0], on_core[0] + len(on_core)))
    assert max(on_core) > 1


@pytest.mark.forks
def test_a_forked_child_commits_on_its_own_completion_thread():
    for h in moves_on_the_pool(4):  # the parent's completion thread has its state
        h.wait()
    pid = os.fork()
    if pid == 0:
        code = 1
        # The parent waits without a bound: a child that hangs is ended by
        # the alarm (and the test fails) rather than hanging the suite.
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(60)
        try:
            got = [h.wait()[BIG - 1] for h in moves_on_the_pool(4)]
            code = 0 if got == [0.0, 1.0, 2.0, 3.0] else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    got = [h.wait()[BIG - 1] for h in moves_on_the_pool(4)]  # and the parent still commits
    assert got == [0.0, 1.0, 2.0, 3.0]
