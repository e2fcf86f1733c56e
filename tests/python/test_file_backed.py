"""The FileBacked carrier (contract-carriers C-6, C-7, C-10..C-12, C-14..C-16,
C-18, C-22, C-23)."""

import gc
import os
import pathlib
import re
import stat
import struct
import uuid

import pytest

import strideweave as sw
from strideweave import _C
from measure import settled_live_bytes
import child_process

D = sw.DType

needs_faults = pytest.mark.skipif(not _C._fault_injection_enabled(),
                                   reason="build without -Dfault_injection=true")

HEX32 = re.compile(r"[0-9a-f]{32}")


def values(c):
    return [c[i] for i in range(c.size())]


def session_dir():
    """The hidden directory (created by the first FileBacked)."""
    f = sw.FileBacked()
    d = f.path.parent
    f.release()
    return d


def listing():
    return sorted(p.name for p in session_dir().iterdir())


def unique_name():
    return f"test-{uuid.uuid4().hex}.bin"


def run_python(code, cwd=None, **env_extra):
    return child_process.run_python(code, timeout=60, cwd=cwd, **env_extra).stdout


@pytest.fixture(autouse=True)
def _no_faults_left():
    yield
    if _C._fault_injection_enabled():
        _C._fault_clear()


# ---- C-22 construction -----------------------------------------------------------


def test_c22_default_generated_file_in_hidden_directory():
    f = sw.FileBacked()
    p = f.path
    assert isinstance(p, pathlib.Path)
    assert p.is_absolute()
    assert re.fullmatch(r"[0-9a-f]{32}\.bin", p.name)
    assert re.fullmatch(r"\.strideweave-filebacked-[0-9a-f]{32}", p.parent.name)
    base = os.environ.get("TMPDIR") or "/tmp"
    assert p.parent.parent == pathlib.Path(base).resolve() or \
        str(p.parent.parent) == base.rstrip("/")
    assert stat.S_IMODE(p.parent.stat().st_mode) == 0o700
    assert p.is_file() and p.stat().st_size == 0
    assert f.size() == 0 and f.dtype() is D.Float32
    assert f.is_mutable() and f.version == 0


def test_c22_named_file():
    name = unique_name()
    f = sw.FileBacked(name, dtype=D.Int32, mutable=False)
    assert f.path.name == name
    assert f.path.parent == session_dir()
    assert f.path.exists()
    assert f.dtype() is D.Int32 and not f.is_mutable()
    f.release()


def test_c22_keyword_only():
    with pytest.raises(TypeError):
        sw.FileBacked(None, True)


@pytest.mark.parametrize("bad", [b"x.bin", 1, pathlib.Path("x.bin"), 1.0])
def test_c22_filename_type_error(bad):
    before = listing()
    with pytest.raises(TypeError, match="filename"):
        sw.FileBacked(bad)
    assert listing() == before


@pytest.mark.parametrize("bad", ["", ".", "..", "a/b", "/abs", "x\0y"])
def test_c22_filename_value_error(bad):
    before = listing()
    with pytest.raises(ValueError, match="filename"):
        sw.FileBacked(bad)
    assert listing() == before


def test_c22_existing_file_exists_error_untouched():
    name = unique_name()
    target = session_dir() / name
    target.write_bytes(b"keep me")
    with pytest.raises(FileExistsError):
        sw.FileBacked(name)
    assert target.read_bytes() == b"keep me"
    first = sw.FileBacked(unique_name())
    with pytest.raises(FileExistsError):
        sw.FileBacked(first.path.name)
    target.unlink()


@pytest.mark.parametrize("bad, exc, msg", [
    ("Float32", TypeError, "dtype must be a DType"),
    (D.Bool, ValueError, "does not support storage dtype Bool"),
    (D.Float64, ValueError, "does not support storage dtype Float64"),
    (D.ScaledInt32, ValueError, "^FileBacked does not support storage dtype ScaledInt32: it is a compound dtype whose tensors span several carriers, one per plane"),
    (D.Floating, ValueError, "Int32"),
])
def test_c7_dtype_errors_create_nothing(bad, exc, msg):
    before = listing()
    with pytest.raises(exc, match=msg):
        sw.FileBacked(dtype=bad)
    assert listing() == before


def test_c22_check_order_dtype_before_filename():
    with pytest.raises(ValueError, match="Bool"):
        sw.FileBacked(5, dtype=D.Bool)
    with pytest.raises(ValueError, match="Bool"):
        sw.FileBacked("", dtype=D.Bool)


# ---- C-12, C-23 storage ---------------------------------------------------------------


def test_c12_allocate_grows_with_zero_fill():
    f = sw.FileBacked()
    assert f._allocate(3) is None
    assert f.size() == 3
    assert f.path.stat().st_size == 12
    assert values(f) == [0.0, 0.0, 0.0]
    assert f.version == 0  # growth is not a write
    f[1] = 2.5
    f._allocate(5)
    assert values(f) == [0.0, 2.5, 0.0, 0.0, 0.0]
    f._allocate(5)
    assert f.size() == 5


def test_c12_allocate_errors():
    f = sw.FileBacked()
    with pytest.raises(TypeError):
        f._allocate(1.0)
    with pytest.raises(TypeError):
        f._allocate(True)
    with pytest.raises(ValueError):
        f._allocate(-1)
    with pytest.raises(OverflowError):
        f._allocate(2**62)
    with pytest.raises(OverflowError):
        f._allocate(2**64)
    assert f.size() == 0 and f.path.stat().st_size == 0
    f._allocate(2)
    with pytest.raises(ValueError, match="shrink"):
        f._allocate(1)
    assert f.size() == 2
    f.release()
    with pytest.raises(RuntimeError, match="released"):
        f._allocate(4)


def test_c23_raw_native_slots_no_header():
    f = sw.FileBacked()
    f._allocate(2)
    f[0] = 1.5
    f[1] = -3.0
    assert f.path.read_bytes() == struct.pack("=2f", 1.5, -3.0)
    i = sw.FileBacked(dtype=D.Int32)
    i._allocate(2)
    i.set_value(1, -9)
    assert i.path.read_bytes() == struct.pack("=2i", 0, -9)
    assert i.version == 1


def test_c14_direct_file_writes_bypass_version():
    f = sw.FileBacked(dtype=D.Int32)
    f._allocate(1)
    f.path.write_bytes(struct.pack("=i", 42))
    assert f[0] == 42
    assert f.version == 0


def test_c4_c5_access_checks():
    f = sw.FileBacked()
    f._allocate(2)
    with pytest.raises(TypeError):
        f["0"]
    with pytest.raises(IndexError):
        f[2]
    with pytest.raises(IndexError):
        f[-1] = 0.0
    with pytest.raises(TypeError):
        f[0] = "x"
    with pytest.raises(OverflowError):
        f[0] = 10**400
    assert f.version == 0
    ro = sw.FileBacked(mutable=False)
    ro._allocate(1)
    with pytest.raises(RuntimeError, match="not mutable"):
        ro[0] = 1.0


def test_c15_release_deletes_file_once_and_keeps_path():
    f = sw.FileBacked()
    f._allocate(4)
    p = f.path
    assert p.exists()
    assert f.release() is None
    assert not p.exists()
    assert f.path == p and isinstance(f.path, pathlib.Path)
    assert f.size() == 0 and f.is_released() and f.dtype() is D.Float32
    # a new file of the same name is not deleted by a second release or by GC
    g = sw.FileBacked(p.name)
    assert f.release() is None
    del f
    gc.collect()
    assert p.exists()
    g.release()
    with pytest.raises(RuntimeError, match="released"):
        g[0]
    with pytest.raises(RuntimeError, match="released"):
        g[0] = 1.0


def test_c23_garbage_collection_deletes_file():
    f = sw.FileBacked()
    f._allocate(1)
    p = f.path
    del f
    assert not p.exists()


def test_c23_released_file_removed_externally_is_fine():
    f = sw.FileBacked()
    f.path.unlink()
    assert f.release() is None


@pytest.mark.parametrize("name, ok", [("Float32", True), ("Int32", True), ("Bool", False),
                                      ("Float64", False), ("Any", False),
                                      ("ScaledInt32", False)])
def test_c6_supports(name, ok):
    f = sw.FileBacked()
    before = listing()
    assert f.supports_storage_dtype(getattr(D, name)) is ok
    f.release()
    assert f.supports_storage_dtype(getattr(D, name)) is ok
    assert len(listing()) == len(before) - 1


def test_c16_no_dlpack():
    with pytest.raises(BufferError, match="DLPack is not supported"):
        sw.FileBacked().dlpack_info()


def test_c18_closed():
    with pytest.raises(TypeError, match="closed carrier implementation"):
        class Sub(sw.FileBacked):
            pass


# ---- C-10, C-11 factories --------------------------------------------------------------


def test_c10_new_like_creates_generated_file():
    f = sw.FileBacked(unique_name(), dtype=D.Int32)
    f.release()
    n = f.new_like([1, None, 3])
    assert type(n) is sw.FileBacked
    assert re.fullmatch(r"[0-9a-f]{32}\.bin", n.path.name)
    assert n.path.parent == f.path.parent
    assert n.dtype() is D.Int32
    assert values(n) == [1, 0, 3]
    assert n.path.read_bytes() == struct.pack("=3i", 1, 0, 3)
    assert n.version == 0 and n.is_mutable()
    m = n.new_like([0.5], dtype=D.Float32, mutable=False)
    assert values(m) == [0.5] and not m.is_mutable()
    assert m.path != n.path


def test_c10_new_like_errors_create_nothing():
    f = sw.FileBacked()
    before = listing()
    with pytest.raises(TypeError, match="iterable"):
        f.new_like(1)
    with pytest.raises(ValueError):
        f.new_like([1.0], dtype=D.Bool)
    with pytest.raises(TypeError):
        f.new_like([1.0], dtype="x")
    with pytest.raises(TypeError):
        f.new_like([1.0, "x"])
    with pytest.raises(OverflowError):
        f.new_like([2**40], dtype=D.Int32)
    assert listing() == before


def test_c11_allocate_like():
    f = sw.FileBacked()
    f.release()
    for empty in (False, True):
        a = f.allocate_like(3, empty=empty)
        assert type(a) is sw.FileBacked and a.size() == 3
        assert values(a) == [0.0] * 3
        assert a.path.stat().st_size == 12
    b = f.allocate_like(0, dtype=D.Int32, mutable=False)
    assert b.size() == 0 and b.dtype() is D.Int32 and not b.is_mutable()
    before = listing()
    with pytest.raises(TypeError):
        f.allocate_like("3")
    with pytest.raises(ValueError):
        f.allocate_like(-3)
    with pytest.raises(ValueError):
        f.allocate_like(3, dtype=D.Bool)
    with pytest.raises(OverflowError):
        f.allocate_like(2**62)
    assert listing() == before


# ---- fault injection ---------------------------------------------------------------------


@needs_faults
def test_fault_pwrite_raises_oserror_and_changes_nothing():
    f = sw.FileBacked()
    f._allocate(2)
    f[0] = 1.5
    _C._fault_inject("pwrite")
    with pytest.raises(OSError):
        f[0] = 7.0
    assert f.version == 1
    assert f[0] == 1.5
    assert f.path.read_bytes() == struct.pack("=2f", 1.5, 0.0)
    f[0] = 2.0  # the fault fired once
    assert f[0] == 2.0 and f.version == 2


@needs_faults
def test_fault_pread_raises_oserror():
    f = sw.FileBacked()
    f._allocate(1)
    _C._fault_inject("pread")
    with pytest.raises(OSError):
        f[0]
    assert f[0] == 0.0


@needs_faults
def test_fault_truncate_allocate_unchanged():
    f = sw.FileBacked()
    _C._fault_inject("truncate")
    with pytest.raises(OSError):
        f._allocate(4)
    assert f.size() == 0 and f.path.stat().st_size == 0


@needs_faults
def test_fault_open_creates_nothing():
    before = listing()
    _C._fault_inject("open")
    with pytest.raises(OSError):
        sw.FileBacked()
    assert listing() == before


@needs_faults
@pytest.mark.parametrize("fault", ["pwrite", "truncate", "open"])
def test_fault_factories_leave_no_file(fault):
    f = sw.FileBacked()
    before = listing()
    live = settled_live_bytes()
    _C._fault_inject(fault)
    with pytest.raises(OSError):
        f.new_like([1.0, 2.0])
    _C._fault_clear()
    if fault != "pwrite":
        _C._fault_inject(fault)
        with pytest.raises(OSError):
            f.allocate_like(2)
    assert listing() == before
    assert _C._live_bytes() == live


# ---- session directory lifetime ------------------------------------------------------------


def test_c23_directory_under_tmpdir_removed_at_exit(tmp_path):
    out = run_python("""
        import strideweave as sw
        kept = sw.FileBacked()          # still alive at exit
        kept._allocate(3)
        gone = sw.FileBacked("named.bin")
        gone.release()
        print(kept.path)
    """, TMPDIR=str(tmp_path))
    p = pathlib.Path(out.strip())
    assert p.parent.parent == tmp_path
    assert re.fullmatch(r"\.strideweave-filebacked-[0-9a-f]{32}", p.parent.name)
    assert not p.parent.exists()
    assert list(tmp_path.iterdir()) == []


def test_c23_directory_created_once_per_process(tmp_path):
    out = run_python("""
        import strideweave as sw, os
        a, b = sw.FileBacked(), sw.FileBacked()
        assert a.path.parent == b.path.parent
        print(len(os.listdir(os.environ["TMPDIR"])))
    """, TMPDIR=str(tmp_path))
    assert out.strip() == "1"


def test_c23_no_directory_without_filebacked(tmp_path):
    run_python("import strideweave as sw; sw.CPU(3)", TMPDIR=str(tmp_path))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.forks
def test_c23_forked_child_exit_keeps_parent_directory(tmp_path):
    out = run_python("""
        import os, sys
        import strideweave as sw
        f = sw.FileBacked()
        f._allocate(1)
        f[0] = 4.0
        pid = os.fork()
        if pid == 0:
            # child: a normal interpreter exit runs atexit handlers and
            # collects the inherited carrier
            child = sw.FileBacked()
            child.release()
            sys.exit(0)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        print(f.path.parent.is_dir(), f.path.exists(), f[0])
        print(f.path.parent)
    """, TMPDIR=str(tmp_path))
    lines = out.split("\n")
    assert lines[0] == "True True 4.0"
    assert not pathlib.Path(lines[1]).exists()  # the parent cleaned up itself


def test_leak_file_backed_carriers():
    before = settled_live_bytes()
    n_files = len(listing())
    for i in range(2000):
        f = sw.FileBacked()
        f._allocate(2)
        f[1] = i
        if i % 2:
            f.release()
    del f
    assert _C._live_bytes() == before
    assert len(listing()) == n_files


def test_c23_relative_tmpdir_resolved_once(tmp_path):
    # C-23: the session directory lives under TMPDIR; a relative TMPDIR is
    # resolved against the working directory of first use, so a later chdir
    # neither moves `path` nor stops release and exit from deleting files.
    (tmp_path / "work" / "tmp").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    out = run_python("""
        import os
        import strideweave as sw
        os.chdir("work")  # TMPDIR=tmp now names work/tmp
        f = sw.FileBacked()
        g = sw.FileBacked()
        g._allocate(2)
        os.chdir("../elsewhere")
        print(f.path.is_absolute(), f.path.exists())
        f.release()
        print(f.path.exists())
        print(g.path)
    """, cwd=str(tmp_path), TMPDIR="tmp")
    lines = out.split("\n")
    assert lines[0] == "True True"
    assert lines[1] == "False"
    p = pathlib.Path(lines[2])
    assert p.parent.parent == tmp_path / "work" / "tmp"
    assert not p.parent.exists()  # removed at exit despite the chdir
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_c23_tmpdir_not_utf8(tmp_path):
    # C-23: the session directory lives under any TMPDIR; `path` decodes the
    # bytes as os.fsdecode does instead of failing on a non-UTF-8 name.
    base = os.fsdecode(os.fsencode(str(tmp_path)) + b"/t\xff")
    os.mkdir(base)
    out = run_python("""
        import os
        import strideweave as sw
        f = sw.FileBacked()
        f._allocate(1)
        f[0] = 2.0
        print(f.path.exists(), f[0])
        print(os.fsencode(f.path.parent.parent) == os.fsencode(os.environ["TMPDIR"]))
    """, TMPDIR=base)
    assert out.split("\n")[:2] == ["True 2.0", "True"]
    assert os.listdir(base) == []
