"""tools/check-binding-layers: the check that the binding's files gain no
new circle must fail on one and pass on a listed one (it is only useful if
it can fail)."""
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "check-binding-layers"

pytestmark = pytest.mark.skipif(shutil.which("cc") is None or shutil.which("nm") is None,
                                reason="needs a C compiler and nm to make object files")

SOURCES = {
    # a <-> b call each other; c calls a (below the circle's reach: no circle).
    "a": "int b_fn(void); int a_fn(void) { return b_fn() + 1; }\n",
    "b": "int a_fn(void); int b_fn(void) { return 2; } int b_back(void) { return a_fn(); }\n",
    "c": "int a_fn(void); int c_fn(void) { return a_fn(); }\n",
}


def build(tmp_path, sources=SOURCES):
    objdir = tmp_path / "_C.so.p"
    objdir.mkdir()
    for name, text in sources.items():
        src = tmp_path / f"py_{name}.c"
        src.write_text(text)
        subprocess.run(["cc", "-c", str(src), "-o", str(objdir / f"src_python_py_{name}.c.o")],
                       check=True)
    return objdir


def run(objdir, baseline):
    return subprocess.run([sys.executable, str(TOOL), str(objdir), str(baseline)],
                          capture_output=True, text=True)


def test_a_circle_not_listed_fails_and_names_its_files(tmp_path):
    objdir = build(tmp_path)
    baseline = tmp_path / "baseline"
    baseline.write_text("# nothing listed\n")
    res = run(objdir, baseline)
    assert res.returncode == 1
    assert "py_a.c py_b.c" in res.stderr
    assert "py_c.c" not in res.stderr.split("\n")[1]


def test_a_listed_circle_passes(tmp_path):
    objdir = build(tmp_path)
    baseline = tmp_path / "baseline"
    baseline.write_text("py_a.c py_b.c\n")
    res = run(objdir, baseline)
    assert res.returncode == 0, res.stderr
    assert "no new circle" in res.stdout


def test_a_file_pulled_into_a_listed_circle_fails(tmp_path):
    # b now also calls c, and c calls a: c joins the listed circle.
    sources = dict(SOURCES)
    sources["b"] = ("int a_fn(void); int c_fn(void); int b_fn(void) { return c_fn(); }"
                    " int b_back(void) { return a_fn(); }\n")
    objdir = build(tmp_path, sources)
    baseline = tmp_path / "baseline"
    baseline.write_text("py_a.c py_b.c\n")
    res = run(objdir, baseline)
    assert res.returncode == 1
    assert "py_a.c py_b.c py_c.c" in res.stderr


def test_a_listed_circle_that_is_gone_is_reported(tmp_path):
    objdir = build(tmp_path)
    baseline = tmp_path / "baseline"
    baseline.write_text("py_a.c py_b.c\npy_c.c py_d.c\n")
    res = run(objdir, baseline)
    assert res.returncode == 0
    assert "is gone" in res.stdout
