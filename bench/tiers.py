"""Tier and block-device movement speed against raw I/O, measured in the same run.

One line per case: our median time, the anchor's median time (both also as
GB/s of tensor data moved per pass), and the ratio anchor time / our time
(1.0 = as fast as the anchor, more is faster). Both sides run alternately,
once per round, after one warm-up round; the figure is the median over
rounds. Target: >= 0.9x on every case.

Cases, 256 MiB of Float32 each (--mib to change):
The anchors read into one buffer allocated and touched before the rounds
(their best case); our side allocates its destinations as the library does.

  (a) Evictable evict+promote: an Evictable with a CPU primary and a
      FileBacked secondary, evict() then promote(), against two raw passes
      of the same bytes to a file in the same directory (the FileBacked
      session directory): an os.pwrite loop, then an os.preadv loop; a
      second line uses the same anchor reading into freshly allocated
      memory, which promote() has to do (its primary was released).
      This case swings from run to run on a VM whose kernel reports free
      memory to the host (virtio-balloon free page reporting; see
      /proc/cmdline page_reporting.page_reporting_order): a page freed and
      reported costs 20-40x more to touch again (measured 0.1-0.2 GB/s
      against 2-4 GB/s for a NumPy fill), and per round ours touches two
      fresh 256 MiB sets in its timing (the file's page cache in evict,
      the new primary in promote) where the first anchor touches one.
  (b) CPU->BlockDeviceCarrier and back: CpuToBlockDeviceMoveOperation then
      BlockDeviceToCpuMoveOperation on a loop device, against an os.pwrite
      loop followed by os.fdatasync (a move into a block device is durable
      when it completes) and an os.preadv loop of the same bytes at the same
      device offset. Skipped, with the reason, when no loop device can be
      made (needs Linux, root, losetup).
  (d) Durable CPU->BlockDeviceCarrier: sw.move into a BlockDeviceCarrier
      on a loop device attached with `losetup --direct-io=on`, against an
      O_DIRECT os.pwrite loop (8 MiB requests from a page-aligned buffer) of
      the same bytes at the same device offsets followed by os.fdatasync.
      Target >= 0.9x. The first line's anchor writes one buffer filled
      before the rounds (its best case); the second line's anchor writes a
      page-aligned buffer freshly allocated and filled each round (outside
      its timing), as our source is. Skipped like (b).
  (c) TiledEvictable projection of a 1/16 tile selection of a 4096x4096
      Float32 tensor against NumPy's a[np.ix_(rows, cols)] of the same tiles
      (bench/project.py); target >= 1.0x.
  (e) TiledEvictable first evict / first promote of a 1/16 tile set (4 of
      the 8x8 tiles) of a 256 MiB grid (--mib), tiles still held in place
      by the tier that was full at construction: a full CPU primary evicted
      to FileBacked against os.pwritev of the same tile runs (one vector
      call per tile, into a fresh file per tile, as ours makes), and a full
      FileBacked secondary promoted to CPU against os.preadv of the same
      runs at the same file offsets into fresh np.empty tiles. Target
      >= 0.9x.
  (f) TiledEvictable projection into a FileBacked destination (issue 17):
      a FileBacked primary full of the 256 MiB (--mib) grid, a CPU
      secondary, a 1/16 selection of which half the tiles were evicted to
      the CPU tier (host memory) and half stay in the primary's file,
      projected into a fresh FileBacked (the default destination), against
      the same work done with NumPy: the grid's file mapped (np.memmap),
      the selection gathered (np.ix_) and written to a fresh file in the
      same directory (tofile). A second line, with no target, times
      os.pwrite of the projection's bytes built beforehand: a bound that
      leaves out reading the tiles. Two selections: 8x8 square-ish tiles
      (2x2 selected; one tile column is a short run of the destination)
      and a 1-D grid of 64 tiles (4 selected; each tile one long run,
      copied file to file). Target >= 0.9x against NumPy.

Run it against a release build (it refuses a debug or fault-injection build
when the extension can say what it is):

    meson setup build/bench -Dbuildtype=release -Dfault_injection=false
    SW_BUILD_DIR=build/bench tools/dev python bench/tiers.py --rounds 7
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import _idle_blas  # noqa: F401 - before NumPy
from _release_only import require_release_build

require_release_build()

import numpy as np

import strideweave as sw
from strideweave import CPU, Evictable, FileBacked, Layout, Shape, Stride, Tensor, _C

CHUNK = 8 << 20


def flat_tensor(n, fill):
    """A Float32 CPU tensor of n slots filled through NumPy (outside timing)."""
    t = Tensor(CPU(n, empty=True), 0, Layout(Shape(n), Stride(1)))
    a = np.from_dlpack(t)
    a[:] = fill
    del a  # a move releases the carrier: no view may outlive it
    return t


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def pwrite_all(fd, buf, base=0):
    mv = memoryview(buf).cast("B")
    off = 0
    while off < len(mv):
        end = min(off + CHUNK, len(mv))
        off += os.pwrite(fd, mv[off:end], base + off)


def preadv_all(fd, buf, base=0):
    mv = memoryview(buf).cast("B")
    off = 0
    while off < len(mv):
        end = min(off + CHUNK, len(mv))
        got = os.preadv(fd, [mv[off:end]], base + off)
        if got == 0:
            raise OSError("unexpected end of file")
        off += got


class Table:
    def __init__(self, nbytes):
        self.nbytes = nbytes
        print(f"{'case':34} {'ours':>14} {'anchor':>28} {'ratio':>7}  target")

    @classmethod
    def sized(cls, nbytes):
        """A table for GB/s of nbytes that prints no header."""
        t = cls.__new__(cls)
        t.nbytes = nbytes
        return t

    def add(self, case, ours, anchor_name, anchor, target):
        o, a = statistics.median(ours), statistics.median(anchor)
        gbs = lambda t: self.nbytes / t / 1e9  # noqa: E731
        ratio = a / o
        goal = "(no target)" if target is None else \
            f">= {target} {'ok' if ratio >= target else 'BELOW'}"
        print(f"{case:34} {o * 1e3:8.1f} ms {gbs(o):4.2f}GB/s "
              f"{anchor_name:>12} {a * 1e3:7.1f} ms {gbs(a):4.2f}GB/s "
              f"{ratio:6.2f}x  {goal}", flush=True)
        return ratio


def alternate(ours_fn, anchor_fn, rounds):
    """Times of each side over `rounds` rounds after one warm-up, the side
    that goes first alternating."""
    ours, anchor = [], []
    for r in range(rounds + 1):
        if r % 2 == 0:
            to, ta = ours_fn(), anchor_fn()
        else:
            ta, to = anchor_fn(), ours_fn()
        if r:
            ours.append(to)
            anchor.append(ta)
    return ours, anchor


# ---- (a) Evictable evict + promote ------------------------------------------------

def bench_evictable(n, rounds, table):
    nbytes = 4 * n
    ours, anchor = [], []
    session_dir = FileBacked().path.parent  # the directory FileBacked files live in
    anchor_path = os.path.join(session_dir, f"bench-tiers-anchor-{os.getpid()}")
    ref = np.arange(n, dtype=np.float32)

    def ours_side():
        primary = CPU(n, empty=True)
        view = np.from_dlpack(Tensor(primary, 0, Layout(Shape(n), Stride(1))))
        view[:] = ref
        del view
        e = Evictable(primary, FileBacked())
        t, _ = timed(lambda: (e.evict(), e.promote()))
        assert e[n - 1] == float(ref[n - 1])
        e.release()
        return t

    back = np.zeros(n, dtype=np.float32)  # touched once: the anchor's best case

    def anchor_side(fresh=False):
        # fresh=True reads into newly allocated memory, as promote() must
        # (evict released the primary): on this VM first-touch page faults
        # of 256 MiB sometimes take a second, on either side.
        into = np.empty(n, dtype=np.float32) if fresh else back
        fd = os.open(anchor_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            t, _ = timed(lambda: (pwrite_all(fd, ref), preadv_all(fd, into)))
        finally:
            os.close(fd)
            os.unlink(anchor_path)
        assert into[n - 1] == float(ref[n - 1])
        return t

    fresh_anchor = []
    try:
        for r in range(rounds + 1):
            if r % 2 == 0:
                to, ta, tf = ours_side(), anchor_side(), anchor_side(fresh=True)
            else:
                tf, ta, to = anchor_side(fresh=True), anchor_side(), ours_side()
            if r:  # round 0 warms up
                ours.append(to)
                anchor.append(ta)
                fresh_anchor.append(tf)
    finally:
        if os.path.exists(anchor_path):
            os.unlink(anchor_path)
    assert nbytes == table.nbytes
    table.add("(a) Evictable evict+promote", ours, "pwrite+preadv", anchor, 0.9)
    return table.add("    same, anchor into fresh memory", ours, "pwrite+preadv", fresh_anchor, 0.9)


# ---- (b) CPU <-> BlockDeviceCarrier on a loop device -----------------------------------

def loop_device_unavailable():
    if not sys.platform.startswith("linux"):
        return "loop devices exist on Linux only"
    if shutil.which("losetup") is None:
        return "losetup is not installed"
    if os.geteuid() != 0:
        return "creating a loop device needs root"
    return None


def attach_loop(directory, size, direct_io=False):
    backing = os.path.join(directory, "tiers-loop.img")
    with open(backing, "wb") as f:
        f.truncate(size)
    extra = ["--direct-io=on"] if direct_io else []
    out = subprocess.run(["losetup", "--find", "--show", *extra, backing],
                         capture_output=True, text=True)
    if out.returncode != 0:
        return None, out.stderr.strip()
    return out.stdout.strip(), None


def bench_block_device(n, rounds, table, case="b"):
    why = loop_device_unavailable()
    tmp = tempfile.mkdtemp(prefix="sw-bench-tiers-")
    path = None
    try:
        if not why:
            path, why = attach_loop(tmp, 2 * 4 * n + (1 << 20), direct_io=case == "d")
        if why:
            print(f"({case}) CPU<->BlockDeviceCarrier        skipped: {why}")
            return None
        if case == "d":
            return measure_durable_block_move(path, n, rounds, table)
        return measure_block_device(path, n, rounds, table)
    finally:
        if path:
            subprocess.run(["losetup", "-d", path], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


def ours_round(to_dev, to_cpu, dst, n, ref):
    src = flat_tensor(n, ref)
    out_cpu = CPU(n, empty=True)
    with sw.no_grad():
        t, res = timed(lambda: to_cpu.forward(to_dev.forward(src, dst), out_cpu))
    assert res.carrier[n - 1] == float(ref[n - 1])
    return t


def anchor_round(path, base, back, ref):
    fd = os.open(path, os.O_RDWR)
    try:
        t, _ = timed(lambda: (pwrite_all(fd, ref, base), os.fdatasync(fd),
                              preadv_all(fd, back, base)))
    finally:
        os.close(fd)
    assert back[-1] == float(ref[-1])
    return t


def measure_block_device(path, n, rounds, table):
    ours, anchor = [], []
    ref = np.arange(n, dtype=np.float32)
    back = np.zeros(n, dtype=np.float32)  # touched once: the anchor's best case
    to_dev, to_cpu = sw.CpuToBlockDeviceMoveOperation(), sw.BlockDeviceToCpuMoveOperation()
    with sw.BlockDevice(path) as dev:
        dst = dev.allocate(n, empty=True)
        base = dst.device_offset_bytes
        for r in range(rounds + 1):
            # Both sides use the same device range and a fresh destination
            # buffer; who goes first alternates, so neither always finds the
            # other's pages in the device's cache.
            sides = [lambda: ours_round(to_dev, to_cpu, dst, n, ref),
                     lambda: anchor_round(path, base, back, ref)]
            if r % 2:
                sides.reverse()
            times = [side() for side in sides]
            to, ta = times if r % 2 == 0 else times[::-1]
            # the moved-from block carrier was released: take its range again
            dst = dev.allocate(n, empty=True)
            assert dst.device_offset_bytes == base
            if r:
                ours.append(to)
                anchor.append(ta)
        del dst
    return table.add("(b) CPU->BlockDevice->CPU", ours, "pwrite+preadv", anchor, 0.9)


# ---- (d) durable CPU -> BlockDeviceCarrier against O_DIRECT writes ---------------------

def direct_anchor_round(path, base, aligned):
    fd = os.open(path, os.O_RDWR | os.O_DIRECT)
    try:
        t, _ = timed(lambda: (pwrite_all(fd, aligned, base), os.fdatasync(fd)))
    finally:
        os.close(fd)
    return t


def durable_move_round(dst, n, ref):
    src = flat_tensor(n, ref)
    with sw.no_grad():
        t, res = timed(lambda: sw.move(src, dst))
    assert res.carrier is dst
    return t


def fresh_aligned(ref):
    import mmap

    buf = mmap.mmap(-1, ref.nbytes)  # page-aligned, as O_DIRECT needs
    np.frombuffer(buf, dtype=np.float32)[:] = ref
    return buf


def measure_durable_block_move(path, n, rounds, table):
    ours, anchor, fresh_anchor = [], [], []
    ref = np.arange(n, dtype=np.float32)
    aligned = fresh_aligned(ref)
    with sw.BlockDevice(path) as dev:
        dst = dev.allocate(n, empty=True)
        base = dst.device_offset_bytes
        for r in range(rounds + 1):
            sides = [lambda: durable_move_round(dst, n, ref),
                     lambda: direct_anchor_round(path, base, aligned),
                     lambda: direct_anchor_round(path, base, fresh_aligned(ref))]
            if r % 2:
                sides.reverse()
            times = [side() for side in sides]
            to, ta, tf = times if r % 2 == 0 else times[::-1]
            dst.release()  # the move kept it: take its range again
            dst = dev.allocate(n, empty=True)
            assert dst.device_offset_bytes == base
            if r:
                ours.append(to)
                anchor.append(ta)
                fresh_anchor.append(tf)
        del dst
    table.add("(d) durable CPU->BlockDevice", ours, "O_DIRECT+sync", anchor, 0.9)
    return table.add("    same, anchor from fresh memory", ours, "O_DIRECT+sync",
                     fresh_anchor, 0.9)

# ---- (e) TiledEvictable first evict / promote of tiles held in place ------------------

IOV_MAX = 1024


def tile_grid(n):
    """An 8x8 tile grid of square-ish Float32 tiles covering n slots."""
    side = int(round(n ** 0.5))
    while n % side:
        side -= 1
    return (8, 8), (side // 8, n // side // 8)


def tile_runs(grid, tile, coord):
    """(slot, count) of each run of one tile in the column-major footprint."""
    rows = grid[0] * tile[0]
    r0, c0 = coord[0] * tile[0], coord[1] * tile[1]
    return [((c0 + j) * rows + r0, tile[0]) for j in range(tile[1])]


def bench_tiled_first_copies(n, rounds, table_bytes):
    grid, tile = tile_grid(n)
    chosen = [(1, 2), (2, 2), (5, 6), (6, 1)]  # 4 of 64 tiles
    nbytes = 4 * len(chosen) * tile[0] * tile[1]
    ref = np.arange(n, dtype=np.float32)
    runs = {c: tile_runs(grid, tile, c) for c in chosen}
    sel = sw.TileSet(chosen)
    session_dir = FileBacked().path.parent

    def ours_evict():
        te = sw.TiledEvictable(flat_tensor(n, ref).carrier, FileBacked(), grid, tile)
        t, _ = timed(lambda: te.evict(sel))
        slot, _ = runs[chosen[-1]][-1]
        assert te[slot] == float(ref[slot])
        te.release()
        return t

    def anchor_evict():
        mv = memoryview(ref).cast("B")
        paths = [os.path.join(session_dir, f"bench-tiers-tile-{os.getpid()}-{k}")
                 for k in range(len(chosen))]
        def run():
            for path, c in zip(paths, chosen):
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
                try:
                    iov = [mv[4 * s:4 * (s + k)] for s, k in runs[c]]
                    off = 0
                    for i in range(0, len(iov), IOV_MAX):
                        off += os.pwritev(fd, iov[i:i + IOV_MAX], off)
                finally:
                    os.close(fd)
        try:
            t, _ = timed(run)
        finally:
            for path in paths:
                if os.path.exists(path):
                    os.unlink(path)
        return t

    full_path = os.path.join(session_dir, f"bench-tiers-full-{os.getpid()}")
    with open(full_path, "wb") as f:
        ref.tofile(f)

    def ours_promote():
        src = flat_tensor(n, ref)
        fb = sw.move(src, FileBacked()).carrier
        te = sw.TiledEvictable(CPU(0), fb, grid, tile)
        t, _ = timed(lambda: te.promote(sel))
        slot, _ = runs[chosen[-1]][-1]
        assert te[slot] == float(ref[slot])
        te.release()
        return t

    def anchor_promote():
        fd = os.open(full_path, os.O_RDONLY)
        try:
            def run():
                out = []
                for c in chosen:
                    dst = np.empty(tile[0] * tile[1], dtype=np.float32)
                    mv = memoryview(dst).cast("B")
                    for j, (s, k) in enumerate(runs[c]):
                        os.preadv(fd, [mv[4 * j * k:4 * (j + 1) * k]], 4 * s)
                    out.append(dst)
                return out
            t, out = timed(run)
        finally:
            os.close(fd)
        s, _ = runs[chosen[0]][0]
        assert out[0][0] == float(ref[s])
        return t

    res = {}
    try:
        for name, ours_fn, anchor_fn, anchor_name in (
                ("evict", ours_evict, anchor_evict, "pwritev"),
                ("promote", ours_promote, anchor_promote, "preadv")):
            ours, anchor = alternate(ours_fn, anchor_fn, rounds)
            res[name] = Table.sized(nbytes).add(f"(e) first {name} 1/16 tiles", ours,
                                                anchor_name, anchor, 0.9)
    finally:
        os.unlink(full_path)
    return res


# ---- (c) TiledEvictable projection ---------------------------------------------------------

def bench_projection(rounds):
    """(c) project() of a 1/16 tile selection of a 4096x4096 Float32
    TiledEvictable against NumPy gathering the same tiles of the equivalent
    array (bench/project.py holds the case; it also prints NumPy's most
    favourable orientation)."""
    import project
    te, full, a, sel, numpy_gather = project.case()
    ours_t, np_t = [], []
    with sw.no_grad():
        for _ in range(rounds):
            ours_t.append(project.per_call(lambda: te.project(full, sel).wait(), 5))
            np_t.append(project.per_call(numpy_gather, 5))
    o, m = statistics.median(ours_t), statistics.median(np_t)
    flag = "ok" if m / o >= 1.0 else "BELOW"
    print(f"{'(c) project 1/16 of 4096^2':34} {o * 1e3:8.3f} ms {'':9} "
          f"{'np.ix_ gather':>12} {m * 1e3:7.3f} ms {'':9} {m / o:6.2f}x  >= 1.0 {flag}",
          flush=True)
    return m / o


# ---- (f) TiledEvictable projection into a FileBacked destination -----------------------

def bench_projection_into_file(n, rounds):
    ref = np.arange(n, dtype=np.float32)
    session_dir = FileBacked().path.parent
    grid2, tile2 = tile_grid(n)
    cases = (("2x2 of 8x8", grid2, tile2, [[1, 5], [2, 6]], [(1, 2), (5, 6)]),
             ("4 of 64", (64,), (n // 64,), [[9, 2, 40, 17]], [(2,), (17,)]))
    res = {}
    for name, grid, tile, per_axis, evicted in cases:
        primary = sw.move(flat_tensor(n, ref), FileBacked()).carrier
        te = sw.TiledEvictable(primary, CPU(0), grid, tile)
        te.evict(sw.TileSet(evicted))
        full = Tensor(te, 0, Layout(Shape(list(te.logical_shape)),
                                    Stride([1, te.logical_shape[0]][:len(grid)])))
        sel = sw.TileSelection(per_axis)
        # the projection's bytes, by the TE-10 formula (axis 0 fastest)
        a = ref.reshape(list(reversed(te.logical_shape))).T
        idx = [np.concatenate([np.arange(c * t, (c + 1) * t) for c in axis])
               for axis, t in zip(per_axis, tile)]
        want = np.ascontiguousarray(a[np.ix_(*idx)].T).ravel()
        check = te.project(full, sel).wait().carrier
        assert np.array_equal(np.fromfile(check.path, dtype=np.float32, count=want.size), want)
        check.release()

        def ours():
            t, r = timed(lambda: te.project(full, sel).wait())
            r.carrier.release()
            return t

        def into_fresh_file(write):
            path = os.path.join(session_dir, f"bench-tiers-project-{os.getpid()}")
            try:
                t, _ = timed(lambda: write(path))
            finally:
                os.unlink(path)
            return t

        def pwrite_ready(path):
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
            pwrite_all(fd, want)
            os.close(fd)

        def numpy_gather(path):
            # the same work by hand: the selection read from the grid's
            # file (mapped) and gathered, then written to a fresh file
            m = np.memmap(primary.path, dtype=np.float32, mode="r", shape=(n,))
            g = m.reshape(list(reversed(te.logical_shape))).T
            np.ascontiguousarray(g[np.ix_(*idx)].T).tofile(path)
            del m, g

        ours_t, gather_t = alternate(ours, lambda: into_fresh_file(numpy_gather), rounds)
        _, ready_t = alternate(ours, lambda: into_fresh_file(pwrite_ready), 1)
        table = Table.sized(want.nbytes)
        res[name] = table.add(f"(f) project {name} -> FileBacked", ours_t, "memmap+ix_",
                              gather_t, 0.9)
        table.add("    bound: bytes ready, written only", ours_t, "pwrite", ready_t, None)
        te.release()
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cases", default="abcdef", help="which cases to run (default: abcdef)")
    args = ap.parse_args()
    n = args.mib * (1 << 20) // 4
    table = Table(4 * n)
    if "a" in args.cases:
        bench_evictable(n, args.rounds, table)
    if "b" in args.cases:
        bench_block_device(n, args.rounds, table)
    if "d" in args.cases:
        bench_block_device(n, args.rounds, table, case="d")
    if "c" in args.cases:
        bench_projection(args.rounds)
    if "e" in args.cases:
        bench_tiled_first_copies(n, args.rounds, table)
    if "f" in args.cases:
        bench_projection_into_file(n, args.rounds)


if __name__ == "__main__":
    main()
