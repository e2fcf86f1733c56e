"""Small moves to and from a block device (move(), and move_async out of a
device) run their transfer on the calling thread (no pool round trip) and
keep every rule of a pool move: a move into
the device commits only once its bytes are durable (contract-carriers B-11),
a failure leaves the source live and unchanged, and many threads moving at
once each get their own values, durable, with no deadlock (B-9)."""

import errno
import gc
import os
import threading

import numpy as np
import pytest

import strideweave as sw
from strideweave import _C

from loop_device import loop_device  # noqa: F401

needs_faults = pytest.mark.skipif(not _C._fault_injection_enabled(),
                                  reason="needs a build with -Dfault_injection=true")

# 4000 bytes (not a whole block), 16 KiB and 64 KiB: the small-move range.
SMALL_SIZES = [1000, 4 << 10, 16 << 10]


def flat(carrier, n=None):
    n = carrier.size() if n is None else n
    return sw.Tensor(carrier, 0, sw.Layout(sw.Shape(n), sw.Stride(1)))


def filled(n, start):
    src = sw.CPU(n, empty=True)
    np.from_dlpack(flat(src))[:] = np.arange(start, start + n, dtype=np.float32)
    return src


def expect(n, start):
    return np.arange(start, start + n, dtype=np.float32)


def backing_floats(backing, offset, n):
    """Slots as the loop device's backing file holds them: what reached the
    device, not what the device's page cache shows."""
    with open(backing, "rb") as f:
        f.seek(offset)
        return np.frombuffer(f.read(4 * n), dtype=np.float32)


@pytest.fixture
def backing(tmp_path, loop_device):  # noqa: F811
    # loop_device attaches tmp_path/loop-backing.img (tests/python/loop_device.py)
    return loop_device, os.path.join(str(tmp_path), "loop-backing.img")


@pytest.mark.parametrize("n", SMALL_SIZES)
@pytest.mark.parametrize("how", ["move", "move_async"])
def test_b11_small_move_into_a_device_is_durable_when_it_returns(backing, n, how):
    # Read the backing file without any flush: a move that reported done
    # before its fdatasync would leave the backing file without the values.
    path, file = backing
    dev = sw.BlockDevice(path)
    src = filled(n, 0.5)
    dst = dev.allocate(n, empty=True)
    if how == "move":
        out = sw.move(flat(src), dst)
    else:
        out = sw.move_async(flat(src), dst).wait(timeout=60)
    assert out.carrier is dst and src.is_released() and not dev.is_faulted()
    assert np.array_equal(backing_floats(file, dst.device_offset_bytes, n), expect(n, 0.5))
    del out, dst
    gc.collect()
    dev.close()


def test_small_block_read_move_async_finishes_on_its_caller(loop_device):  # noqa: F811
    # No pool round trip: the handle is already complete when move_async
    # returns, and the move is committed (source released, values there).
    n = 4 << 10
    dev = sw.BlockDevice(loop_device)
    blk = sw.move(flat(filled(n, 3.0)), dev.allocate(n, empty=True)).carrier
    handle = sw.move_async(flat(blk), sw.CPU(n, empty=True))
    assert handle.done
    out = handle.wait()
    assert blk.is_released()
    assert np.array_equal(np.from_dlpack(out), expect(n, 3.0))
    del blk, handle, out
    gc.collect()
    dev.close()



@needs_faults
@pytest.mark.parametrize("how", ["move", "move_async"])
def test_small_block_read_lets_other_threads_run_while_its_transfer_waits(loop_device, how):  # noqa: F811
    # The read runs on its caller and keeps the GIL for its checks and its
    # commit, but lets it go around the transfer, which may wait for the
    # device: another Python thread runs meanwhile (here, the one that lets
    # the paused transfer go on; with the GIL kept, it could not).
    n = 4 << 10
    dev = sw.BlockDevice(loop_device)
    blk = sw.move(flat(filled(n, 8.0)), dev.allocate(n, empty=True)).carrier
    ran = []

    def let_it_go():
        _C._fault_wait_paused()
        ran.append(blk.is_released())
        _C._fault_resume()

    helper = threading.Thread(target=let_it_go)
    _C._fault_inject("blockdev_io_pause", 0, 1)
    try:
        helper.start()
        if how == "move":
            out = sw.move(flat(blk), sw.CPU(n, empty=True))
        else:
            out = sw.move_async(flat(blk), sw.CPU(n, empty=True)).wait(timeout=60)
    finally:
        _C._fault_clear()
        _C._fault_resume()
        helper.join(timeout=60)
    assert ran == [False]  # it ran inside the transfer, before the commit
    assert blk.is_released() and not dev.is_faulted()
    assert np.array_equal(np.from_dlpack(out), expect(n, 8.0))
    del blk, out
    gc.collect()
    dev.close()

def assert_unchanged(src, n, start, version):
    assert not src.is_released() and src.is_mutable()
    assert src.version == version
    assert np.array_equal(np.from_dlpack(flat(src)), expect(n, start))


def move_fails_with_eio(source, dst, fault, how):
    """Move `source`'s slots into `dst` with `fault` injected once; the
    move (or its wait) must fail OSError EIO."""
    _C._fault_inject(fault, 0, 1)
    try:
        with pytest.raises(OSError) as info:
            if how == "move":
                sw.move(flat(source), dst)
            else:
                sw.move_async(flat(source), dst).wait(timeout=60)
    finally:
        _C._fault_clear()
    assert info.value.errno == errno.EIO


@needs_faults
@pytest.mark.parametrize("fault", ["pwrite", "blockdev_fdatasync"])
@pytest.mark.parametrize("how", ["move", "move_async"])
def test_b11_failed_small_move_into_a_device_keeps_the_source(loop_device, fault, how):  # noqa: F811
    n = 4 << 10
    dev = sw.BlockDevice(loop_device)
    src = filled(n, 4.0)
    version = src.version
    dst = dev.allocate(n, empty=True)
    move_fails_with_eio(src, dst, fault, how)
    assert dev.is_faulted()
    assert_unchanged(src, n, 4.0, version)
    assert dst.version == 0 and not dst.is_released()
    # the source is free to move again (no pending mark left behind)
    again = sw.move(flat(src), sw.CPU(n, empty=True))
    assert np.array_equal(np.from_dlpack(again), expect(n, 4.0))
    del dst
    gc.collect()
    dev.close()


@needs_faults
@pytest.mark.parametrize("how", ["move", "move_async"])
def test_failed_small_move_out_of_a_device_keeps_the_source(loop_device, how):  # noqa: F811
    n = 4 << 10
    dev = sw.BlockDevice(loop_device)
    blk = sw.move(flat(filled(n, 6.0)), dev.allocate(n, empty=True)).carrier
    version = blk.version
    dst = sw.CPU(n, empty=True)
    move_fails_with_eio(blk, dst, "pread", how)
    # The device faults (its data can no longer be trusted), but the source
    # carrier is neither released nor counted as written.
    assert dev.is_faulted()
    assert not blk.is_released() and blk.version == version
    assert not dst.is_released() and dst.version == 0
    del blk
    gc.collect()
    dev.close()


@pytest.mark.parametrize("n", [1000, 16 << 10])
def test_b9_many_threads_moving_small_spans_at_once(backing, n):
    # Eight threads, each moving into and back out of its own extents
    # several times, with move_async in flight from several at once: every
    # move lands whole and durable, none waits for ever.
    path, file = backing
    dev = sw.BlockDevice(path)
    threads, rounds = 8, 6
    errors = []
    landed = []
    lock = threading.Lock()
    start = threading.Barrier(threads)

    def worker(w):
        try:
            start.wait(timeout=60)
            for r in range(rounds):
                base = float(w * 1000 + r * 10)
                blk = dev.allocate(n, empty=True)
                handle = sw.move_async(flat(filled(n, base)), blk)
                moved = handle.wait(timeout=60)
                assert moved.carrier is blk
                with lock:
                    landed.append((blk.device_offset_bytes, base))
                assert np.array_equal(backing_floats(file, blk.device_offset_bytes, n),
                                      expect(n, base))
                back = sw.move_async(flat(blk), sw.CPU(n, empty=True)).wait(timeout=60)
                assert np.array_equal(np.from_dlpack(back), expect(n, base))
                back.carrier.release()
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    pool = [threading.Thread(target=worker, args=(w,)) for w in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in pool), "a thread never finished its moves"
    if errors:
        raise errors[0]
    assert len(landed) == threads * rounds
    assert not dev.is_faulted()
    gc.collect()
    dev.close()


@needs_faults
@pytest.mark.parametrize("n", [1000, 16 << 10, 1 << 20])
@pytest.mark.parametrize("way", ["cpu->blk", "blk->cpu"])
@pytest.mark.parametrize("how", ["move", "move_async"])
def test_a_block_move_is_checked_only_by_its_start(loop_device, how, way, n):  # noqa: F811
    # CPU <-> BlockDeviceCarrier with no autograd node or profiling record:
    # the core's start is the move's only check (issue 19), so with the
    # separate check made to fail the move still goes through, durable.
    dev = sw.BlockDevice(loop_device)
    blk = dev.allocate(n, empty=True)
    if way == "blk->cpu":
        blk = sw.move(flat(filled(n, 9.0)), blk).carrier
    src, dst = (flat(filled(n, 9.0)), blk) if way == "cpu->blk" else (flat(blk), sw.CPU(n))
    _C._fault_inject("move_check", count=-1)
    try:
        with sw.no_grad():
            out = sw.move(src, dst) if how == "move" else sw.move_async(src, dst).wait(timeout=60)
    finally:
        _C._fault_clear()
    assert out.carrier is dst and src.carrier.is_released() and not dev.is_faulted()
    back = out if way == "blk->cpu" else sw.move(out, sw.CPU(n))
    assert np.array_equal(np.from_dlpack(back), expect(n, 9.0))
    del blk, src, dst, out, back
    gc.collect()
    dev.close()


@needs_faults
@pytest.mark.parametrize("how", ["move", "move_async"])
def test_a_block_move_recording_a_node_still_runs_the_separate_check(loop_device, how):  # noqa: F811
    dev = sw.BlockDevice(loop_device)
    n = 1000
    blk = sw.move(flat(filled(n, 2.0)), dev.allocate(n, empty=True)).carrier
    dst = sw.CPU(n)
    _C._fault_inject("move_check", count=-1)
    try:
        with pytest.raises(OSError, match="injected check failure"):  # autograd on
            sw.move(flat(blk), dst) if how == "move" else sw.move_async(flat(blk), dst).wait()
    finally:
        _C._fault_clear()
    assert not blk.is_released() and not dst.is_released() and dst.version == 0
    del blk
    gc.collect()
    dev.close()
