"""DLPack export cost against NumPy and PyTorch, measured in the same run.

One line per case: our median time per call, the anchor's median time per
call, and the ratio (ours / anchor). The two are measured alternately, round
by round; each round is the best of three timings, the figure the median
over rounds. Targets (issue 3): export <= 1.0x NumPy's
ndarray.__dlpack__ with the same arguments; np.from_dlpack(t) <= 1.2x
np.from_dlpack(ndarray).

    .venv/bin/python bench/dlpack_export.py              # the release build `make demo` installs
    .venv/bin/python bench/dlpack_export.py --rounds 15

It refuses to run on a debug or fault-injection build (bench/_release_only.py).
"""

import argparse
import os
import statistics
import timeit

from _release_only import require_release_build

require_release_build()

# No BLAS work here; idle BLAS threads spinning on a small machine only add noise.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import torch

import strideweave as sw


def rank1():
    n = 1024
    c = sw.CPU(n)
    t = sw.Tensor(c, 0, sw.Layout(sw.Shape([n]), sw.Stride([1])))
    return t, np.zeros(n, dtype=np.float32), torch.zeros(n)


def rank6():
    shape = [2, [3, [4, 2]], [5, 3]]
    stride = [1, [2, [6, 24]], [48, 240]]
    layout = sw.Layout(sw.Shape(shape), sw.Stride(stride))
    t = sw.Tensor(sw.CPU(layout.cosize), 0, layout)
    a = np.zeros((3, 5, 2, 4, 3, 2), dtype=np.float32).transpose(5, 4, 3, 2, 1, 0)
    assert a.shape == (2, 3, 4, 2, 5, 3) and a.ndim == len(t.layout.infix())
    x = torch.zeros(3, 5, 2, 4, 3, 2).permute(5, 4, 3, 2, 1, 0)
    return t, a, x


def per_call(fn, number):
    """Seconds per call for one round: the best of three timings of `number`
    calls, so a scheduler hiccup inside a round does not decide it."""
    return min(timeit.repeat(fn, number=number, repeat=3)) / number


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--number", type=int, default=20000)
    args = parser.parse_args()

    print(f"numpy {np.__version__}, torch {torch.__version__}; median over {args.rounds} rounds of {args.number} calls")
    print(f"{'case':<50} {'ours ns':>9} {'anchor':<18} {'anchor ns':>9} {'ratio':>6}")
    results = []
    for label, build in (("rank-1", rank1), ("rank-6 hierarchical", rank6)):
        t, a, x = build()
        mv = (1, 0)
        cases = [
            ("__dlpack__()", t.__dlpack__, "ndarray.__dlpack__", a.__dlpack__),
            ("__dlpack__()", t.__dlpack__, "torch.__dlpack__", x.__dlpack__),
            ("__dlpack__(max_version=(1,0))", lambda: t.__dlpack__(max_version=mv),
             "ndarray.__dlpack__", lambda: a.__dlpack__(max_version=mv)),
            ("__dlpack__(max_version=(1,0))", lambda: t.__dlpack__(max_version=mv),
             "torch.__dlpack__", lambda: x.__dlpack__(max_version=mv)),
            ("np.from_dlpack(t)", lambda: np.from_dlpack(t),
             "np.from_dlpack(nd)", lambda: np.from_dlpack(a)),
        ]
        for name, ours, anchor_name, anchor in cases:
            # interleave the two measurements so drift hits both alike
            o, n = [], []
            for _ in range(args.rounds):
                o.append(per_call(ours, args.number))
                n.append(per_call(anchor, args.number))
            ours_t, anchor_t = statistics.median(o), statistics.median(n)
            ratio = ours_t / anchor_t
            results.append((label, name, anchor_name, ratio))
            print(f"{label + ' ' + name:<50} {ours_t * 1e9:9.1f} {anchor_name:<18} "
                  f"{anchor_t * 1e9:9.1f} {ratio:6.2f}")


if __name__ == "__main__":
    main()
