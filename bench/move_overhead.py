"""Instructions per small move: the fixed cost of one move through the binding.

Wall times of a 4 KiB move (about a microsecond) are noise on a loaded
machine; the number of user-space instructions the process runs is not.
For every case and mode this runs a child process twice: once building N
sources and destinations only, once building them and then moving each;
the difference divided by N is the instructions one move costs (the move,
its result Tensor, the AwaitMove for move_async, the source's release and
the list append that keeps the result; every thread of the process is
counted, so a background close or pool thread's share is in it too).

Counted with `perf stat -e instructions:u` where the CPU's counters can be
read, else with valgrind's callgrind (slow: about 10 s per run; a virtual
machine often hides the counters), else wall time per move is printed,
marked as such. Both children run with PYTHONHASHSEED=0 and one BLAS
thread so that they do the same work up to the moves. The best of --repeat pairs is printed.

  cpu->cpu    CPU -> fresh CPU
  cpu->file   CPU -> fresh FileBacked
  file->cpu   FileBacked -> fresh CPU (the move unlinks the source's file)
  blk->cpu    BlockDeviceCarrier -> fresh CPU (a loop device: root only)

Modes: single (move(), one after another), inflight (all move_async,
then all waited) and rounds (256 move_async in flight, waited, their
handles dropped, then the next 256: bench/sweep.py's pattern).

    meson setup build/bench -Dbuildtype=release -Dfault_injection=false
    SW_BUILD_DIR=build/bench tools/dev python bench/move_overhead.py
    SW_BUILD_DIR=build/bench tools/dev python bench/move_overhead.py --cases 'cpu->cpu' -n 5000
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

from _release_only import require_release_build

require_release_build()

CASES = ("cpu->cpu", "cpu->file", "file->cpu", "blk->cpu")
ROUND = 256  # moves in flight at once in the rounds mode


def child(case, mode, n, size, move, blockdev):
    import numpy as np

    import strideweave as sw
    from strideweave import CPU, FileBacked, Layout, Shape, Stride, Tensor

    slots = size // 4
    ref = np.arange(slots, dtype=np.float32)

    def cpu_tensor():
        t = Tensor(CPU(slots, empty=True), 0, Layout(Shape(slots), Stride(1)))
        a = np.from_dlpack(t)
        a[:] = ref
        del a  # a move releases the carrier: no view may outlive it
        return t

    dev = None
    with sw.no_grad():
        if case == "cpu->cpu":
            srcs = [cpu_tensor() for _ in range(n)]
            dsts = [CPU(slots, empty=True) for _ in range(n)]
        elif case == "cpu->file":
            srcs = [cpu_tensor() for _ in range(n)]
            dsts = [FileBacked() for _ in range(n)]
        elif case == "file->cpu":
            srcs = [sw.move(cpu_tensor(), FileBacked()) for _ in range(n)]
            dsts = [CPU(slots, empty=True) for _ in range(n)]
        else:
            dev = sw.BlockDevice(blockdev)
            srcs = [sw.move(cpu_tensor(), dev.allocate(slots, empty=True)) for _ in range(n)]
            dsts = [CPU(slots, empty=True) for _ in range(n)]
        out = []
        if move:
            t0 = time.perf_counter()
            if mode == "single":
                for s, d in zip(srcs, dsts):
                    out.append(sw.move(s, d))
            elif mode == "inflight":
                hs = [sw.move_async(s, d) for s, d in zip(srcs, dsts)]
                for h in hs:
                    out.append(h.wait())
            else:
                for i in range(0, n, ROUND):
                    hs = [sw.move_async(s, d) for s, d in zip(srcs[i:i + ROUND],
                                                              dsts[i:i + ROUND])]
                    for h in hs:
                        out.append(h.wait())
                    del hs
            print(f"WALL {(time.perf_counter() - t0) / n}", flush=True)
            assert out[-1].carrier[slots - 1] == float(ref[-1])
    # The device (if any) closes at exit, with its carriers.


def count(argv, counter, tmp):
    """(instructions or None, wall seconds per move or None) of one child run."""
    # One BLAS thread: OpenBLAS's idle threads spin for a while after numpy
    # starts, a count that varies from run to run and swamps a move's.
    env = dict(os.environ, PYTHONHASHSEED="0", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    out_file = os.path.join(tmp, "callgrind.out")
    if counter == "perf":
        cmd = ["perf", "stat", "-x,", "-e", "instructions:u", "--", sys.executable] + argv
    elif counter == "callgrind":
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_file}",
               sys.executable] + argv
    else:
        cmd = [sys.executable] + argv
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    wall = None
    for line in out.stdout.splitlines():
        if line.startswith("WALL "):
            wall = float(line.split()[1])
    instr = None
    if counter == "perf":
        for line in out.stderr.splitlines():
            f = line.split(",")
            if len(f) > 2 and f[2].startswith("instructions") and f[0].isdigit():
                instr = int(f[0])
    elif counter == "callgrind":
        with open(out_file) as f:
            for line in f:
                if line.startswith(("summary:", "totals:")):
                    instr = int(line.split()[1])
        os.unlink(out_file)
    return instr, wall


def choose_counter():
    if shutil.which("perf"):
        out = subprocess.run(["perf", "stat", "-x,", "-e", "instructions:u", "--", "true"],
                             capture_output=True, text=True)
        if out.returncode == 0 and any(
                line.split(",")[0].isdigit() for line in out.stderr.splitlines()):
            return "perf"
    if shutil.which("valgrind"):
        return "callgrind"
    return "wall"


def make_loop(tmp, bytes_needed):
    if not sys.platform.startswith("linux") or os.geteuid() != 0 or not shutil.which("losetup"):
        return None, "a loop device needs Linux, losetup and root"
    backing = os.path.join(tmp, "overhead-loop.img")
    with open(backing, "wb") as f:
        f.truncate(bytes_needed)
    out = subprocess.run(["losetup", "--find", "--show", backing], capture_output=True,
                         text=True)
    if out.returncode:
        return None, out.stderr.strip() or "losetup failed"
    return out.stdout.strip(), None


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--modes", default="single,inflight,rounds")
    p.add_argument("-n", type=int, default=2000, help="moves per child run")
    p.add_argument("--size", type=int, default=4096, help="bytes per move")
    p.add_argument("--repeat", type=int, default=1, help="pairs of runs; the best is kept")
    p.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        case, mode, n, move, blockdev = a.child
        child(case, mode, int(n), a.size, move == "1", blockdev)
        return
    counter = choose_counter()
    unit = {"perf": "instructions per move (perf stat)",
            "callgrind": "instructions per move (callgrind)",
            "wall": "WALL µs per move (no instruction counter)"}[counter]
    print(f"{a.size} B per move, n={a.n}, best of {a.repeat}: {unit}", flush=True)
    tmp = tempfile.mkdtemp(prefix="sw-bench-overhead-")
    loop = None
    try:
        for case in a.cases.split(","):
            blockdev = "-"
            if case == "blk->cpu":
                if loop is None:
                    loop, why = make_loop(tmp, a.n * max(a.size, 4096) * 2 + (4 << 20))
                    if why:
                        print(f"{case:10} skipped: {why}")
                        continue
                blockdev = loop
            for mode in a.modes.split(","):
                best = None
                for _ in range(a.repeat):
                    base = [os.path.abspath(__file__), "--size", str(a.size), "--child", case,
                            mode, str(a.n)]
                    i0, _ = count(base + ["0", blockdev], counter, tmp)
                    i1, wall = count(base + ["1", blockdev], counter, tmp)
                    v = (i1 - i0) / a.n if counter != "wall" else wall * 1e6
                    best = v if best is None else min(best, v)
                print(f"{case:10} {mode:8} {best:10.0f}" if counter != "wall"
                      else f"{case:10} {mode:8} {best:10.2f} µs", flush=True)
    finally:
        if loop:
            subprocess.run(["losetup", "-d", loop], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
