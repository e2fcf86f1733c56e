"""The anchors' read loop, shared by bench/move.py and bench/sweep.py."""

import os


def preadv_all(fd, buf, base):
    """Read len(buf) bytes at file offset `base` into `buf` with os.preadv,
    as many calls as it takes; EOFError if the file ends first."""
    mv = memoryview(buf).cast("B")
    off = 0
    while off < len(mv):
        got = os.preadv(fd, [mv[off:]], base + off)
        if not got:
            raise EOFError("short read")
        off += got
