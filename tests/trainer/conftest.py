import pytest

from cstorch.amp import precision
from cstorch.trainer.callbacks import base


@pytest.fixture(autouse=True)
def fresh_trainer_globals():
    """Mixed precision and globally registered callbacks are process state: each test
    starts and ends without them."""
    precision._reset()
    base._GLOBAL_CALLBACKS.clear()
    yield
    precision._reset()
    base._GLOBAL_CALLBACKS.clear()
