"""TiledEvictable evict + promote of every tile, against NumPy copying the
same bytes twice, measured in the same run.

Every tile is first moved once, so each later copy starts from a tile's own
storage and runs the tier classes' exact-pair movement: the elementwise
operation between two CPU tiers, CpuToFileBacked / FileBackedToCpu
(pwrite / pread) with a FileBacked secondary. One line per case: our median
time for evict() then promote() of every tile, NumPy's two np.copyto calls
over the whole array, and the ratio NumPy / ours (higher is better for us).
Small tiles measure the per-tile cost (fresh storage from the prototype's
factory, the operation's _copy), large ones the copy itself. Use a release
build:

    meson setup build/bench -Dbuildtype=release -Dfault_injection=false
    SW_BUILD_DIR=build/bench tools/dev python bench/tiled_residency.py
"""

import argparse
import ctypes
import os
import statistics
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

from _release_only import require_release_build

require_release_build()

import numpy as np

import strideweave as sw

SECONDARIES = {"CPU": lambda: sw.CPU(0), "FileBacked": lambda: sw.FileBacked()}
CASES = [((16, 16), (64, 64)), ((64, 64), (4, 4))]


def tiled(grid, tile, secondary):
    n = grid[0] * tile[0] * grid[1] * tile[1]
    values = np.arange(n, dtype=np.float32)
    cpu = sw.CPU(n, empty=True)
    ctypes.memmove(cpu.pointer(), values.ctypes.data, values.nbytes)
    te = sw.TiledEvictable(cpu, SECONDARIES[secondary](), grid, tile)
    every = sw.TileSet([(i, j) for j in range(grid[1]) for i in range(grid[0])])
    te.evict(every)
    te.promote(every)  # from here on every tile has its own storage
    return te, every, values


def median_time(fn, rounds):
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    print(f"numpy {np.__version__}; median over {args.rounds} rounds")
    print(f"{'case':<58} {'ours ms':>9} {'numpy ms':>9} {'numpy/ours':>10}")
    for secondary in SECONDARIES:
        for grid, tile in CASES:
            te, every, values = tiled(grid, tile, secondary)
            ours = median_time(lambda: (te.evict(every), te.promote(every)), args.rounds)
            scratch = np.empty_like(values)
            anchor = median_time(lambda: (np.copyto(scratch, values), np.copyto(values, scratch)),
                                 args.rounds)
            te.release()
            name = f"evict+promote {grid}x{tile} f32, {secondary} secondary"
            print(f"{name:<58} {ours * 1e3:9.2f} {anchor * 1e3:9.3f} {anchor / ours:10.4f}")


if __name__ == "__main__":
    main()
