"""Exact injectivity (Layout.is_injective) on common and interleaved layouts,
against a NumPy anchor measured in the same run.

One line per layout family: our median time for building the Layout and
asking is_injective (a fresh Layout each call: the answer is cached per
Layout), the anchor (NumPy: every scalar index of the layout, then
np.unique), and the ratio ours / anchor. Common layouts are decided while
the Layout is built; interleaved ones enumerate within a fixed memory cap.
Use a release build.

    python bench/injectivity.py
    python bench/injectivity.py --rounds 9
"""

import argparse
import statistics
import time

from _release_only import require_release_build

require_release_build()

import numpy as np

import strideweave as sw

FAMILIES = [
    # name, extents, strides
    ("row-major 64x64x64", (64, 64, 64), (4096, 64, 1)),
    ("transposed 512x512", (512, 512), (1, 512)),
    ("strided slice (holes)", (100, 50), (3, 1000)),
    ("broadcast (stride 0)", (256, 256), (0, 1)),
    ("16 leaves of 2", (2,) * 16, tuple(1 << i for i in range(16))),
    ("interleaved 3x3 + radix top", (3, 3, 1024), (2, 3, 11)),
    ("interleaved 3 leaves, 4000 coords", (1000, 2, 2), (4, 6, 9)),
    ("interleaved 3 leaves, 2**20 coords", (2 ** 18, 2, 2), (4, 6, 9)),
    ("interleaved, huge cosize", (2, 2 ** 40 + 1), (3, 2)),
]


def indices(extents, strides):
    idx = np.zeros(1, dtype=np.int64)
    for e, s in zip(extents, strides):
        idx = (idx[:, None] + np.arange(e, dtype=np.int64)[None, :] * s).reshape(-1)
    return idx


def anchor(extents, strides):
    start = time.perf_counter()
    idx = indices(extents, strides)
    np.unique(idx).size == idx.size
    return time.perf_counter() - start


def ours(extents, strides, reps):
    start = time.perf_counter()
    for _ in range(reps):
        sw.Layout(sw.Shape(*extents), sw.Stride(*strides)).is_injective
    return (time.perf_counter() - start) / reps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    print(f"{'family':38} {'ours':>11} {'numpy':>11} {'ratio':>8}")
    for name, extents, strides in FAMILIES:
        size = int(np.prod(extents, dtype=object))
        can_anchor = size <= 1 << 22
        reps = 2000 if size <= 1 << 12 else 20
        a, o = [], []
        try:
            ours(extents, strides, 1)
        except MemoryError:  # a build that sizes its record by cosize
            print(f"{name:38} {'MemoryError':>11}")
            continue
        for _ in range(args.rounds):
            o.append(ours(extents, strides, reps))
            if can_anchor:
                a.append(anchor(extents, strides))
        mo = statistics.median(o)
        if can_anchor:
            ma = statistics.median(a)
            print(f"{name:38} {mo * 1e6:9.2f}us {ma * 1e6:9.1f}us {mo / ma:8.4f}")
        else:
            print(f"{name:38} {mo * 1e6:9.2f}us {'(too big)':>11} {'-':>8}")


if __name__ == "__main__":
    main()
