"""Test-only helpers for the movement tests (no tests here).

Python-defined carriers over a list, value fillers for every carrier class,
a state snapshot for "nothing changed" checks, and the two deterministic
ways to hold a move in its pending interval:

* `held()` -- `strideweave._C._hold_moves(True)`: built-in C jobs are queued
  but not started until the block ends (always switched back off, so a
  failing test cannot wedge the pool for the tests after it);
* `BlockedCopy` -- a MoveOperation whose `_copy` blocks on a
  `threading.Event`, run from a helper thread, so the caller observes the
  carriers while the transfer is in progress.
"""

import contextlib
import threading

import strideweave as sw
from strideweave import _C

D = sw.DType

# Built-in async jobs above this size never complete inline (move_api: "transfers
# <= 64 KiB may complete inline"); 20000 Float32 slots = 80 KB.
BIG = 20_000

ZERO = {D.Float32: 0.0, D.Int32: 0, D.Bool: False}


def L(shape, stride):
    return sw.Layout(sw.Shape(shape), sw.Stride(stride))


class PyList(sw.Carrier):
    """A Python-defined carrier over a list: C-2 hooks plus `_allocate`, so an
    empty one is allocatable-empty (C-12)."""

    def __init__(self, values=(), dtype=D.Float32, mutable=True):
        super().__init__()
        self.values = list(values)
        self._dtype = dtype
        self.mutable = mutable
        self.allocations = []

    def size(self):
        return len(self.values)

    def dtype(self):
        return self._dtype

    def get_value(self, index):
        return self.values[index]

    def set_value(self, index, value):
        self.values[index] = value

    def _is_mutable(self):
        return self.mutable

    def _allocate(self, size):
        self.allocations.append(size)
        self.values.extend([ZERO[self._dtype]] * (size - len(self.values)))

    def _release(self):
        self.values = []


class FixedPyList(sw.Carrier):
    """Like PyList but with no `_allocate`: never allocatable-empty."""

    def __init__(self, values=(), dtype=D.Float32):
        super().__init__()
        self.values = list(values)
        self._dtype = dtype

    def size(self):
        return len(self.values)

    def dtype(self):
        return self._dtype

    def get_value(self, index):
        return self.values[index]

    def set_value(self, index, value):
        self.values[index] = value

    def _is_mutable(self):
        return True

    def _release(self):
        self.values = []


# ---- values ------------------------------------------------------------------


def slot_value(dtype, k):
    """A distinct, exactly representable value for slot k."""
    if dtype is D.Float32:
        return k * 1.5 - 7.25
    if dtype is D.Int32:
        return k * 7 - 3
    return k % 3 != 1


def slot_values(dtype, n):
    return [slot_value(dtype, k) for k in range(n)]


def make_carrier(kind, values, dtype):
    """A live carrier of class `kind` ("CPU", "Generic", "FileBacked", "Py")
    holding `values` in its slots."""
    values = list(values)
    if kind == "CPU":
        c = sw.CPU(len(values), dtype=dtype)
        for k, v in enumerate(values):
            c[k] = v
        return c
    if kind == "Generic":
        return sw.Generic(values, dtype=dtype)
    if kind == "FileBacked":
        c = sw.FileBacked(dtype=dtype)
        c._allocate(len(values))
        for k, v in enumerate(values):
            c[k] = v
        return c
    if kind == "Py":
        return PyList(values, dtype=dtype)
    raise AssertionError(kind)


def make_destination(kind, cosize, dtype, fill=None):
    """A destination for a move of `cosize` slots: allocatable-empty for
    FileBacked and Py, exactly `cosize` slots (filled with `fill` or the dtype
    zero) for CPU and Generic."""
    if kind in ("FileBacked", "Py"):
        return sw.FileBacked(dtype=dtype) if kind == "FileBacked" else PyList(dtype=dtype)
    fill = ZERO[dtype] if fill is None else fill
    return make_carrier(kind, [fill] * cosize, dtype)


def values_of(c):
    return [c[i] for i in range(c.size())]


def state(c, read_values=True):
    """What "nothing changed" compares for one carrier."""
    s = {
        "version": c.version,
        "released": c.is_released(),
        "size": c.size(),
        "mutable": c.is_mutable(),
        "owned": c.is_owned(),
    }
    if isinstance(c, sw.FileBacked):
        s["file_bytes"] = c.path.stat().st_size if c.path.exists() else None
    if read_values and not c.is_released():
        s["values"] = values_of(c)
    return s


# ---- holding a move pending ---------------------------------------------------


@contextlib.contextmanager
def held():
    """Built-in async jobs submitted inside the block start when it ends."""
    _C._hold_moves(True)
    try:
        yield
    finally:
        _C._hold_moves(False)


class BlockedCopy:
    """Run `op_class().forward(tensor, destination)` (or `move_async(...).wait()`
    when `via_move` is true) on a helper thread, with an elementwise `_copy`
    that blocks until `release()`; `entered` is set once `_copy` runs.

        with BlockedCopy(t, d) as b:   # _copy is now blocked
            ...observe the pending carriers...
        b.result / b.error             # after the block: the move finished
    """

    def __init__(self, tensor, destination, via_move=False, inside=None):
        self.tensor, self.destination = tensor, destination
        self.via_move = via_move
        self.entered = threading.Event()
        self.go = threading.Event()
        self.result = self.error = None
        self.returned = False  # move_async returned (via_move only)
        self.inside = inside  # optional callable(tensor, destination, output)
        outer = self

        class BlockingCopy(sw.MoveOperation):
            def _copy(self, tensor, destination, output, element_count):
                outer.thread = threading.get_ident()
                outer.entered.set()
                if not outer.go.wait(60):
                    raise TimeoutError("test never released the blocked copy")
                if outer.inside is not None:
                    outer.inside(tensor, destination, output)
                for i in range(tensor.size()):
                    output[i] = tensor[i]

        self.op_class = BlockingCopy

    def _run(self):
        try:
            if self.via_move:
                h = sw.move_async(self.tensor, self.destination)
                self.returned = True
                self.result = h.wait()
            else:
                self.result = self.op_class().forward(self.tensor, self.destination)
        except BaseException as e:  # noqa: BLE001 - handed to the test
            self.error = e
        finally:
            self.entered.set()  # a failure before _copy must not hang __enter__

    def __enter__(self):
        self.worker = threading.Thread(target=self._run)
        self.worker.start()
        assert self.entered.wait(60), "_copy never started"
        if self.error is not None:
            self.go.set()
            self.worker.join(60)
            raise AssertionError(f"move failed before _copy: {self.error!r}")
        return self

    def __exit__(self, *exc):
        self.go.set()
        self.worker.join(60)
        assert not self.worker.is_alive(), "blocked move never finished"
        return False


def warm_up():
    """Run one move on every built-in route so that lazily created executor
    state (pool threads, queues, the FileBacked session) exists before a
    live-bytes baseline is taken."""
    for src_kind, dst in (("CPU", lambda: sw.FileBacked()), ("FileBacked", lambda: sw.CPU(BIG)),
                          ("Generic", lambda: sw.CPU(BIG)), ("CPU", lambda: sw.CPU(BIG))):
        c = make_carrier(src_kind, [0.0] * BIG, D.Float32)
        sw.move(sw.Tensor(c, 0, L([BIG], [1])), dst())


def scaled_tensor():
    """A validated two-subtensor ScaledInt32 Tensor (T-4) on two CPU carriers."""
    c0 = sw.CPU(4, dtype=D.Int32)
    c1 = sw.CPU(1, dtype=D.Float32)
    t = sw.Tensor._from_representation(
        D.ScaledInt32,
        [(c0, 0, L([2, 2], [1, 2])), (c1, 0, L([1], [1]))],
        [L([2, 2], [0, 0])],
    )
    return t, c0, c1
