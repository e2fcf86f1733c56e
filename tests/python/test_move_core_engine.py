"""Moves between CPU, Generic and FileBacked carriers run on the C core's move
engine (issue 17, step 3): a failure injected into the core's transfer
("move_transfer", a fault point only the core's engine has) fails them, with
the source live and unchanged and both carriers usable again; moves that must
call Python keep the binding's own path; interpreter exit waits for core moves
in flight, each committed with its values.
"""

import os
import subprocess
import sys
import textwrap

import pytest

import strideweave as sw
from strideweave import _C
from moves_for_tests import BIG, D, L, make_carrier, slot_values, values_of

needs_faults = pytest.mark.skipif(not _C._fault_injection_enabled(),
                                  reason="build without -Dfault_injection=true")

PAIRS = [("CPU", "FileBacked"), ("FileBacked", "CPU"), ("CPU", "CPU"),
         ("Generic", "CPU"), ("Generic", "FileBacked")]


def _pair_setup(pair, n):
    """Float32 values on a source of the pair's first kind, a Tensor over
    them, and a fresh destination of the second kind."""
    values = slot_values(D.Float32, n)
    src = make_carrier(pair[0], values, D.Float32)
    t = sw.Tensor(src, 0, L(n, 1))
    dst = sw.CPU(n) if pair[1] == "CPU" else sw.FileBacked()
    return values, src, t, dst


@needs_faults
@pytest.mark.parametrize("how", ["move", "move_async"])
@pytest.mark.parametrize("n", [16, BIG])  # on the caller, and on the core's pool
@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: "->".join(p))
def test_builtin_moves_run_on_the_core_engine(pair, n, how):
    values, src, t, dst = _pair_setup(pair, n)
    version = src.version
    _C._fault_inject("move_transfer", 0, 1)
    try:
        with pytest.raises(OSError, match="injected transfer failure"):
            if how == "move":
                sw.move(t, dst)
            else:
                sw.move_async(t, dst).wait()
    finally:
        _C._fault_clear()
    assert not src.is_released() and src.version == version
    assert src.is_mutable() and dst.is_mutable()  # neither is pending any more
    assert values_of(src) == values
    moved = sw.move(t, dst)  # the same move succeeds afterwards
    assert src.is_released() and moved.carrier is dst
    assert [moved[i] for i in range(n)] == values


@pytest.mark.parametrize("how", ["move", "move_async"])
@pytest.mark.parametrize("n", [16, BIG])  # on the caller, and on the core's pool
@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: "->".join(p))
def test_a_core_moved_source_keeps_no_view_of_its_storage(pair, n, how):
    # The core released the source at its commit; the binding then drops
    # only the object's views (issue 19): nothing of the storage is left to
    # read, a release after it has nothing to do, and a file source's file
    # is gone.
    values, src, t, dst = _pair_setup(pair, n)
    path = src.path if pair[0] == "FileBacked" else None
    moved = sw.move(t, dst) if how == "move" else sw.move_async(t, dst).wait()
    assert src.is_released() and src.size() == 0
    with pytest.raises(RuntimeError):
        src[0]
    src.release()  # idempotent: nothing left to free
    assert src.is_released() and src.size() == 0
    if path is not None:
        assert not path.exists()
    assert [moved[i] for i in range(n)] == values


@needs_faults
def test_python_carriers_keep_the_binding_path():
    n = 8
    values = slot_values(D.Float32, n)
    for kinds in [("Py", "CPU"), ("CPU", "Py")]:
        src = make_carrier(kinds[0], values, D.Float32)
        dst = make_carrier(kinds[1], [0.0] * n, D.Float32)
        _C._fault_inject("move_transfer", 0, 1)
        try:
            moved = sw.move(sw.Tensor(src, 0, L(n, 1)), dst)
        finally:
            _C._fault_clear()
        assert [moved[i] for i in range(n)] == values


def test_exit_waits_for_core_moves_in_flight(tmp_path):
    # A hook registered before strideweave is imported runs after its exit
    # drain: by then every dropped move has committed, values in place.
    script = textwrap.dedent("""
        import atexit
        handles = []
        def after_drain():
            ok = all(h.done for h in handles)
            ok = ok and all(h.wait()[(1 << 20) - 1] == 7.0 for h in handles)
            print("committed" if ok else "NOT committed", flush=True)
        atexit.register(after_drain)
        import strideweave as sw
        for i in range(16):
            c = sw.CPU(1 << 20)
            c[(1 << 20) - 1] = 7.0
            t = sw.Tensor(c, 0, sw.Layout(sw.Shape(1 << 20), sw.Stride(1)))
            handles.append(sw.move_async(t, sw.FileBacked()))
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=120, env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "committed", r.stderr
