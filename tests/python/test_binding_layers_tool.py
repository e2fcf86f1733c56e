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


# A circle behind a function pointer: b (above a: it calls a) hands a its
# function at init, and a calls it later. The objects show only b -> a.
SETTER_SOURCES = {
    "a": ("static int (*shown)(int);\n"
          "void sw_py_a_set_shown(int (*fn)(int)) { shown = fn; }\n"
          "int a_show(int x) { return shown ? shown(x) : x; }\n"),
    "b": ("void sw_py_a_set_shown(int (*fn)(int));\n"
          "static int b_show(int x) { return x + 1; }\n"
          "void b_init(void) { sw_py_a_set_shown(b_show); }\n"),
}


def run_sources(objdir, baseline, sources):
    return subprocess.run([sys.executable, str(TOOL), str(objdir), str(baseline),
                           "--sources", str(sources)], capture_output=True, text=True)


def test_a_registration_from_above_fails_and_names_both_files(tmp_path):
    objdir = build(tmp_path, SETTER_SOURCES)
    baseline = tmp_path / "baseline"
    baseline.write_text("# nothing listed\n")
    res = run_sources(objdir, baseline, tmp_path)
    assert res.returncode == 1
    assert "py_a.c takes code from the files above it through sw_py_a_set_shown" in res.stderr
    assert "called by py_b.c" in res.stderr


def test_a_listed_registration_passes(tmp_path):
    objdir = build(tmp_path, SETTER_SOURCES)
    baseline = tmp_path / "baseline"
    baseline.write_text("registration sw_py_a_set_shown  # many providers\n")
    res = run_sources(objdir, baseline, tmp_path)
    assert res.returncode == 0, res.stderr
    assert "1 listed registrations, no other" in res.stdout


def test_a_pointer_passed_per_call_is_no_registration(tmp_path):
    # a calls the function it is given and keeps nothing.
    sources = {
        "a": "int sw_py_a_apply(int (*fn)(int), int x) { int (*f)(int) = fn; return f(x); }\n",
        "b": ("int sw_py_a_apply(int (*fn)(int), int x);\n"
              "static int b_show(int x) { return x + 1; }\n"
              "int b_use(void) { return sw_py_a_apply(b_show, 1); }\n"),
    }
    objdir = build(tmp_path, sources)
    baseline = tmp_path / "baseline"
    baseline.write_text("")
    res = run_sources(objdir, baseline, tmp_path)
    assert res.returncode == 0, res.stderr


def test_a_listed_registration_that_is_gone_is_reported(tmp_path):
    objdir = build(tmp_path)
    baseline = tmp_path / "baseline"
    baseline.write_text("py_a.c py_b.c\nregistration sw_py_gone\n")
    res = run_sources(objdir, baseline, tmp_path)
    assert res.returncode == 0, res.stderr
    assert "registration sw_py_gone is gone" in res.stdout
