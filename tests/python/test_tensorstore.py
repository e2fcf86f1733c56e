"""strideweave.tensorstore on the memory and file kvstores: the carrier's
entry points, moves with CPU through the framework's normal path, save/load
with the Layout in zarr attributes, the Evictable and TiledEvictable tiers,
and failures that end as OSError naming the store."""

import json
import os
import pathlib
import subprocess
import sys
import uuid

import numpy as np
import pytest

import strideweave as sw
from strideweave import DType as D

tst = pytest.importorskip("strideweave.tensorstore",
                          reason="the tensorstore package cannot be imported")
TensorStoreCarrier = tst.TensorStoreCarrier
ROOT = pathlib.Path(__file__).resolve().parents[2]


def L(shape, stride):
    return sw.Layout(sw.Shape(*shape) if isinstance(shape, tuple) else sw.Shape(shape),
                     sw.Stride(*stride) if isinstance(stride, tuple) else sw.Stride(stride))


def mem():
    return {"kvstore": {"driver": "memory", "path": f"{uuid.uuid4().hex}/"}}


def filespec(tmp_path, name="a"):
    return {"driver": "zarr3", "kvstore": {"driver": "file", "path": f"{tmp_path}/{name}/"}}


def cpu_tensor(values, layout=None, offset=0, dtype=D.Float32):
    values = list(values)
    layout = layout or L(len(values), 1)
    c = sw.CPU(offset + layout.cosize, dtype=dtype)
    np.from_dlpack(sw.Tensor(c, 0, L(c.size(), 1)))[offset:offset + len(values)] = values
    return sw.Tensor(c, offset, layout)


def span(tensor):
    c, o, n = tensor.carrier, tensor.offset, tensor.layout.cosize
    return [c[o + i] for i in range(n)]


def run_python(code, **env):
    stage = os.path.dirname(os.path.dirname(sw.__file__))
    full = {**os.environ, "PYTHONPATH": stage, **env}
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True,
                          text=True, timeout=120)


# ---- the optional extra -------------------------------------------------------


def test_import_strideweave_loads_no_tensorstore():
    out = run_python("import sys, strideweave; print('tensorstore' in sys.modules)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_import_without_the_engine_names_the_extra():
    out = run_python("import sys; sys.modules['tensorstore'] = None\n"
                     "import strideweave.tensorstore")
    assert out.returncode != 0
    assert "ImportError" in out.stderr and "strideweave[tensorstore]" in out.stderr


def test_extra_is_declared_and_the_test_deps_install_the_engine():
    text = (ROOT / "pyproject.toml").read_text()
    assert "[project.optional-dependencies]" in text and "tensorstore = [" in text
    make = (ROOT / "Makefile").read_text()
    deps = next(line for line in make.splitlines() if line.startswith("TEST_DEPS"))
    assert "tensorstore==0.1.86" in deps and "moto[server]" in deps and "boto3" in deps


# ---- create / open / slots / release ------------------------------------------------


@pytest.mark.parametrize("dtype, value, back", [(D.Float32, 0.1, float(np.float32(0.1))),
                                                (D.Int32, -7, -7)])
def test_create_makes_a_zeroed_array_with_working_slots(tmp_path, dtype, value, back):
    c = TensorStoreCarrier.create(filespec(tmp_path), 5, dtype=dtype, chunk_slots=2)
    assert c.size() == 5 and c.dtype() is dtype and c.chunk_slots == 2
    assert [c[i] for i in range(5)] == [0, 0, 0, 0, 0]
    c[3] = value
    assert c[3] == back and c.version == 1
    assert type(c[3]) is (float if dtype is D.Float32 else int)
    assert (tmp_path / "a" / "zarr.json").is_file()
    meta = json.loads((tmp_path / "a" / "zarr.json").read_text())
    assert meta["zarr_format"] == 3 and meta["shape"] == [5]
    assert meta["chunk_grid"]["configuration"]["chunk_shape"] == [2]


def test_slot_writes_are_checked_like_every_carrier():
    c = TensorStoreCarrier.create(mem(), 3, dtype=D.Int32)
    with pytest.raises(TypeError):
        c[0] = 1.5
    with pytest.raises(OverflowError):
        c[0] = 2**31
    with pytest.raises(IndexError):
        c[3] = 1
    assert c.version == 0 and c[0] == 0


def test_create_rejects_bad_arguments_before_touching_the_store(tmp_path):
    with pytest.raises(TypeError, match="dtype"):
        TensorStoreCarrier.create(filespec(tmp_path), 1, dtype="float32")
    with pytest.raises(ValueError, match="Float32 and Int32"):
        TensorStoreCarrier.create(filespec(tmp_path), 1, dtype=D.Bool)
    with pytest.raises(ValueError, match="zarr3"):
        TensorStoreCarrier.create({"driver": "n5", "kvstore": {"driver": "memory"}}, 1)
    with pytest.raises(ValueError, match="size"):
        TensorStoreCarrier.create(filespec(tmp_path), -1)
    with pytest.raises(TypeError, match="spec"):
        TensorStoreCarrier.create(42, 1)
    assert not (tmp_path / "a").exists()


def test_create_refuses_an_existing_array_and_open_reads_it(tmp_path):
    c = TensorStoreCarrier.create(json.dumps(filespec(tmp_path)), 4)
    c[2] = 5.0
    with pytest.raises(FileExistsError, match="already exists"):
        TensorStoreCarrier.create(filespec(tmp_path), 4)
    again = TensorStoreCarrier.open(filespec(tmp_path))
    assert again.size() == 4 and again[2] == 5.0


def test_open_of_a_missing_array_is_an_oserror_naming_the_store(tmp_path):
    with pytest.raises(OSError, match=f"file://{tmp_path}/missing/"):
        TensorStoreCarrier.open(filespec(tmp_path, "missing"))


def test_release_drops_the_handle_and_never_deletes_the_data(tmp_path):
    c = TensorStoreCarrier.create(filespec(tmp_path), 3)
    c[1] = 2.5
    c.release()
    assert c.is_released() and c.size() == 0 and c.store is None
    with pytest.raises(RuntimeError, match="released"):
        c[1]
    assert TensorStoreCarrier.open(filespec(tmp_path))[1] == 2.5


# ---- moves -----------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["memory", "file"])
def test_move_cpu_to_store_and_back_keeps_values_and_layout(tmp_path, where):
    spec = mem() if where == "memory" else filespec(tmp_path)
    layout = L((2, [3, 2]), (1, [2, 7]))               # hierarchical, gapped
    t = cpu_tensor([float(k) for k in range(layout.cosize)], L(layout.cosize, 1), offset=3)
    t = sw.Tensor(t.carrier, 3, layout)
    before = span(t)
    dst = TensorStoreCarrier.create(spec, 0, chunk_slots=4)   # empty: the move grows it
    r = sw.move(t, dst)
    assert r.carrier is dst and r.layout == layout and r.offset == 0
    assert dst.size() == layout.cosize and span(r) == before
    assert t.carrier.is_released()                 # the source is released at the commit
    assert type(r.autograd_ctx) is tst.CpuToTensorStoreMoveOperation
    back = sw.move(r, sw.CPU(layout.cosize))
    assert back.layout == layout and span(back) == before and dst.is_released()
    assert type(back.autograd_ctx) is tst.TensorStoreToCpuMoveOperation


def test_move_int32_and_a_prefix_span():
    t = cpu_tensor([1, -2, 3, 2**31 - 1], dtype=D.Int32)
    dst = TensorStoreCarrier.create(mem(), 10, dtype=D.Int32)   # larger than needed
    r = sw.move(t, dst)
    assert span(r) == [1, -2, 3, 2**31 - 1] and dst[4] == 0
    assert sw.move(r, sw.CPU(4, dtype=D.Int32)).tolist() == [1, -2, 3, 2**31 - 1]


def test_moves_are_registered_pairs_and_profiled():
    from strideweave.carriers.move import dispatch_move
    assert dispatch_move(sw.CPU, TensorStoreCarrier) is tst.CpuToTensorStoreMoveOperation
    assert dispatch_move(TensorStoreCarrier, sw.CPU) is tst.TensorStoreToCpuMoveOperation
    t = cpu_tensor([1.0, 2.0])
    with sw.profile() as prof:
        sw.move(t, TensorStoreCarrier.create(mem(), 0))
    done = [e for e in prof.move_events() if e.phase == "complete"]
    assert [(e.operation_type, e.succeeded) for e in done] == \
        [(tst.CpuToTensorStoreMoveOperation, True)]


def test_move_validation_runs_before_anything_is_written():
    t = cpu_tensor([1.0, 2.0, 3.0])
    small = TensorStoreCarrier.create(mem(), 2)          # too small, not empty
    with pytest.raises(ValueError):
        sw.move(t, small)
    ints = TensorStoreCarrier.create(mem(), 3, dtype=D.Int32)
    with pytest.raises(TypeError):
        sw.move(t, ints)
    assert not t.carrier.is_released() and [small[0], small[1]] == [0.0, 0.0]


def test_many_async_moves_overlap_and_all_commit():
    n = 1 << 16
    tensors = [cpu_tensor(np.full(n, k, np.float32)) for k in range(6)]
    dsts = [TensorStoreCarrier.create(mem(), n, chunk_slots=1 << 14) for _ in tensors]
    handles = [sw.move_async(t, d) for t, d in zip(tensors, dsts)]
    results = [h.wait() for h in handles]
    for k, r in enumerate(results):
        assert r.carrier[0] == k and r.carrier[n - 1] == k
        assert tensors[k].carrier.is_released()


def test_destination_is_pending_until_the_engine_commits():
    n = 1 << 22                                        # 16 MiB, well past any inline bound
    t = cpu_tensor(np.arange(n, dtype=np.float32))
    dst = TensorStoreCarrier.create(mem(), n)
    h = sw.move_async(t, dst)
    if not h.done:                                     # the engine is still writing
        with pytest.raises(RuntimeError, match="pending"):
            dst.release()
        with pytest.raises(RuntimeError, match="pending"):
            t.carrier.release()
    r = h.wait()
    assert r.carrier[n - 1] == n - 1 and t.carrier.is_released()


def test_autograd_flows_back_across_both_moves():
    t = cpu_tensor([1.0, 2.0, 3.0])
    r = sw.move(t, TensorStoreCarrier.create(mem(), 0))
    g = cpu_tensor([4.0, 5.0, 6.0])
    (grad,) = r.autograd_ctx.backward(g)
    assert type(grad.carrier) is sw.CPU and grad.tolist() == [4.0, 5.0, 6.0]
    back = sw.move(r, sw.CPU(3))
    (grad2,) = back.autograd_ctx.backward(cpu_tensor([7.0, 8.0, 9.0]))
    assert type(grad2.carrier) is TensorStoreCarrier and span(grad2) == [7.0, 8.0, 9.0]


# ---- save / load -----------------------------------------------------------------------


def test_save_keeps_the_source_and_load_gives_back_layout_offset_dtype(tmp_path):
    layout = L(([2, 2], 3), ([1, 6], 2))
    t = cpu_tensor([float(k) for k in range(layout.cosize)], L(layout.cosize, 1))
    t = sw.Tensor(t.carrier, 0, layout)
    version = t.carrier.version
    assert tst.save(t, filespec(tmp_path)) is None
    assert not t.carrier.is_released() and t.carrier.version == version
    meta = json.loads((tmp_path / "a" / "zarr.json").read_text())
    assert meta["attributes"]["strideweave"] == {
        "layout": {"shape": [[2, 2], 3], "stride": [[1, 6], 2]}, "offset": 0,
        "dtype": "Float32"}
    back = tst.load(filespec(tmp_path))
    assert type(back.carrier) is TensorStoreCarrier and back.layout == layout
    assert back.tolist() == t.tolist()


def test_load_in_another_process(tmp_path):
    t = cpu_tensor([1, 2, 3, 4, 5, 6], L((2, 3), (3, 1)), dtype=D.Int32)
    tst.save(t, filespec(tmp_path))
    code = ("import json, sys, strideweave.tensorstore as t\n"
            f"x = t.load({json.dumps(filespec(tmp_path))!r})\n"
            "print(json.dumps([x.tolist(), repr(x.layout), x.dtype().name]))")
    out = run_python(code)
    assert out.returncode == 0, out.stderr
    values, layout, dtype = json.loads(out.stdout)
    assert values == t.tolist() and layout == repr(t.layout) and dtype == "Int32"


def test_a_move_records_the_layout_so_load_works(tmp_path):
    layout = L((3, 2), (2, 1))
    t = cpu_tensor([float(k) for k in range(6)], layout)
    sw.move(t, TensorStoreCarrier.create(filespec(tmp_path), 0))
    back = tst.load(filespec(tmp_path))
    assert back.layout == layout and back.tolist() == [0.0, 2.0, 4.0, 1.0, 3.0, 5.0]


def test_load_of_an_array_without_a_layout_says_so(tmp_path):
    TensorStoreCarrier.create(filespec(tmp_path), 3)
    with pytest.raises(ValueError, match="no strideweave layout"):
        tst.load(filespec(tmp_path))


# ---- tiers -----------------------------------------------------------------------------


def test_evictable_evicts_to_the_store_and_promotes_back(tmp_path):
    n = 1000
    cpu = sw.CPU(n)
    np.from_dlpack(sw.Tensor(cpu, 0, L(n, 1)))[:] = np.arange(n)
    secondary = TensorStoreCarrier.create(filespec(tmp_path), 0, chunk_slots=256)
    e = sw.Evictable(cpu, secondary)
    e.evict()
    assert e.is_evicted() and type(e.secondary) is TensorStoreCarrier
    e.promote()
    assert not e.is_evicted() and [e[i] for i in (0, 500, 999)] == [0.0, 500.0, 999.0]
    e.evict()                                          # a second round trip works too
    e.promote()
    assert e[999] == 999.0


def tiled(tmp_path, grid=8, tile=64):
    n = grid * tile
    cpu = sw.CPU(n)
    np.from_dlpack(sw.Tensor(cpu, 0, L(n, 1)))[:] = np.arange(n)
    sec = TensorStoreCarrier.create(filespec(tmp_path, "tiles"), 0, chunk_slots=tile)
    return sw.TiledEvictable(cpu, sec, (grid,), (tile,)), n


def test_tiled_evictable_pages_tiles_through_the_store(tmp_path):
    te, n = tiled(tmp_path)
    every = sw.TileSet([(k,) for k in range(8)])
    te.evict(every)
    assert te.secondary_tiles == every and te.primary_tiles == sw.TileSet()
    full = sw.Tensor(te, 0, L(n, 1))
    proj = te.project(full, sw.TileSelection([[5, 2]])).wait()
    assert proj.tolist() == list(map(float, range(320, 384))) + \
        list(map(float, range(128, 192)))
    te.promote(sw.TileSet([(7,)]))
    assert te[7 * 64 + 3] == 7 * 64 + 3


def test_tile_arrays_are_written_and_read_in_whole_chunks(tmp_path):
    te, n = tiled(tmp_path, grid=4, tile=64)
    te.evict(sw.TileSet([(k,) for k in range(4)]))
    metas = sorted((tmp_path).glob("tiles.like-*/zarr.json"))
    assert len(metas) == 4                                  # one array per tile copy
    for meta in metas:
        m = json.loads(meta.read_text())
        (chunk,) = m["chunk_grid"]["configuration"]["chunk_shape"]
        assert m["shape"] == [64] and 64 % chunk == 0      # a tile is whole chunks
    te.promote(sw.TileSet([(k,) for k in range(4)]))
    left = [p for p in tmp_path.glob("tiles.like-*/**/*") if p.is_file()]
    assert left == []                                      # released copies go away


# ---- failures ----------------------------------------------------------------------------


def test_a_corrupt_chunk_ends_the_move_with_oserror_and_keeps_the_source(tmp_path):
    t = cpu_tensor([1.0, 2.0, 3.0, 4.0])
    r = sw.move(t, TensorStoreCarrier.create(filespec(tmp_path), 0, chunk_slots=2))
    (tmp_path / "a" / "c" / "1").write_bytes(b"xyz")       # damaged behind our back
    with pytest.raises(OSError, match=f"file://{tmp_path}/a/"):
        sw.move(r, sw.CPU(4))
    assert not r.carrier.is_released() and r.carrier[0] == 1.0


def test_a_failing_write_ends_the_move_with_oserror_and_keeps_the_source(tmp_path):
    dst = TensorStoreCarrier.create(filespec(tmp_path), 4, chunk_slots=2)
    (tmp_path / "a" / "c").write_bytes(b"")                # a file where chunks must go
    t = cpu_tensor([1.0, 2.0, 3.0, 4.0])
    with pytest.raises(OSError, match=f"TensorStore file://{tmp_path}/a/"):
        sw.move(t, dst)
    assert not t.carrier.is_released() and t.tolist() == [1.0, 2.0, 3.0, 4.0]
    assert not dst.is_released()


def test_tiles_in_place_in_a_full_store_page_as_whole_chunks_never_slot_by_slot(
        tmp_path, monkeypatch):
    grid, tile = 8, 128
    n = grid * tile
    t = cpu_tensor(np.arange(n, dtype=np.float32))
    store = sw.move(t, TensorStoreCarrier.create(filespec(tmp_path), 0, chunk_slots=tile))
    store.carrier.release()                                # reopen: a full secondary
    secondary = TensorStoreCarrier.open(filespec(tmp_path))

    def refuse(*args):
        raise AssertionError("a slot-by-slot copy of a tile")
    monkeypatch.setattr(TensorStoreCarrier, "get_value", refuse)
    monkeypatch.setattr(TensorStoreCarrier, "set_value", refuse)
    te = sw.TiledEvictable(sw.CPU(0), secondary, (grid,), (tile,))
    assert len(te.secondary_tiles.coordinates) == grid     # held in place
    proj = te.project(sw.Tensor(te, 0, L(n, 1)), sw.TileSelection([[6, 1, 4]])).wait()
    expect = np.concatenate([np.arange(k * tile, (k + 1) * tile) for k in (6, 1, 4)])
    assert np.array_equal(np.from_dlpack(proj), expect.astype(np.float32))


def full_store_tiles(tmp_path, logical, tile):
    """A TiledEvictable over a full file-kvstore secondary holding 0..n-1,
    every tile in place; chunks of one tile each when the tile is a span."""
    grid = tuple(lg // tl for lg, tl in zip(logical, tile))
    n = int(np.prod(logical))
    t = cpu_tensor(np.arange(n, dtype=np.float32))
    store = sw.move(t, TensorStoreCarrier.create(filespec(tmp_path), 0,
                                                 chunk_slots=int(np.prod(tile))))
    store.carrier.release()
    te = sw.TiledEvictable(sw.CPU(0), TensorStoreCarrier.open(filespec(tmp_path)), grid, tile)
    return te, n


def record_reads(monkeypatch):
    """(destination, output offset, count) of every engine read the framework starts."""
    reads = []
    original = tst.TensorStoreToCpuMoveOperation._copy_async

    def spy(self, tensor, destination, output, count):
        reads.append((destination, output.offset, count))
        return original(self, tensor, destination, output, count)
    monkeypatch.setattr(tst.TensorStoreToCpuMoveOperation, "_copy_async", spy)
    return reads


def test_projected_tiles_are_read_by_the_engine_straight_into_their_place(tmp_path, monkeypatch):
    # 16-tile speed goal: no private tile per selected tile and no gather
    # copy; each tile's chunk is read into its run of the projection.
    te, n = full_store_tiles(tmp_path, (4, 8), (4, 2))   # tile = 8 contiguous slots
    reads = record_reads(monkeypatch)
    proj = te.project(sw.Tensor(te, 0, L((4, 8), (1, 4))),
                      sw.TileSelection([[0], [3, 1, 2]])).wait()
    expect = np.concatenate([np.arange(k * 8, (k + 1) * 8) for k in (3, 1, 2)])
    assert np.array_equal(np.from_dlpack(proj).ravel(order="F"), expect.astype(np.float32))
    assert [(d is proj.carrier, o, c) for d, o, c in reads] == \
        [(True, 8, 8), (True, 16, 8), (True, 0, 8)]       # in tile order, into place
    assert len(te.secondary_tiles.coordinates) == 4       # residency unchanged


def test_tiles_on_the_primary_are_gathered_and_those_in_the_store_read_into_place(
        tmp_path, monkeypatch):
    te, n = full_store_tiles(tmp_path, (64,), (8,))
    te.promote(sw.TileSet([(1,)]))
    reads = record_reads(monkeypatch)
    proj = te.project(sw.Tensor(te, 0, L(64, 1)), sw.TileSelection([[6, 1, 4]])).wait()
    expect = np.concatenate([np.arange(k * 8, (k + 1) * 8) for k in (6, 1, 4)])
    assert np.array_equal(np.from_dlpack(proj), expect.astype(np.float32))
    assert [(d is proj.carrier, o, c) for d, o, c in reads] == [(True, 16, 8), (True, 0, 8)]


def test_tiles_that_do_not_land_as_one_run_are_staged_whole(tmp_path, monkeypatch):
    # 4x4 grid of 2x2 tiles, each in its own array; two tiles down axis 0 interleave
    # in the projection, so each is read whole into a private tile, then gathered.
    cpu = sw.CPU(16)
    np.from_dlpack(sw.Tensor(cpu, 0, L(16, 1)))[:] = np.arange(16)
    sec = TensorStoreCarrier.create(filespec(tmp_path, "tiles"), 0, chunk_slots=4)
    te = sw.TiledEvictable(cpu, sec, (2, 2), (2, 2))
    te.evict(sw.TileSet([(i, j) for i in range(2) for j in range(2)]))
    reads = record_reads(monkeypatch)
    proj = te.project(sw.Tensor(te, 0, L((4, 4), (1, 4))), sw.TileSelection([[0, 1], [1]])).wait()
    assert np.array_equal(np.from_dlpack(proj).ravel(order="F"),
                          np.arange(8, 16, dtype=np.float32))
    assert len(reads) == 2 and all(d is not proj.carrier and o == 0 for d, o, c in reads)


def test_a_failing_tile_read_fails_the_projection_and_keeps_residency(tmp_path):
    te, n = full_store_tiles(tmp_path, (64,), (8,))
    (tmp_path / "a" / "c" / "1").write_bytes(b"xyz")       # tile 1's chunk, damaged
    with pytest.raises(OSError, match=f"TensorStore file://{tmp_path}/a/"):
        te.project(sw.Tensor(te, 0, L(64, 1)), sw.TileSelection([[6, 1, 4]])).wait()
    assert len(te.secondary_tiles.coordinates) == 8 and te.primary_tiles == sw.TileSet()
    proj = te.project(sw.Tensor(te, 0, L(64, 1)), sw.TileSelection([[6, 4]])).wait()
    assert np.array_equal(np.from_dlpack(proj),
                          np.r_[np.arange(48, 56), np.arange(32, 40)].astype(np.float32))


# ---- chunks deleted behind our back -------------------------------------------------------


def test_a_deleted_chunk_ends_the_move_with_oserror_and_keeps_the_source(tmp_path):
    t = cpu_tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    r = sw.move(t, TensorStoreCarrier.create(filespec(tmp_path), 0, chunk_slots=2))
    (tmp_path / "a" / "c" / "1").unlink()                  # deleted behind our back
    with pytest.raises(OSError, match=f"TensorStore file://{tmp_path}/a/: .*missing"):
        sw.move(r, sw.CPU(6))
    assert not r.carrier.is_released()
    with pytest.raises(OSError, match="missing"):         # slot reads see it too
        r.carrier[2]
    assert [r.carrier[i] for i in (0, 1, 4, 5)] == [1.0, 2.0, 5.0, 6.0]
    again = tst.load(filespec(tmp_path))                   # so does a fresh open
    with pytest.raises(OSError, match=f"TensorStore file://{tmp_path}/a/"):
        sw.move(again, sw.CPU(6))


def test_chunks_never_written_read_as_zero_and_written_zeros_are_stored(tmp_path):
    made = TensorStoreCarrier.create(filespec(tmp_path), 6, chunk_slots=2)
    assert not (tmp_path / "a" / "c").exists()             # nothing written yet
    back = sw.move(sw.Tensor(made, 0, L(6, 1)), sw.CPU(6))
    assert back.tolist() == [0.0] * 6                      # unwritten chunks are zeros
    zeros = sw.move(cpu_tensor([0.0] * 6),
                    TensorStoreCarrier.create(filespec(tmp_path, "z"), 0, chunk_slots=2))
    assert sorted(p.name for p in (tmp_path / "z" / "c").iterdir()) == ["0", "1", "2"]
    assert sw.move(zeros, sw.CPU(6)).tolist() == [0.0] * 6


def test_a_chunk_deleted_among_16_projected_tiles_fails_the_projection_and_keeps_residency(
        tmp_path, monkeypatch):
    # The 16 chunk reads start together, each into its place in the projection;
    # one of them finding its chunk gone fails the whole projection.
    grid, tile = 32, 64
    te, n = full_store_tiles(tmp_path, (grid * tile,), (tile,))
    picks = list(range(1, grid, 2))                        # 16 tiles
    (tmp_path / "a" / "c" / str(picks[9])).unlink()
    reads = record_reads(monkeypatch)
    full = sw.Tensor(te, 0, L(n, 1))
    with pytest.raises(OSError, match=f"TensorStore file://{tmp_path}/a/: .*missing"):
        te.project(full, sw.TileSelection([picks])).wait()
    assert [(o, c) for d, o, c in reads] == [(i * tile, tile) for i in range(16)]
    assert len({id(d) for d, o, c in reads}) == 1 and reads[0][0].is_released()
    assert len(te.secondary_tiles.coordinates) == grid and te.primary_tiles == sw.TileSet()
    rest = [k for k in picks if k != picks[9]]
    proj = te.project(full, sw.TileSelection([rest])).wait()
    expect = np.concatenate([np.arange(k * tile, (k + 1) * tile) for k in rest])
    assert np.array_equal(np.from_dlpack(proj), expect.astype(np.float32))


def test_a_chunk_deleted_from_the_evicted_copy_fails_the_promotion(tmp_path):
    n = 8
    cpu = sw.CPU(n)
    np.from_dlpack(sw.Tensor(cpu, 0, L(n, 1)))[:] = np.arange(n)
    e = sw.Evictable(cpu, TensorStoreCarrier.create(filespec(tmp_path), 0, chunk_slots=2))
    e.evict()
    where = e.secondary.location                           # the array evict wrote
    pathlib.Path(where.removeprefix("file://"), "c", "3").unlink()
    with pytest.raises(OSError, match=f"TensorStore {where}: .*missing"):
        e.promote()
    assert e.is_evicted() and not e.secondary.is_released()
