"""TiledEvictable.project against NumPy fancy indexing, measured in the same run.

Case: a 4096x4096 Float32 TiledEvictable (16x16 tiles of 256x256, all in a
CPU primary), projecting a 1/16 tile selection (4 tiles per axis, out of
order) into a new CPU carrier, against NumPy gathering the same tiles of the
equivalent first-axis-fastest array with a[np.ix_(rows, cols)]. One line per
case: our median time per call, NumPy's, and the ratio NumPy / ours (higher
is better for us; the target is >= 1.0x). Each round is the best of three
timings; the figure is the median over rounds. Use a release build:

    meson setup build/bench -Dbuildtype=release -Dfault_injection=false
    SW_BUILD_DIR=build/bench tools/dev python bench/project.py
"""

import argparse
import ctypes
import os
import statistics
import timeit

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

from _release_only import require_release_build

require_release_build()

import numpy as np

import strideweave as sw


def build(n, tile):
    values = np.arange(n * n, dtype=np.float32)
    cpu = sw.CPU(n * n, empty=True)
    ctypes.memmove(cpu.pointer(), values.ctypes.data, values.nbytes)
    grid = n // tile
    te = sw.TiledEvictable(cpu, sw.CPU(0), (grid, grid), (tile, tile))
    full = sw.Tensor(te, 0, sw.Layout(sw.Shape([n, n]), sw.Stride([1, n])))
    # x0 fastest: element (x0, x1) at x0 + n * x1, i.e. Fortran order.
    a = values.reshape((n, n), order="F")
    return te, full, a


def per_call(fn, number):
    return min(timeit.repeat(fn, number=number, repeat=3)) / number


def case(n=4096, tile=256):
    """The benchmark's TiledEvictable, its full Tensor, the equivalent NumPy
    array, the 1/16 selection and NumPy's gather of the same tiles."""
    te, full, a = build(n, tile)
    sel_axes = [[9, 2, 14, 5], [3, 12, 0, 7]]
    rows = np.concatenate([np.arange(t * tile, (t + 1) * tile) for t in sel_axes[0]])
    cols = np.concatenate([np.arange(t * tile, (t + 1) * tile) for t in sel_axes[1]])
    return te, full, a, sw.TileSelection(sel_axes), lambda: a[np.ix_(rows, cols)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--number", type=int, default=5)
    args = parser.parse_args()
    te, full, a, sel, numpy_gather = case()
    rows, cols = sel.per_axis

    def ours():
        return te.project(full, sel).wait()

    # The same gather on the C-ordered view (rows of memory along the last
    # index): NumPy's most favourable orientation, as a second anchor.
    at = a.T
    tile = 256
    r_idx = np.concatenate([np.arange(t * tile, (t + 1) * tile) for t in rows])
    c_idx = np.concatenate([np.arange(t * tile, (t + 1) * tile) for t in cols])

    def numpy_gather_c():
        return at[np.ix_(c_idx, r_idx)]

    with sw.no_grad():
        r = ours()
    # check once: our dense first-axis-fastest result equals NumPy's gather
    expected = numpy_gather()
    assert np.array_equal(np.asarray(r), expected)
    assert np.array_equal(numpy_gather_c().T, expected)
    ours_t, np_t, npc_t = [], [], []
    with sw.no_grad():
        for _ in range(args.rounds):
            ours_t.append(per_call(ours, args.number))
            np_t.append(per_call(numpy_gather, args.number))
            npc_t.append(per_call(numpy_gather_c, args.number))
    o = statistics.median(ours_t)
    print(f"numpy {np.__version__}; median over {args.rounds} rounds of {args.number} calls")
    print(f"{'case':<64} {'ours ms':>8} {'numpy ms':>9} {'numpy/ours':>10}")
    for name, times in [("a[np.ix_(rows, cols)]", np_t), ("a.T[np.ix_(cols, rows)]", npc_t)]:
        m = statistics.median(times)
        print(f"{'project 1/16 of 4096^2 f32 vs ' + name:<64} "
              f"{o * 1e3:8.3f} {m * 1e3:9.3f} {m / o:9.2f}x")


if __name__ == "__main__":
    main()
