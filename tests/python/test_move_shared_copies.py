"""Moves whose copy the core shares with a second thread: a CPU -> CPU copy
of 32 KiB to 8 MiB that runs on its caller (any move() that size, a
move_async up to 64 KiB) is cut in two halves, one copied by the caller and
one by the core's copy partner thread while it is free. Values must come out
exact whatever the size, offset and alignment, with moves from many threads
at once, in runs (the partner awake) and after pauses (the partner asleep,
woken by a large copy), and in a forked child, whose partner is its own.
Read back through NumPy and PyTorch."""

import os
import random
import threading
import time

import numpy as np
import pytest

import child_process
import strideweave as sw
from child_process import last_json
from strideweave import CPU, Layout, Shape, Stride, Tensor

torch = pytest.importorskip("torch")

KIB = 1024 // 4  # slots of a Float32 KiB


def source(slots, offset, seed):
    """A tensor of `slots` Float32 at `offset` in a CPU carrier, holding
    values no other source holds."""
    t = Tensor(CPU(offset + slots, empty=True), offset, Layout(Shape(slots), Stride(1)))
    whole = np.from_dlpack(Tensor(t.carrier, 0, Layout(Shape(offset + slots), Stride(1))))
    whole[:] = np.arange(offset + slots, dtype=np.float32) * 0.5 + seed
    del whole
    return t


def expected(slots, offset, seed):
    return np.arange(offset, offset + slots, dtype=np.float32) * 0.5 + seed


def move_and_check(slots, offset, seed, how):
    with sw.no_grad():
        src = source(slots, offset, seed)
        dst = CPU(slots, empty=True)
        out = sw.move(src, dst) if how == "move" else sw.move_async(src, dst).wait()
    want = expected(slots, offset, seed)
    assert np.array_equal(np.from_dlpack(out), want)
    assert torch.equal(torch.from_dlpack(out), torch.from_numpy(want))


@pytest.mark.parametrize("how", ["move", "move_async"])
@pytest.mark.parametrize("kib", [31, 32, 33, 64, 257, 1024, 8192, 8192 + 1])
@pytest.mark.parametrize("offset", [0, 1, 15])
def test_values_exact_around_the_sizes_that_share(how, kib, offset):
    for seed in range(3):  # a run: the partner wakes and takes halves
        move_and_check(kib * KIB + seed, offset, seed, how)


def test_a_run_of_moves_then_a_pause_then_a_large_move():
    for seed in range(64):
        move_and_check(64 * KIB, seed % 5, seed, "move")
    time.sleep(0.05)  # the partner sleeps
    move_and_check(4096 * KIB + 7, 3, 99, "move")  # wakes it for its own half
    move_and_check(40 * KIB, 0, 100, "move_async")


def test_moves_from_many_threads_at_once():
    errors = []

    def worker(k):
        rng = random.Random(k)
        try:
            for i in range(40):
                slots = rng.randrange(8 * KIB, 2048 * KIB)
                move_and_check(slots, rng.randrange(0, 64), k * 1000 + i,
                               rng.choice(["move", "move_async"]))
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


@pytest.mark.forks
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork()")
def test_forked_child_while_another_thread_shares_copies():
    proc = child_process.run_python("""
        import json, os, threading
        import numpy as np
        import strideweave as sw
        from strideweave import CPU, Layout, Shape, Stride, Tensor

        N = 256 * 256  # 256 KiB of Float32
        stop = threading.Event()

        def one_move(seed):
            src = Tensor(CPU(N, empty=True), 0, Layout(Shape(N), Stride(1)))
            a = np.from_dlpack(src)
            a[:] = np.arange(N, dtype=np.float32) + seed
            del a
            with sw.no_grad():
                out = sw.move(src, CPU(N, empty=True))
            return bool(np.array_equal(np.from_dlpack(out),
                                       np.arange(N, dtype=np.float32) + seed))

        def busy():
            while not stop.is_set():
                assert one_move(7)

        t = threading.Thread(target=busy)
        t.start()
        for _ in range(20):
            one_move(1)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            ok = all(one_move(s) for s in range(50))
            os.write(w, b"1" if ok else b"0")
            os._exit(0)
        os.close(w)
        child_ok = os.read(r, 1) == b"1"
        _, status = os.waitpid(pid, 0)
        stop.set()
        t.join()
        print(json.dumps({"child_ok": child_ok, "status": status}))
    """, timeout=120)
    report = last_json(proc)
    assert report == {"child_ok": True, "status": 0}
