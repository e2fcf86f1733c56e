"""Measuring the core's live allocations in tests."""

import gc

from strideweave import _C

_WARM = {"done": False}


def _warm_moves():
    """Run a move on the move engine's pool and one on its caller, once per
    process.

    The engine (its queues and completion records) is made at the first
    move handed to the pool and lives as long as the process, like a thread
    pool; the first move run on its caller leaves its handle for the next to
    reuse. A leak check whose test makes the process's first such move would
    otherwise count them (about 1.5 KiB) as a leak when run alone.
    """
    if _WARM["done"]:
        return
    import strideweave as sw
    from strideweave import CPU, Layout, Shape, Stride, Tensor

    with sw.no_grad():
        for n in (1 << 18, 4):  # 1 MiB of Float32 goes to the pool; 16 bytes stay
            src = Tensor(CPU(n), 0, Layout(Shape(n), Stride(1)))
            sw.move_async(src, CPU(n, empty=True)).wait()
    _WARM["done"] = True


def settled_live_bytes():
    """`_C._live_bytes()` after collecting earlier tests' garbage.

    Otherwise a collection that runs mid-test could free older objects and
    move the baseline, making a leak check fail (or pass) by test order.
    """
    _warm_moves()
    gc.collect()
    return _C._live_bytes()
