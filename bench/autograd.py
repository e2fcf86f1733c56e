"""Forward and backward of reduce_sum(elementwise_mul(x, w)) against PyTorch
(CPU), measured in the same run.

One line: our median time for forward+backward on N Float32 elements, the
same computation in PyTorch, and the ratio (ours / PyTorch; target <= 2.0,
issue 7). The two sides alternate round by round; the figure is the median.

    python bench/autograd.py                 # against an installed build
    python bench/autograd.py --n 1000000 --rounds 9
"""

import argparse
import os
import statistics
import time

from _release_only import require_release_build

require_release_build()

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import torch

import strideweave as sw

torch.set_num_threads(1)


def leaf(values):
    n = values.size
    t = sw.Tensor(sw.CPU(n, empty=True), 0, sw.Layout(sw.Shape(n), sw.Stride(1)))
    np.from_dlpack(t)[:] = values
    return t


def ours(x, w):
    x.grad = None
    w.grad = None
    start = time.perf_counter()
    loss = sw.reduce_sum(sw.elementwise_mul(x, w), "a -> 1")
    loss.backward()
    return time.perf_counter() - start


def theirs(x, w):
    x.grad = None
    w.grad = None
    start = time.perf_counter()
    loss = (x * w).sum()
    loss.backward()
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    xv = rng.standard_normal(args.n, dtype=np.float32)
    wv = rng.standard_normal(args.n, dtype=np.float32)
    x, w = leaf(xv), leaf(wv)
    tx = torch.from_numpy(xv.copy()).requires_grad_()
    tw = torch.from_numpy(wv.copy()).requires_grad_()
    ours(x, w), theirs(tx, tw)  # warm-up
    a, b = [], []
    for _ in range(args.rounds):
        a.append(ours(x, w))
        b.append(theirs(tx, tw))
    np.testing.assert_allclose(np.from_dlpack(x.grad), tx.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(np.from_dlpack(w.grad), tw.grad.numpy(), rtol=1e-6)
    ma, mb = statistics.median(a), statistics.median(b)
    ratio = ma / mb
    print(f"strideweave {sw.__file__}, torch {torch.__version__}, n={args.n}, "
          f"median of {args.rounds}")
    print(f"{'case':40s} {'ours ms':>9s} {'torch ms':>9s} {'ratio':>6s}  target")
    print(f"{'reduce_sum(elementwise_mul(x, w)) fwd+bwd':40s} {ma * 1e3:9.2f} "
          f"{mb * 1e3:9.2f} {ratio:6.2f}  <= 2.0x {'ok' if ratio <= 2.0 else 'MISSED'}")


if __name__ == "__main__":
    main()
