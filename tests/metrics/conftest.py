import pytest

from cstorch.metrics import Metric


@pytest.fixture(autouse=True)
def empty_metric_registry():
    """Metric.registry is process-wide (strong references): every test starts without
    metrics and leaves none behind (its metrics would otherwise be state of later steps)."""
    Metric.registry.clear()
    yield
    Metric.registry.clear()
