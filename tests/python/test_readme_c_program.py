"""The README's "Using strideweave from C" program is examples/c/move_roundtrip.c.

`make test` compiles and runs the example against an installed library
(tools/test-c-examples); this keeps the copy users read identical to it."""

import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_readme_c_program_is_the_tested_example():
    readme = (ROOT / "README.md").read_text()
    program = (ROOT / "examples" / "c" / "move_roundtrip.c").read_text()
    assert "## Using strideweave from C" in readme
    assert "```c\n" + program + "```" in readme


def test_readme_gives_the_pkg_config_compile_line():
    readme = (ROOT / "README.md").read_text()
    assert "cc prog.c $(pkg-config --cflags --libs strideweave)" in readme
