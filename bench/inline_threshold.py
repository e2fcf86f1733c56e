"""Where small moves should run: on their caller, or on the pool.

Two thresholds, both 64 KiB of span today, decide where a small move runs:

  inflight  move_async: a span up to the core's HERE_BYTES (src/core/move.c)
            runs and commits on its caller before move_async returns; a
            larger one goes to the pool, its commit to the completion thread.
  single    move(): the caller runs a span up to 16 MiB itself either way;
            up to the binding's GIL_HELD_BYTES (src/python/py_move_core.c)
            it keeps the GIL while it copies, past it it lets the GIL go.

This times both sides of the line with the same copy work: moves of
exactly 64 KiB, and moves of 64 KiB plus one Float32 slot (4 bytes more,
the other side). Rounds alternate the two sides; min and median
microseconds per move are printed, and the ratio of the medians, first side
over second (above 1: the second side is faster at the threshold, and the
threshold should go down; well below 1: it could go up).

Run it on a quiet machine: under load both sides are noise.

    meson setup build/bench -Dbuildtype=release -Dfault_injection=false
    SW_BUILD_DIR=build/bench tools/dev python bench/inline_threshold.py
    SW_BUILD_DIR=build/bench tools/dev python bench/inline_threshold.py --cases 'cpu->file'
    (quote --cases: an unquoted '>' is a shell redirection)
"""

import argparse
import statistics

from _release_only import require_release_build

require_release_build()

import numpy as np  # noqa: E402

import strideweave as sw  # noqa: E402
from strideweave import CPU, FileBacked  # noqa: E402
from sweep import cpu_tensor, timed_moves  # noqa: E402

THRESHOLD = 64 << 10
CASES = ("cpu->cpu", "cpu->file", "file->cpu")


def one_round(case, nbytes, k, inflight):
    """Seconds per move of k moves of nbytes, sources and destinations
    made before timing."""
    n = nbytes // 4
    ref = np.arange(n, dtype=np.float32)
    with sw.no_grad():
        if case == "file->cpu":
            srcs = [sw.move(cpu_tensor(n, ref), FileBacked()) for _ in range(k)]
        else:
            srcs = [cpu_tensor(n, ref) for _ in range(k)]
        dsts = [FileBacked() if case == "cpu->file" else CPU(n, empty=True) for _ in range(k)]
        t, out = timed_moves(srcs, dsts, inflight)
    assert out[-1].carrier[n - 1] == float(ref[-1])
    for o in out:
        o.carrier.release()
    return t / k


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--modes", default="inflight,single")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--smoke", action="store_true", help="one round of 4 moves: a quick check that it runs")
    p.add_argument("-k", type=int, default=64, help="moves per round")
    a = p.parse_args()
    if a.smoke:
        a.rounds, a.k = 1, 4
    print(f"{'case':10} {'mode':8} {'64 KiB':>22} {'64 KiB + 4 B':>22} {'ratio':>8}")
    print(f"{'':10} {'':8} {'min / median µs':>22} {'min / median µs':>22}")
    for case in a.cases.split(","):
        for mode in a.modes.split(","):
            here, pool = [], []
            one_round(case, THRESHOLD, a.k, mode == "inflight")  # warm-up
            for _ in range(a.rounds):
                here.append(one_round(case, THRESHOLD, a.k, mode == "inflight"))
                pool.append(one_round(case, THRESHOLD + 4, a.k, mode == "inflight"))
            h, q = statistics.median(here), statistics.median(pool)
            print(f"{case:10} {mode:8} {min(here) * 1e6:10.2f} / {h * 1e6:9.2f} "
                  f"{min(pool) * 1e6:10.2f} / {q * 1e6:9.2f} {h / q:8.2f}", flush=True)


if __name__ == "__main__":
    main()
