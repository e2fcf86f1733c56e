"""A real Linux block device for tests: a loop device over a sparse file.

`loop_device` (a pytest fixture) yields the path of a fresh loop device
(`losetup --find --show` over a sparse file in a temporary directory),
detached again in the finalizer. Tests that need it skip, with the reason,
when this process may not create loop devices (not Linux, not root, no
losetup, no /dev/loop-control)."""

import os
import shutil
import subprocess
import sys

import pytest

LOOP_BYTES = 64 << 20


def loop_device_unavailable():
    """Why no loop device can be made here, or None when one can."""
    if not sys.platform.startswith("linux"):
        return "loop devices exist on Linux only"
    if shutil.which("losetup") is None:
        return "losetup is not installed"
    if not os.path.exists("/dev/loop-control"):
        return "/dev/loop-control is missing (no loop driver in this environment)"
    if os.geteuid() != 0:
        return "creating a loop device needs root"
    return None


def attach(directory, size=LOOP_BYTES):
    """Attach a loop device over a new sparse file; returns its path."""
    backing = os.path.join(directory, "loop-backing.img")
    with open(backing, "wb") as f:
        f.truncate(size)
    out = subprocess.run(["losetup", "--find", "--show", backing],
                         capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip(f"losetup could not attach a loop device: {out.stderr.strip()}")
    return out.stdout.strip()


def detach(path):
    subprocess.run(["losetup", "-d", path], capture_output=True)


@pytest.fixture
def loop_device(tmp_path):
    why = loop_device_unavailable()
    if why:
        pytest.skip(why)
    path = attach(str(tmp_path))
    try:
        yield path
    finally:
        detach(path)
