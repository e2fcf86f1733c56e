"""Benchmarks refuse debug and fault-injection builds (issue 10, item 7), and
_C._build_info() says how the extension was built."""

import os
import pathlib
import subprocess
import sys

import pytest

import strideweave
from strideweave import _C

ROOT = pathlib.Path(__file__).resolve().parents[2]
BENCH_SCRIPTS = sorted(p for p in (ROOT / "bench").glob("*.py") if not p.name.startswith("_"))


def test_build_info_reports_buildtype_and_fault_injection():
    info = _C._build_info()
    assert set(info) == {"buildtype", "fault_injection", "assertions"}
    assert info["buildtype"] in {"plain", "debug", "debugoptimized", "release", "minsize", "custom"}
    assert info["fault_injection"] is _C._fault_injection_enabled()
    assert isinstance(info["assertions"], bool)
    assert _C._build_info() is not info          # a fresh dict each call


def test_there_are_bench_scripts_to_check():
    names = {p.name for p in BENCH_SCRIPTS}
    assert {"autograd.py", "dlpack_export.py", "move.py"} <= names


@pytest.mark.skipif(not _C._fault_injection_enabled(),
                    reason="needs the fault-injection test build to see a refusal; a release "
                           "build would run the full benchmark")
@pytest.mark.parametrize("script", BENCH_SCRIPTS, ids=lambda p: p.name)
def test_bench_script_refuses_the_test_build_with_one_line(script):
    env = dict(os.environ)
    # The subprocess must import the same (fault-injection) build as this test.
    env["PYTHONPATH"] = os.pathsep.join(
        [str(pathlib.Path(strideweave.__file__).parents[1]), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, str(script.relative_to(ROOT))], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    line = lines[0]
    assert line.startswith(f"bench/{script.name}: refusing to run: ")
    assert "has fault injection compiled in" in line
    assert "release builds only" in line
    assert "make demo" in line


def test_bench_guard_accepts_only_release_without_fault_injection():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from _release_only import _problem
    finally:
        sys.path.remove(str(ROOT / "bench"))
    assert _problem({"buildtype": "release", "fault_injection": False}) is None
    assert _problem({"buildtype": "debug", "fault_injection": False}) == "a debug build"
    assert _problem({"buildtype": "release", "fault_injection": True}) == \
        "has fault injection compiled in"
    assert _problem({"buildtype": "debugoptimized", "fault_injection": True}) == \
        "a debugoptimized build and has fault injection compiled in"
    assert "does not report" in _problem(None)
