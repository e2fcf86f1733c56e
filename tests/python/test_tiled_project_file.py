"""TiledEvictable.project into a FileBacked destination (contract-carriers TE-10;
issue 17): the destination's file is written straight from the tiles (host tiles by
pwritev, runs of tiles kept in files by copy_file_range, implicit tiles as zeros),
never from one projection-sized buffer; every value follows the TE-10 formula; a
failure part way releases a default destination, leaves a given one live and
unclaimed, and residency unchanged."""

import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import strideweave as sw
from strideweave import CPU, FileBacked, Layout, Shape, Stride, Tensor, _C

from tiled_helpers import full_tensor, states

TE, TileSet, TileSelection = sw.TiledEvictable, sw.TileSet, sw.TileSelection


def file_primary(n):
    """A FileBacked carrier of n Float32 slots, slot i holding i + 0.5."""
    t = Tensor(CPU(n, empty=True), 0, Layout(Shape(n), Stride(1)))
    a = np.from_dlpack(t)
    a[:] = np.arange(n, dtype=np.float32) + 0.5
    del a  # the move releases the carrier: no view may outlive it
    return sw.move(t, FileBacked()).carrier


def file_te(grid, tile, evicted=()):
    """A FileBacked primary full of numbered values, a CPU secondary, the
    tiles `evicted` in it (host memory)."""
    n = int(np.prod(grid) * np.prod(tile))
    te = TE(file_primary(n), CPU(0), grid, tile)
    if evicted:
        te.evict(TileSet(list(evicted)))
    return te


def expected(te, tensor, selection):
    """The projection by the TE-10 formula, as a NumPy array."""
    tile, L = te.tile_shape, te.logical_shape
    shape = [len(a) * t for a, t in zip(selection.per_axis, tile)]
    flat = np.array([te[i] for i in range(te.size())], dtype=np.float32)
    out = np.empty(int(np.prod(shape)), dtype=np.float32)
    for c in range(out.size):
        rest, s, mul = c, 0, 1
        for k in range(len(shape)):
            ck = rest % shape[k]
            rest //= shape[k]
            s += (selection.per_axis[k][ck // tile[k]] * tile[k] + ck % tile[k]) * mul
            mul *= L[k]
        out[c] = flat[tensor.offset + tensor.layout(s)]
    return out


def file_values(carrier, n):
    return np.fromfile(carrier.path, dtype=np.float32, count=n)


def sevens(n):
    d = FileBacked()
    d._allocate(n)
    with open(d.path, "r+b") as f:
        np.full(n, 7.0, dtype=np.float32).tofile(f)
    return d


# ---- values ------------------------------------------------------------------------------

@pytest.mark.parametrize("grid, tile, per_axis, evicted", [
    ((4,), (4096,), [[2, 0, 3]], [(0,)]),                   # long runs: file to file
    ((3, 2), (3, 3), [[2, 0, 1], [1, 0]], [(1, 0), (2, 1)]),  # short runs: read with the tile
    ((2, 2), (16384, 2), [[1, 0], [0, 1]], [(1, 1)]),       # 64 KiB runs, host and file mixed
    ((4, 2), (1024, 2), [[3, 0], [1, 0]], [(3, 1)]),        # 4 KiB runs 12 KiB apart: one by one
])
def test_te10_file_backed_destination_holds_every_value(grid, tile, per_axis, evicted):
    te = file_te(grid, tile, evicted)
    t = full_tensor(te)
    sel = TileSelection(per_axis)
    want = expected(te, t, sel)
    before = states(te)
    for dest in (None, FileBacked(), sevens(want.size)):
        kw = {} if dest is None else {"destination": dest}
        r = te.project(t, sel, **kw).wait()
        assert dest is None or r.carrier is dest
        assert np.array_equal(file_values(r.carrier, want.size), want)
        assert not r.carrier.is_owned()
    assert states(te) == before


def test_te10_file_backed_destination_under_a_within_tile_transposed_layout():
    te = file_te((3, 2), (3, 3), [(1, 0)])
    # slot = a1 + 9 a0 + 3 b0 + 27 b1: every tile transposed onto itself
    lay = Layout(Shape([[3, 3], [3, 2]]), Stride([[9, 3], [1, 27]]))
    t = Tensor(te, 0, lay)
    sel = TileSelection([[2, 0], [1, 0]])
    want = expected(te, t, sel)
    r = te.project(t, sel, destination=sevens(want.size)).wait()
    assert np.array_equal(file_values(r.carrier, want.size), want)


def test_te10_implicit_tiles_read_zero_in_a_written_file_backed_destination():
    te = file_te((4,), (4096,))
    z = te.allocate_like(te.size())  # every tile implicit 0
    if type(z.primary) is not FileBacked:  # pragma: no cover - documents the premise
        pytest.fail(f"allocate_like made a {type(z.primary).__name__} primary")
    z[4096 + 5] = 3.0  # tile 1 becomes primary
    t = full_tensor(z)
    sel = TileSelection([[3, 1, 0]])
    want = np.zeros(3 * 4096, dtype=np.float32)
    want[4096 + 5] = 3.0
    for dest in (FileBacked(), sevens(want.size)):
        r = z.project(t, sel, destination=dest).wait()
        assert np.array_equal(file_values(r.carrier, want.size), want)


# ---- the file is written straight from the tiles ---------------------------------------

STRACED = textwrap.dedent("""
    import numpy as np, strideweave as sw, sys
    sys.path.insert(0, {tests!r})
    from test_tiled_project_file import file_te, full_tensor
    te = file_te((4,), (1 << 18,), [(1,)])        # 1 MiB tiles; tile 1 in host memory
    t = full_tensor(te)
    sel = sw.TileSelection([[3, 1, 0]])
    print("MARK", flush=True)
    open("/dev/null").close()                     # a marker in the trace
    r = te.project(t, sel).wait()
    open("/dev/zero").close()
""")


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_te10_file_backed_destination_is_written_without_a_bounce_buffer(tmp_path):
    log = tmp_path / "trace"
    script = STRACED.format(tests=os.path.dirname(__file__))
    run = subprocess.run(["strace", "-f", "-o", str(log), "-e",
                          "trace=openat,pwrite64,pwritev,pwritev2,copy_file_range",
                          sys.executable, "-c", script],
                         capture_output=True, text=True, timeout=120)
    if "PTRACE" in run.stderr or "Operation not permitted" in run.stderr:
        pytest.skip("strace may not trace here: " + run.stderr.strip()[:200])
    assert run.returncode == 0, run.stderr
    lines = log.read_text().splitlines()
    start = next(i for i, x in enumerate(lines) if '"/dev/null"' in x)
    end = next(i for i, x in enumerate(lines) if '"/dev/zero"' in x)
    calls = lines[start:end]
    projection = 3 * (1 << 18) * 4
    writes = [x for x in calls if "pwrite64(" in x or "pwritev" in x]
    copies = [x for x in calls if "copy_file_range(" in x]
    # tiles 3 and 0 stay in the primary's file: copied file to file, 1 MiB each
    assert len(copies) >= 2, calls
    # tile 1 comes from host memory; nothing writes the whole projection at once
    assert writes, calls
    assert not any(f"= {projection}" in x for x in writes), writes


# ---- failure ------------------------------------------------------------------------------

fault = pytest.mark.skipif(not _C._fault_injection_enabled(),
                           reason="needs the fault-injection build")


@fault
@pytest.mark.parametrize("name, skip", [("copy_range", 1), ("pwrite", 0), ("copy_range", 0)])
def test_te10_a_write_failing_part_way_releases_a_default_destination(name, skip):
    te = file_te((4,), (1 << 16,), [(1,)])  # tiles 3, 0 copied; 1 written from memory
    t = full_tensor(te)
    sel = TileSelection([[3, 1, 0]])
    before = states(te)
    live = _C._live_bytes()
    _C._fault_inject(name, skip, 1)
    try:
        h = te.project(t, sel)
        with pytest.raises(OSError, match="injected"):
            h.wait()
    finally:
        _C._fault_clear()
    del h
    assert states(te) == before
    assert _C._live_bytes() <= live  # the default destination was released
    te.evict(TileSet([(3,)]))        # nothing left pinned
    te.promote(TileSet([(3,)]))


@fault
def test_te10_a_write_failing_part_way_leaves_a_given_destination_live():
    te = file_te((4,), (1 << 16,), [(1,)])
    t = full_tensor(te)
    sel = TileSelection([[3, 1, 0]])
    want = expected(te, t, sel)
    dest = sevens(want.size)
    version = dest.version
    _C._fault_inject("copy_range", 1, 1)
    try:
        with pytest.raises(OSError, match="injected"):
            te.project(t, sel, destination=dest).wait()
    finally:
        _C._fault_clear()
    assert not dest.is_released() and not dest.is_owned()
    assert dest.version == version
    r = te.project(t, sel, destination=dest).wait()
    assert r.carrier is dest
    assert np.array_equal(file_values(dest, want.size), want)
