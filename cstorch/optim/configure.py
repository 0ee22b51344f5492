"""Build optimizers from configuration dicts (the params section of a YAML file).

`configure_optimizer("AdamW", params, learning_rate=1e-3, weight_decay=0.01)` finds the
cstorch optimizer class by case-insensitive name and calls it; `configure_param_groups`
splits a model's parameters into groups by weight decay (none for biases and the
parameters of normalization layers) and by learning-rate scale.
"""
from __future__ import annotations

import inspect
import warnings
from typing import Iterable

import torch

from .optimizer import Optimizer
from .spec_optimizer import BUILTIN_OPTIMIZERS, SpecOptimizer

#: keys of older configuration formats, and what replaced them
_RENAMED_KEYS = {
    "weight_decay_rate": "weight_decay",
    "beta1": "betas",
    "beta2": "betas",
    "eps1": "eps",
    "eps2": "eps",
    "optimizer_epsilon": "eps",
    "momentum_decay": None,
}

#: placeholder learning rate when the rate comes from a scheduler (a dict or list)
DEFAULT_LR = 0.1


def _subclasses(cls) -> Iterable[type]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def optimizer_class(optimizer_type: str) -> type[Optimizer]:
    """The cstorch optimizer class named `optimizer_type` (any case): a built-in one, or a
    subclass of `cstorch.optim.Optimizer` defined elsewhere."""
    classes = {name.lower(): cls for name, cls in BUILTIN_OPTIMIZERS.items()}
    for sub in _subclasses(Optimizer):  # user subclasses defined elsewhere
        if sub is not SpecOptimizer and not inspect.isabstract(sub) and not sub.__name__.startswith("_"):
            classes.setdefault(sub.__name__.lower(), sub)
    try:
        return classes[optimizer_type.lower()]
    except KeyError:
        raise ValueError(
            f"Invalid optimizer type {optimizer_type!r}. Expected one of: {sorted(c.__name__ for c in classes.values())}"
        ) from None


def configure_optimizer(optimizer_type: str, params, **kwargs) -> Optimizer:
    """Instantiate the optimizer named `optimizer_type` for `params`.

    `learning_rate` becomes `lr` when it is a number (a schedule, given as a dict or
    list, is the scheduler's business: `lr` is then a placeholder it overwrites).
    Keys of older formats (`weight_decay_rate`, `beta1`/`beta2`, `eps1`/`eps2`, ...)
    raise ValueError naming their replacement; keys the optimizer does not take warn
    and are dropped.

    Args:
        optimizer_type: the optimizer's class name, any case: a built-in one or a subclass of
            cstorch.optim.Optimizer defined elsewhere.
        params: the parameters or param groups (see `configure_param_groups`).
        **kwargs: the optimizer's arguments; `learning_rate` is accepted for `lr`.
    """
    cls = optimizer_class(optimizer_type)
    kwargs = dict(kwargs)
    renamed = sorted(k for k in kwargs if k in _RENAMED_KEYS and k not in inspect.signature(cls).parameters)
    if renamed:
        hints = ", ".join(f"{k} -> {_RENAMED_KEYS[k]}" if _RENAMED_KEYS[k] else k for k in renamed)
        raise ValueError(f"{cls.__name__}: configuration keys of an older format are not accepted: {hints}")
    learning_rate = kwargs.pop("learning_rate", None)
    if "lr" not in kwargs:
        kwargs["lr"] = learning_rate if isinstance(learning_rate, (int, float, torch.Tensor)) else DEFAULT_LR
    accepted = inspect.signature(cls).parameters
    takes_var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values())
    unused = sorted(k for k in kwargs if k not in accepted and not takes_var_kw)
    if unused:
        warnings.warn(f"{cls.__name__} does not take {unused}; these configuration keys are ignored")
        for k in unused:
            del kwargs[k]
    return cls(params, **kwargs)


_NORM_TYPES = (torch.nn.modules.batchnorm._NormBase, torch.nn.LayerNorm, torch.nn.GroupNorm, torch.nn.LocalResponseNorm)
if hasattr(torch.nn, "RMSNorm"):
    _NORM_TYPES += (torch.nn.RMSNorm,)


def _is_norm(module: torch.nn.Module) -> bool:
    return isinstance(module, _NORM_TYPES) or "norm" in type(module).__name__.lower()


def configure_param_groups(model: torch.nn.Module, optimizer_params: dict) -> list[dict]:
    """Param groups for `model` from an optimizer configuration.

    - `weight_decay` (default 0) applies to every parameter except biases and the
      parameters of normalization layers, which get 0;
    - `adjust_learning_rate` ({name substring: factor}) gives each parameter the factor
      of the first key its name contains (else 1.0), stored in the group as
      `adjust_learning_rate` for `ScalePerParamLR`.
    Parameters sharing both values share a group; groups keep the model's order. The
    two keys are removed from `optimizer_params` (the rest is for the optimizer).

    Args:
        model: the model whose parameters are grouped.
        optimizer_params: the optimizer configuration; its `weight_decay` and `adjust_learning_rate` keys
            are removed.

    Differences from the real system:
        Biases and every parameter of a normalization layer get no weight decay, and
        `adjust_learning_rate` matches parameters by name substring.
    """
    weight_decay = optimizer_params.pop("weight_decay", 0.0)
    adjust = optimizer_params.pop("adjust_learning_rate", None) or {}
    no_decay: set[int] = set()
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            if name.endswith("bias") or _is_norm(module):
                no_decay.add(id(p))
    groups: dict[tuple, dict] = {}
    seen: set[int] = set()
    for name, p in model.named_parameters():
        if id(p) in seen or not p.requires_grad:
            continue
        seen.add(id(p))
        wd = 0.0 if id(p) in no_decay else weight_decay
        scale = next((float(v) for k, v in adjust.items() if k in name), 1.0)
        key = (wd, scale)
        if key not in groups:
            groups[key] = {"params": [], "param_names": [], "weight_decay": wd}
            if adjust:
                groups[key]["adjust_learning_rate"] = scale
        groups[key]["params"].append(p)
        groups[key]["param_names"].append(name)
    return list(groups.values())
