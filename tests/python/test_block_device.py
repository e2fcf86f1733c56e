"""BlockDevice and BlockDeviceCarrier (contract-carriers B-1..B-11).

Error paths of BlockDevice(path) run everywhere; everything else runs on a
real loop device (see loop_device.py) and skips with the reason when this
process may not create one."""

import errno
import gc
import numbers
import os
import struct
import subprocess
import sys
import textwrap
import threading

import pytest

import strideweave as sw
from strideweave import _C
from strideweave.carriers import block_device as bdmod
from strideweave.carriers import move as mv

from loop_device import loop_device, loop_device_unavailable  # noqa: F401

D = sw.DType
needs_faults = pytest.mark.skipif(not _C._fault_injection_enabled(),
                                  reason="needs a build with -Dfault_injection=true")


def L(shape, stride):
    return sw.Layout(sw.Shape(shape), sw.Stride(stride))


def flat(carrier, n=None, offset=0):
    n = carrier.size() if n is None else n
    return sw.Tensor(carrier, offset, L(n, 1))


def cpu_of(values):
    c = sw.CPU(len(values))
    for i, v in enumerate(values):
        c[i] = v
    return c


def raw_floats(path, offset, n):
    fd = os.open(path, os.O_RDONLY)
    try:
        return list(struct.unpack(f"={n}f", os.pread(fd, 4 * n, offset)))
    finally:
        os.close(fd)


@pytest.fixture
def dev(loop_device):
    d = sw.BlockDevice(loop_device)
    yield d
    gc.collect()
    try:
        d.close()
    except RuntimeError:
        pass


# ---- B-1 types ---------------------------------------------------------------

def test_b1_import_paths_are_identical():
    assert sw.BlockDevice is bdmod.BlockDevice is sw.carriers.BlockDevice
    assert sw.BlockDeviceCarrier is bdmod.BlockDeviceCarrier is sw.carriers.BlockDeviceCarrier
    assert bdmod.CpuToBlockDeviceMoveOperation is sw.CpuToBlockDeviceMoveOperation
    assert bdmod.BlockDeviceToCpuMoveOperation is sw.BlockDeviceToCpuMoveOperation
    assert not issubclass(sw.BlockDevice, sw.Carrier)
    assert issubclass(sw.BlockDeviceCarrier, sw.Carrier)


def test_b1_direct_construction_points_to_allocate():
    with pytest.raises(TypeError, match=r"BlockDevice\(path\)\.allocate"):
        sw.BlockDeviceCarrier()


def test_b1_closed_carrier():
    with pytest.raises(TypeError, match="closed carrier implementation"):
        class Mine(sw.BlockDeviceCarrier):
            pass


# ---- B-2 BlockDevice(path): error paths that run everywhere -----------------

def test_b2_regular_file_is_value_error(tmp_path):
    p = tmp_path / "plain.bin"
    p.write_bytes(b"\x01" * 4096)
    with pytest.raises(ValueError, match="not a block device"):
        sw.BlockDevice(str(p))
    assert p.read_bytes() == b"\x01" * 4096  # never written


def test_b2_character_device_is_value_error():
    with pytest.raises(ValueError, match="character device"):
        sw.BlockDevice("/dev/null")


def test_b2_directory_is_value_error(tmp_path):
    with pytest.raises(ValueError, match="directory"):
        sw.BlockDevice(tmp_path)


def test_b2_missing_path_is_os_error(tmp_path):
    with pytest.raises(OSError) as info:
        sw.BlockDevice(str(tmp_path / "missing"))
    assert isinstance(info.value, FileNotFoundError)


@pytest.mark.parametrize("bad", [b"/dev/null", 7, None])
def test_b2_path_type(bad):
    with pytest.raises(TypeError):
        sw.BlockDevice(bad)


def test_b2_pathlike_giving_bytes_is_type_error():
    class P:
        def __fspath__(self):
            return b"/dev/null"
    with pytest.raises(TypeError, match="str"):
        sw.BlockDevice(P())


def test_b2_fspath_error_propagates():
    class Boom(Exception):
        pass

    class P:
        def __fspath__(self):
            raise Boom()
    with pytest.raises(Boom):
        sw.BlockDevice(P())


def test_b2_fifo_is_refused_without_being_opened(tmp_path):
    # Checking the type must not open the node: opening a FIFO read-write
    # would count as a writer coming and going, which a reader sees as a
    # hang-up (Linux reports POLLHUP only once some writer has been there).
    import select

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with pytest.raises(ValueError, match="not a block device"):
            sw.BlockDevice(fifo)
        p = select.poll()
        p.register(reader, select.POLLIN)
        assert p.poll(0) == []
    finally:
        os.close(reader)


def test_b2_fifo_without_reader_or_writer_is_refused_at_once(tmp_path):
    fifo = tmp_path / "lonely-fifo"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="FIFO"):
        sw.BlockDevice(str(fifo))


def test_b2_unwritable_non_block_node_is_os_error(tmp_path):
    # The contract checks that the node opens read-write before its type, so
    # a file that cannot be opened read-write stays an OSError. Root may
    # write any file, so there the file sits on a tmpfs remounted read-only.
    mounted = None
    if os.geteuid() == 0:
        mounted = tmp_path / "ro-mount"
        mounted.mkdir()
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mounted)],
                          capture_output=True).returncode != 0:
            pytest.skip("cannot mount a tmpfs here")
        p = mounted / "ro.bin"
    else:
        p = tmp_path / "ro.bin"
    try:
        p.write_bytes(b"x")
        if mounted is not None:
            subprocess.run(["mount", "-o", "remount,ro", str(mounted)], check=True)
        else:
            os.chmod(p, 0o444)
        with pytest.raises(OSError) as info:
            sw.BlockDevice(str(p))
        assert not isinstance(info.value, (ValueError, FileNotFoundError))
        assert info.value.errno in (errno.EACCES, errno.EPERM, errno.EROFS)
        assert p.read_bytes() == b"x"
    finally:
        if mounted is not None:
            subprocess.run(["umount", str(mounted)], capture_output=True)


def test_b2_nul_in_path_is_value_error():
    with pytest.raises(ValueError):
        sw.BlockDevice("/dev/null\0x")


def test_b2_properties(loop_device):
    class P:
        def __fspath__(self):
            return loop_device
    d = sw.BlockDevice(P())
    assert d.path == loop_device and type(d.path) is str
    assert d.capacity_bytes == 64 << 20
    assert d.logical_block_size > 0 and d.physical_block_size > 0
    assert d.capacity_bytes % d.logical_block_size == 0
    assert d.allocation_alignment == max(d.logical_block_size, d.physical_block_size)
    assert not d.is_closed() and not d.is_faulted()
    d.close()
    assert d.is_closed()


# ---- B-3 allocate -------------------------------------------------------------

@pytest.mark.parametrize("size, exc", [("3", TypeError), (1.0, TypeError), (True, TypeError),
                                       (-1, ValueError), (2**62, OverflowError),
                                       (2**70, OverflowError)])
def test_b3_size_checks(dev, size, exc):
    with pytest.raises(exc):
        dev.allocate(size)
    assert dev.allocate(1).device_offset_bytes == 0  # nothing was reserved


@pytest.mark.parametrize("kw, exc", [({"mutable": 1}, TypeError), ({"empty": None}, TypeError),
                                     ({"dtype": "Float32"}, TypeError),
                                     ({"dtype": D.Int32}, ValueError),
                                     ({"dtype": D.Bool}, ValueError)])
def test_b3_argument_checks(dev, kw, exc):
    with pytest.raises(exc):
        dev.allocate(4, **kw)
    assert dev.allocate(1).device_offset_bytes == 0


def test_b3_aligned_first_fit_and_zeroing(dev):
    a = dev.allocation_alignment
    c1 = dev.allocate(3)
    c2 = dev.allocate(a // 4 + 1)
    c3 = dev.allocate(0)
    assert (c1.device_offset_bytes, c1.extent_bytes) == (0, a)
    assert (c2.device_offset_bytes, c2.extent_bytes) == (a, 2 * a)
    assert (c3.size(), c3.device_offset_bytes, c3.extent_bytes) == (0, 0, 0)
    assert [c1[i] for i in range(3)] == [0.0, 0.0, 0.0]
    assert c1.dtype() is D.Float32 and c1.is_mutable()
    assert not dev.allocate(1, mutable=False).is_mutable()
    # zero-write really writes: dirty the range, release it, take it again
    c1[1] = 5.0
    c1.release()
    again = dev.allocate(3)
    assert again.device_offset_bytes == 0 and again[1] == 0.0


def test_b3_exhaustion_is_memory_error(dev):
    big = dev.allocate(dev.capacity_bytes // 4, empty=True)
    with pytest.raises(MemoryError):
        dev.allocate(1)
    big.release()
    assert dev.allocate(1).device_offset_bytes == 0


@needs_faults
def test_b3_failed_zero_write_frees_the_range(dev):
    _C._fault_inject("alloc", 0, 1)  # the zero buffer
    with pytest.raises(MemoryError):
        dev.allocate(8)
    _C._fault_clear()
    assert not dev.is_faulted()
    assert dev.allocate(8).device_offset_bytes == 0


# ---- B-4 surface ---------------------------------------------------------------

def test_b4_slot_layout_on_the_device(dev, loop_device):
    dev.allocate(1)
    c = dev.allocate(4)
    for i, v in enumerate([1.5, -2.0, 3.25, 1024.0]):
        c[i] = v
    assert raw_floats(loop_device, c.device_offset_bytes, 4) == [1.5, -2.0, 3.25, 1024.0]
    assert c.size() == 4
    assert c.version == 4


def test_b4_undersized_destination_is_value_error(dev):
    src = cpu_of([1.0, 2.0, 3.0])
    dst = dev.allocate(2)
    dst[0] = 9.0
    with pytest.raises(ValueError, match="cannot grow"):
        sw.CpuToBlockDeviceMoveOperation().forward(flat(src), dst)
    with pytest.raises(ValueError):
        sw.CpuToBlockDeviceMoveOperation().forward(flat(src), dev.allocate(0))
    assert dst[0] == 9.0 and not src.is_released() and not dev.is_faulted()


def test_b10_revised_move_chooses_the_block_operations(dev, loop_device):
    src = cpu_of([float(i) for i in range(10)])
    t = sw.Tensor(src, 2, L((2, 3), (4, 1)))  # cosize 7 from slot 2
    dst = dev.allocate(8)
    out = sw.move(t, dst)
    assert out.carrier is dst and src.is_released()
    assert raw_floats(loop_device, dst.device_offset_bytes, 7) == [float(2 + i) for i in range(7)]
    back = sw.move(out, sw.CPU(7))
    assert type(back.carrier) is sw.CPU and dst.is_released()
    assert [back.carrier[i] for i in range(7)] == [float(2 + i) for i in range(7)]


def test_b10_revised_move_async_runs_on_the_worker_pool(dev):
    n = 1 << 18
    src = sw.CPU(n)
    src[n - 1] = 4.5
    dst = dev.allocate(n, empty=True)
    _C._hold_moves(True)  # only a move queued on the pool can be held
    try:
        handle = sw.move_async(flat(src), dst)
        assert not dst.is_mutable() and not src.is_released()  # pending, not run
    finally:
        _C._hold_moves(False)
    out = handle.wait()
    assert out.carrier is dst and dst[n - 1] == 4.5 and src.is_released()
    back = sw.move_async(out, sw.CPU(n)).wait()
    assert back.carrier[n - 1] == 4.5 and dst.is_released()


def test_b10_revised_empty_or_small_block_destination_is_value_error(dev):
    src = cpu_of([1.0, 2.0, 3.0])
    small = dev.allocate(2)
    small[0] = 9.0
    for dst in (small, dev.allocate(0)):
        with pytest.raises(ValueError):
            sw.move(flat(src), dst)
        with pytest.raises(ValueError):
            sw.move_async(flat(src), dst)
    assert small[0] == 9.0 and small.version == 1
    assert not src.is_released() and src.version == 3 and not dev.is_faulted()


# ---- B-5 / B-6 access and faults --------------------------------------------------

def test_b5_preflight_failures_never_fault(dev):
    c = dev.allocate(2)
    with pytest.raises(TypeError):
        c["0"]
    with pytest.raises(IndexError):
        c[2]
    with pytest.raises(IndexError):
        c[-1]
    with pytest.raises(TypeError):
        c[0] = "x"
    with pytest.raises(RuntimeError):
        dev.allocate(1, mutable=False)[0] = 1.0
    assert not dev.is_faulted() and c.version == 0


@needs_faults
def test_b5_os_error_faults_and_keeps_the_bump(dev, loop_device):
    c = dev.allocate(2)
    other = dev.allocate(2)
    c[0] = 1.0
    _C._fault_inject("pwrite", 0, 1)
    with pytest.raises(OSError):
        c[1] = 2.0
    assert c.version == 2  # the failed write counts
    assert dev.is_faulted()
    # B-6: access, mutation, allocation and factories refuse
    with pytest.raises(RuntimeError, match="faulted"):
        c[0]
    with pytest.raises(RuntimeError, match="faulted"):
        other[0] = 3.0
    with pytest.raises(RuntimeError, match="faulted"):
        dev.allocate(1)
    with pytest.raises(RuntimeError, match="faulted"):
        c.new_like([1.0])
    with pytest.raises(RuntimeError, match="faulted"):
        c.allocate_like(1)
    with pytest.raises(RuntimeError, match="faulted"):
        sw.CpuToBlockDeviceMoveOperation().forward(flat(cpu_of([1.0])), other)
    assert other.version == 0
    # release, queries and close still work
    assert c.size() == 2 and c.dtype() is D.Float32 and c.device is dev
    c.release()
    other.release()
    del c, other
    gc.collect()
    dev.close()
    assert dev.is_closed()


@needs_faults
def test_b5_zero_byte_completion_is_runtime_error(dev):
    c = dev.allocate(2)
    _C._fault_inject("blockdev_zero", 0, 1)
    with pytest.raises(RuntimeError, match="transferred nothing"):
        c[0] = 1.0
    assert dev.is_faulted() and c.version == 1


@needs_faults
def test_b5_eintr_and_short_transfers_are_continued(dev):
    c = dev.allocate(2)
    _C._fault_inject("blockdev_eintr", 0, 3)
    _C._fault_inject("blockdev_short", 0, 2)
    c[1] = 4.5
    assert c[1] == 4.5 and not dev.is_faulted()


@needs_faults
def test_b5_move_failing_mid_transfer_faults_the_device(dev):
    n = 6 << 20  # 24 MiB: several 8 MiB writes
    src = sw.CPU(n)
    src[0] = 1.0
    src[n - 1] = 2.0
    dst = dev.allocate(n, empty=True)
    _C._fault_inject("pwrite", 1, 1)  # the second write fails
    with pytest.raises(OSError):
        sw.CpuToBlockDeviceMoveOperation().forward(flat(src), dst)
    assert dev.is_faulted()
    assert not src.is_released() and src[0] == 1.0 and src[n - 1] == 2.0
    assert src.version == 2 and dst.version == 0  # moves never bump (C-14)
    assert dst.is_mutable()  # the pending marks are gone


# ---- B-7 release and factories -------------------------------------------------------

def test_b7_release_retires_and_coalesces(dev):
    a = dev.allocation_alignment
    c1, c2, c3 = dev.allocate(1), dev.allocate(1), dev.allocate(1)
    assert c3.device_offset_bytes == 2 * a
    c1.release()
    c2.release()
    c1.release()  # idempotent
    assert (c1.size(), c1.device_offset_bytes, c1.extent_bytes) == (0, 0, 0)
    assert c1.device is dev and c1.is_released()
    both = dev.allocate(2 * a // 4)
    assert both.device_offset_bytes == 0


def test_b7_collection_retires_the_extent(dev):
    c = dev.allocate(5)
    assert c.device_offset_bytes == 0
    del c
    gc.collect()
    assert dev.allocate(5).device_offset_bytes == 0


def test_b7_factories_on_a_released_carrier(dev):
    c = dev.allocate(2)
    c.release()
    n = c.new_like([1, None, 2.5], mutable=False)
    assert type(n) is sw.BlockDeviceCarrier and n.device is dev
    assert [n[i] for i in range(3)] == [1.0, 0.0, 2.5] and not n.is_mutable()
    assert n.version == 0
    z = c.allocate_like(3)
    assert [z[i] for i in range(3)] == [0.0, 0.0, 0.0]
    with pytest.raises(TypeError):
        c.allocate_like(3, empty=0)
    with pytest.raises(TypeError):
        c.new_like([1.0], mutable="yes")
    with pytest.raises(ValueError):
        c.new_like([1.0], dtype=D.Int32)
    with pytest.raises(TypeError):
        c.new_like(5)
    with pytest.raises(TypeError):
        c.new_like(["x"])


def test_b7_new_like_normalizes_before_touching_the_device(dev):
    c = dev.allocate(1)
    keep = dev.allocate(1)

    class F:
        def __float__(self):
            c.release()  # re-enters during normalization
            return 3.0

    numbers.Real.register(F)
    n = c.new_like([F(), 1.0])
    assert [n[0], n[1]] == [3.0, 1.0] and c.is_released()
    # the extent was reserved after the values were normalized: it reuses
    # the range the release freed
    assert n.device_offset_bytes == 0 and keep.device_offset_bytes > 0


# ---- B-8 close and the context manager -------------------------------------------

def test_b8_close_refused_while_carriers_live(loop_device):
    d = sw.BlockDevice(loop_device)
    c = d.allocate(1)
    c.release()
    with pytest.raises(RuntimeError, match="still alive"):
        d.close()
    assert not d.is_closed()
    del c
    gc.collect()
    assert d.close() is None
    assert d.close() is None  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        d.allocate(1)


def test_b8_carriers_keep_their_device_alive(loop_device):
    c = sw.BlockDevice(loop_device).allocate(2)
    gc.collect()
    c[0] = 1.0
    assert c[0] == 1.0 and type(c.device) is sw.BlockDevice


def test_b8_context_manager(loop_device):
    with sw.BlockDevice(loop_device) as d:
        assert type(d) is sw.BlockDevice
    assert d.is_closed()
    with pytest.raises(KeyError):
        with sw.BlockDevice(loop_device) as d2:
            raise KeyError("body")
    assert d2.is_closed()
    d3 = sw.BlockDevice(loop_device)
    assert d3.__exit__(None, None, None) is False



def test_b8_revised_exit_with_a_live_carrier_marks_closing(loop_device):
    # Exiting the block while a carrier object is alive does not raise: the
    # device is marked closing (allocation refused, the carrier still works)
    # and closes when the last carrier object goes.
    d = sw.BlockDevice(loop_device)
    with d:
        keep = d.allocate(2)
        keep[1] = 6.0
    assert not d.is_closed()
    with pytest.raises(RuntimeError, match="closing"):
        d.allocate(1)
    with pytest.raises(RuntimeError, match="closing"):
        keep.allocate_like(1)
    with pytest.raises(RuntimeError, match="closing"):
        keep.new_like([1.0])
    assert keep[1] == 6.0
    keep[0] = 2.0
    with pytest.raises(RuntimeError, match="still alive"):
        d.close()
    del keep
    gc.collect()
    assert d.is_closed()
    with pytest.raises(RuntimeError, match="closed"):
        d.allocate(1)
    assert d.close() is None


# ---- B-9 serialization -------------------------------------------------------------

def test_b9_index_that_releases_is_seen_under_the_lock(dev):
    c = dev.allocate(2)

    class I:
        def __index__(self):
            c.release()
            return 0

    with pytest.raises(RuntimeError, match="released"):
        c[I()] = 1.0
    assert dev.allocate(2).device_offset_bytes == 0 and not dev.is_faulted()


def test_b9_threads_allocate_and_write_without_overlap(dev):
    out, errors = [], []

    def work(k):
        try:
            for j in range(20):
                c = dev.allocate(1 + (k + j) % 300)
                c[0] = float(k * 100 + j)
                out.append((c, float(k * 100 + j)))
                if j % 3 == 0:
                    c.release()
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    live = sorted((c.device_offset_bytes, c.extent_bytes) for c, _ in out if not c.is_released())
    for (s1, l1), (s2, _) in zip(live, live[1:]):
        assert s1 + l1 <= s2
    assert all(c[0] == v for c, v in out if not c.is_released())


# ---- B-10 restrictions and movement -------------------------------------------------

def test_b10_scatter_dlpack_evictable(dev):
    c = dev.allocate(2)
    with pytest.raises(NotImplementedError):
        c.scatter(c, c, None)
    with pytest.raises(BufferError, match="DLPack is not supported"):
        c.dlpack_info()
    with pytest.raises(BufferError):
        flat(c).__dlpack__()
    with pytest.raises(TypeError, match="BlockDeviceCarrier"):
        sw.Evictable(c, sw.CPU(2))
    with pytest.raises(TypeError, match="BlockDeviceCarrier"):
        sw.Evictable(sw.CPU(2), c)
    assert not c.is_owned()


def test_b10_revised_registry_prepopulated_and_closed_to_users():
    B, C = sw.BlockDeviceCarrier, sw.CPU
    assert mv.dispatch_move(C, B) is sw.CpuToBlockDeviceMoveOperation
    assert mv.dispatch_move(B, C) is sw.BlockDeviceToCpuMoveOperation
    assert mv.dispatch_move(B, B) is sw.ElementwiseMoveOperation
    assert mv.dispatch_move(sw.Generic, B) is sw.ElementwiseMoveOperation
    with pytest.raises(ValueError, match="BlockDeviceCarrier"):
        mv.register_move_operation(C, B, sw.CpuToBlockDeviceMoveOperation)
    with pytest.raises(ValueError, match="BlockDeviceCarrier"):
        mv.register_move_operation(B, B, sw.ElementwiseMoveOperation)
    with pytest.raises(ValueError):
        mv.unregister_move_operation(B, C)
    with pytest.raises(ValueError):
        mv.unregister_move_operation(C, B)
    with pytest.raises(ValueError):
        mv.registered_move_operation(B, B, sw.ElementwiseMoveOperation)
    assert mv.dispatch_move(C, B) is sw.CpuToBlockDeviceMoveOperation
    assert mv.dispatch_move(B, C) is sw.BlockDeviceToCpuMoveOperation


def test_b10_cosize_bytes_from_offset_in_one_transfer(dev, loop_device):
    src = cpu_of([float(i) for i in range(20)])
    t = sw.Tensor(src, 3, L((2, 3), (5, 2)))  # cosize 10, holes between
    dst = dev.allocate(12)
    dst[11] = -1.0
    out = sw.CpuToBlockDeviceMoveOperation().forward(t, dst)
    assert out.carrier is dst and out.layout == t.layout and src.is_released()
    assert raw_floats(loop_device, dst.device_offset_bytes, 10) == [float(3 + i) for i in range(10)]
    assert dst[11] == -1.0 and dst.version == 1
    back = sw.BlockDeviceToCpuMoveOperation().forward(out, sw.CPU(10))
    assert type(back.carrier) is sw.CPU and dst.is_released()
    assert [back.carrier[i] for i in range(10)] == [float(3 + i) for i in range(10)]


def test_b10_every_other_pair_or_operation_refused_before_effects(dev):
    src = cpu_of([1.0, 2.0])
    dst = dev.allocate(2)
    dst[0] = 7.0
    attempts = [
        lambda: sw.move(flat(sw.Generic([1.0, 2.0])), dst),
        lambda: sw.move_async(flat(sw.Generic([1.0, 2.0])), dst),
        lambda: sw.move(flat(dst), dev.allocate(2)),
        lambda: sw.move(flat(dst), sw.Generic([0.0, 0.0])),
        lambda: sw.ElementwiseMoveOperation().forward(flat(src), dst),
        lambda: sw.BlockDeviceToCpuMoveOperation().forward(flat(src), dst),
        lambda: sw.CpuToBlockDeviceMoveOperation().forward(flat(sw.Generic([1.0, 2.0])), dst),
        lambda: sw.CpuToBlockDeviceMoveOperation().forward(flat(dst), dev.allocate(2)),
        lambda: sw.BlockDeviceToCpuMoveOperation().forward(flat(dst), sw.Generic([0.0, 0.0])),
        lambda: sw.CpuToFileBackedMoveOperation().forward(flat(dst), sw.FileBacked()),
    ]
    for attempt in attempts:
        with pytest.raises(NotImplementedError, match="BlockDeviceCarrier moves only"):
            attempt()
    assert not src.is_released() and not dst.is_released() and dst[0] == 7.0
    assert dst.version == 1 and dst.is_mutable()
    assert not dev.is_faulted()


def test_b10_direct_copy_hook_refused(dev):
    src = cpu_of([1.0])
    dst = dev.allocate(1)
    out = sw.Tensor(dst, 0, L(1, 1))
    with pytest.raises(NotImplementedError):
        sw.ElementwiseMoveOperation()._copy(flat(src), dst, out, 1)
    sw.CpuToBlockDeviceMoveOperation()._copy(flat(src), dst, out, 1)
    assert dst[0] == 1.0


def test_b10_large_moves_many_threads(dev):
    n = 1 << 18  # 1 MiB each: runs on the worker pool
    results, errors = [], []

    def work(k):
        try:
            for j in range(3):
                src = sw.CPU(n)
                src[0] = float(k)
                src[n - 1] = float(j)
                dst = dev.allocate(n, empty=True)
                on_dev = sw.CpuToBlockDeviceMoveOperation().forward(flat(src), dst)
                back = sw.BlockDeviceToCpuMoveOperation().forward(on_dev, sw.CPU(n))
                results.append((back.carrier[0], back.carrier[n - 1]) == (float(k), float(j)))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors and len(results) == 18 and all(results)


def test_b10_interpreter_exit_with_a_pending_move(loop_device):
    code = textwrap.dedent(f"""
        import strideweave as sw
        from strideweave import _C
        d = sw.BlockDevice({loop_device!r})
        n = 4 << 20
        src = sw.CPU(n)
        src[n - 1] = 5.0
        dst = d.allocate(n, empty=True)
        t = sw.Tensor(src, 0, sw.Layout(sw.Shape(n), sw.Stride(1)))
        _C._hold_moves(True)  # the move stays queued until exit drains it
        import threading, time
        def go():
            sw.CpuToBlockDeviceMoveOperation().forward(t, dst)
        threading.Thread(target=go, daemon=True).start()
        while dst.is_mutable():  # pending from submission on
            time.sleep(0.001)
        print("exiting", flush=True)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "exiting" in r.stdout
    assert raw_floats(loop_device, (4 << 20) * 4 - 4, 1) == [5.0]


def test_b10_differentiable_block_moves_move_gradients_back(dev):
    # C-14 and the move node: the reverse of each block route is the other
    # block route, outside the registry.
    t = flat(cpu_of([1.0, 2.0, 3.0]))
    r = sw.CpuToBlockDeviceMoveOperation().forward(t, dev.allocate(3))
    node = r.autograd_ctx
    assert type(node) is sw.CpuToBlockDeviceMoveOperation and node.inputs() == (t,)
    g = flat(cpu_of([0.5, 1.5, 2.5]))
    (grad,) = node.backward(g)
    assert type(grad.carrier) is sw.CPU
    assert [grad.carrier[i] for i in range(3)] == [0.5, 1.5, 2.5]
    back = sw.BlockDeviceToCpuMoveOperation().forward(r, sw.CPU(3))
    assert type(back.autograd_ctx) is sw.BlockDeviceToCpuMoveOperation
    (g2,) = back.autograd_ctx.backward(g)
    assert type(g2.carrier) is sw.BlockDeviceCarrier and g2.carrier.device is dev
    assert [g2.carrier[i] for i in range(3)] == [0.5, 1.5, 2.5]


def test_public_callables_have_signatures():
    import inspect
    for f in [sw.BlockDevice, sw.BlockDevice.allocate, sw.BlockDevice.close,
              sw.BlockDevice.is_closed, sw.BlockDevice.is_faulted,
              sw.BlockDeviceCarrier.new_like, sw.BlockDeviceCarrier.allocate_like]:
        assert f.__doc__
        inspect.signature(f)
    # an unbound method descriptor shows self first, as CPython's own do
    assert list(inspect.signature(sw.BlockDevice.allocate).parameters) == [
        "self", "size", "mutable", "dtype", "empty"]


def test_b7_no_leak_over_many_carriers(dev):
    # carriers, extents and factory buffers come and go without leaving core
    # allocations or reserved ranges behind
    def churn():
        for k in range(50):
            c = dev.allocate(1 + k, empty=bool(k % 2))
            n = c.new_like([1.0] * (k + 1))
            c[0] = float(k)
            if k % 3 == 0:
                c.release()
            del c, n
    churn()
    gc.collect()
    before = _C._live_bytes()
    churn()
    gc.collect()
    assert _C._live_bytes() == before
    assert dev.allocate(dev.capacity_bytes // 4, empty=True).device_offset_bytes == 0


# ---- audit: B-3 check order ------------------------------------------------------

@pytest.mark.parametrize("args, kw, exc", [
    ((-1,), {"mutable": 1}, ValueError),              # size before the flags
    ((2**62,), {"mutable": 1}, OverflowError),        # byte overflow before the flags
    ((1,), {"mutable": 1, "empty": None}, TypeError),  # mutable before empty
    ((1,), {"empty": None, "dtype": "x"}, TypeError),  # empty before dtype
    ((1,), {"dtype": D.Int32}, ValueError),
])
def test_b3_arguments_are_checked_before_the_device_state(loop_device, args, kw, exc):
    d = sw.BlockDevice(loop_device)
    d.close()  # a closed device still reports the argument error first
    with pytest.raises(exc):
        d.allocate(*args, **kw)
    with pytest.raises(RuntimeError, match="closed"):
        d.allocate(1)
    assert d.is_closed() and not d.is_faulted()


# ---- audit: B-6 what a fault poisons ------------------------------------------------

@needs_faults
def test_b6_fault_poisons_every_data_path_but_not_queries(dev):
    c = dev.allocate(2)
    c[0] = 2.0
    spare = dev.allocate(1)
    _C._fault_inject("pwrite", 0, 1)
    try:
        with pytest.raises(OSError):
            c[1] = 3.0
    finally:
        _C._fault_clear()
    assert dev.is_faulted() and c.version == 2
    dst = cpu_of([5.0, 6.0])
    refused = [
        lambda: c[0], lambda: c.get_value(0), lambda: c.set_value(0, 1.0),
        lambda: flat(c).tolist(), lambda: flat(c)[0],
        lambda: sw.BlockDeviceToCpuMoveOperation().forward(flat(c), dst),
        lambda: sw.CpuToBlockDeviceMoveOperation().forward(flat(cpu_of([1.0])), spare),
        lambda: dev.allocate(1), lambda: dev.allocate(0), lambda: spare.new_like([1.0]),
        lambda: spare.allocate_like(1, empty=True),
    ]
    for call in refused:
        with pytest.raises(RuntimeError, match="faulted"):
            call()
    # nothing moved, nothing released, no version advanced
    assert not c.is_released() and dst[0] == 5.0 and not dst.is_released()
    assert c.version == 2 and spare.version == 0 and spare.is_mutable()
    # allocate's argument errors come first (B-3); for slot access the
    # fault is a state check like "released" (C-4 check 1), before the index
    with pytest.raises(ValueError):
        dev.allocate(-1)
    with pytest.raises(RuntimeError, match="faulted"):
        c[5]
    # queries, DLPack's refusal, release and close still work
    assert (c.size(), c.dtype(), c.device, c.is_mutable()) == (2, D.Float32, dev, True)
    assert c.extent_bytes == dev.allocation_alignment and c.supports_storage_dtype(D.Float32)
    with pytest.raises(BufferError, match="DLPack is not supported"):
        c.dlpack_info()
    c.release()
    spare.release()
    assert c.extent_bytes == 0 and c.is_released()
    del c, spare
    gc.collect()
    assert dev.close() is None
    assert dev.is_closed() and dev.is_faulted()  # a fault is for good


@needs_faults
def test_b6_failed_read_faults_too(dev):
    c = dev.allocate(2)
    _C._fault_inject("pread", 0, 1)
    try:
        with pytest.raises(OSError):
            c[0]
    finally:
        _C._fault_clear()
    assert dev.is_faulted() and c.version == 0  # a read never counts


# ---- audit: B-8 __exit__ -------------------------------------------------------------

def test_b8_revised_exit_never_masks_the_body_exception(loop_device):
    d = sw.BlockDevice(loop_device)
    keep = d.allocate(1)
    with pytest.raises(KeyError, match="body") as info:
        with d:
            raise KeyError("body")
    assert info.value.__context__ is None
    assert not d.is_closed()
    keep[0] = 1.0  # the device is still usable, only closing
    with pytest.raises(RuntimeError, match="closing"):
        d.allocate(1)
    del keep
    gc.collect()
    assert d.is_closed()


# ---- audit: B-9 serialization ----------------------------------------------------------

def test_b9_release_racing_slot_writes_never_touches_a_reused_range(dev):
    # A slot write waiting for the device lock (held GIL-free by a big
    # zero-fill) must re-check its carrier under the lock: if another thread
    # released it meanwhile and the range went to a new carrier, the write
    # fails instead of landing in the new carrier.
    stop = threading.Event()

    def churn():
        while not stop.is_set():
            dev.allocate(1 << 20).release()  # 4 MiB zero-filled with the lock held

    bg = threading.Thread(target=churn)
    bg.start()
    stray, errors = 0, []
    try:
        for _ in range(150):
            c = dev.allocate(4)

            def writer(c=c):
                try:
                    while True:
                        c[1] = 7.0
                except RuntimeError:
                    pass  # released: the only way out
                except Exception as e:  # pragma: no cover - reported below
                    errors.append(e)

            ws = [threading.Thread(target=writer) for _ in range(3)]
            for w in ws:
                w.start()
            offset = c.device_offset_bytes
            c.release()
            n = dev.allocate(4)  # zero-filled, usually over the same range
            for w in ws:
                w.join(timeout=60)
                assert not w.is_alive()
            if n.device_offset_bytes == offset and n[1] != 0.0:
                stray += 1
            n.release()
    finally:
        stop.set()
        bg.join()
    assert errors == [] and stray == 0


def test_b9_many_threads_allocate_free_write_and_move_without_deadlock(dev):
    n_big = 1 << 17  # 512 KiB: moves run on the worker pool, fills drop the GIL
    errors, kept = [], []

    def work(k):
        try:
            for j in range(6):
                c = dev.allocate(1 + (k * 7 + j) % 200, empty=bool(j % 2))
                c[0] = float(k)
                src = sw.CPU(n_big)
                src[n_big - 1] = float(j)
                on_dev = sw.CpuToBlockDeviceMoveOperation().forward(
                    flat(src), dev.allocate(n_big, empty=True))
                like = c.new_like([float(j)] * 3)
                back = sw.BlockDeviceToCpuMoveOperation().forward(on_dev, sw.CPU(n_big))
                assert back.carrier[n_big - 1] == float(j) and c[0] == float(k)
                assert like[2] == float(j)
                if j % 2:
                    c.release()
                else:
                    kept.append((c, float(k)))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in ts), "a thread is stuck: deadlock"
    assert errors == []
    live = sorted((c.device_offset_bytes, c.extent_bytes) for c, _ in kept)
    for (s1, l1), (s2, _) in zip(live, live[1:]):
        assert s1 + l1 <= s2
    assert all(c[0] == v for c, v in kept) and not dev.is_faulted()


def test_b9_concurrent_releases_retire_the_extent_once(dev):
    # Releases that wait for the lock (held GIL-free by a big zero-fill on
    # another thread) read the extent under it: the first retires it, the
    # others find nothing. Read outside the lock, a late one would retire
    # offset 0 (the zeroed field), which belongs to `guard`.
    guard = dev.allocate(1)
    assert guard.device_offset_bytes == 0
    stop = threading.Event()

    def churn():
        while not stop.is_set():
            dev.allocate(1 << 20).release()

    bg = threading.Thread(target=churn)
    bg.start()
    try:
        for _ in range(100):
            c = dev.allocate(1)
            barrier = threading.Barrier(4)

            def rel(c=c):
                barrier.wait()
                c.release()

            ts = [threading.Thread(target=rel) for _ in range(4)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(timeout=60)
            assert c.is_released() and not any(t.is_alive() for t in ts)
            probe = dev.allocate(1)
            assert probe.device_offset_bytes != 0, "guard's range was retired twice"
            probe.release()
    finally:
        stop.set()
        bg.join()
    assert guard.extent_bytes == dev.allocation_alignment and not dev.is_faulted()


# ---- audit: B-10 -----------------------------------------------------------------------

def test_b10_user_operations_and_async_moves_refused_before_effects(dev):
    class Mine(sw.MoveOperation):
        def _copy(self, tensor, destination, output, element_count):  # pragma: no cover
            raise AssertionError("never reached")

    src = cpu_of([1.0, 2.0])
    dst = dev.allocate(2)
    dst[1] = 4.0
    for attempt in (lambda: Mine().forward(flat(src), dst),
                    lambda: Mine().forward(flat(dst), sw.CPU(2)),
                    lambda: sw.move_async(flat(dst), sw.Generic([0.0, 0.0]))):
        with pytest.raises(NotImplementedError, match="BlockDeviceCarrier moves only"):
            attempt()
    assert not src.is_released() and not dst.is_released() and dst[1] == 4.0
    assert dst.version == 1 and dst.is_mutable() and src.is_mutable()
    assert mv.dispatch_move(sw.CPU, sw.BlockDeviceCarrier) is sw.CpuToBlockDeviceMoveOperation
    with pytest.raises(ValueError, match="BlockDeviceCarrier"):
        mv.unregister_move_operation(sw.CPU, sw.BlockDeviceCarrier)
    with pytest.raises(ValueError, match="BlockDeviceCarrier"):
        mv.register_move_operation(sw.BlockDeviceCarrier, sw.BlockDeviceCarrier, Mine)
    assert mv.dispatch_move(sw.BlockDeviceCarrier, sw.BlockDeviceCarrier) is sw.ElementwiseMoveOperation


# ---- audit: B-7 release while device work is in flight ------------------------------

def test_b7_release_during_a_pending_block_move_refuses_then_completes(dev):
    # The move is held queued (pending) on the worker pool: release of either
    # participant is refused with RuntimeError and changes nothing; once the
    # move runs, the destination holds the values and the source is released.
    n = 1 << 18
    src = sw.CPU(n)
    src[n - 1] = 3.5
    dst = dev.allocate(n, empty=True)
    out = []
    _C._hold_moves(True)
    try:
        t = threading.Thread(target=lambda: out.append(
            sw.CpuToBlockDeviceMoveOperation().forward(flat(src), dst)))
        t.start()
        while dst.is_mutable():  # pending from submission on
            pass
        for carrier in (dst, src):
            with pytest.raises(RuntimeError, match="pending"):
                carrier.release()
        with pytest.raises(RuntimeError, match="pending"):
            dst[0] = 1.0
        assert not dst.is_released() and dst.extent_bytes > 0 and not src.is_released()
    finally:
        _C._hold_moves(False)
    t.join(timeout=60)
    assert not t.is_alive() and out and out[0].carrier is dst
    assert dst[n - 1] == 3.5 and src.is_released() and dst.version == 0
    dst.release()
    assert dst.extent_bytes == 0


# ---- audit: base rules on BlockDeviceCarrier (C-5, C-6, C-11, C-15) ---------------------

def test_c5_write_check_order_on_a_block_carrier(dev):
    frozen = dev.allocate(2, mutable=False)
    live = dev.allocate(2)
    with pytest.raises(TypeError):
        frozen["0"] = 1.0        # index type before mutability
    with pytest.raises(RuntimeError, match="not mutable|immutable"):
        frozen[5] = 1.0          # mutability before range
    with pytest.raises(IndexError):
        live[5] = "x"            # range before normalization
    live.release()
    with pytest.raises(RuntimeError, match="released"):
        live["0"] = "x"          # released first
    assert frozen.version == 0 and live.version == 0 and not dev.is_faulted()


def test_c6_c11_c15_block_carrier_surface_after_release(dev):
    c = dev.allocate(3)
    assert c.supports_storage_dtype(D.Float32)
    assert not c.supports_storage_dtype(D.Int32) and not c.supports_storage_dtype(D.Bool)
    with pytest.raises(TypeError):
        c.supports_storage_dtype("Float32")
    c[0] = 1.0
    c.release()
    assert (c.size(), c.dtype(), c.version, c.is_released()) == (0, D.Float32, 1, True)
    assert c.supports_storage_dtype(D.Float32) and not c.is_owned()
    with pytest.raises(BufferError, match="DLPack is not supported"):
        c.dlpack_info()
    with pytest.raises(RuntimeError, match="released"):
        c[0]
    with pytest.raises(ValueError):
        c.allocate_like(-1)
    with pytest.raises(TypeError):
        c.allocate_like(1.5)
    e = c.allocate_like(2, empty=True)
    assert e.size() == 2 and e.device is dev and e.version == 0
