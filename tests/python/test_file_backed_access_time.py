"""A FileBacked file is private scratch storage: reading it (element reads,
moves out of it) makes no access-time update, which on a relatime mount
would otherwise dirty the file's inode on the first read after each write
(measured as half of a small file read's time). Its name still goes at
release, whichever path the release takes.

The access time is set into the past by hand, before the modification time:
a relatime, strictatime or lazytime mount then updates it on the next read
unless the descriptor asks for none. On a noatime mount nothing would
change either way, so those tests are skipped there."""

import os

import pytest

import strideweave as sw
from strideweave import CPU, FileBacked, Layout, Shape, Stride, Tensor

PAST = 1_000_000  # seconds since the epoch, long before any mtime here


def filled_file(n=1024):
    src = Tensor(CPU(1).new_like([3.0] * n), 0, Layout(Shape(n), Stride(1)))
    with sw.no_grad():
        return sw.move(src, FileBacked())


def mount_options(path):
    """The options of the mount that holds `path`, or None if unknown."""
    try:
        with open("/proc/self/mounts") as f:
            mounts = [line.split() for line in f]
    except OSError:
        return None
    path = os.path.realpath(path)
    best = None
    for m in mounts:
        point = m[1]
        if path == point or path.startswith(point.rstrip("/") + "/"):
            if best is None or len(point) > len(best[1]):
                best = m
    return best[3].split(",") if best else None


def skip_without_atime(path):
    opts = mount_options(path)
    if opts is None or "noatime" in opts:
        pytest.skip("needs a mount that updates access times (relatime or strictatime)")


def age_access_time(path):
    st = os.stat(path)
    os.utime(path, ns=(PAST * 10**9, st.st_mtime_ns))
    assert os.stat(path).st_atime_ns == PAST * 10**9


def test_c23_reading_a_file_backed_leaves_its_access_time():
    t = filled_file()
    path = t.carrier.path
    skip_without_atime(path)
    age_access_time(path)
    assert t.carrier[5] == 3.0  # a pread of the file
    assert os.stat(path).st_atime_ns == PAST * 10**9
    t.carrier.release()
    assert not path.exists()


def test_c23_moving_out_of_a_file_backed_leaves_its_access_time_then_removes_it():
    t = filled_file()
    path = t.carrier.path
    skip_without_atime(path)
    age_access_time(path)
    # A descriptor of the same file opened while the move runs sees the
    # inode the move read; after the move the name is gone.
    fd = os.open(path, os.O_RDONLY)
    try:
        with sw.no_grad():
            out = sw.move(t, CPU(1024, empty=True))
        assert out.carrier[1023] == 3.0
        assert not path.exists()
        assert os.fstat(fd).st_atime_ns == PAST * 10**9
    finally:
        os.close(fd)


def test_c23_a_plain_descriptor_of_the_same_mount_does_update_the_access_time():
    """The control: the mount really updates access times on a read, so the
    two tests above can fail."""
    t = filled_file()
    path = t.carrier.path
    skip_without_atime(path)
    age_access_time(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert len(os.pread(fd, 16, 0)) == 16
    finally:
        os.close(fd)
    assert os.stat(path).st_atime_ns != PAST * 10**9
    t.carrier.release()
