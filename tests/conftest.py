import os

import pytest

# Tests compile every step afresh: a persistent compile cache of an earlier run (or of
# another test) would change what they measure. tests/test_compile_cache.py turns it on.
os.environ["CSTORCH_CACHE"] = "0"

from cstorch._backend import _reset_backend  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_backend():
    """Each test starts without a backend (the real API allows one per process)."""
    _reset_backend()
    yield
    _reset_backend()


def pytest_addoption(parser):
    parser.addoption("--full", action="store_true", default=False,
                     help="OpInfo tests: run every sample of every op (default: a fixed, seeded subset)")
