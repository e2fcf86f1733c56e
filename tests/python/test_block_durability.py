"""Block-device durability (contract-carriers B-11): a transfer into a
BlockDeviceCarrier commits, and releases its source, only once the written
range is on the device; BlockDevice.flush() and close() make buffered slot
writes durable and report write-back errors.

The failing-device cases run on a loop device over a sparse 64 MiB file that
lives on an 8 MiB tmpfs made inside the test: writes are accepted into the
page cache, but only about 8 MiB can ever reach the backing file, so the rest
fails at write-back with an I/O error. They skip, with the reason, where this
process may not mount a tmpfs or create loop devices."""

import errno
import gc
import os
import struct
import subprocess
import tempfile

import pytest

import strideweave as sw
from strideweave import _C

from loop_device import loop_device, loop_device_unavailable  # noqa: F401

needs_faults = pytest.mark.skipif(not _C._fault_injection_enabled(),
                                  reason="needs a build with -Dfault_injection=true")

WRITE_BACK_ERRNOS = (errno.EIO, errno.ENOSPC)


def flat(carrier, n=None):
    n = carrier.size() if n is None else n
    return sw.Tensor(carrier, 0, sw.Layout(sw.Shape(n), sw.Stride(1)))


def backing_floats(backing, offset, n):
    """Slots as the loop device's backing file holds them (what reached the
    device), not as the device's own page cache shows them."""
    with open(backing, "rb") as f:
        f.seek(offset)
        return list(struct.unpack(f"={n}f", f.read(4 * n)))


class TinyLoop:
    """A loop device whose 64 MiB backing file sits on an 8 MiB tmpfs."""

    def __init__(self, mount_point):
        self.mount_point = mount_point
        self.backing = os.path.join(mount_point, "backing.img")
        self.path = None


@pytest.fixture
def tiny_loop():
    why = loop_device_unavailable()
    if why:
        pytest.skip(why)
    mount_point = tempfile.mkdtemp(prefix="sw-tiny-tmpfs-")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", mount_point],
                       capture_output=True, text=True)
    if r.returncode != 0:
        os.rmdir(mount_point)
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    tiny = TinyLoop(mount_point)
    try:
        with open(tiny.backing, "wb") as f:
            f.truncate(64 << 20)
        out = subprocess.run(["losetup", "--find", "--show", tiny.backing],
                             capture_output=True, text=True)
        if out.returncode != 0:
            pytest.skip(f"losetup could not attach a loop device: {out.stderr.strip()}")
        tiny.path = out.stdout.strip()
        try:
            yield tiny
        finally:
            gc.collect()
            subprocess.run(["losetup", "-d", tiny.path], capture_output=True)
    finally:
        # The loop driver may hold the backing file a little past detach:
        # a lazy unmount detaches the tmpfs now and frees it when it lets go.
        subprocess.run(["umount", "-l", mount_point], capture_output=True)
        os.rmdir(mount_point)


def big_source(n):
    src = sw.CPU(n)
    src[0] = 1.5
    src[n // 2] = 2.5
    src[n - 1] = 3.5
    return src


def assert_source_intact(src, n):
    assert not src.is_released() and src.is_mutable()
    assert (src[0], src[n // 2], src[n - 1]) == (1.5, 2.5, 3.5)
    assert src.version == 3


@pytest.mark.parametrize("how", ["move", "move_async", "forward"])
def test_b11_move_into_a_device_that_cannot_store_it_fails_and_keeps_the_source(
        tiny_loop, how):
    # 32 MiB into a device where only 8 MiB can land: the move must not
    # report success nor release the source.
    n = 8 << 20
    dev = sw.BlockDevice(tiny_loop.path)
    src = big_source(n)
    dst = dev.allocate(n, empty=True)
    t = flat(src)
    with pytest.raises(OSError) as info:
        if how == "move":
            sw.move(t, dst)
        elif how == "move_async":
            sw.move_async(t, dst).wait()
        else:
            sw.CpuToBlockDeviceMoveOperation().forward(t, dst)
    assert info.value.errno in WRITE_BACK_ERRNOS
    assert dev.is_faulted()
    assert_source_intact(src, n)
    assert dst.is_mutable() and dst.version == 0
    with pytest.raises(RuntimeError, match="faulted"):
        dst[0]
    del dst
    gc.collect()
    dev.close()  # a faulted device still closes
    assert dev.is_closed()


def test_b11_a_completed_move_is_on_the_device(tiny_loop):
    # A move that fits: when it returns, the backing file already has it.
    n = 1 << 20  # 4 MiB
    dev = sw.BlockDevice(tiny_loop.path)
    src = big_source(n)
    dst = dev.allocate(n, empty=True)
    out = sw.move(flat(src), dst)
    assert out.carrier is dst and src.is_released() and not dev.is_faulted()
    off = dst.device_offset_bytes
    assert backing_floats(tiny_loop.backing, off, 1) == [1.5]
    assert backing_floats(tiny_loop.backing, off + 4 * (n // 2), 1) == [2.5]
    assert backing_floats(tiny_loop.backing, off + 4 * (n - 1), 1) == [3.5]
    del out, dst
    gc.collect()
    dev.close()


def test_b11_flush_makes_slot_writes_durable(tiny_loop):
    dev = sw.BlockDevice(tiny_loop.path)
    c = dev.allocate(4, empty=True)
    c[2] = 7.25
    assert dev.flush() is None
    assert backing_floats(tiny_loop.backing, c.device_offset_bytes + 8, 1) == [7.25]
    assert not dev.is_faulted()
    del c
    gc.collect()
    dev.close()
    assert dev.flush() is None  # nothing left to flush on a closed device


def test_b11_flush_reports_and_faults_on_a_write_back_error(tiny_loop):
    dev = sw.BlockDevice(tiny_loop.path)
    c = dev.allocate(4 << 20)  # 16 MiB of buffered zero-writes: too much to land
    c[0] = 1.0
    with pytest.raises(OSError) as info:
        dev.flush()
    assert info.value.errno in WRITE_BACK_ERRNOS
    assert dev.is_faulted()
    with pytest.raises(RuntimeError, match="faulted"):
        dev.flush()
    with pytest.raises(RuntimeError, match="faulted"):
        c[0] = 2.0
    del c
    gc.collect()
    dev.close()
    assert dev.is_closed()


def test_b11_close_flushes_and_reports_a_write_back_error(tiny_loop):
    dev = sw.BlockDevice(tiny_loop.path)
    c = dev.allocate(4 << 20)
    del c
    gc.collect()
    with pytest.raises(OSError) as info:
        dev.close()
    assert info.value.errno in WRITE_BACK_ERRNOS
    assert dev.is_faulted() and not dev.is_closed()
    assert dev.close() is None  # a faulted device closes
    assert dev.is_closed()


def test_b11_with_block_exit_flush_failure_never_masks_the_body_exception(tiny_loop):
    with pytest.raises(KeyError, match="body"):
        with sw.BlockDevice(tiny_loop.path) as dev:
            c = dev.allocate(4 << 20)
            del c
            gc.collect()
            raise KeyError("body")
    assert dev.is_faulted() and dev.is_closed()


def test_b11_close_flushes_slot_writes(tiny_loop):
    dev = sw.BlockDevice(tiny_loop.path)
    c = dev.allocate(4, empty=True)
    c[1] = -3.0
    off = c.device_offset_bytes
    del c
    gc.collect()
    dev.close()
    assert backing_floats(tiny_loop.backing, off + 4, 1) == [-3.0]


def test_b11_tiled_tier_copy_into_block_storage_is_durable_or_fails(tiny_loop):
    # Evicting tiles to a block secondary: the copy counts only once it is on
    # the device; when it cannot be stored the request fails and every tile
    # stays where it was.
    dev = sw.BlockDevice(tiny_loop.path)
    n = 4 << 20  # 16 MiB in two tiles: more than can land
    primary = big_source(n)
    te = sw.TiledEvictable(primary, dev.allocate(0), (2,), (n // 2,))
    every = sw.TileSet([(0,), (1,)])
    with pytest.raises(OSError) as info:
        te.evict(every)
    assert info.value.errno in WRITE_BACK_ERRNOS
    assert dev.is_faulted()
    assert te.primary_tiles == every
    assert (te[0], te[n // 2], te[n - 1]) == (1.5, 2.5, 3.5)
    te.release()
    del te, primary
    gc.collect()
    dev.close()


def test_b11_tiled_tier_copy_that_fits_is_on_the_device(tiny_loop):
    dev = sw.BlockDevice(tiny_loop.path)
    values = [float(i) + 0.5 for i in range(16)]
    primary = sw.CPU(16)
    for i, v in enumerate(values):
        primary[i] = v
    te = sw.TiledEvictable(primary, dev.allocate(0), (2,), (8,))
    every = sw.TileSet([(0,), (1,)])
    te.evict(every)
    assert te.secondary_tiles == every and not dev.is_faulted()
    # every tile now lives in a private block extent; the backing file has them
    data = open(tiny_loop.backing, "rb").read(1 << 20)
    on_disk = struct.unpack(f"={len(data) // 4}f", data)
    for k in range(2):
        tile = values[8 * k:8 * k + 8]
        assert any(list(on_disk[i:i + 8]) == tile for i in range(0, len(on_disk) - 7, 128))
    te.release()
    del te, primary
    gc.collect()
    dev.close()


@needs_faults
def test_b11_failing_fdatasync_fails_the_move_with_its_errno(loop_device):
    dev = sw.BlockDevice(loop_device)
    src = sw.CPU(2)
    src[0], src[1] = 1.0, 2.0
    dst = dev.allocate(2)
    _C._fault_inject("blockdev_fdatasync", 0, 1)
    with pytest.raises(OSError) as info:
        sw.move(flat(src), dst)
    assert info.value.errno == errno.EIO
    assert dev.is_faulted() and not src.is_released() and (src[0], src[1]) == (1.0, 2.0)
    del dst
    gc.collect()
    dev.close()


@needs_faults
def test_b11_failing_fdatasync_fails_flush(loop_device):
    dev = sw.BlockDevice(loop_device)
    c = dev.allocate(2)
    c[0] = 1.0
    _C._fault_inject("blockdev_fdatasync", 0, 1)
    with pytest.raises(OSError) as info:
        dev.flush()
    assert info.value.errno == errno.EIO and dev.is_faulted()
    del c
    gc.collect()
    dev.close()


def _raw(path, offset, nbytes):
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.pread(fd, nbytes, offset)
    finally:
        os.close(fd)


@pytest.mark.parametrize("src_offset,extra", [(0, 0), (1, 37), (3, 129)])
def test_b11_large_moves_land_whole_whatever_the_alignment(loop_device, src_offset, extra):
    # Large moves write block-aligned requests straight to the device and
    # the unaligned tail through the page cache: every byte must land, the
    # slots after the span must keep a buffered write made before the move.
    import numpy as np

    dev = sw.BlockDevice(loop_device)
    n = (3 << 18) + extra  # 3 MiB and a tail that is not a whole block
    src = sw.CPU(n + src_offset)
    np.from_dlpack(flat(src))[:] = np.arange(n + src_offset, dtype=np.float32) + 0.25
    dst = dev.allocate(n + 300)
    dst[n + 100] = -9.0
    out = sw.move(sw.Tensor(src, src_offset, sw.Layout(sw.Shape(n), sw.Stride(1))), dst)
    assert out.carrier is dst and src.is_released() and not dev.is_faulted()
    got = np.frombuffer(_raw(loop_device, dst.device_offset_bytes, 4 * n), dtype=np.float32)
    want = np.arange(src_offset, src_offset + n, dtype=np.float32) + 0.25
    assert np.array_equal(got, want)
    assert dst[n + 100] == -9.0 and dst[n - 1] == want[-1]
    back = sw.move(sw.Tensor(dst, 0, sw.Layout(sw.Shape(n + 300), sw.Stride(1))), sw.CPU(n + 300))
    assert np.array_equal(np.from_dlpack(back)[:n], want)
    del out, back, dst
    gc.collect()
    dev.close()


@needs_faults
def test_b11_large_move_failing_part_way_keeps_the_source(loop_device):
    dev = sw.BlockDevice(loop_device)
    n = 6 << 20  # 24 MiB: several direct requests
    src = big_source(n)
    dst = dev.allocate(n, empty=True)
    _C._fault_inject("pwrite", 1, 1)  # the second request fails
    with pytest.raises(OSError) as info:
        sw.move(flat(src), dst)
    assert info.value.errno == errno.EIO and dev.is_faulted()
    assert_source_intact(src, n)
    del dst
    gc.collect()
    dev.close()
