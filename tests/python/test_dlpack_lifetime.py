"""Capsule lifetime (seed: "A capsule keeps its producer alive but not
released storage"): the strong reference to the Tensor, the used_ rename,
exactly-once deleter, deleter from another thread without the GIL, pending
exceptions, release while a capsule is outstanding, leak churn, and exit with
capsules alive."""

import ctypes
import gc
import subprocess
import sys
import textwrap
import threading
import tracemalloc
import weakref

import numpy as np
import pytest
import torch

import strideweave as sw
from strideweave import _C
from carriers_for_tests import capsule_get_pointer as _get_pointer
from carriers_for_tests import capsule_is_valid as _is_valid
from carriers_for_tests import capsule_set_name as _set_name
from measure import settled_live_bytes

USED_LEGACY = b"used_dltensor"
USED_VERSIONED = b"used_dltensor_versioned"
FOREIGN_NAME = b"not_a_dltensor"

DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)  # called with the GIL released


def deleter_of(ptr, versioned):
    # Versioned: deleter at byte 16; legacy: after the 48-byte DLTensor and manager_ctx.
    offset = 16 if versioned else 56
    return DELETER(ctypes.c_void_p.from_address(ptr + offset).value)


def fresh_tensor(n=8, offset=1, values=True):
    c = sw.CPU(n + offset)
    if values:
        for i in range(n + offset):
            c[i] = float(i) * 1.5
    return sw.Tensor(c, offset, sw.Layout(sw.Shape([2, [2, n // 4]]), sw.Stride([1, [2, 4]])))


class Counter:
    def __init__(self):
        self.n = 0

    def __call__(self):
        self.n += 1


def watch(t):
    counter = Counter()
    weakref.finalize(t, counter)
    return counter


# ---- strong reference --------------------------------------------------------------


@pytest.mark.parametrize("consumer", ["numpy", "torch"])
def test_consumer_outlives_every_strideweave_reference(consumer):
    # Seed: "Outlive the producing expression"
    def imported():
        t = fresh_tensor()
        expected = [t[i] for i in range(t.size())]
        arr = np.from_dlpack(t) if consumer == "numpy" else torch.from_dlpack(t)
        return arr, expected, watch(t)

    arr, expected, gone = imported()
    gc.collect()
    assert gone.n == 0  # the capsule's manager_ctx keeps the Tensor alive
    values = np.ravel(arr, order="F").tolist() if consumer == "numpy" else arr.permute(2, 1, 0).reshape(-1).tolist()
    assert values == expected
    del arr
    gc.collect()
    assert gone.n == 1  # the consumer's deleter dropped it, once


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_unconsumed_capsule_runs_deleter_once(max_version):
    # Seed: "Free once for an unconsumed capsule"
    t = fresh_tensor()
    gone = watch(t)
    live = settled_live_bytes()
    cap = t.__dlpack__(max_version=max_version)
    assert _C._live_bytes() > live
    del t
    gc.collect()
    assert gone.n == 0
    del cap
    assert gone.n == 1
    assert _C._live_bytes() < live  # the Tensor's carrier went too


@pytest.mark.parametrize("versioned", [False, True])
def test_used_capsule_destructor_does_nothing_consumer_deleter_frees(versioned):
    # DLPack ownership transfer: after the used_ rename the capsule leaves the
    # managed tensor alone and whoever renamed it calls the deleter, here from
    # another thread with the GIL released (ctypes drops it for the call).
    t = fresh_tensor()
    gone = watch(t)
    cap = t.__dlpack__(max_version=(1, 0) if versioned else None)
    name = b"dltensor_versioned" if versioned else b"dltensor"
    ptr = _get_pointer(cap, name)
    assert _set_name(cap, USED_VERSIONED if versioned else USED_LEGACY) == 0
    del t, cap
    gc.collect()
    assert gone.n == 0  # destructor of a used_ capsule did not run the deleter
    worker = threading.Thread(target=deleter_of(ptr, versioned), args=(ptr,))
    worker.start()
    worker.join()
    assert gone.n == 1


def test_capsule_renamed_to_foreign_name_reports_and_leaves_managed_tensor(monkeypatch):
    # Neither ours nor used_: the destructor must not guess. It reports through
    # sys.unraisablehook and leaves the managed tensor to whoever renamed it.
    t = fresh_tensor()
    gone = watch(t)
    cap = t.__dlpack__(max_version=(1, 0))
    ptr = _get_pointer(cap, b"dltensor_versioned")
    assert _set_name(cap, FOREIGN_NAME) == 0
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append((u.exc_type, str(u.exc_value))))
    del t, cap
    gc.collect()
    assert len(seen) == 1 and seen[0][0] is RuntimeError
    assert "foreign name not_a_dltensor" in seen[0][1]
    assert gone.n == 0
    deleter_of(ptr, True)(ptr)  # the renaming party cleans up
    assert gone.n == 1


def test_deleter_preserves_pending_exception():
    # The capsule is a temporary dropped while int()'s TypeError is pending;
    # its destructor runs the deleter, which drops the last Tensor reference.
    counters = []

    def exported():
        t = fresh_tensor()
        counters.append(watch(t))
        return t.__dlpack__(max_version=(1, 0))

    with pytest.raises(TypeError, match="PyCapsule"):
        int(exported())
    assert counters[0].n == 1
    with pytest.raises(TypeError, match="PyCapsule"):
        float(fresh_tensor().__dlpack__())


def test_release_succeeds_while_capsule_outstanding():
    # Seed: "Do not outlive released storage" (C-15: allowed while a capsule is outstanding)
    t = fresh_tensor()
    cap = t.__dlpack__(max_version=(1, 0))
    arr = np.from_dlpack(t)
    held = t.carrier.pointer()
    assert arr.__array_interface__["data"][0] == held + 4
    version = t.carrier.version
    assert t.carrier.release() is None
    assert t.carrier.is_released()
    assert t.carrier.pointer() == 0  # the exported buffer no longer addresses held storage
    assert t.carrier.version == version
    with pytest.raises(BufferError, match="non-null"):
        t.__dlpack__()
    del cap, arr  # deleters still run fine; nobody reads the freed memory
    gc.collect()


def test_export_and_import_keep_refcount_and_live_bytes_flat():
    t = fresh_tensor()
    base_refs = sys.getrefcount(t)
    live = settled_live_bytes()
    for _ in range(100):
        a = np.from_dlpack(t)
        x = torch.from_dlpack(t)
        cap = t.__dlpack__()
        assert sys.getrefcount(t) == base_refs + 3
        del a, x, cap
    assert sys.getrefcount(t) == base_refs
    assert _C._live_bytes() == live


def test_100000_export_drop_cycles_flat():
    # conventions.md leak test: tracemalloc for Python objects, _live_bytes for C.
    t = fresh_tensor()
    dl = t.__dlpack__
    for _ in range(1000):
        dl()
        dl(max_version=(1, 0))
    gc.collect()
    live = _C._live_bytes()
    refs = sys.getrefcount(t)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(50_000):
            dl()
            dl(max_version=(1, 0), dl_device=(1, 0), copy=False)
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert after - before < 64 * 1024  # a leaked capsule per cycle would be megabytes
    assert _C._live_bytes() == live
    assert sys.getrefcount(t) == refs


def test_100000_numpy_import_cycles_flat():
    t = fresh_tensor()
    for _ in range(1000):
        np.from_dlpack(t)
    live = settled_live_bytes()
    refs = sys.getrefcount(t)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(100_000):
            np.from_dlpack(t)
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert after - before < 64 * 1024
    assert _C._live_bytes() == live
    assert sys.getrefcount(t) == refs


def test_failed_exports_leave_nothing():
    t = fresh_tensor()
    live = settled_live_bytes()
    refs = sys.getrefcount(t)
    for _ in range(1000):
        for kwargs in ({"copy": True}, {"dl_device": (2, 0)}, {"max_version": (-1, 0)}):
            with pytest.raises((BufferError, ValueError)):
                t.__dlpack__(**kwargs)
    assert _C._live_bytes() == live
    assert sys.getrefcount(t) == refs


@pytest.mark.skipif(not _C._fault_injection_enabled(), reason="needs -Dfault_injection=true")
@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_alloc_fault_is_memory_error_and_leaves_nothing(max_version):
    t = fresh_tensor()
    gone = watch(t)
    live = settled_live_bytes()
    refs = sys.getrefcount(t)
    _C._fault_inject("alloc")
    with pytest.raises(MemoryError, match="DLPack"):
        t.__dlpack__(max_version=max_version)
    _C._fault_clear()
    assert _C._live_bytes() == live
    assert sys.getrefcount(t) == refs
    assert capsule_ok(t.__dlpack__(max_version=max_version))
    del t
    assert gone.n == 1


def capsule_ok(cap):
    return bool(_is_valid(cap, b"dltensor") or _is_valid(cap, b"dltensor_versioned"))


# ---- interpreter exit ------------------------------------------------------------


EXIT_SCRIPT = textwrap.dedent(
    """
    import gc, threading, numpy as np, torch, strideweave as sw

    def tensor(n):
        c = sw.CPU(n)
        for i in range(n):
            c[i] = float(i)
        return sw.Tensor(c, 0, sw.Layout(sw.Shape([n]), sw.Stride([1])))

    keep = []
    for n in range(1, 50):
        t = tensor(n)
        keep.append(t.__dlpack__())
        keep.append(t.__dlpack__(max_version=(1, 0)))
        keep.append(np.from_dlpack(t))
        keep.append(torch.from_dlpack(t))
    # a reference cycle holding capsules and imported arrays, collected late
    cycle = [tensor(4).__dlpack__(max_version=(2, 0)), np.from_dlpack(tensor(3))]
    cycle.append(cycle)
    # a thread-owned consumer that is still alive at exit
    stop = threading.Event()
    def hold():
        arr = np.from_dlpack(tensor(5))
        stop.wait()
    th = threading.Thread(target=hold, daemon=True)
    th.start()
    del cycle
    gc.disable()
    print("exiting", len(keep))
    """
)


@pytest.mark.parametrize("how", ["normal", "sys_exit"])
def test_process_exit_with_live_capsules_does_not_crash(how):
    # Seed: "Dropping the producer's reference SHALL be safe during interpreter finalization"
    script = EXIT_SCRIPT + ("\nimport sys; sys.exit(0)\n" if how == "sys_exit" else "")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "exiting 196" in proc.stdout
    assert "Fatal" not in proc.stderr and "Segmentation" not in proc.stderr


def test_concurrent_exports_and_imports_from_threads():
    # Consumers drop their arrays (and so call our deleter) on many threads.
    t = fresh_tensor()
    refs = sys.getrefcount(t)
    live = settled_live_bytes()
    expected = [t[i] for i in range(t.size())]
    errors = []
    start = threading.Barrier(4)

    def work():
        try:
            start.wait()
            for k in range(2000):
                a = np.from_dlpack(t)
                if k % 500 == 0 and np.ravel(a, order="F").tolist() != expected:
                    errors.append("values")
                cap = t.__dlpack__(max_version=(1, 0))
                del a, cap
        except Exception as exc:  # reported below
            errors.append(repr(exc))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert sys.getrefcount(t) == refs
    assert _C._live_bytes() == live
