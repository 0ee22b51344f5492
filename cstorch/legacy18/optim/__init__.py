"""`cstorch.optim` of the 1.8 API: the 2.x optimizers and configuration helpers, and
the 1.8 base class of custom optimizers.

- The optimizers (`SGD`, `Adam`, `AdamW`, ...), `configure_optimizer(optimizer_type,
  params, **kwargs)` and `configure_lr_scheduler` are the 2.x ones (one set of
  optimizers; see `lr_scheduler` for the 1.8 `main_scheduler` spelling).
- `Optimizer`: the 2.x `cstorch.optim.Optimizer` (`__init__(params, defaults,
  enable_global_step=False)`, abstract `preinitialize` and `step`) plus 1.8's third
  abstract method `state_names_to_sparsify()`: the names of the state tensors that
  would be sparsified with the weights. This engine has no sparsity, so the names are
  only checked (each must be a state the optimizer created in `preinitialize`); a
  subclass that does not define the method cannot be instantiated, as in 1.8.
  `isinstance(cstorch.optim.SGD(...), Optimizer)` holds for the built-in optimizers.
"""
from __future__ import annotations

import abc

import cstorch
from cstorch.optim import *  # noqa: F401,F403  (the 2.x optimizers, configure_optimizer, ...)
from cstorch.optim import __all__ as _optim_all

from . import lr_scheduler
from .lr_scheduler import configure_lr_scheduler


class Optimizer(cstorch.optim.Optimizer):
    """Base class of custom 1.8 optimizers: the 2.x `cstorch.optim.Optimizer`
    (`__init__(params, defaults, enable_global_step=False)`, abstract `preinitialize`
    and `step`) plus 1.8's abstract `state_names_to_sparsify()`. A subclass that does
    not define it cannot be instantiated; `isinstance(cstorch.optim.SGD(...),
    Optimizer)` holds for the built-in optimizers.

    Args:
        params: the parameters or param groups, as for cstorch.optim.Optimizer.
        defaults: the default value of every hyper-parameter of a param group.
        enable_global_step: keep a float32 0-d "step" state per parameter.

    Differences from the real system:
        No sparsity: the names `state_names_to_sparsify()` returns are checked (each
        must be a state `preinitialize` created), not used.
    """

    def __init__(self, params, defaults: dict, enable_global_step: bool = False):
        super().__init__(params, defaults, enable_global_step=enable_global_step)
        names = self.state_names_to_sparsify()
        if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
            raise TypeError(f"{type(self).__name__}.state_names_to_sparsify() must return a list of state names, "
                            f"got {names!r}.")
        created = {k for st in self.state.values() for k in st}
        unknown = sorted(set(names) - created) if self.state else []
        if unknown:
            raise ValueError(f"{type(self).__name__}.state_names_to_sparsify() names {unknown}, which preinitialize() "
                             f"did not create; the optimizer's state names are {sorted(created)}.")

    @abc.abstractmethod
    def state_names_to_sparsify(self) -> list:
        """Names of the per-parameter state tensors to sparsify with the weights."""

    @classmethod
    def __subclasshook__(cls, subclass):
        if cls is Optimizer and cstorch.optim.Optimizer in getattr(subclass, "__mro__", ()):
            return True
        return NotImplemented


__all__ = [*_optim_all, "lr_scheduler", "configure_lr_scheduler"]
