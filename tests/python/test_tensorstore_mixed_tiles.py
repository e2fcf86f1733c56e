"""A projection whose tiles are kept in stores of different kinds: a
TensorStore tier held in place, while the tiles evicted to it went to other
stores (local FileBacked files, or a carrier written in Python). Each kind is
read its own way in one projection: the TensorStore chunks straight into
their places in the destination, started together; the other tiles where
they are. The values come out in request order, and a damaged chunk fails
the projection as a whole with residency unchanged."""

import numpy as np
import pytest

import strideweave as sw

tst = pytest.importorskip("strideweave.tensorstore",
                          reason="the tensorstore package cannot be imported")
from strideweave.carriers.move import register_move_operation  # noqa: E402
from test_tensorstore import record_reads  # noqa: E402
from tiled_helpers import ListCarrier  # noqa: E402

GRID, TILE = 8, 16
N = GRID * TILE


def L(n):
    return sw.Layout(sw.Shape(n), sw.Stride(1))


def local_file(size):
    f = sw.FileBacked()
    f._allocate(size)
    return f


class EvictsToFiles(tst.TensorStoreCarrier):
    """A TensorStore array whose evicted tiles go to local files."""

    def allocate_like(self, size, *, mutable=True, dtype=None, empty=False):
        return local_file(size)


class EvictsToSlots(tst.TensorStoreCarrier):
    """A TensorStore array whose evicted tiles go to a Python store."""

    def allocate_like(self, size, *, mutable=True, dtype=None, empty=False):
        return ListCarrier([0.0] * size)


def engine_moves(cls):
    """The TensorStore engine's moves with CPU, for the array class `cls`."""
    read = type("Read", (tst.TensorStoreToCpuMoveOperation,), {"source_class": cls})
    write = type("Write", (tst.CpuToTensorStoreMoveOperation,), {"destination_class": cls})
    register_move_operation(cls, sw.CPU, read)
    register_move_operation(sw.CPU, cls, write)


engine_moves(EvictsToFiles)
engine_moves(EvictsToSlots)


def spec(tmp_path):
    return {"driver": "zarr3", "kvstore": {"driver": "file", "path": f"{tmp_path}/a/"}}


def mixed(tmp_path, cls):
    """Every tile in place in the full array holding 0..N-1, except tiles 1
    and 4: promoted, written (+1000) and evicted again into `cls`'s stores."""
    t = sw.Tensor(sw.CPU(N), 0, L(N))
    np.from_dlpack(t)[:] = np.arange(N, dtype=np.float32)
    sw.move(t, tst.TensorStoreCarrier.create(spec(tmp_path), 0, chunk_slots=TILE)).carrier.release()
    te = sw.TiledEvictable(sw.CPU(0), cls.open(spec(tmp_path)), (GRID,), (TILE,))
    moved = sw.TileSet([(1,), (4,)])
    te.promote(moved)
    for k in (1, 4):
        for i in range(k * TILE, (k + 1) * TILE):
            te[i] = i + 1000.0
    te.evict(moved)
    return te


def expected(picks):
    return np.concatenate([np.arange(k * TILE, (k + 1) * TILE) + (1000 if k in (1, 4) else 0)
                           for k in picks]).astype(np.float32)


@pytest.mark.parametrize("cls", [EvictsToFiles, EvictsToSlots], ids=["files", "python"])
def test_chunks_are_read_into_place_beside_tiles_kept_elsewhere(tmp_path, monkeypatch, cls):
    te = mixed(tmp_path, cls)
    kinds = {type(te.secondary)}
    assert te.secondary_tiles == sw.TileSet([(k,) for k in range(GRID)])
    picks = [6, 1, 3, 4, 0]
    reads = record_reads(monkeypatch)
    proj = te.project(sw.Tensor(te, 0, L(N)), sw.TileSelection([picks])).wait()
    assert np.array_equal(np.from_dlpack(proj), expected(picks))
    # The chunks of tiles 0, 3 and 6 (held in the array) started together in
    # tile order, each straight into its run of the result; tiles 1 and 4 are
    # read where they are.
    assert [(d is proj.carrier, o, c) for d, o, c in reads] == \
        [(True, 4 * TILE, TILE), (True, 2 * TILE, TILE), (True, 0, TILE)]
    assert {type(te.secondary)} == kinds and len(te.secondary_tiles.coordinates) == GRID


@pytest.mark.parametrize("cls", [EvictsToFiles, EvictsToSlots], ids=["files", "python"])
def test_a_damaged_chunk_fails_the_mixed_projection_and_keeps_residency(tmp_path, cls):
    te = mixed(tmp_path, cls)
    (tmp_path / "a" / "c" / "3").write_bytes(b"xyz")       # tile 3's chunk, damaged
    with pytest.raises(OSError, match=f"TensorStore file://{tmp_path}/a/"):
        te.project(sw.Tensor(te, 0, L(N)), sw.TileSelection([[6, 1, 3, 4]])).wait()
    assert len(te.secondary_tiles.coordinates) == GRID and te.primary_tiles == sw.TileSet()
    proj = te.project(sw.Tensor(te, 0, L(N)), sw.TileSelection([[6, 1, 4]])).wait()
    assert np.array_equal(np.from_dlpack(proj), expected([6, 1, 4]))
