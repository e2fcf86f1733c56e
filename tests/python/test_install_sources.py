"""Every file of the Python package is installed.

The tests run against a staged copy of python/strideweave (tools/dev), which
holds every file whether or not meson.build installs it; `make demo` and
`pip install .` install only what meson.build lists, so a file missing there
breaks `import strideweave` for users while every other test passes."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "python" / "strideweave"


def installed_by_meson():
    text = (ROOT / "meson.build").read_text()
    listed = set()
    for block in re.findall(r"py\.install_sources\((.*?)\)", text, re.S):
        listed.update(re.findall(r"'(python/strideweave/[^']+)'", block))
    return listed


def test_every_package_file_is_listed_in_meson_install_sources():
    on_disk = {p.relative_to(ROOT).as_posix() for p in PACKAGE.rglob("*")
               if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".so"}
    missing = sorted(on_disk - installed_by_meson())
    assert missing == [], f"add these to py.install_sources in meson.build: {missing}"


def test_meson_lists_no_file_that_does_not_exist():
    gone = sorted(f for f in installed_by_meson() if not (ROOT / f).is_file())
    assert gone == []
