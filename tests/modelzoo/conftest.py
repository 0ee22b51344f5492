import pytest

from cstorch.amp import precision
from cstorch.trainer import registry
from cstorch.trainer.callbacks import base


@pytest.fixture(autouse=True)
def fresh_trainer_globals():
    """Mixed precision, global callbacks and registered names are process state: each
    test starts and ends with the ones it found."""
    names = {kind: registry.registered(kind) for kind in registry.KINDS}
    precision._reset()
    base._GLOBAL_CALLBACKS.clear()
    yield
    precision._reset()
    base._GLOBAL_CALLBACKS.clear()
    for kind, before in names.items():
        for name in set(registry.registered(kind)) - set(before):
            registry.unregister(kind, name)
