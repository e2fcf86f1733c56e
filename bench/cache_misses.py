"""Cache misses per move of bench/sweep.py's cells, counted, not timed (a diagnostic).

Runs the sweep's own cases (the same sources, warm(), fresh destinations
and anchors: sweep.py's classes, whose start()/stop() are replaced by
markers) under valgrind's callgrind with its cache simulator, and counts
only each side's timed part: per move, instructions (Ir), first-level data
read / write misses (D1mr, D1mw) and last-level read / write misses (LLmr,
LLmw). The last level is modelled as the 512 KiB L2 of the machines we
measure on (--ll): sweep.py's warm() and the copies push a move's objects out
of L2, not out of L3, so L2 misses are the ones that cost. The counts are
the same from run to run on any load, which a small cell's wall time is not.

    SW_BUILD_DIR=build/cg tools/dev python bench/cache_misses.py
    SW_BUILD_DIR=build/cg tools/dev python bench/cache_misses.py --sizes 4K --lines 20

--lines N lists, for our last round of each cell, the N source lines of
src/ with the most last-level misses (exclusive: a line that calls counts
only its own loads and stores), from callgrind_annotate. That needs a
release build with debug information, e.g.

    meson setup build/cg -Dbuildtype=release -Dfault_injection=false -Dc_args=-g

Needs valgrind (with its valgrind/callgrind.h header) and a C compiler: the
markers are two client requests in a small shared library built on the fly.
About half a minute for the two default sizes.
"""

import argparse
import ctypes
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

from _release_only import require_release_build

require_release_build()

import sweep  # the cases, counts() and parse_size(); this script's folder is sys.path[0]

MARKERS_C = r"""
#include <valgrind/callgrind.h>
void sw_cg_start(void) { CALLGRIND_ZERO_STATS; }
void sw_cg_stop(const char *label) { CALLGRIND_DUMP_STATS_AT(label); }
"""

EVENTS = ("Ir", "D1mr", "D1mw", "DLmr", "DLmw")


def child(args):
    """Inside valgrind: run the cells, a dump per side and round."""
    lib = ctypes.CDLL(args.markers)
    lib.sw_cg_stop.argtypes = [ctypes.c_char_p]
    label = {"now": ""}

    def start():
        lib.sw_cg_start()
        return 0.0

    def stop(t0):
        lib.sw_cg_stop(label["now"].encode())
        return 1.0

    sweep.start, sweep.stop = start, stop  # the cases call them by module name
    cases = {"cpu->cpu": sweep.CpuToCpu, "cpu->file": sweep.CpuToFile}
    directory = tempfile.mkdtemp(prefix="sw-cache-misses-")
    try:
        for name in args.cases.split(","):
            for size in [sweep.parse_size(s) for s in args.sizes.split(",")]:
                case = cases[name](size // 4, directory)
                single, inflight = sweep.counts(size, args.budget_mib << 20)
                for mode, k in (("single", single), ("inflight", inflight)):
                    for r in range(args.rounds + 1):  # round 0 warms up, as in sweep.py
                        sides = [("anchor", lambda: case.anchor(k)),
                                 ("ours", lambda: case.ours(k, mode == "inflight"))]
                        for side, run in (sides if r % 2 else sides[::-1]):
                            label["now"] = f"{side}|{name}|{mode}|{size}|{k}|{r}"
                            run()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def read_dump(path):
    label, events, totals = None, None, None
    with open(path) as f:
        for line in f:
            if line.startswith("desc: Trigger: Client Request: "):
                label = line.rstrip("\n").split("Client Request: ", 1)[1]
            elif line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith(("summary:", "totals:")):
                totals = [int(x) for x in line.split()[1:]]
    if not label or "|" not in label:
        return None
    return label, dict(zip(events, totals))


def our_lines(path, k, count):
    """The `count` lines of src/ with the most LL misses in one dump."""
    out = subprocess.run(["callgrind_annotate", "--show=" + ",".join(EVENTS[1:]),
                          "--threshold=100", "--auto=yes", "--context=0", path],
                         capture_output=True, text=True).stdout
    num = r"([\d,]+|\.)(?: \(\s*[\d.]+%\))?"
    pat = re.compile(r"^\s*" + r"\s+".join([num] * 4) + r"\s(.*)$")
    rows, current, lineno = [], None, 0
    for line in out.splitlines():
        if line.startswith("-- Auto-annotated source:"):
            current = line.split(":", 1)[1].strip()
            continue
        m = re.match(r"-- line (\d+)", line)
        if m:
            lineno = int(m.group(1))
            continue
        m = pat.match(line)
        if current is None or not m:
            continue
        text = m.group(5)
        if "=>" not in text and "/src/" in current and "events annotated" not in text:
            v = [0 if g == "." else int(g.replace(",", "")) for g in m.groups()[:4]]
            rows.append((v, current.split("/src/", 1)[1], lineno, m.group(5).strip()))
        lineno += 1
    rows.sort(key=lambda r: -(r[0][2] + r[0][3]))
    for v, name, n, text in rows[:count]:
        print(f"      LLmr {v[2] / k:5.2f} LLmw {v[3] / k:5.2f} D1mr {v[0] / k:5.2f} "
              f"D1mw {v[1] / k:5.2f}  {name}:{n}  {text[:70]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="4K,16K")
    ap.add_argument("--cases", default="cpu->cpu", help="cpu->cpu and/or cpu->file")
    ap.add_argument("--rounds", type=int, default=2, help="counted rounds after one warm-up")
    ap.add_argument("--budget-mib", type=int, default=512, help="as sweep.py's")
    ap.add_argument("--ll", default="524288,8,64", help="last level: bytes,ways,line bytes")
    ap.add_argument("--lines", type=int, default=0, metavar="N")
    ap.add_argument("--keep", metavar="DIR", help="keep callgrind's dumps in DIR")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--markers", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)
    for tool in ("valgrind", "callgrind_annotate"):
        if shutil.which(tool) is None:
            sys.exit(f"cache_misses.py needs {tool}")
    work = args.keep or tempfile.mkdtemp(prefix="sw-cache-misses-")
    os.makedirs(work, exist_ok=True)
    try:
        src = os.path.join(work, "markers.c")
        with open(src, "w") as f:
            f.write(MARKERS_C)
        markers = os.path.join(work, "libmarkers.so")
        subprocess.run([os.environ.get("CC", "cc"), "-O2", "-shared", "-fPIC", "-o", markers, src],
                       check=True)
        for old in glob.glob(os.path.join(work, "cg.out*")):
            os.remove(old)
        cmd = ["valgrind", "--tool=callgrind", "--cache-sim=yes", "--D1=32768,8,64",
               "--I1=32768,8,64", f"--LL={args.ll}",
               f"--callgrind-out-file={os.path.join(work, 'cg.out')}",
               sys.executable, os.path.abspath(__file__), "--child", "--markers", markers,
               "--sizes", args.sizes, "--cases", args.cases, "--rounds", str(args.rounds),
               "--budget-mib", str(args.budget_mib)]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode:
            sys.exit(run.stderr[-3000:])
        dumps = []
        for path in glob.glob(os.path.join(work, "cg.out.*")):
            got = read_dump(path)
            if got:
                dumps.append((int(path.rsplit(".", 1)[1]), path) + got)
        dumps.sort()
        cells = {}
        for _, path, label, ev in dumps:
            side, name, mode, size, k, r = label.split("|")
            if r != "0":  # round 0 warms up
                cells.setdefault((name, mode, int(size), int(k), int(r)), {})[side] = (ev, path)
        print(f"per move; LL = {args.ll} (bytes,ways,line); after one warm-up round")
        head = " ".join(f"{e.replace('DL', 'LL'):>7}" for e in EVENTS)
        print(f"{'case':9} {'mode':8} {'size':>5} {'k':>4} {'r':>1}  ours: {head}   "
              f"anchor: {head}   ours-anchor LLmr LLmw")
        last = {}
        for (name, mode, size, k, r), sides in sorted(cells.items()):
            if set(sides) != {"ours", "anchor"}:
                continue
            o, a = sides["ours"][0], sides["anchor"][0]
            fig = lambda ev: " ".join(f"{ev.get(e, 0) / k:7.1f}" for e in EVENTS)
            print(f"{name:9} {mode:8} {size >> 10:>4}K {k:4d} {r}        {fig(o)}           "
                  f"{fig(a)}   {(o.get('DLmr', 0) - a.get('DLmr', 0)) / k:+7.1f} "
                  f"{(o.get('DLmw', 0) - a.get('DLmw', 0)) / k:+5.1f}")
            last[(name, mode, size)] = (sides["ours"][1], k)
        if args.lines:
            for (name, mode, size), (path, k) in last.items():
                print(f"\nours {name} {mode} {size >> 10}K, last round: lines of src/ "
                      "by LL misses per move")
                our_lines(path, k, args.lines)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
