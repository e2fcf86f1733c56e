"""A TiledEvictable's first copy of a tile still held in place by a tier
that was full at construction (TE-2 footprint: tile[0]-long runs strided
over the logical shape) between a host tier and FileBacked: values exact,
a handful of system calls per tile instead of one per slot, and a failure
in the middle of the copy leaves every tile as it was (TE-7)."""

import itertools

import numpy as np
import pytest

import strideweave as sw
from strideweave import CPU, FileBacked, TileSet, _C
from tiled_helpers import F, numbered, slots, states

I = sw.DType.Int32

GEOMETRIES = [
    ((4,), (8,)),          # 1-D: every tile is one run
    ((3, 2), (4, 5)),      # 2-D: one run per tile column
    ((1, 3), (6, 2)),      # tile[0] spans axis 0: a tile's runs merge into one
    ((2, 3, 2), (3, 2, 4)),  # 3-D
]

fault = pytest.mark.skipif(not _C._fault_injection_enabled(),
                           reason="needs the fault-injection build")


def every_tile(grid):
    return [tuple(reversed(c)) for c in itertools.product(*[range(g) for g in reversed(grid)])]


def some_tiles(grid):
    tiles = every_tile(grid)
    return tiles[::2] if len(tiles) > 1 else tiles


def size_of(grid, tile):
    return int(np.prod(grid) * np.prod(tile))


def file_full(grid, tile, dtype=F):
    """A TiledEvictable whose secondary FileBacked is full at construction
    (slot i holds 1 + i) and whose primary is empty."""
    n = size_of(grid, tile)
    sec = FileBacked(dtype=dtype).new_like([1 + i for i in range(n)], dtype=dtype)
    return sw.TiledEvictable(CPU(0, dtype=dtype), sec, grid, tile)


def runs_per_tile(grid, tile):
    """Contiguous runs of one tile in the full footprint (merged when the
    tile spans axis 0)."""
    if grid[0] == 1:
        return 1
    return int(np.prod(tile[1:]))


@pytest.mark.parametrize("grid,tile", GEOMETRIES)
def test_te7_first_evict_from_full_host_primary_to_file_is_exact(grid, tile):
    te = numbered(grid, tile, secondary=FileBacked())
    before = slots(te)
    chosen = some_tiles(grid)
    te.evict(TileSet(chosen))
    assert te.secondary_tiles == TileSet(chosen)
    assert slots(te) == before
    te.promote(TileSet(chosen))
    assert te.secondary_tiles == TileSet([])
    assert slots(te) == before


@pytest.mark.parametrize("grid,tile", GEOMETRIES)
@pytest.mark.parametrize("dtype", [F, I])
def test_te7_first_promote_from_full_file_secondary_is_exact(grid, tile, dtype):
    te = file_full(grid, tile, dtype)
    before = slots(te)
    assert before == [1 + i for i in range(size_of(grid, tile))]
    chosen = some_tiles(grid)
    te.promote(TileSet(chosen))
    assert te.primary_tiles == TileSet(chosen)
    assert slots(te) == before
    te.evict(TileSet(chosen))  # back to private FileBacked storage
    assert slots(te) == before
    te.promote(TileSet(every_tile(grid)))
    assert slots(te) == before


def test_te7_int32_full_host_primary_to_file_keeps_exact_integers():
    n = 4 * 6
    prim = CPU(n, dtype=I)
    for i in range(n):
        prim[i] = (1 << 31) - 1 - i
    te = sw.TiledEvictable(prim, FileBacked(dtype=I), (2, 2), (2, 3))
    before = slots(te)
    te.evict(TileSet([(1, 0), (0, 1)]))
    assert slots(te) == before


@fault
@pytest.mark.parametrize("grid,tile", GEOMETRIES)
def test_te7_first_evict_writes_each_tile_in_one_call(grid, tile):
    # One pwritev per tile: a fault armed after as many writes as tiles
    # never fires (the slot-by-slot copy wrote once per slot).
    te = numbered(grid, tile, secondary=FileBacked())
    chosen = some_tiles(grid)
    _C._fault_inject("pwrite", len(chosen), 1)
    try:
        te.evict(TileSet(chosen))
    finally:
        _C._fault_clear()
    assert te.secondary_tiles == TileSet(chosen)


@fault
@pytest.mark.parametrize("grid,tile", GEOMETRIES)
def test_te7_first_promote_reads_each_run_in_one_call(grid, tile):
    te = file_full(grid, tile)
    chosen = some_tiles(grid)
    _C._fault_inject("pread", len(chosen) * runs_per_tile(grid, tile), 1)
    try:
        te.promote(TileSet(chosen))
    finally:
        _C._fault_clear()
    assert te.primary_tiles == TileSet(chosen)


@fault
@pytest.mark.parametrize("skip", [0, 1, 2])
def test_te7_fault_mid_first_evict_to_file_leaves_every_tile_unchanged(skip):
    te = numbered((3, 2), (4, 5), secondary=FileBacked())
    te.evict(TileSet([(2, 1)]))
    before_states, before = states(te), slots(te)
    chosen = TileSet([(0, 0), (1, 0), (2, 0)])
    _C._fault_inject("pwrite", skip, 1)
    try:
        with pytest.raises(OSError, match="injected"):
            te.evict(chosen)
    finally:
        _C._fault_clear()
    assert states(te) == before_states and slots(te) == before
    te.evict(chosen)  # retryable
    assert slots(te) == before


@fault
@pytest.mark.parametrize("skip", [0, 1, 2])
def test_te7_fault_mid_first_promote_from_file_leaves_every_tile_unchanged(skip):
    # 3 tiles of 5 runs each, held in place by the full file: each tile is read
    # with one preadv (its runs and the gaps between them), so the fault lands
    # on the first, the middle or the last tile's read.
    te = file_full((3, 2), (4, 5))
    before_states, before = states(te), slots(te)
    chosen = TileSet([(0, 0), (1, 0), (2, 1)])
    _C._fault_inject("pread", skip, 1)
    try:
        with pytest.raises(OSError, match="injected"):
            te.promote(chosen)
    finally:
        _C._fault_clear()
    assert states(te) == before_states and slots(te) == before
    te.promote(chosen)
    assert te.primary_tiles == chosen and slots(te) == before
