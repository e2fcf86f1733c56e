"""Collecting a carrier that was never released frees its storage (C-15,
C-23): host memory goes back, a FileBacked's file is deleted, also for the
tiers of a collected Evictable (E-8) and for a move's destination. The
binding leaves that to the core carrier's last reference (issue 17): these
tests hold the behaviour the collection had when the binding released the
storage itself."""

import gc

import pytest

import strideweave as sw
from strideweave import CPU, FileBacked, Generic, Layout, Shape, Stride, Tensor, _C
from measure import settled_live_bytes

N = 1 << 16  # slots: 256 KiB of Float32, well above the allocator's noise


def host(kind):
    return CPU(N) if kind == "CPU" else Generic([0.5] * N)


@pytest.mark.parametrize("kind", ["CPU", "Generic"])
def test_c15_collected_host_carrier_frees_its_storage(kind):
    before = settled_live_bytes()
    c = host(kind)
    c[N - 1] = 2.0
    assert _C._live_bytes() >= before + 4 * N
    del c
    assert _C._live_bytes() == before


def test_c15_host_carrier_kept_by_a_cycle_frees_its_storage_when_collected():
    before = settled_live_bytes()
    cycle = [CPU(N)]
    cycle.append(cycle)  # only the cyclic collector can free it
    del cycle
    gc.collect()
    assert _C._live_bytes() == before


def test_c23_collected_move_destination_deletes_its_file():
    src = Tensor(CPU(1).new_like([1.5] * 8), 0, Layout(Shape(8), Stride(1)))
    f = FileBacked()
    moved = sw.move(src, f)
    path = f.path
    assert path.exists() and moved.carrier is f
    del f, moved
    assert not path.exists()


@pytest.mark.parametrize("evicted", [False, True])
def test_e8_collected_unreleased_evictable_frees_both_tiers(evicted):
    before = settled_live_bytes()
    p = CPU(N)
    p[N - 1] = 3.0
    e = sw.Evictable(p, FileBacked())
    if evicted:
        e.evict()  # into a fresh FileBacked holding the values
    path = e.secondary.path
    assert path.exists()
    del p, e
    gc.collect()
    assert not path.exists()
    assert _C._live_bytes() == before


def test_e8_collected_evictable_leaves_a_tier_the_caller_keeps_usable():
    p = CPU(4)
    f = FileBacked()
    e = sw.Evictable(p, f)
    e.evict()
    e.promote()  # the primary is now a fresh one; f was released by the promote
    kept = e.primary
    del e
    gc.collect()
    assert not kept.is_released()
    kept[0] = 1.0
    assert kept[0] == 1.0
    assert not f.path.exists()
