"""Printing cost: str() of large tensors against NumPy's str() of the
same-size array, measured in the same run.

One line per case: our median time per call, NumPy's, and the ratio
(ours / NumPy). Rounds alternate the two; each round is the best of three
timings, the figure the median over rounds. Target (issue 10): str() of a
10**7-element tensor under 10 ms (it reads only the edge elements).
Also: numpy.asarray(t) for tensors NumPy cannot take over DLPack (the
one-pass copy) against ndarray.copy() of the same size, and
friendly.tensor(ndarray) against numpy's astype copy.

    meson setup build/bench -Dbuildtype=release -Dfault_injection=false
    SW_BUILD_DIR=build/bench tools/dev python bench/repr.py
"""

import argparse
import os
import statistics
import timeit

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

from _release_only import require_release_build

require_release_build()

import numpy as np

import strideweave as sw
from strideweave import friendly as F


def per_call(fn, number):
    return min(timeit.repeat(fn, number=number, repeat=3)) / number


def case(name, ours, anchor, anchor_name, rounds, number):
    a, b = [], []
    for _ in range(rounds):
        a.append(per_call(ours, number))
        b.append(per_call(anchor, number))
    mo, ma = statistics.median(a), statistics.median(b)
    print(f"{name:<46} {mo * 1e3:>10.4f} {anchor_name:<22} {ma * 1e3:>10.4f} {mo / ma:>7.3f}")
    return mo


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    r = args.rounds
    print(f"numpy {np.__version__}; median over {r} rounds; times in ms per call")
    print(f"{'case':<46} {'ours ms':>10} {'anchor':<22} {'anchor ms':>10} {'ratio':>7}")

    n = 10 ** 7
    t = F.zeros(n)
    arr = np.zeros(n, dtype=np.float32)
    t2 = F.zeros(1000, n // 1000)
    arr2 = np.zeros((1000, n // 1000), dtype=np.float32)
    ms = case("str(t), 10**7 Float32, rank 1", lambda: str(t), lambda: str(arr),
              "str(ndarray)", r, 20)
    case("str(t), 10**7 Float32, 1000 x 10**4", lambda: str(t2), lambda: str(arr2),
         "str(ndarray)", r, 20)
    ti = F.arange(n, dtype=sw.DType.Int32)
    ai = np.arange(n, dtype=np.int32)
    case("str(t), 10**7 Int32", lambda: str(ti), lambda: str(ai), "str(ndarray)", r, 20)
    print(f"target: str() of a 10**7-element tensor < 10 ms: {ms * 1e3:.4f} ms "
          f"({'met' if ms < 0.010 else 'NOT met'})")

    m = 10 ** 6
    g = sw.Tensor(sw.Generic([0.0] * m), 0, sw.Layout(sw.Shape([m]), sw.Stride([1])))
    ga = np.zeros(m, dtype=np.float32)
    case("np.asarray(t), 10**6 Float32 on Generic", lambda: np.asarray(g), lambda: ga.copy(),
         "ndarray.copy()", r, 20)
    gp = sw.Tensor(sw.Generic([0.0] * m), 0, sw.Layout(sw.Shape([1000, 1000]),
                                                       sw.Stride([1000, 1])))
    gpa = np.zeros((1000, 1000), dtype=np.float32).T
    case("np.asarray(t), 10**6 permuted on Generic", lambda: np.asarray(gp),
         lambda: np.asfortranarray(gpa.T), "asfortranarray(a.T)", r, 10)
    src = np.random.default_rng(0).standard_normal(m)
    case("friendly.tensor(float64 ndarray), 10**6", lambda: F.tensor(src),
         lambda: src.astype(np.float32), "astype(float32)", r, 10)


if __name__ == "__main__":
    main()
