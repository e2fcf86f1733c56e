"""Every carrier's state lives in a core carrier handle, Python subclasses
included (their handle holds state only; the core never calls back into
Python). The deadlock rule: a thread holding the GIL and core calls on the
same carrier from another thread never wait on each other."""

import threading

import strideweave as sw
from strideweave.carriers.move import registered_move_operation

from moves_for_tests import PyList

BOUND_SECONDS = 30  # a bound for a broken build, never reached when it works


class Src(PyList):
    """A separate source class so the registered pair is this file's alone."""


observed = threading.Event()


class Slow(sw.MoveOperation):
    """An elementwise Python _copy: it runs on a worker thread, which takes
    the GIL for every slot while the core marks stay on the carriers. It
    starts once the other thread has seen the source pending, so the two
    really overlap."""

    def _copy(self, tensor, destination, output, element_count):
        if not observed.wait(BOUND_SECONDS):
            raise TimeoutError("the reading thread never saw the move pending")
        for i in range(element_count):
            output[i] = tensor[i]


def test_gil_holder_and_a_worker_on_the_same_python_carrier_do_not_deadlock():
    n = 2000
    c = Src([float(i) for i in range(n)])
    t = sw.Tensor(c, 0, sw.Layout(sw.Shape(n), sw.Stride(1)))
    d = sw.CPU(n)
    seen = {"pending": 0}
    observed.clear()

    def hammer(h):
        # Holds the GIL between bytecodes and reads the same carrier's core
        # state while the worker thread runs the copy.
        while not h.done:
            if not c.is_mutable():
                seen["pending"] += 1
                observed.set()
            c.version
            c.is_released()
            d.is_mutable()

    with registered_move_operation(Src, sw.CPU, Slow):
        h = sw.move_async(t, d)
        th = threading.Thread(target=hammer, args=(h,))
        th.start()
        th.join(BOUND_SECONDS)
        assert not th.is_alive(), "the state reads and the copy deadlocked"
        r = h.wait()
    assert r.tolist()[:3] == [0.0, 1.0, 2.0] and c.is_released()
    assert seen["pending"] > 0  # the reads really overlapped the move
