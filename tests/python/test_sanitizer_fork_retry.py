"""The extra attempts CI's sanitizer pass gives the tests that fork
(sanitizer_fork.py): a failing test runs again up to the number asked for,
each retry warns, the last failure is raised as it was, and a skip is never
retried. Everywhere else a fork test runs once."""

import warnings

import pytest

import sanitizer_fork
from sanitizer_fork import ATTEMPTS_VARIABLE, ForkRetryWarning


def failing(times, result="passed"):
    calls = []

    def run():
        calls.append(1)
        if len(calls) <= times:
            raise AssertionError(f"the child did not report (attempt {len(calls)})")
        return result
    return run, calls


def test_one_attempt_unless_the_variable_asks_for_more():
    assert sanitizer_fork.attempts({}) == 1
    assert sanitizer_fork.attempts({ATTEMPTS_VARIABLE: "3"}) == 3


@pytest.mark.parametrize("text", ["three", "0", "-1", ""])
def test_a_bad_attempt_count_is_refused(text):
    with pytest.raises(ValueError, match=ATTEMPTS_VARIABLE):
        sanitizer_fork.attempts({ATTEMPTS_VARIABLE: text})


def test_a_failure_runs_again_and_warns():
    run, calls = failing(2)
    with pytest.warns(ForkRetryWarning, match=r"attempt [12] of 3 failed") as caught:
        assert sanitizer_fork.retrying(run, 3, "t")() == "passed"
    assert len(calls) == 3 and len(caught) == 2


def test_the_last_failure_is_raised_as_it_was():
    run, calls = failing(5)
    with pytest.warns(ForkRetryWarning), pytest.raises(AssertionError, match=r"attempt 3\)"):
        sanitizer_fork.retrying(run, 3, "t")()
    assert len(calls) == 3


def test_a_passing_test_runs_once_without_a_warning():
    run, calls = failing(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert sanitizer_fork.retrying(run, 3, "t")() == "passed"
    assert len(calls) == 1


def test_a_skip_is_not_retried():
    calls = []

    def run():
        calls.append(1)
        pytest.skip("not here")
    with pytest.raises(pytest.skip.Exception):
        sanitizer_fork.retrying(run, 3, "t")()
    assert calls == [1]


def test_the_fork_tests_carry_the_marker():
    # A test that forks and lacks the marker would get no extra attempt in
    # the sanitizer pass: every test whose code forks has it, on itself or
    # on its module.
    import ast
    import pathlib

    def names_forks(node):
        return "forks" in ast.dump(node)

    def forks(node):  # calls os.fork(), here or in the code it hands a child
        return "os.fork()" in text[slice(*offsets(node))]

    unmarked = []
    this = pathlib.Path(__file__)
    for path in sorted(this.parent.glob("test_*.py")):
        if path.name == this.name:  # names the call without making it
            continue
        text = path.read_text()
        tree = ast.parse(text)
        starts = [0]
        for line in text.splitlines(keepends=True):
            starts.append(starts[-1] + len(line))

        def offsets(node):
            return (starts[node.lineno - 1] + node.col_offset,
                    starts[node.end_lineno - 1] + node.end_col_offset)

        module_marked = any(isinstance(n, ast.Assign) and names_forks(n.value)
                            and any(getattr(t, "id", "") == "pytestmark" for t in n.targets)
                            for n in tree.body)
        for node in tree.body:
            if (isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
                    and forks(node)
                    and not module_marked and not any(map(names_forks, node.decorator_list))):
                unmarked.append(f"{path.name}::{node.name}")
    assert unmarked == []
