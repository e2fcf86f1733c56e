"""Shared test setup: every test starts and ends with no injected fault."""

import pytest

from strideweave import _C


@pytest.fixture(autouse=True)
def _no_injected_faults():
    _C._fault_clear()
    yield
    _C._fault_clear()


# The loopback S3 server for the TensorStore tests and the README's example.
from s3_server import s3, s3_endpoint  # noqa: E402,F401
