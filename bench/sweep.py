"""Movement speed across sizes, against an anchor doing the same work in the same run.

For every case and size (4 KiB ... 1 GiB, x4 steps) two modes are timed:

  single    k moves one after another, each move() waited before the next;
  inflight  up to 256 move_async in flight at once, then all waited
            (fewer when 256 of the size would pass --budget-mib: the count
            is printed).

Each side does the same work on fresh destinations that are all kept
alive until the round ends; sources are filled (touched) before timing,
destinations are created after the side's warm-up (_fresh_pages.py), just
before the timing on both sides, and not touched. Neither side's timing
holds the allocation calls (np.empty, CPU(), FileBacked(), a device
extent, the anchor's files): what is fresh is the memory, whose first-touch
faults stay inside the copy on both sides. (The anchors once made their
np.empty inside their timing while ours were made just outside it, which
leaned the small cells our way by about 0.2 us a move.)

  cpu->cpu    move() into fresh CPU carriers    vs np.copyto into fresh np.empty
  cpu->file   move() into fresh FileBacked      vs os.pwrite into fresh files
  file->cpu   move() of FileBacked tensors      vs os.preadv of as many distinct files
              into fresh CPU carriers              of the same bytes into fresh np.empty
  file->cpu*  the same moves                    vs the same reads, each followed by
              (a second reading)                   os.unlink of the file read: a move
                                                   releases its FileBacked source, whose
                                                   name is gone at release
  cpu->blk    CPU -> BlockDeviceCarrier         vs os.pwrite + os.fdatasync to the same device
  blk->cpu    BlockDeviceCarrier -> CPU         vs os.preadv from the same device
              (both sides read from the device, not the page cache: after
              the sources are written their extents are flushed and dropped
              from the cache, since a durable move's direct writes leave
              nothing there while the anchor's buffered ones would)
              (a loop device; skipped with the reason where none can be made;
              sw.move when it moves block carriers, else the block
              MoveOperations' forward, whose in-flight mode is then skipped)

Before the first cell, both sides run 16 untimed rounds of the smallest
CPU -> CPU cell (not in --smoke), so the first cell does not pay the start
of the process. The figure is the median over rounds (after one warm-up
round) of the throughput of one side; cells below 1 MiB take three times
the rounds (--rounds), since a round of them costs milliseconds and one
disturbed round moved their median by up to 0.3x between runs. The ratio
is anchor time / our time (1.0 = as fast as the anchor, more is faster).
Targets: >= 0.8x for single moves at every size, >= 1.0x with 256 in
flight. The anchors have no asynchronous form: the in-flight anchor is the
same sequence of copies. The last line counts
the cells that met their target and those below.

The target of a FileBacked -> CPU move is judged on the file->cpu* row,
whose anchor does the same work as the move (the read, then the name
removed); the plain file->cpu row is printed beside it as a reference
("ref"): its anchor leaves the name, a syscall that costs more than a
small read, so the two rows apart show what the unlink itself costs.

    meson setup build/bench -Dbuildtype=release -Dfault_injection=false
    SW_BUILD_DIR=build/bench tools/dev python bench/sweep.py
    SW_BUILD_DIR=build/bench tools/dev python bench/sweep.py --max-size 64M --plot sweep.png
    SW_BUILD_DIR=build/bench tools/dev python bench/sweep.py --smoke
    SW_BUILD_DIR=build/bench tools/dev python bench/sweep.py --cases 'cpu->file,file->cpu'
    SW_BUILD_DIR=build/bench tools/dev python bench/sweep.py --cases 'cpu->cpu' \
        --min-size 16K --max-size 16K --modes inflight --counts
    (quote --cases: an unquoted '>' is a shell redirection)

--counts prints, under each cell, the minor page faults and context switches
per move of each side's timed part (getrusage) and the cyclic garbage
collections that ran inside it: evidence that stays readable on a loaded
machine, where wall time is not.

--plot needs matplotlib (an optional bench dependency: pip install matplotlib).
"""

import argparse
import gc
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import _idle_blas  # noqa: F401 - before NumPy
from _fresh_pages import warm
from _read_loop import preadv_all
from _release_only import require_release_build

require_release_build()

import numpy as np

import strideweave as sw
from strideweave import CPU, FileBacked, Layout, Shape, Stride, Tensor

INFLIGHT = 256
TARGETS = {"single": 0.8, "inflight": 1.0}


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("IB")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def human(size):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift:
            return f"{size >> shift} {unit}"
    return f"{size} B"


def cpu_tensor(n, fill):
    """A Float32 CPU tensor of n slots holding `fill` (pages touched)."""
    t = Tensor(CPU(n, empty=True), 0, Layout(Shape(n), Stride(1)))
    a = np.from_dlpack(t)
    a[:] = fill
    del a  # a move releases the carrier: no view may outlive it
    return t


def fresh_cpu(k, n):
    """k fresh, untouched CPU destinations of n slots, made after the side's
    warm(), as the anchors make theirs (fresh_np): both then draw from the
    process heap in the same state. (Made before warm(), ours took heap
    pages never touched while the anchor's malloc reused the pages warm()
    had just touched and freed: 15 page faults per 64 KiB move for ours,
    none for the anchor, measured with getrusage.)"""
    return [CPU(n, empty=True) for _ in range(k)]


def fresh_np(k, n):
    """The anchors' k fresh, untouched np.empty destinations of n Float32,
    made after warm() and before the timing, as fresh_cpu makes ours."""
    return [np.empty(n, dtype=np.float32) for _ in range(k)]


# --counts: what each timed part cost besides instructions (getrusage of the
# process around it): minor page faults, voluntary / involuntary context
# switches, and Python's cyclic collections that ran inside it. Wall time on a
# shared machine is noisy; these are not.
COUNTS = {"on": False, "last": None, "collections": 0}


def _usage():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_minflt, r.ru_nvcsw, r.ru_nivcsw, COUNTS["collections"]


def _count_collection(phase, info):
    if phase == "start":
        COUNTS["collections"] += 1


def start():
    """The start of a timed part (with its counters under --counts)."""
    if COUNTS["on"]:
        COUNTS["first"] = _usage()
    return time.perf_counter()


def stop(t0):
    """Seconds since start(); the counters' deltas go to COUNTS["last"]."""
    t = time.perf_counter() - t0
    if COUNTS["on"]:
        COUNTS["last"] = tuple(b - a for a, b in zip(COUNTS["first"], _usage()))
    return t


def timed_moves(srcs, dsts, inflight):
    """(seconds, results) of moving srcs[i] into dsts[i]: move() one after
    another, or all move_async in flight, then all waited."""
    t0 = start()
    if inflight:
        out = [h.wait() for h in [sw.move_async(s, d) for s, d in zip(srcs, dsts)]]
    else:
        out = [sw.move(s, d) for s, d in zip(srcs, dsts)]
    return stop(t0), out


def median_time(fn, rounds):
    times = []
    for r in range(rounds + 1):
        times.append(fn())
    return statistics.median(times[1:])


# ---- the cases: each gives ours(k, inflight) and anchor(k) returning seconds -------------


class Case:
    name = ""

    def __init__(self, n, directory):
        self.n = n
        self.nbytes = 4 * n
        self.dir = directory
        self.ref = np.arange(n, dtype=np.float32)

    def close(self):
        pass


class CpuToCpu(Case):
    name = "cpu->cpu"

    def ours(self, k, inflight):
        srcs = [cpu_tensor(self.n, self.ref) for _ in range(k)]
        with sw.no_grad():
            warm(k * self.nbytes)
            dsts = fresh_cpu(k, self.n)
            t, out = timed_moves(srcs, dsts, inflight)
        assert out[-1].carrier[self.n - 1] == float(self.ref[-1])
        return t

    def anchor(self, k):
        srcs = [self.ref.copy() for _ in range(k)]
        warm(k * self.nbytes)
        dsts = fresh_np(k, self.n)
        t0 = start()
        for s, d in zip(srcs, dsts):
            np.copyto(d, s)
        return stop(t0)


class CpuToFile(Case):
    name = "cpu->file"

    def ours(self, k, inflight):
        srcs = [cpu_tensor(self.n, self.ref) for _ in range(k)]
        dsts = [FileBacked() for _ in range(k)]
        with sw.no_grad():
            warm(k * self.nbytes)
            t, out = timed_moves(srcs, dsts, inflight)
        assert out[-1].carrier[self.n - 1] == float(self.ref[-1])
        for o in out:
            o.carrier.release()
        return t

    def anchor(self, k):
        srcs = [self.ref.copy() for _ in range(k)]
        paths = [os.path.join(self.dir, f"sweep-anchor-{os.getpid()}-{i}") for i in range(k)]
        fds = [os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600) for p in paths]
        try:
            warm(k * self.nbytes)
            t0 = start()
            for fd, s in zip(fds, srcs):
                pwrite_all(fd, s, 0)
            return stop(t0)
        finally:
            for fd, p in zip(fds, paths):
                os.close(fd)
                os.unlink(p)


class FileToCpu(Case):
    name = "file->cpu"

    def ours(self, k, inflight):
        with sw.no_grad():
            srcs = [sw.move(cpu_tensor(self.n, self.ref), FileBacked()) for _ in range(k)]
            warm(k * self.nbytes)
            dsts = fresh_cpu(k, self.n)
            t, out = timed_moves(srcs, dsts, inflight)
        assert out[-1].carrier[self.n - 1] == float(self.ref[-1])
        return t

    unlinks = False  # the anchor removes each file's name once read

    def anchor(self, k):
        # k distinct files written before timing, as our k sources are: one
        # file read k times would be served from the CPU caches at small
        # sizes, which is not the work a move does.
        paths = [os.path.join(self.dir, f"sweep-anchor-src-{os.getpid()}-{i}") for i in range(k)]
        fds = [os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600) for p in paths]
        try:
            for fd in fds:
                pwrite_all(fd, self.ref, 0)
            warm(k * self.nbytes)
            keep = fresh_np(k, self.n)
            t0 = start()
            for fd, p, d in zip(fds, paths, keep):
                preadv_all(fd, d, 0)
                if self.unlinks:
                    os.unlink(p)
            t = stop(t0)
        finally:
            for fd, p in zip(fds, paths):
                os.close(fd)
                if not self.unlinks:
                    os.unlink(p)
        assert keep[-1][-1] == self.ref[-1]
        return t


class FileToCpuUnlinking(FileToCpu):
    """file->cpu against an anchor that also removes each file's name.

    A move releases its FileBacked source, and a released file's name is
    gone at once: the move does one unlink per file that the plain anchor
    does not. This second reading gives the anchor that unlink too (its
    close stays outside the timing, as the move's close runs in the
    background); the file->cpu rows keep the plain anchor."""

    name = "file->cpu*"
    unlinks = True


def pwrite_all(fd, buf, base):
    mv = memoryview(buf).cast("B")
    off = 0
    while off < len(mv):
        off += os.pwrite(fd, mv[off:], base + off)


def drop_cached(path, offsets, nbytes):
    """Flush the extents and drop them from the device's page cache."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        for off in offsets:
            os.posix_fadvise(fd, off, nbytes, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


class Block(Case):
    """Both block directions over one loop device; `to_dev` picks one."""

    def __init__(self, n, directory, dev, path, to_dev, use_move):
        super().__init__(n, directory)
        self.dev, self.path, self.to_dev, self.use_move = dev, path, to_dev, use_move
        self.name = "cpu->blk" if to_dev else "blk->cpu"
        self.ops = (sw.CpuToBlockDeviceMoveOperation(), sw.BlockDeviceToCpuMoveOperation())

    def _move(self, t, dst):
        if self.use_move:
            return sw.move(t, dst)
        return (self.ops[0] if self.to_dev else self.ops[1]).forward(t, dst)

    def ours(self, k, inflight):
        if inflight and not self.use_move:
            return None
        with sw.no_grad():
            blks = [self.dev.allocate(self.n, empty=True) for _ in range(k)]
            if self.to_dev:
                srcs, dsts = [cpu_tensor(self.n, self.ref) for _ in range(k)], blks
            else:
                fill = sw.move if self.use_move else self.ops[0].forward
                srcs = [fill(cpu_tensor(self.n, self.ref), b) for b in blks]
                drop_cached(self.path, [b.device_offset_bytes for b in blks], self.n * 4)
            warm(k * self.nbytes)
            if not self.to_dev:
                dsts = fresh_cpu(k, self.n)
            t0 = start()
            if inflight:
                out = [h.wait() for h in [sw.move_async(s, d) for s, d in zip(srcs, dsts)]]
            else:
                out = [self._move(s, d) for s, d in zip(srcs, dsts)]
            t = stop(t0)
        if not self.to_dev:
            assert out[-1].carrier[self.n - 1] == float(self.ref[-1])
        for o in out:
            o.carrier.release()
        return t

    def anchor(self, k):
        blks = [self.dev.allocate(self.n, empty=True) for _ in range(k)]
        offsets = [b.device_offset_bytes for b in blks]
        fd = os.open(self.path, os.O_RDWR)
        try:
            if self.to_dev:
                srcs = [self.ref.copy() for _ in range(k)]
                warm(k * self.nbytes)
                t0 = start()
                for s, off in zip(srcs, offsets):
                    pwrite_all(fd, s, off)
                    # a move into block storage reports done only once its
                    # range is durable, so the anchor makes each write durable
                    os.fdatasync(fd)
            else:
                for off in offsets:
                    pwrite_all(fd, self.ref, off)
                drop_cached(self.path, offsets, self.n * 4)
                warm(k * self.nbytes)
                keep = fresh_np(k, self.n)
                t0 = start()
                for off, d in zip(offsets, keep):
                    preadv_all(fd, d, off)
            t = stop(t0)
        finally:
            os.close(fd)
            for b in blks:
                b.release()
        return t


def block_unavailable():
    if not sys.platform.startswith("linux"):
        return "loop devices exist on Linux only"
    if shutil.which("losetup") is None:
        return "losetup is not installed"
    if not os.path.exists("/dev/loop-control"):
        return "/dev/loop-control is missing"
    if os.geteuid() != 0:
        return "creating a loop device needs root"
    return None


def block_move_works(dev):
    """Whether sw.move moves CPU <-> BlockDeviceCarrier (else the operations)."""
    try:
        b = dev.allocate(1, empty=True)
        t = sw.move(cpu_tensor(1, 1.0), b)
        back = sw.move(t, CPU(1, empty=True))
        back.carrier.release()
        return True
    except (NotImplementedError, TypeError, RuntimeError):
        return False


# ---- driving ------------------------------------------------------------------------


def counts(size, budget):
    """(single moves per round, moves in flight) for one size."""
    fit = max(1, budget // size)
    return min(64, fit), min(INFLIGHT, fit)


def counted(side, *args):
    """(seconds, counters of its timed part or None) of one side's round."""
    COUNTS["last"] = None
    return side(*args), COUNTS["last"]


SMALL_CELL = 1 << 20  # below this size a cell takes SMALL_CELL_ROUNDS x the rounds
SMALL_CELL_ROUNDS = 3


def rounds_for(size, rounds):
    """Timed rounds of a cell: more for the small, cheap ones (not in --smoke)."""
    return rounds * SMALL_CELL_ROUNDS if size < SMALL_CELL and rounds > 1 else rounds


WARM_UP_ROUNDS = 16


def warm_up_process(directory):
    """Untimed rounds of both sides of the smallest CPU -> CPU cell before the
    first cell. Every cell gets one warm-up round of its own, but the first
    cell of a fresh process also paid the process's start: cpu->cpu single
    4 KiB (always the first cell) gave 0.69-0.90x (median 0.81) in five fresh
    processes, and 0.84-0.94x (median 0.92) after 16 such rounds of our side;
    the cells after it start warm either way."""
    case = CpuToCpu(1024, directory)
    for _ in range(WARM_UP_ROUNDS):
        case.ours(64, False)
        case.anchor(64)


def run(cases, sizes, rounds, budget, table, modes=("single", "inflight")):
    for make in cases:
        for size in sizes:
            n = size // 4
            case = make(n)
            try:
                single, inflight = counts(size, budget)
                for mode, k in (("single", single), ("inflight", inflight)):
                    if mode not in modes:
                        continue
                    if case.ours(k, mode == "inflight") is None:
                        table.skip(case.name, mode, size, "needs sw.move for block carriers")
                        continue
                    ours, anchor = [], []
                    for r in range(rounds_for(size, rounds) + 1):
                        # alternate who goes first
                        if r % 2:
                            ta = counted(case.anchor, k)
                            to = counted(case.ours, k, mode == "inflight")
                        else:
                            to = counted(case.ours, k, mode == "inflight")
                            ta = counted(case.anchor, k)
                        if r:
                            ours.append(to)
                            anchor.append(ta)
                    table.add(case.name, mode, size, k, ours, anchor)
            finally:
                case.close()


def counters_text(rounds, k):
    got = [c for _, c in rounds if c is not None]
    if not got:
        return "not counted"
    med = [statistics.median(c[i] for c in got) / k for i in range(3)]
    collections = sum(c[3] for c in got)
    return (f"{med[0]:.2f} minor faults, {med[1]:.2f}/{med[2]:.2f} (in)voluntary switches, "
            f"{collections} collections in {len(got)} rounds")


class Table:
    # Rows printed for reference, without a verdict: their anchor does
    # less work than the move (see the module's docstring).
    REFERENCE = {"file->cpu"}

    def __init__(self):
        self.rows = []
        self.met = self.below = 0
        print(f"{'case':10} {'mode':9} {'size':>8} {'k':>4} {'ours GB/s':>10} "
              f"{'anchor GB/s':>12} {'ratio':>6}  target", flush=True)

    def add(self, case, mode, size, k, ours_rounds, anchor_rounds):
        """One cell from each side's rounds: (seconds, counters or None)."""
        ours = statistics.median(t for t, _ in ours_rounds)
        anchor = statistics.median(t for t, _ in anchor_rounds)
        total = size * k
        target = TARGETS[mode]
        ratio = anchor / ours
        self.rows.append((case, mode, size, total / ours / 1e9, total / anchor / 1e9, ratio))
        if case in self.REFERENCE:
            flag = "ref"
        elif ratio >= target:
            flag, self.met = "ok", self.met + 1
        else:
            flag, self.below = "BELOW", self.below + 1
        print(f"{case:10} {mode:9} {human(size):>8} {k:4d} {total / ours / 1e9:10.2f} "
              f"{total / anchor / 1e9:12.2f} {ratio:6.2f}  >= {target} {flag}", flush=True)
        if COUNTS["on"]:
            print(f"{'':10} per move, median of the rounds: ours "
                  f"{counters_text(ours_rounds, k)}; anchor {counters_text(anchor_rounds, k)}",
                  flush=True)

    def skip(self, case, mode, size, why):
        print(f"{case:10} {mode:9} {human(size):>8}  skipped: {why}", flush=True)

    def plot(self, path):
        try:
            import matplotlib
        except ImportError:
            print("--plot needs matplotlib (pip install matplotlib); no chart written")
            return
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        cases = sorted({c for c, *_ in self.rows})
        colors = {c: f"C{i}" for i, c in enumerate(cases)}  # the same in both panels
        fig, axes = plt.subplots(1, 2, figsize=(13, 5), sharey=True)
        for ax, mode in zip(axes, ("single", "inflight")):
            for case in cases:
                rows = [r for r in self.rows if r[0] == case and r[1] == mode]
                if not rows:
                    continue
                x = [r[2] for r in rows]
                color = colors[case]
                ax.plot(x, [r[3] for r in rows], "-o", color=color, label=f"{case} ours")
                ax.plot(x, [r[4] for r in rows], "--", color=color, label=f"{case} anchor")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("bytes per move")
            ax.set_title("one move() at a time" if mode == "single"
                         else f"up to {INFLIGHT} move_async in flight")
            ax.grid(True, which="both", alpha=0.3)
        axes[0].set_ylabel("GB/s")
        for ax in axes:
            if ax.lines:
                ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        print(f"chart written to {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--min-size", default="4K")
    ap.add_argument("--max-size", default="1G")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--budget-mib", type=int, default=512,
                    help="most bytes of fresh destinations one side keeps alive per round")
    ap.add_argument("--cases", default="cpu->cpu,cpu->file,file->cpu,file->cpu*,cpu->blk,"
                    "blk->cpu")
    ap.add_argument("--modes", default="single,inflight",
                    help="which modes to run: single, inflight or both")
    ap.add_argument("--counts", action="store_true",
                    help="also print each side's minor page faults and context switches per "
                    "move in its timed part (getrusage), and the collections run in it")
    ap.add_argument("--smoke", action="store_true",
                    help="tiny sizes (4 KiB .. 64 KiB), one round: a quick check that it runs")
    ap.add_argument("--plot", metavar="OUT.png")
    args = ap.parse_args()
    lo, hi, rounds, budget = (parse_size(args.min_size), parse_size(args.max_size),
                              args.rounds, args.budget_mib << 20)
    if args.smoke:
        lo, hi, rounds, budget = 4 << 10, 64 << 10, 1, 4 << 20
    sizes = []
    s = lo
    while s <= hi:
        sizes.append(s)
        s *= 4
    wanted = args.cases.split(",")
    modes = tuple(m.strip() for m in args.modes.split(","))
    for m in modes:
        if m not in TARGETS:
            ap.error(f"--modes takes single and/or inflight, not {m!r}")
    COUNTS["on"] = args.counts
    if args.counts:
        gc.callbacks.append(_count_collection)
    probe = FileBacked()
    directory = str(probe.path.parent)
    probe.release()
    print(f"{os.cpu_count()} CPUs; sizes {human(lo)} .. {human(hi)}; median of {rounds} "
          f"rounds ({rounds_for(0, rounds)} below {human(SMALL_CELL)}) after 1 warm-up; "
          f"files in {directory}")
    if rounds > 1:
        warm_up_process(directory)
    table = Table()
    host = {"cpu->cpu": CpuToCpu, "cpu->file": CpuToFile, "file->cpu": FileToCpu,
            "file->cpu*": FileToCpuUnlinking}
    run([lambda n, c=host[w]: c(n, directory) for w in wanted if w in host],
        sizes, rounds, budget, table, modes)
    block = [w for w in wanted if w in ("cpu->blk", "blk->cpu")]
    if block:
        run_block(block, sizes, rounds, budget, table, directory, modes)
    if "file->cpu*" in wanted:
        print("file->cpu*: the same moves against an anchor that also unlinks each file it "
              "read,\n            as a move must for the FileBacked source it releases")
    if "file->cpu" in wanted:
        print("file->cpu:  a reference (ref), no verdict: its anchor leaves each file's name, "
              "which a move\n            removes; the file->cpu* row holds the target")
    print(f"{table.met} cells met their target, {table.below} below")
    if args.plot:
        table.plot(args.plot)


def run_block(block, sizes, rounds, budget, table, directory, modes):
    why = block_unavailable()
    tmp = tempfile.mkdtemp(prefix="sw-bench-sweep-")
    path = None
    try:
        if not why:
            span = max(max(counts(s, budget)) * s for s in sizes) + (4 << 20)
            backing = os.path.join(tmp, "sweep-loop.img")
            with open(backing, "wb") as f:
                f.truncate(span)
            out = subprocess.run(["losetup", "--find", "--show", backing],
                                 capture_output=True, text=True)
            if out.returncode:
                why = out.stderr.strip() or "losetup failed"
            else:
                path = out.stdout.strip()
        if why:
            for w in block:
                print(f"{w:10} skipped: {why}")
            return
        with sw.BlockDevice(path) as dev:
            use_move = block_move_works(dev)
            print(f"block moves through {'sw.move' if use_move else 'the block MoveOperations'}")
            run([lambda n, w=w: Block(n, directory, dev, path, w == "cpu->blk", use_move)
                 for w in block], sizes, rounds, budget, table, modes)
    finally:
        if path:
            subprocess.run(["losetup", "-d", path], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
