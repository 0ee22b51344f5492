import pytest
import torch


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tests/lowering/" in str(item.path).replace("\\", "/"):
            # a lowering must not lean on jnp's deprecated unsafe casts in scatters (an error in future JAX)
            item.add_marker(pytest.mark.filterwarnings("error:scatter inputs have incompatible types:FutureWarning"))
            # "degrees of freedom <= 0" is asked for on purpose by the var samples
            item.add_marker(pytest.mark.filterwarnings("ignore:var\\(\\):UserWarning"))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
