"""Every file of the Python package is installed: meson.build lists each one
in install_sources, so an installed strideweave (make demo, a wheel) imports
the same modules as the staged development build."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_every_package_file_is_installed():
    listed = set(re.findall(r"'(python/strideweave/[^']+)'", (ROOT / "meson.build").read_text()))
    package = ROOT / "python" / "strideweave"
    shipped = {str(p.relative_to(ROOT)) for p in package.rglob("*")
               if p.is_file() and p.suffix in (".py", ".pyi", ".typed")}
    assert shipped - listed == set(), "add these to install_sources in meson.build"
    assert listed - shipped == set(), "meson.build installs files that do not exist"
