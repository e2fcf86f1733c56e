"""Measuring the core's live allocations in tests."""

import gc

from strideweave import _C


def settled_live_bytes():
    """`_C._live_bytes()` after collecting earlier tests' garbage.

    Otherwise a collection that runs mid-test could free older objects and
    move the baseline, making a leak check fail (or pass) by test order.
    """
    gc.collect()
    return _C._live_bytes()
