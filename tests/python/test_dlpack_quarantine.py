"""C-15a: arrays that outlive their storage are quarantined.

A NumPy or PyTorch array made with from_dlpack may outlive the carrier's
storage: release(), a move that releases its source, or an Evictable's
evict() all free it while the array can still reach it. Reads and writes
through such a stale array must never reach another tensor, the allocator or
the process; the memory goes back when the array is gone, and
`_C._live_bytes()` counts the quarantined block until then.
"""

import gc
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import strideweave as sw
from strideweave import CPU, Evictable, Layout, Shape, Stride, Tensor, _C
from measure import settled_live_bytes

CONSUMERS = ["numpy", "torch", "asarray"]  # np.asarray aliases through DLPack too
HOWS = ["release", "move", "evict"]


def flat(carrier, n):
    return Tensor(carrier, 0, Layout(Shape([n]), Stride([1])))


def filled(n, value):
    t = flat(CPU(n), n)
    np.from_dlpack(t)[:] = value
    return t


def values(t):
    return np.from_dlpack(t).copy()


def importer(consumer):
    return {"numpy": np.from_dlpack, "torch": torch.from_dlpack, "asarray": np.asarray}[consumer]


def stale_write(arr, value=-7.0):
    if isinstance(arr, np.ndarray):
        arr[...] = value
        return float(arr.sum())  # reads through it too
    arr.fill_(value)
    return float(arr.sum())


def free_under(how, t, n):
    """Free t's storage the way `how` does; returns what holds its values now."""
    if how == "release":
        t.carrier.release()
        kept = None
    elif how == "move":
        kept = sw.move(t, CPU(n))
    else:
        kept = Evictable(t.carrier, CPU(n))
        kept.evict()
    assert t.carrier.is_released()
    return kept


def moved_values(how, kept):
    if how == "move":
        return values(kept)
    if how == "evict":
        kept.promote()  # back into a fresh primary
        return np.array([kept.get_value(i) for i in range(kept.size())], dtype=np.float32)
    return None


@pytest.mark.parametrize("n", [1, 1000, 300_000], ids=["one", "small", "large"])
@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("consumer", CONSUMERS)
def test_c15a_stale_writes_never_reach_other_tensors(consumer, how, n):
    # The first large move, and the first eviction, set up what they keep
    # for the process (copy workers, the eviction's own lasting state); do
    # the same path once before taking the baseline.
    sw.move(filled(n, 0.0), CPU(n))
    warm = free_under(how, filled(n, 0.0), n)
    moved_values(how, warm)
    del warm
    live = settled_live_bytes()
    t = filled(n, 1.5)
    neighbours = [filled(n, 100.0 + i) for i in range(4)]
    stale = importer(consumer)(t)
    kept = free_under(how, t, n)
    # Churn: allocations of the same and other sizes while the stale array
    # writes; any reuse of the freed range shows up as a changed value.
    churn = []
    for i in range(60):
        size = (n, n, max(1, n // 2), n + 16)[i % 4]
        c = filled(size, float(i))
        if i % 3:
            churn.append((c, float(i)))
        else:
            del c  # freed again: its range goes back to the allocator
        stale_write(stale, -7.0 - i)
    for i, other in enumerate(neighbours):
        assert (values(other) == 100.0 + i).all()
    for c, v in churn:
        assert (values(c) == v).all()
    if how != "release":
        assert (moved_values(how, kept) == 1.5).all()  # the values that moved are intact
    # The quarantined block is still counted while the array can reach it ...
    del churn, c, neighbours, other
    gc.collect()
    held = _C._live_bytes()
    del stale
    gc.collect()
    # ... and goes with the array's deleter.
    assert held - _C._live_bytes() >= 4 * n
    del kept, t
    assert settled_live_bytes() == live


@pytest.mark.parametrize("versioned", [False, True], ids=["legacy", "versioned"])
def test_c15a_unconsumed_capsule_after_release_frees_the_block(versioned):
    live = settled_live_bytes()
    t = filled(5000, 2.0)
    cap = t.__dlpack__(max_version=(1, 0) if versioned else None)
    t.carrier.release()
    assert _C._live_bytes() - live >= 5000 * 4  # quarantined, not freed
    del cap  # never consumed: the capsule destructor runs the deleter
    del t
    assert settled_live_bytes() == live


def test_c15a_several_arrays_keep_the_block_until_the_last_is_gone():
    live = settled_live_bytes()
    t = filled(4096, 3.0)
    arrays = [np.from_dlpack(t), torch.from_dlpack(t), np.from_dlpack(t)]
    t.carrier.release()
    while arrays:
        stale_write(arrays[-1])
        assert _C._live_bytes() - live >= 4096 * 4
        arrays.pop()
        gc.collect()
    del t
    assert settled_live_bytes() == live


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_c15a_quarantined_large_block_returns_its_memory():
    # The physical memory goes back at release even though the array lives:
    # the pages are replaced by fresh zero pages, the range stays reserved.
    n = 16 << 20  # 64 MiB of Float32
    t = flat(CPU(n), n)
    arr = np.from_dlpack(t)
    arr[:] = 1.0  # every page resident
    before = _rss_bytes()
    t.carrier.release()
    after = _rss_bytes()
    assert before - after >= 48 << 20
    del arr
    gc.collect()


README_FLOW = textwrap.dedent(
    """
    import gc, numpy as np, torch, strideweave as sw
    from strideweave import CPU, Layout, Shape, Stride, Tensor

    def flat(n, value):
        t = Tensor(CPU(n), 0, Layout(Shape([n]), Stride([1])))
        np.from_dlpack(t)[:] = value
        return t

    n = 1000
    broken = []
    for how in ("release", "move"):
        for consumer in (np.from_dlpack, torch.from_dlpack):
            t = flat(n, 1.0)
            a = consumer(t)
            if how == "release":
                t.carrier.release()
            else:
                m = sw.move(t, CPU(n))
            later = [flat(n, float(i)) for i in range(50)]
            a[...] = -7.0
            for i, o in enumerate(later):
                if not (np.from_dlpack(o) == float(i)).all():
                    broken.append((how, i))
            del a, later, t
            gc.collect()
    print("broken", broken, flush=True)
    """
)


def test_c15a_readme_flow_in_a_fresh_process_leaves_later_tensors_intact():
    # Before quarantine this corrupted later tensors or aborted the process
    # (double free or corruption); run it in its own process to see either.
    proc = subprocess.run([sys.executable, "-c", README_FLOW], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == "broken []\n"
