"""TiledEvictable tiers of the built-in classes in roles the core does not keep
them in (Generic memory, a FileBacked primary, a BlockDeviceCarrier secondary):
the core reads and writes their tile stores itself, without calling back into
Python. Every step (reads, evictions, promotions, writes that promote, a
projection) leaves values, residency and version exactly as a TiledEvictable
over CPU tiers does."""

import gc

import pytest

import strideweave as sw
from strideweave import CPU, FileBacked, Generic

from loop_device import loop_device, loop_device_unavailable  # noqa: F401
from tiled_helpers import cpu_values, full_tensor, slots, states

N, TILE = 16, 4
VALUES = [0.25 + i for i in range(N)]


def file_values(values):
    f = FileBacked()
    f._allocate(len(values))
    for i, v in enumerate(values):
        f[i] = v
    return f


def same_steps(te, ref):
    """The same requests on both; after each, the same observable state."""
    def check():
        assert slots(te) == slots(ref)
        assert states(te) == states(ref)
        assert te.version == ref.version

    check()
    te.evict(sw.TileSet([(0,), (2,)]))
    ref.evict(sw.TileSet([(0,), (2,)]))
    check()
    for t in (te, ref):
        t[1] = 100.0  # a secondary tile: promoted first
        t[13] = -3.5  # a primary tile
    check()
    every = sw.TileSet([(i,) for i in range(N // TILE)])
    te.evict(every)
    ref.evict(every)
    check()
    te.promote(every)
    ref.promote(every)
    check()
    selection = sw.TileSelection([[3, 1]])
    a = te.project(full_tensor(te), selection).wait(10)
    b = ref.project(full_tensor(ref), selection).wait(10)
    assert [a.carrier[i] for i in range(a.carrier.size())] == \
        [b.carrier[i] for i in range(b.carrier.size())]
    check()


@pytest.mark.parametrize("tiers", [
    pytest.param(lambda: (Generic(VALUES), CPU(0)), id="generic-primary"),
    pytest.param(lambda: (file_values(VALUES), Generic([])), id="file-primary-generic-secondary"),
    pytest.param(lambda: (cpu_values(VALUES), Generic([])), id="generic-secondary"),
])
def test_built_in_tiers_in_other_roles_behave_as_cpu_tiers(tiers):
    primary, secondary = tiers()
    te = sw.TiledEvictable(primary, secondary, (N // TILE,), (TILE,))
    ref = sw.TiledEvictable(cpu_values(VALUES), CPU(0), (N // TILE,), (TILE,))
    same_steps(te, ref)
    te.release()
    # A full primary held its tiles in place: the writes through the
    # TiledEvictable reached it until the tiles left (released now).
    assert primary.is_released()


def test_block_device_secondary_behaves_as_a_cpu_tier(loop_device):  # noqa: F811
    dev = sw.BlockDevice(loop_device)
    te = sw.TiledEvictable(cpu_values(VALUES), dev.allocate(0), (N // TILE,), (TILE,))
    ref = sw.TiledEvictable(cpu_values(VALUES), CPU(0), (N // TILE,), (TILE,))
    same_steps(te, ref)
    te.release()
    del te
    gc.collect()
    dev.close()
