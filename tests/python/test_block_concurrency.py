"""Block device transfers side by side (issue 19; contract-carriers B-9,
B-11): transfers on disjoint extents of one device run at the same time
(the device lock only guards the allocation map and the device's state),
writers that commit together share a fdatasync that covers their bytes, and
a fault on one of several overlapping moves fails that move alone: the
others commit with their data on the device, the failed one's source stays
live and unchanged, and the device is faulted for what comes after.

Runs on a real loop device (loop_device.py; skips with the reason where
none can be made). Moves are held in flight at pause points of the
fault-injection build; only the commits of dropped handles, which nothing
can wait on, are polled for."""

import errno
import gc
import os
import threading
import time

import numpy as np
import pytest

import strideweave as sw
from strideweave import _C

from loop_device import loop_device  # noqa: F401

needs_faults = pytest.mark.skipif(not _C._fault_injection_enabled(),
                                  reason="needs a build with -Dfault_injection=true")

BIG = 1 << 20  # 4 MiB of Float32: the direct I/O path both ways
SMALL = 1000   # 4000 bytes: buffered I/O


@pytest.fixture
def dev(loop_device):
    d = sw.BlockDevice(loop_device)
    yield d
    _C._fault_clear()
    _C._fault_resume()
    gc.collect()
    try:
        d.close()
    except (RuntimeError, OSError):
        pass


def filled(n, start):
    """A CPU tensor of n Float32 slots start, start + 1, ..."""
    t = sw.Tensor(sw.CPU(n, empty=True), 0, sw.Layout(sw.Shape(n), sw.Stride(1)))
    a = np.from_dlpack(t)
    a[:] = np.arange(start, start + n, dtype=np.float32)
    del a
    return t


def values(t):
    """The values of a CPU tensor, as a NumPy copy."""
    return np.from_dlpack(t).copy()


def on_device(path, carrier, n, offset=0):
    """n Float32 slots of a block carrier read straight from the device node."""
    fd = os.open(path, os.O_RDONLY)
    try:
        raw = os.pread(fd, 4 * n, carrier.device_offset_bytes + 4 * offset)
    finally:
        os.close(fd)
    return np.frombuffer(raw, dtype=np.float32)


def expect(n, start):
    return np.arange(start, start + n, dtype=np.float32)


def hold_one_move_in_flight(src, dst):
    """move_async(src, dst), stopped in flight (after its state check, not
    holding the device lock) until _C._fault_resume()."""
    _C._fault_inject("blockdev_io_pause", 0, 1)
    handle = sw.move_async(src, dst)
    _C._fault_wait_paused()
    return handle


@needs_faults
@pytest.mark.parametrize("n", [SMALL, BIG])
@pytest.mark.parametrize("second", ["write", "read"])
def test_b9_transfers_on_disjoint_extents_run_side_by_side(dev, loop_device, n, second):
    # With one lock held for every whole transfer (as before), the second
    # move waits for the paused one and its wait times out.
    x = dev.allocate(n, empty=True)
    y = dev.allocate(n, empty=True)
    if second == "read":
        y = sw.move(filled(n, 7.0), y).carrier
    held = hold_one_move_in_flight(filled(n, 1.0), x)
    try:
        if second == "write":
            out = sw.move_async(filled(n, 3.0), y).wait(timeout=60)
            assert out.carrier is y
            assert np.array_equal(on_device(loop_device, y, n), expect(n, 3.0))
        else:
            out = sw.move_async(sw.Tensor(y, 0, sw.Layout(sw.Shape(n), sw.Stride(1))),
                                sw.CPU(n, empty=True)).wait(timeout=60)
            assert np.array_equal(values(out), expect(n, 7.0))
        assert not held.done  # the first move is still in flight
    finally:
        _C._fault_resume()
    assert held.wait(timeout=60).carrier is x
    assert np.array_equal(on_device(loop_device, x, n), expect(n, 1.0))
    assert not dev.is_faulted()


@needs_faults
@pytest.mark.parametrize("n", [SMALL, BIG])
def test_b11_fault_mid_transfer_on_one_of_several_overlapping_moves(dev, loop_device, n):
    x = dev.allocate(n, empty=True)
    y = dev.allocate(n, empty=True)
    z = sw.move(filled(n, 5.0), dev.allocate(n, empty=True)).carrier
    failing_src = filled(n, 1.0)
    held = hold_one_move_in_flight(failing_src, x)
    try:
        # two more moves start and finish while the first is in flight
        wrote = sw.move_async(filled(n, 3.0), y).wait(timeout=60)
        read = sw.move_async(sw.Tensor(z, 0, sw.Layout(sw.Shape(n), sw.Stride(1))),
                             sw.CPU(n, empty=True)).wait(timeout=60)
        _C._fault_inject("pwrite", 0, 1)  # the held move's first write fails
    finally:
        _C._fault_resume()
    with pytest.raises(OSError) as info:
        held.wait(timeout=60)
    assert info.value.errno == errno.EIO
    # the failed move: source live and unchanged, the device faulted
    assert dev.is_faulted()
    assert not failing_src.carrier.is_released()
    assert np.array_equal(values(failing_src), expect(n, 1.0))
    # the overlapping moves are unaffected: committed, their data in place
    assert wrote.carrier is y
    assert np.array_equal(on_device(loop_device, y, n), expect(n, 3.0))
    assert np.array_equal(values(read), expect(n, 5.0))
    # what starts after the fault is refused before effects (B-6)
    later = filled(n, 9.0)
    with pytest.raises(RuntimeError, match="faulted"):
        sw.move(later, y)
    assert not later.carrier.is_released()
    assert np.array_equal(values(later), expect(n, 9.0))


@needs_faults
def test_b11_a_failed_shared_fdatasync_fails_every_writer_it_was_to_cover(dev, loop_device):
    # Many writers commit at once; the first fdatasync fails. Whoever it
    # was to cover fails with its errno, whoever comes later is refused or
    # fails the same way (a later fdatasync may succeed although pages were
    # lost); no move reports success for bytes that are not on the device.
    k = 12
    srcs = [filled(BIG if i % 3 == 0 else SMALL, 100.0 * i) for i in range(k)]
    sizes = [s.carrier.size() for s in srcs]
    dsts = [dev.allocate(n, empty=True) for n in sizes]
    _C._fault_inject("blockdev_fdatasync", 0, 1)
    handles = []
    for s, d in zip(srcs, dsts):
        try:
            handles.append(sw.move_async(s, d))
        except RuntimeError as e:  # the device faulted before this one started
            assert "faulted" in str(e)
            handles.append(None)
    failed = 0
    for i, h in enumerate(handles):
        try:
            if h is None:
                raise RuntimeError("refused at submission: the device is faulted")
            out = h.wait(timeout=120)
        except OSError as e:
            assert e.errno == errno.EIO
            failed += 1
        except RuntimeError as e:
            assert "faulted" in str(e)
            failed += 1
        else:
            assert out.carrier is dsts[i]
            assert np.array_equal(on_device(loop_device, dsts[i], sizes[i]),
                                  expect(sizes[i], 100.0 * i))
            continue
        assert not srcs[i].carrier.is_released()
        assert np.array_equal(values(srcs[i]), expect(sizes[i], 100.0 * i))
    assert failed >= 1
    assert dev.is_faulted()


def test_b11_bursts_of_small_durable_writes_in_flight_all_land(dev, loop_device):
    # 4 threads each put 48 small moves into the device in flight and wait
    # for every other one, dropping the rest of the handles. Writers waiting
    # for a flush leave their place in the pool, so many of them pile up
    # behind one fdatasync and share the next: a move still reports done
    # only with its bytes on the device, and a dropped one still commits.
    per, errors, results = 48, [], {}
    barrier = threading.Barrier(4)

    def worker(w):
        try:
            barrier.wait()
            moves = []
            for i in range(per):
                base = 10_000.0 * w + 100.0 * i
                blk = dev.allocate(SMALL, empty=True)
                src = filled(SMALL, base)
                handle = sw.move_async(src, blk)
                moves.append((base, blk, src, handle if i % 2 else None))
            for base, blk, src, handle in moves:
                if handle is not None:
                    assert handle.wait(timeout=120).carrier is blk
            results[w] = moves
        except BaseException as e:  # reported by the main thread
            errors.append((w, e))

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    moves = [m for w in sorted(results) for m in results[w]]
    # a dropped handle's move commits on its own: its source is released then
    for _ in range(12000):
        if all(src.carrier.is_released() for _, _, src, _ in moves):
            break
        time.sleep(0.01)
    for base, blk, src, _ in moves:
        assert src.carrier.is_released()
        assert np.array_equal(on_device(loop_device, blk, SMALL), expect(SMALL, base))
    assert not dev.is_faulted()


def test_b9_many_threads_move_to_and_from_disjoint_extents(dev, loop_device):
    # Sizes cover buffered moves, direct moves and direct moves with a
    # buffered tail (1.2 MB written, 4 MiB + 308 bytes both ways: neither is
    # a multiple of the 512-byte block).
    sizes = [SMALL, 300_000, BIG, BIG + 77]
    errors = []
    barrier = threading.Barrier(6)

    def worker(w):
        try:
            barrier.wait()
            for it in range(4):
                n = sizes[(w + it) % len(sizes)]
                base = 1000.0 * w + 10.0 * it
                blk = dev.allocate(n, empty=True)
                if it % 2:
                    moved = sw.move_async(filled(n, base), blk).wait(timeout=120)
                else:
                    moved = sw.move(filled(n, base), blk)
                assert np.array_equal(on_device(loop_device, blk, n), expect(n, base))
                back = sw.move(moved, sw.CPU(n, empty=True))
                assert np.array_equal(values(back), expect(n, base))
                assert blk.is_released()
        except BaseException as e:  # reported by the main thread
            errors.append((w, e))

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert not dev.is_faulted()


@pytest.mark.parametrize("offset", [0, 128, 1, 3])
@pytest.mark.parametrize("n", [BIG, BIG + 77])
def test_b10_large_reads_land_whole_whatever_the_alignment(dev, n, offset):
    # Block-aligned device offsets read directly into the destination,
    # others (and the unaligned tail) through the page cache.
    blk = sw.move(filled(n + offset, 0.0), dev.allocate(n + offset, empty=True)).carrier
    view = sw.Tensor(blk, offset, sw.Layout(sw.Shape(n), sw.Stride(1)))
    back = sw.move(view, sw.CPU(n, empty=True))
    assert np.array_equal(values(back), expect(n, float(offset)))


def test_b9_slot_writes_then_a_large_read_see_each_other(dev):
    # Buffered slot writes are seen by a direct read of the same range
    # (the kernel writes dirty cached pages back before it).
    n = BIG
    blk = sw.move(filled(n, 0.0), dev.allocate(n, empty=True)).carrier
    blk[0] = -1.0
    blk[n - 1] = -2.0
    back = sw.move(sw.Tensor(blk, 0, sw.Layout(sw.Shape(n), sw.Stride(1))),
                   sw.CPU(n, empty=True))
    got = values(back)
    assert got[0] == -1.0 and got[n - 1] == -2.0 and got[1] == 1.0
