import shutil
from pathlib import Path

import pytest

from cstorch._backend import _reset_backend
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


@pytest.fixture
def no_backend():
    """No backend before the test, none left after it."""
    _reset_backend()
    yield
    _reset_backend()


@pytest.fixture
def toy_dir(tmp_path):
    """`tmp_path` holding `toy.py` (yaml_toy.py's Toy and ToyData, named from YAMLs)."""
    shutil.copyfile(Path(__file__).with_name("yaml_toy.py"), tmp_path / "toy.py")
    return tmp_path
