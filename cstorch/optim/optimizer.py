"""`cstorch.optim.Optimizer`: torch.optim.Optimizer whose state exists before the first
step (`preinitialize`) and whose `step()` creates none, so the state can be lifted into
a compiled step."""
from __future__ import annotations

import abc
import weakref

import torch

_LIVE: "weakref.WeakSet[Optimizer]" = weakref.WeakSet()


def live_optimizers() -> list["Optimizer"]:
    """Every cstorch optimizer still referenced, in creation order."""
    return sorted(_LIVE, key=lambda o: o._creation_index)


_counter = 0


def as_tensor(value) -> torch.Tensor:
    """A hyper-parameter as a float32 0-d tensor (it may already be one)."""
    return value if isinstance(value, torch.Tensor) else torch.tensor(float(value), dtype=torch.float32)


class Optimizer(torch.optim.Optimizer, abc.ABC):
    #: param-group keys that are tensor inputs of a compiled step (never frozen into it)
    TENSOR_HYPERPARAMS: tuple[str, ...] = ("lr", "weight_decay")

    def __init__(self, params, defaults: dict, enable_global_step: bool = False):
        global _counter
        super().__init__(params, defaults)
        for group in self.param_groups:
            if "tags" in group:
                tags = group["tags"]
                group["tags"] = {tags} if isinstance(tags, str) else set(tags or ())
        self.enable_global_step = enable_global_step
        if enable_global_step:
            for group in self.param_groups:
                for p in group["params"]:
                    self.state[p]["step"] = torch.zeros((), dtype=torch.float32)
        self.preinitialize()
        _counter += 1
        self._creation_index = _counter
        _LIVE.add(self)

    @abc.abstractmethod
    def preinitialize(self) -> None:
        """Create every state tensor the optimizer will ever use."""

    @abc.abstractmethod
    def step(self, closure=None):
        """Update the parameters from their gradients; must create no new state."""

    def increment_global_step(self, p: torch.Tensor) -> torch.Tensor:
        if "step" not in self.state[p]:
            raise RuntimeError("increment_global_step needs the optimizer to be built with enable_global_step=True")
        self.state[p]["step"].add_(1.0)
        return self.state[p]["step"]

    def zero_grad(self, set_to_none: bool = True) -> None:
        if not set_to_none:
            import warnings

            warnings.warn("zero_grad(set_to_none=False) is slower and gives the same result; prefer the default")
        super().zero_grad(set_to_none=set_to_none)

    # -- helpers for step() implementations -------------------------------------------
    @staticmethod
    def _call_closure(closure):
        """Re-evaluate the model with grad enabled, as torch.optim does."""
        if closure is None:
            return None
        with torch.enable_grad():
            return closure()

    def _groups_with_grads(self):
        """(group, params that have a gradient) for every group with at least one."""
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if params:
                yield group, params

    @staticmethod
    def _write_back(targets, values) -> None:
        """Copy an update op's results into the parameter and state tensors, in place."""
        for t, v in zip(targets, values):
            t.copy_(v)
