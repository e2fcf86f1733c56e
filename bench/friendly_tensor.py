"""Arrays in: friendly.tensor(array) against ndarray.copy() of the same
array, measured in the same run (issue 18 item 3).

One line per case: our median time per call, the anchor's, and the
throughput ratio (anchor time / ours: 1.0 is as fast as a.copy(), higher is
faster). Rounds alternate the two; each round is the best of three timings,
the figure the median over rounds. Target: >= 0.5 for a contiguous
64 MiB float32 ndarray (and a torch tensor, read over DLPack).

    meson setup build/bench -Dbuildtype=release -Dfault_injection=false
    SW_BUILD_DIR=build/bench tools/dev python bench/friendly_tensor.py
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

from strideweave import friendly as F


def per_call(fn, number):
    return min(timeit.repeat(fn, number=number, repeat=3)) / number


def case(name, ours, anchor, rounds, number):
    a, b = [], []
    for _ in range(rounds):
        a.append(per_call(ours, number))
        b.append(per_call(anchor, number))
    mo, ma = statistics.median(a), statistics.median(b)
    print(f"{name:<44} {mo * 1e3:>9.3f} {ma * 1e3:>12.3f} {ma / mo:>8.3f}")
    return ma / mo


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    r = args.rounds
    n = (64 << 20) // 4
    a = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    a2 = a.reshape(4096, n // 4096)
    print(f"numpy {np.__version__}; median over {r} rounds; ms per call; "
          "ratio = a.copy() time / ours (target >= 0.5)")
    print(f"{'case':<44} {'ours ms':>9} {'a.copy() ms':>12} {'ratio':>8}")
    case("64 MiB float32 1-D ndarray", lambda: F.tensor(a), a.copy, r, 2)
    case("64 MiB float32 2-D C-order ndarray", lambda: F.tensor(a2), a2.copy, r, 2)
    try:
        import torch
    except ImportError:
        return
    ta = torch.from_numpy(a2)
    case("64 MiB float32 2-D torch tensor (DLPack)", lambda: F.tensor(ta), a2.copy, r, 2)
    s = a2[:, ::2]
    case("32 MiB float32 strided view (a[:, ::2])", lambda: F.tensor(s), s.copy, r, 2)


if __name__ == "__main__":
    main()
