"""Benchmarks measure release builds only.

A debug or fault-injection build is several times slower and its figures
would mislead, so every bench script calls require_release_build() before
it imports anything heavy; on any other build it prints one line saying what
was found and how to get a release build, and exits with status 2.
"""

import os
import sys

EXIT_NOT_RELEASE = 2


def _problem(info):
    """What disqualifies this build, in words, or None for a release build."""
    if info is None:
        return "does not report how it was built (it predates _build_info)"
    wrong = []
    if info.get("buildtype") != "release":
        wrong.append(f"a {info.get('buildtype')} build")
    if info.get("fault_injection"):
        wrong.append("has fault injection compiled in")
    return " and ".join(wrong) or None


def require_release_build():
    """Exit with one line on stderr unless strideweave is a release build
    without fault injection."""
    import strideweave
    from strideweave import _C

    build_info = getattr(_C, "_build_info", None)
    problem = _problem(build_info() if build_info else None)
    if problem is None:
        return
    script = os.path.relpath(sys.argv[0]) if sys.argv and sys.argv[0] else "this benchmark"
    where = os.path.dirname(strideweave.__file__)
    print(f"{script}: refusing to run: strideweave at {where} is {problem}; benchmarks "
          "measure release builds only (`make demo` installs one into .venv; then run "
          f".venv/bin/python {script})", file=sys.stderr)
    sys.exit(EXIT_NOT_RELEASE)
