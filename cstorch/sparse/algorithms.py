"""The real system's sparsity algorithms, declared: `DynamicSparsityAlgorithm`, `Static`,
`GMP`, `SET`, `RigL` and `Group` (the classes of `cerebras.pytorch.sparse.dynamic`,
`.static`, `.gmp`, `.set`, `.rigl` and `.group`), with their real constructors (names,
defaults, annotations) and methods.

Config builders read them without making one: the Model Zoo's trainer makes a pydantic
model of the constructor of every concrete subclass of `SparsityAlgorithm` when it
validates any configuration, sparse or not. So they exist here with the real
signatures; sparse training itself is out of scope (see `cerebras.pytorch.sparse.*`
in cstorch.unsupported), and constructing one raises `UnsupportedAPIError` saying so.
`HyperParameterScheduleType` and `UpdateScheduleType` are the plain-value parts of the
real annotations (numbers, lists, dicts, callables; the real ones add their own
schedule classes).
"""
from abc import abstractmethod
from typing import Callable, Dict, List, Optional, Tuple, Union

import torch

from .base import SparsityAlgorithm, _unsupported

HyperParameterScheduleType = Union[int, float, List[int], List[float], Tuple, Dict,
                                   Callable[[torch.Tensor, torch.Tensor], torch.Tensor]]
UpdateScheduleType = Union[Dict, Callable[[torch.LongTensor], torch.BoolTensor]]


class DynamicSparsityAlgorithm(SparsityAlgorithm):
    """Base class of the algorithms whose mask changes during training (`update`, on a
    schedule, calls `update_mask`).

    Args:
        sparsity: the real system's fraction of zeroed weights (or a schedule).
        update: the real system's schedule of mask updates.
        **kwargs: the base class's arguments.
    """

    def __init__(self, sparsity: Union[float, dict, None] = None, update: Optional[UpdateScheduleType] = None,
                 **kwargs):
        super().__init__(sparsity)

    @property
    def is_update_step(self) -> bool:
        raise _unsupported("DynamicSparsityAlgorithm.is_update_step")

    def update(self, optimizer: Optional[torch.optim.Optimizer] = None):
        raise _unsupported("DynamicSparsityAlgorithm.update")

    @abstractmethod
    def update_mask(self, p, mask, sparsity) -> torch.Tensor:
        """The new mask of parameter `p` (each algorithm's own rule)."""


class Static(SparsityAlgorithm):
    """A fixed mask of the given sparsity (a float in [0, 1)).

    Args:
        sparsity: the fraction of zeroed weights, in [0, 1).
        **kwargs: the base class's arguments.
    """

    def __init__(self, sparsity: Optional[float] = None, **kwargs):
        super().__init__(sparsity)

    def update(self, optimizer):
        raise _unsupported("Static.update")


class GMP(DynamicSparsityAlgorithm):
    """Gradual magnitude pruning.

    Args:
        **kwargs: DynamicSparsityAlgorithm's arguments.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)

    def update_mask(self, p, mask, sparsity) -> torch.Tensor:
        raise _unsupported("GMP.update_mask")


class SET(DynamicSparsityAlgorithm):
    """Sparse evolutionary training: drop the smallest weights, regrow at random.

    Args:
        drop_fraction: the fraction of weights dropped and regrown at each update (or a schedule).
        **kwargs: DynamicSparsityAlgorithm's arguments.
    """

    def __init__(self, drop_fraction: HyperParameterScheduleType = 0.3, **kwargs):
        super().__init__(**kwargs)

    def update_mask(self, p, mask, sparsity) -> torch.Tensor:
        raise _unsupported("SET.update_mask")


class RigL(DynamicSparsityAlgorithm):
    """Rigged lottery: drop the smallest weights, regrow where the gradient is largest.

    Args:
        drop_fraction: the fraction of weights dropped and regrown at each update (or a schedule).
        balance_in_groups: the real system's balancing of the mask over groups of input columns.
        balance_out_groups: the real system's balancing of the mask over groups of output rows.
        **kwargs: DynamicSparsityAlgorithm's arguments.
    """

    def __init__(self, drop_fraction: HyperParameterScheduleType = 0.3, balance_in_groups: Optional[int] = None,
                 balance_out_groups: Optional[int] = None, **kwargs):
        super().__init__(**kwargs)

    def update_mask(self, p, mask, sparsity) -> torch.Tensor:
        raise _unsupported("RigL.update_mask")


class Group(SparsityAlgorithm):
    """Several algorithms, each applied to the parameters its filter selects.

    Args:
        groups: a parameter filter (glob) -> algorithm map.
    """

    def __init__(self, groups: Dict[str, SparsityAlgorithm] = None):
        super().__init__(sparsity=None)

    def add(self, filter, algorithm: SparsityAlgorithm):  # noqa: A002 (the real parameter's name)
        raise _unsupported("Group.add")

    def extend(self, group: "Group"):
        raise _unsupported("Group.extend")

    def update(self, optimizer: Optional[torch.optim.Optimizer] = None):
        raise _unsupported("Group.update")


__all__ = ["DynamicSparsityAlgorithm", "Static", "GMP", "SET", "RigL", "Group", "HyperParameterScheduleType",
           "UpdateScheduleType"]
