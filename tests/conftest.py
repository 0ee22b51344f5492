import os
import random
import signal
import zlib

import numpy as np
import pytest
import torch

# Tests compile every step afresh: a persistent compile cache of an earlier run (or of
# another test) would change what they measure. tests/engine/test_compile_cache.py turns it on, and
# the tests that start processes running the same scripts share one (`shared_compile_cache`).
os.environ["CSTORCH_CACHE"] = "0"

import scheduling  # noqa: E402
from cstorch._backend import _reset_backend  # noqa: E402


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    scheduling.configure(config)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):  # pytest-xdist's
    scheduling.configure_node(node)


@pytest.hookimpl(tryfirst=True)  # before xdist adds the group to each test id
def pytest_collection_modifyitems(config, items):
    scheduling.arrange(config, items)


@pytest.fixture(autouse=True)
def fresh_backend():
    """Each test starts without a backend (the real API allows one per process)."""
    _reset_backend()
    yield
    _reset_backend()


@pytest.fixture(autouse=True)
def seeded_random(request):
    """Each test draws its random inputs from generators seeded by its own id: a test sees
    the same data on every run and machine (a failure reproduces; no tolerance is met only
    by most draws), and two tests do not see the same data."""
    seed = zlib.crc32(request.node.nodeid.split("@")[0].encode())  # xdist appends "@group"
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)


@pytest.fixture
def shared_compile_cache(monkeypatch, tmp_path_factory, request):
    """The processes this test starts use the compile cache of this pytest run, one folder
    shared by the xdist workers and empty when the run starts: a script that another
    process of the run compiled (a fit and the validation of its checkpoint, a run killed
    and restarted, the same example under two tests) loads its program instead of
    compiling it again. For tests that start scripts (`pytestmark` of their module) and
    whose subject is not a cold compile; the cache returns the program a cold compile
    would make (cstorch_jax/compile_cache.py)."""
    in_xdist_worker = hasattr(request.config, "workerinput")
    root = tmp_path_factory.getbasetemp().parent if in_xdist_worker else tmp_path_factory.getbasetemp()
    monkeypatch.setenv("CSTORCH_CACHE", "1")
    monkeypatch.setenv("CSTORCH_CACHE_DIR", str(root / "compile-cache"))


@pytest.fixture
def python_signal_handling():
    """Python's own handling of SIGINT (`KeyboardInterrupt`) and SIGTERM (the default
    disposition) in this process and the processes it starts, for the tests of what
    cstorch does with them, whatever the test runner inherited: a shell without job
    control starts a background job (`bash .ci/run &`) with SIGINT ignored, Python then
    keeps it ignored, and no Ctrl-C would reach the code under test. Restored after."""
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    for signum, handler in before.items():
        if handler is not None:  # None: installed outside Python, not restorable from here
            signal.signal(signum, handler)


def pytest_addoption(parser):
    parser.addoption("--full", action="store_true", default=False,
                     help="OpInfo tests: run every sample of every op (default: a fixed, seeded subset)")
