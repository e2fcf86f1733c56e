"""Shared test setup: every test starts and ends with no injected fault; the
`forks` marker (extra attempts in CI's sanitizer pass only, sanitizer_fork.py)."""

import pytest

import sanitizer_fork
from strideweave import _C


@pytest.fixture(autouse=True)
def _no_injected_faults():
    _C._fault_clear()
    yield
    _C._fault_clear()


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "forks: the test forks a process while other threads run (sanitizer_fork.py)")


def pytest_collection_modifyitems(config, items):
    # CI's sanitizer pass only: see sanitizer_fork.py for why.
    n = sanitizer_fork.attempts()
    if n > 1:
        for item in items:
            if item.get_closest_marker("forks"):
                item.runtest = sanitizer_fork.retrying(item.runtest, n, item.nodeid)


# The loopback S3 server for the TensorStore tests and the README's example.
from s3_server import s3, s3_endpoint  # noqa: E402,F401
