"""`cstorch.utils`: data loading (`cstorch.utils.data`), nested structures (`nest`),
rates (`tracker`, `profiler`) and, imported explicitly, `cstorch.utils.tensorboard`."""
import warnings

from . import benchmark, data, nest, profiler, tracker
from ..factories import make_constant
from .data import DataExecutor, DataLoader, RestartableDataLoader, SyntheticDataset


def __getattr__(name):
    if name == "CSConfig":  # removed from the real API as well
        raise AttributeError(
            '"CSConfig" is no longer available. Please pass in a "cstorch.distributed.ClusterConfig" instance to '
            'the backend constructor instead: cstorch.backend("CSX", cluster_config='
            'cstorch.distributed.ClusterConfig(...))')
    if name == "tensorboard":
        warnings.warn("cstorch.utils.tensorboard must be imported before it can be accessed:\n\n"
                      "\timport cerebras.pytorch.utils.tensorboard\n")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["DataLoader", "SyntheticDataset", "DataExecutor", "RestartableDataLoader", "make_constant", "data", "nest",
           "profiler", "tracker", "benchmark"]
