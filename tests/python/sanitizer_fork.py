"""Extra attempts for the tests that fork, in CI's sanitizer pass only.

The AddressSanitizer runtime of GCC 12 (the compiler CI builds the sanitized
extension with) does nothing around fork(): a lock of its allocator that
another thread of the parent holds at that moment stays held in the child,
and the child's first allocation that needs it waits forever. Any thread
that allocates without the GIL can hold one -- strideweave's pool threads do,
and so does every thread while it starts or exits. It needs no strideweave
at all: a plain Python loop that forks while two threads start and exit
short threads left about 1 child in 100 hung under the preloaded sanitizer
(every hung child's new thread stopped in the allocator's
SizeClassAllocator64::GetFromAllocator, on its region lock) and none in 300
without it. Newer sanitizer runtimes take those locks across fork().

So in that pass only (.ci/run sets STRIDEWEAVE_SANITIZER_FORK_ATTEMPTS), a
test marked `forks` that fails runs again, up to that many attempts in all,
and each retry is reported as a warning in pytest's summary. Every other run
(make test's debug build, the release build) runs each fork test once: a
hang of strideweave's own still fails there."""

import os
import warnings

ATTEMPTS_VARIABLE = "STRIDEWEAVE_SANITIZER_FORK_ATTEMPTS"


class ForkRetryWarning(UserWarning):
    """A fork test failed under the sanitizer runtime and ran again."""


def attempts(environ=os.environ):
    """How many times a failing fork test may run: 1 unless the variable says more."""
    text = environ.get(ATTEMPTS_VARIABLE, "1")
    try:
        n = int(text)
    except ValueError:
        raise ValueError(f"{ATTEMPTS_VARIABLE} must be a whole number of attempts, not {text!r}") from None
    if n < 1:
        raise ValueError(f"{ATTEMPTS_VARIABLE} must be at least 1, not {n}")
    return n


def retrying(run, n, name):
    """`run` wrapped to run up to n times while it raises an Exception (a
    skip, an xfail or Ctrl-C is not one): the last failure is raised as is."""
    def run_again_on_failure():
        for attempt in range(1, n + 1):
            try:
                return run()
            except Exception as e:
                if attempt == n:
                    raise
                warnings.warn(f"{name}: attempt {attempt} of {n} failed under the sanitizer "
                              f"runtime ({type(e).__name__}: {str(e)[:200]}); running it again",
                              ForkRetryWarning)
    return run_again_on_failure
