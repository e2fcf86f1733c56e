"""README's usage example runs as written and means what its comments say."""

import pathlib
import re

import pytest

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


def python_blocks(text):
    return re.findall(r"```python\n(.*?)```", text, re.S)


def section(text, title):
    start = text.index(title)
    end = text.find("\n## ", start + len(title))
    return text[start:end if end >= 0 else len(text)]


def test_readme_every_python_block_runs_in_order(tmp_path, monkeypatch):
    # The blocks build on each other (the Usage block defines t), as a reader
    # would run them; each must run as written (in a scratch directory: a
    # block may write a file).
    monkeypatch.chdir(tmp_path)
    scope = {}
    for n, code in enumerate(python_blocks(README.read_text())):
        exec(compile(code, f"README.md block {n}", "exec"), scope)


def test_readme_numpy_section_means_what_it_says():
    import numpy as np

    import strideweave as sw
    from strideweave import DType

    text = section(README.read_text(), "## Coming from NumPy / PyTorch")
    (code,) = python_blocks(text)
    scope = {}
    exec(compile(code, "README.md", "exec"), scope)
    m, fb, on_file = scope["m"], scope["fb"], scope["on_file"]
    # The block's comments, checked. m was moved to the file at the end.
    assert on_file.tolist() == [1.0, 3.0, 2.0, 4.0]
    assert on_file[1, 0] == 3.0
    assert m.dtype() is DType.Float32
    assert fb.size() == 4 and m.carrier.is_released()
    again = sw.friendly.tensor([[1, 2], [3, 4]])
    assert np.from_dlpack(again).tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert sw.friendly.to_list(again) == again.tolist() == [1.0, 3.0, 2.0, 4.0]
    assert sw.FileBacked().size() == 0
    # The bullets, checked.
    assert "`[1.0, 3.0, 2.0, 4.0]`" in text
    wrap = ("index -1 is out of range for a tensor of size 4: indices run\n  from 0 to 3 and do "
            "not wrap around")
    assert wrap in text
    try:
        again[-1]
    except ValueError as e:
        assert str(e) == " ".join(wrap.split())
    else:
        raise AssertionError("t[-1] must raise ValueError")
    assert again[0, -1:].tolist() == [2.0]


def test_readme_says_exactly_which_tensors_export():
    import numpy as np
    import pytest
    import torch

    import strideweave as sw
    from strideweave import CPU, DType, FileBacked, Generic, Layout, Shape, Stride, Tensor

    intro = README.read_text().split("## Set up")[0]
    assert "any CPU Tensor" not in intro
    assert "Float32 and Int32\ntensors on a `CPU` carrier zero-copy" in intro
    for dtype in (DType.Float32, DType.Int32):
        t = sw.friendly.tensor([1, 2], dtype=dtype)
        np.from_dlpack(t)[0] = 7
        assert t[0] == 7 and torch.from_dlpack(t)[0] == 7
    refused = [
        (sw.friendly.tensor([True, False], dtype=DType.Bool), BufferError),
        (sw.friendly.scaled_int32([1, 2]), NotImplementedError),
        (Tensor(Generic([1.0]), 0, Layout(Shape(1), Stride(1))), BufferError),
        (sw.move(sw.friendly.tensor([1.0]), FileBacked()), BufferError),
        (sw.move(sw.friendly.tensor([1.0]), sw.Evictable(CPU(1), FileBacked())), BufferError),
    ]
    for t, exc in refused:
        with pytest.raises(exc):
            np.from_dlpack(t)
        with pytest.raises(exc):
            torch.from_dlpack(t)


def test_readme_np_asarray_claims():
    import numpy as np
    import pytest

    import strideweave as sw
    from strideweave import DType, Tensor

    if not hasattr(Tensor, "__array__"):
        pytest.skip("Tensor.__array__ is added on another branch of issue 10; the README "
                    "describes the merged behaviour")
    t = sw.friendly.tensor([[1, 2], [3, 4]])
    a = np.asarray(t)
    a[0, 0] = 9.0
    assert t[0, 0] == 9.0                       # the same zero-copy array as from_dlpack
    flags = sw.friendly.tensor([True, False], dtype=DType.Bool)
    assert np.asarray(flags).tolist() == [True, False]     # a fresh copy


# ---- shown output (issue 18 item 8) -------------------------------------------
#
# Convention (stated in README's Usage section): in a ```python block, a
# comment `# -> TEXT` on the last line of an expression statement shows what
# Python prints for it: repr(value) for an expression, the captured output
# for a `print(...)` call. Text after " -- " is explanation, not output. A
# block that uses the convention uses it for every commented expression
# whose value is not None (a comment there reads as the output); blocks
# without any `# ->` only have to run.

ARROW = re.compile(r"#\s*->\s?(?P<shown>.*?)(?:\s+--\s.*)?\s*$")


def shown_claims(code):
    """(statement, source, shown text or None, has_comment) per top-level
    statement of a block."""
    import ast

    lines = code.split("\n")
    out = []
    for stmt in ast.parse(code).body:
        last = lines[stmt.end_lineno - 1]
        match = ARROW.search(last) if "# ->" in last or "#->" in last else None
        out.append((stmt, "\n".join(lines[stmt.lineno - 1:stmt.end_lineno]),
                    match.group("shown") if match else None, "#" in last))
    return out


def run_checking_shown(code, scope, where):
    import ast
    import contextlib
    import io

    checked = 0
    claims = shown_claims(code)
    uses_arrow = any(shown is not None for _, _, shown, _ in claims)
    for stmt, src, shown, commented in claims:
        if not isinstance(stmt, ast.Expr):
            assert shown is None, f"{where}: '# ->' on a statement that shows nothing: {src}"
            exec(compile(ast.Module([stmt], []), where, "exec"), scope)
            continue
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            value = eval(compile(ast.Expression(stmt.value), where, "eval"), scope)
        is_print = (isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Name)
                    and stmt.value.func.id == "print")
        got = out.getvalue().rstrip("\n") if is_print else repr(value)
        if shown is not None:
            assert got == shown, f"{where}: {src!r} shows {got!r}, the comment says {shown!r}"
            checked += 1
        elif uses_arrow and commented and value is not None:
            raise AssertionError(f"{where}: {src!r} shows {got!r}; write the comment as "
                                 "'# -> <what it shows>'")
    return checked


def test_readme_comments_show_what_the_code_prints(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a block writes moves.json: not into the checkout
    scope = {}
    checked = 0
    for n, code in enumerate(python_blocks(README.read_text())):
        checked += run_checking_shown(code, scope, f"README.md block {n}")
    assert checked >= 15  # the convention is in use, not silently skipped


def test_readme_shown_output_check_can_fail():
    scope = {}
    with pytest.raises(AssertionError, match="shows '3', the comment says '4'"):
        run_checking_shown("1 + 2   # -> 4\n", scope, "probe")
    with pytest.raises(AssertionError, match="write the comment as"):
        run_checking_shown("1 + 2   # -> 3\n2 + 2   # four\n", scope, "probe")
    assert run_checking_shown("print('a b')   # -> a b -- prose\n", scope, "probe") == 1


def test_readme_states_the_user_facing_facts():
    text = README.read_text()
    flat = " ".join(text.split())
    assert "removed on `release()` and when the process exits" in flat
    assert "under `$TMPDIR`" in flat
    assert "sw.move(view_copy, sw.FileBacked())" in text
    assert "whole physical span" in flat
    assert 'a.ravel(order="F")[1]' in flat and "`m[1, :]`" in flat
    assert "source .venv/bin/activate" in text and ".venv/bin/python" in text
    assert "# DType.Float32" not in text  # the old, wrong comment


def test_make_demo_needs_no_pytorch():
    root = README.parent
    makefile = (root / "Makefile").read_text()
    recipe = makefile.split("\ndemo:")[1].split("\n\n")[0]
    assert "torch" not in recipe and "numpy" in recipe
    deps = re.search(r"^TEST_DEPS\s*=(.*)$", makefile, re.M).group(1)
    assert "torch" in deps


def test_tour_runs_without_pytorch(tmp_path):
    import os
    import subprocess
    import sys

    # a sitecustomize that makes `import torch` fail, as on a machine without it
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\nsys.modules['torch'] = None\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path)] + sys.path)
    out = subprocess.run([sys.executable, str(README.parent / "examples" / "tour.py")],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "PyTorch is not installed" in out.stdout
    assert "numpy sees shape" in out.stdout


def test_readme_progress_bar_runs_with_tqdm(tmp_path, monkeypatch, capsys):
    pytest = __import__("pytest")
    pytest.importorskip("tqdm")
    monkeypatch.chdir(tmp_path)  # the example writes moves.json
    (code,) = python_blocks(section(README.read_text(), "## Watching long moves"))
    scope = {}
    exec(compile(code, "README.md", "exec"), scope)
    on_file, big_bytes = scope["on_file"], scope["n"] * 4
    assert on_file.carrier.size() == scope["n"]
    out, err = capsys.readouterr()
    assert "to file: 100%" in err and "67.1M/67.1M" in err  # the bar reached the total
    (row,) = [line for line in out.splitlines() if line.startswith("move CPU -> FileBacked")]
    assert row.split()[7] == str(big_bytes)  # 4 words of name, count, total, mean, bytes
    import json
    spans = [e for e in json.load(open(tmp_path / "moves.json"))["traceEvents"]
             if e.get("ph") == "X"]
    assert [s["args"]["bytes"] for s in spans] == [big_bytes]
