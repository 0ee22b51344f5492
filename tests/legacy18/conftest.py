import gc

import pytest

import cstorch.legacy18


@pytest.fixture(autouse=True)
def fresh_legacy18_configuration():
    """Each test is a new 1.8 script: configure() may be called again (the backend is
    reset by the root conftest)."""
    cstorch.legacy18._reset()
    gc.collect()  # optimizers, schedulers and scalers of earlier tests stop being live state
    yield
    cstorch.legacy18._reset()
