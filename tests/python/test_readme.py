"""README's usage example runs as written and means what its comments say."""

import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def test_readme_usage_example_runs():
    text = README.read_text()
    usage = text[text.index("## Usage"):]
    code = re.search(r"```python\n(.*?)```", usage, re.S).group(1)
    scope = {}
    exec(compile(code, "README.md", "exec"), scope)
    t, a, layout = scope["t"], scope["a"], scope["layout"]
    assert layout.infix() == [(2, 1), (3, 2), (4, 6)]
    assert a.shape == (2, 3, 4)
    assert t[1, [2, 3]] == -1.0          # the write through NumPy is visible
    assert t[23] == -1.0
    assert scope["col"].layout.shape.top_level == ((3, 4),)
