"""Shared test setup: every test starts and ends with no injected fault."""

import pytest

from strideweave import _C


@pytest.fixture(autouse=True)
def _no_injected_faults():
    _C._fault_clear()
    yield
    _C._fault_clear()
