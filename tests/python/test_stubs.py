"""The type stubs (strideweave/_C.pyi and the package's .py files) agree with
the runtime: mypy's stubtest imports the built extension and compares every
class, function, method, parameter name, kind and default with the stubs.

Stubs drift silently otherwise (a constructor documented with arguments it
refuses, a parameter the stub calls keyword-capable that is positional-only).
The few findings the stubs cannot express are listed, each with its reason,
in stubtest_allowlist.txt next to this file.
"""

import os
import pathlib
import subprocess
import sys

import strideweave

HERE = pathlib.Path(__file__).resolve().parent
ALLOWLIST = HERE / "stubtest_allowlist.txt"
HOW_TO_FIX = """\
stubtest found {n} difference(s) between strideweave's stubs and the runtime:

{lines}

Fix python/strideweave/_C.pyi (or the text signature at the head of the C
docstring) until they agree. Reproduce with:
    tools/dev python -m mypy.stubtest strideweave --concise \\
        --allowlist tests/python/stubtest_allowlist.txt
Common fixes: a C method's text signature needs "$self, " and "/" after
positional-only parameters; a type built in tp_new takes __new__ in the stub;
a class nobody can subclass is @final; a class whose constructor has an object
default (dtype=DType.Float32) carries __signature__, declared in its stub as
"__signature__: ClassVar[Signature]". Only a difference the stubs cannot
express goes into tests/python/stubtest_allowlist.txt, with a comment saying
why."""


def run_stubtest(tmp_path, *extra):
    # The package under test is the one on sys.path (tools/dev stages the
    # fresh build there), never an installed copy.
    root = str(pathlib.Path(strideweave.__file__).resolve().parent.parent)
    config = tmp_path / "mypy.ini"
    config.write_text(f"[mypy]\ncache_dir = {tmp_path / 'cache'}\n")
    env = dict(os.environ, PYTHONPATH=root, MYPYPATH=root)
    return subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "strideweave", "--concise",
         "--mypy-config-file", str(config), *extra],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)


def test_stubs_match_the_runtime(tmp_path):
    done = run_stubtest(tmp_path, "--allowlist", str(ALLOWLIST))
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert done.returncode == 0, (
        HOW_TO_FIX.format(n=len(lines), lines="\n".join(lines) or done.stderr)
        if lines else f"stubtest failed to run:\n{done.stdout}\n{done.stderr}")


def test_allowlist_entries_are_all_needed_and_explained(tmp_path):
    # An entry that no longer matches anything is stale: stubtest reports it.
    done = run_stubtest(tmp_path, "--allowlist", str(ALLOWLIST))
    assert "unused allowlist entry" not in done.stdout, done.stdout
    entries = ALLOWLIST.read_text().splitlines()
    for i, line in enumerate(entries):
        if line.strip() and not line.startswith("#"):
            # Every entry sits under a comment block that gives its reason.
            assert i > 0 and entries[i - 1].startswith("#"), line


def test_stubtest_catches_a_wrong_stub(tmp_path):
    # The check can fail: a stub that lies about a signature is reported.
    pkg = pathlib.Path(strideweave.__file__).resolve().parent
    fake_root = tmp_path / "pkg"
    fake = fake_root / "strideweave"
    fake.mkdir(parents=True)
    for entry in pkg.iterdir():
        target = fake / entry.name
        if entry.name == "_C.pyi":
            text = entry.read_text().replace(
                "def item(tensor: Tensor, /) -> _Value: ...",
                "def item(tensor: Tensor, extra: int) -> _Value: ...")
            assert "extra: int" in text
            target.write_text(text)
        else:
            target.symlink_to(entry)
    config = tmp_path / "mypy.ini"
    config.write_text(f"[mypy]\ncache_dir = {tmp_path / 'cache'}\n")
    env = dict(os.environ, PYTHONPATH=str(fake_root), MYPYPATH=str(fake_root))
    done = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "strideweave", "--concise",
         "--mypy-config-file", str(config), "--allowlist", str(ALLOWLIST)],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    assert done.returncode != 0
    assert "strideweave._C.item" in done.stdout
