"""Fresh Python interpreters for the tests that need a process of their own
(interpreter exit, fork, settings read at import): the child imports the
same strideweave as the test, and a child that fails fails the test with
its stderr."""

import json
import os
import subprocess
import sys
import textwrap


def child_env(**extra):
    """The test's environment, with its sys.path as PYTHONPATH (so the child
    finds the same strideweave), and `extra` variables (as strings)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in sys.path if p)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_python(*parts, timeout, cwd=None, **extra):
    """Run the code parts, each dedented on its own and joined, in a fresh
    interpreter with child_env(**extra); assert that it exited with 0 and
    return the finished process (stdout and stderr as text)."""
    code = "".join(textwrap.dedent(part) for part in parts)
    proc = subprocess.run([sys.executable, "-c", code], env=child_env(**extra),
                          capture_output=True, text=True, timeout=timeout, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return proc


def last_json(proc):
    """The child's report: the last line of its stdout, as JSON."""
    return json.loads(proc.stdout.strip().splitlines()[-1])
