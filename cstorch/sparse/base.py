"""`SparsityAlgorithm`: the base class of the real system's weight-sparsity algorithms
(`cerebras.pytorch.sparse.base`), here as a type only.

It exists so that code which only names it works: type annotations, `isinstance`
checks, subclass enumeration (the Model Zoo does all three; the real algorithms are
declared in `algorithms.py`). It has the real constructor and methods (same names and
parameters), but sparse training is out of scope here (see `cerebras.pytorch.sparse.*`
in cstorch.unsupported): constructing an algorithm, subclass or not, raises
`UnsupportedAPIError` with that reason, and so does every method.
"""
from abc import ABC, abstractmethod
from typing import Callable, Optional, Union

import torch

from ..unsupported import REAL, UNSUPPORTED, UnsupportedAPIError


def _unsupported(what: str) -> UnsupportedAPIError:
    return UnsupportedAPIError(f"{REAL}.sparse.{what} is not supported by cstorch. {UNSUPPORTED[REAL + '.sparse.*']}")


class SparsityAlgorithm(ABC):
    """Base class of the sparsity algorithms; see the module's doc (constructing one, or
    calling any method, raises `UnsupportedAPIError`).

    Args:
        sparsity: the real system's fraction of zeroed weights (or a per-parameter dict).
        init_method: the real system's initial mask method.
    """

    def __init__(self, sparsity: Union[float, dict, None], init_method: Union[str, Callable] = "random"):
        raise _unsupported(f"{type(self).__name__}")

    @property
    def num_sparse_params(self) -> int:
        raise _unsupported("SparsityAlgorithm.num_sparse_params")

    @property
    def sparsity(self):
        raise _unsupported("SparsityAlgorithm.sparsity")

    @sparsity.setter
    def sparsity(self, sparsity):
        raise _unsupported("SparsityAlgorithm.sparsity")

    def get_sparse_params(self, obj):
        raise _unsupported("SparsityAlgorithm.get_sparse_params")

    def initialize(self) -> None:
        raise _unsupported("SparsityAlgorithm.initialize")

    def csx_annotate_sparsity(self, param) -> None:
        raise _unsupported("SparsityAlgorithm.csx_annotate_sparsity")

    def sparsify_parameter(self, module: torch.nn.Module, name: str, param: torch.Tensor) -> None:
        raise _unsupported("SparsityAlgorithm.sparsify_parameter")

    def apply(self, obj) -> None:
        raise _unsupported("SparsityAlgorithm.apply")

    def sparsify_module(self, module: torch.nn.Module) -> None:
        raise _unsupported("SparsityAlgorithm.sparsify_module")

    def prune_weight(self, sparse_param):
        raise _unsupported("SparsityAlgorithm.prune_weight")

    def sparsify_optimizer(self, optimizer: torch.optim.Optimizer) -> None:
        raise _unsupported("SparsityAlgorithm.sparsify_optimizer")

    @abstractmethod
    def update(self, optimizer: Optional[torch.optim.Optimizer] = None):
        """Update the sparsity pattern (each algorithm's own rule)."""

    def register_target_sparsity_hook(self, hook):
        raise _unsupported("SparsityAlgorithm.register_target_sparsity_hook")

    def register_computed_sparsity_hook(self, hook):
        raise _unsupported("SparsityAlgorithm.register_computed_sparsity_hook")

    def visit_state(self, f: Callable):
        raise _unsupported("SparsityAlgorithm.visit_state")

    def state_dict(self):
        raise _unsupported("SparsityAlgorithm.state_dict")

    def load_state_dict(self, state_dict) -> None:
        raise _unsupported("SparsityAlgorithm.load_state_dict")


__all__ = ["SparsityAlgorithm"]
