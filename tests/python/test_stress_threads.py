"""Eight threads hammering shared carriers for a bounded time: DLPack export
and capsules dropped on other threads, element reads and writes, views,
release, ownership, FileBacked growth, moves. The property: no crash, no
undocumented exception, and every value read is one that was written.

STRIDEWEAVE_STRESS_SECONDS sets the duration (default 4 s; CI runs it
under the sanitizer build)."""

import os
import queue
import random
import threading
import time

import numpy as np

import strideweave as sw
from strideweave import CPU, FileBacked, Generic, Layout, Shape, Stride, Tensor

SECONDS = float(os.environ.get("STRIDEWEAVE_STRESS_SECONDS", "4"))
THREADS = 8
N = 64
# Refusals the API documents for a carrier another thread released, owns,
# or is moving.
EXPECTED = (RuntimeError, BufferError, IndexError, ValueError)
ALLOWED = {0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0}


def fresh_pool():
    pool = [CPU(N) for _ in range(4)] + [Generic([0.0] * N)]
    fb = FileBacked()
    fb._allocate(N)
    pool.append(fb)
    return pool


def test_eight_threads_share_carriers_without_crashing():
    carriers = fresh_pool()
    lock = threading.Lock()
    capsules = queue.Queue()
    failures = []
    succeeded = [0] * 10  # per operation, updated under the GIL
    deadline = time.monotonic() + SECONDS
    flat = Layout(Shape(N), Stride(1))
    view_layout = Layout(Shape(4, 8), Stride(1, 8))

    def pick(rng):
        with lock:
            c = rng.choice(carriers)
            if c.is_released():
                carriers[carriers.index(c)] = replacement = CPU(N)
                return replacement
            return c

    def step(rng):
        c = pick(rng)
        op = rng.randrange(10)
        run(rng, c, op)
        succeeded[op] += 1

    def run(rng, c, op):
        if op == 0:  # write a value from the allowed set
            c[rng.randrange(N)] = float(rng.randrange(8))
        elif op == 1:  # read: only written values may appear
            v = c[rng.randrange(N)]
            assert v in ALLOWED, v
        elif op == 2:  # export, hand the capsule to another thread to drop
            if type(c) is CPU:
                capsules.put(Tensor(c, 0, flat).__dlpack__(max_version=(1, 0)))
        elif op == 3:  # consume a capsule made elsewhere (numpy owns it now)
            try:
                cap = capsules.get_nowait()
            except queue.Empty:
                return
            del cap
        elif op == 4:  # views and their reads
            t = Tensor(c, 0, view_layout)
            v = sw.permute(t, 1, 0)
            assert set(v.tolist()) <= ALLOWED
        elif op == 5:  # release now and then
            if rng.random() < 0.2:
                c.release()
        elif op == 6:  # ownership round trip
            token = c._claim_ownership()
            try:
                c._begin_owner_access(token)
                c._end_owner_access(token)
            finally:
                c._relinquish_ownership(token)
        elif op == 7:  # FileBacked growth
            f = FileBacked()
            f._allocate(rng.randrange(1, 4 * N))
            f[0] = 1.0
            assert f[0] == 1.0
            f.release()
        elif op == 8:  # a move out of a shared carrier
            dst = CPU(N)
            out = sw.move(Tensor(c, 0, flat), dst)
            assert set(out.tolist()) <= ALLOWED
        else:  # numpy over an export, read only
            if type(c) is CPU:
                a = np.from_dlpack(Tensor(c, 0, flat))
                assert a.shape == (N,)

    def worker(seed):
        rng = random.Random(seed)
        while time.monotonic() < deadline:
            try:
                step(rng)
            except EXPECTED:
                pass
            except Exception as exc:  # pragma: no cover - reported below
                failures.append(repr(exc))
                return

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(SECONDS + 60)
    assert not any(t.is_alive() for t in threads), "a worker hung"
    while not capsules.empty():
        capsules.get_nowait()
    assert failures == []
    # every kind of operation really ran, many times
    assert all(n > 0 for n in succeeded), succeeded
    assert sum(succeeded) > 200, succeeded
