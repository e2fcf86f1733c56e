"""FileBacked storage of a process that was killed is reclaimed by the next
process that makes FileBacked storage; a live process's never is, and
nothing outside TMPDIR is reached through a symlink."""

import os
import pathlib
import signal
import subprocess
import sys

import pytest

HOLD = ("import strideweave as sw, time\n"
        "f = sw.FileBacked(); f._allocate(1000)\n"
        "print(f.path, flush=True)\n"
        "time.sleep(120)\n")
MAKE = "import strideweave as sw; print(sw.FileBacked().path)"


def run_python(code, tmpdir, **kw):
    env = dict(os.environ, TMPDIR=str(tmpdir), PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                            text=True, **kw)


def make_storage_in(tmpdir):
    p = run_python(MAKE, tmpdir)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 0
    return pathlib.Path(out.strip())


@pytest.fixture
def holder(tmp_path):
    """A live process that owns FileBacked storage in tmp_path."""
    p = run_python(HOLD, tmp_path)
    path = pathlib.Path(p.stdout.readline().strip())
    assert path.exists()
    yield p, path
    if p.poll() is None:
        p.kill()
    p.wait()


def test_killed_process_storage_is_reclaimed_by_the_next_process(tmp_path, holder):
    p, path = holder
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    assert path.exists()  # nobody cleaned up at the kill
    mine = make_storage_in(tmp_path)
    assert not path.parent.exists()
    assert not mine.parent.exists()  # that process exited normally: removed too
    assert list(tmp_path.iterdir()) == []


def test_live_process_storage_is_never_reclaimed(tmp_path, holder):
    p, path = holder
    other = make_storage_in(tmp_path)
    assert other.parent != path.parent
    assert path.exists() and path.stat().st_size == 4000
    assert p.poll() is None


def test_a_symlink_named_like_storage_is_not_followed(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.bin").write_bytes(b"keep")
    (outside / ".lock").write_bytes(b"")
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    link = tmpdir / (".strideweave-filebacked-" + "0" * 32)
    link.symlink_to(outside)
    make_storage_in(tmpdir)
    assert link.is_symlink() and (outside / "precious.bin").read_bytes() == b"keep"


def test_directories_without_a_lock_are_left_alone(tmp_path):
    stray = tmp_path / (".strideweave-filebacked-" + "a" * 32)
    stray.mkdir()
    (stray / "data.bin").write_bytes(b"x")
    half_made = tmp_path / (".strideweave-filebacked-new-" + "b" * 32)
    half_made.mkdir()
    make_storage_in(tmp_path)
    assert (stray / "data.bin").exists() and half_made.exists()


HALF_MADE_HOLD = (
    "import fcntl, os, sys, time\n"
    "d = sys.argv[1]\n"
    "os.mkdir(d, 0o700)\n"
    "fd = os.open(os.path.join(d, '.lock'), os.O_RDWR | os.O_CREAT, 0o600)\n"
    "fcntl.flock(fd, fcntl.LOCK_EX)\n"
    "open(os.path.join(d, 'data.bin'), 'wb').close()\n"
    "print('locked', flush=True)\n"
    "time.sleep(120)\n")


def test_half_made_directory_of_a_killed_process_is_reclaimed(tmp_path):
    # A process killed between mkdir and rename leaves the temporary name
    # with a lock file in it; its lock is free once it is dead.
    half = tmp_path / (".strideweave-filebacked-new-" + "c" * 32)
    p = subprocess.Popen([sys.executable, "-c", HALF_MADE_HOLD, str(half)],
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "locked"
    live = make_storage_in(tmp_path)
    assert (half / "data.bin").exists()  # its maker still holds the lock: kept
    assert not live.parent.exists()
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    p.stdout.close()
    make_storage_in(tmp_path)
    assert not half.exists()
    assert list(tmp_path.iterdir()) == []


SWAP_FOR_SYMLINK = (
    "import os, sys, strideweave as sw\n"
    "f = sw.FileBacked(); f._allocate(4)\n"
    "session = f.path.parent\n"
    "os.rename(session, sys.argv[1])\n"
    "os.symlink(sys.argv[2], session)\n"
    "print(session, flush=True)\n")


def test_exit_cleanup_does_not_follow_a_symlink_at_the_session_directory(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "canary.bin").write_bytes(b"alive")
    (outside / ".lock").write_bytes(b"")
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    moved = tmp_path / "moved-session"
    p = subprocess.run([sys.executable, "-c", SWAP_FOR_SYMLINK, str(moved), str(outside)],
                       env=dict(os.environ, TMPDIR=str(tmpdir),
                                PYTHONPATH=os.pathsep.join(sys.path)),
                       stdout=subprocess.PIPE, text=True, timeout=60)
    assert p.returncode == 0
    session = pathlib.Path(p.stdout.strip())
    assert session.is_symlink()
    assert (outside / "canary.bin").read_bytes() == b"alive"
    assert (outside / ".lock").exists()
