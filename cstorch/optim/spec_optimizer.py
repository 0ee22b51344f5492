"""The generic facade optimizer: every built-in optimizer class is `SpecOptimizer` bound
to one `cstorch_jax.optim.PublicOptimizer` (its signature, checks and param-group
defaults) and that class's algorithm (state layout and update op).

`build_optimizer_class(public)` builds the class: its `__init__` takes the real API's
arguments (the signature `inspect.signature` shows), checks them, and creates every
state tensor from the algorithm's layout (`preinitialize`); `step()` runs one update op
per param group with the group's learning rate and weight decay as 0-d tensors
(`Optimizer.hyperparameter`) and its frozen hyper-parameters, and writes the new
values back into the parameters and state in place.
"""
from __future__ import annotations

import inspect
from typing import ClassVar

import torch

from cstorch_jax.optim import REQUIRED, PublicOptimizer, Slot, call_update, public_optimizers

from .optimizer import Optimizer, ParamsT


class SpecOptimizer(Optimizer):
    """An optimizer built from its spec (see the module docstring)."""

    public: ClassVar[PublicOptimizer]

    def __init__(self, params, *args, **kwargs):
        arguments = self._signature.bind(*args, **kwargs)
        arguments.apply_defaults()
        values = dict(arguments.arguments)
        self.public.check(values)
        super().__init__(params, self.public.defaults(values), enable_global_step=self.public.global_step)

    def preinitialize(self) -> None:
        algorithm = self.public.algorithm
        for group in self.param_groups:
            hyper = self.public.hyper(group)
            for p in group["params"]:
                if algorithm.check_param is not None:
                    algorithm.check_param(p)
                st = self.state[p]
                slots = algorithm.state(hyper, tuple(p.shape))
                for name, slot in zip(slots._fields, slots):
                    if slot is not None:
                        st[name] = _initial(slot, p, group)

    @torch.no_grad()
    def step(self, closure=None):
        loss = self._call_closure(closure)
        algorithm, op = self.public.algorithm, self._op
        for gi, group in enumerate(self.param_groups):
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            if self.public.check_group is not None:
                self.public.check_group(group)
            hyper = self.public.hyper(group)
            states = []
            for p in params:
                _, fields = algorithm.layout(hyper, p.shape)
                states.append([self.state[p][f] for f in fields])
            new_params, new_states = call_update(
                op, params, [p.grad for p in params], states, self.hyperparameter(gi, "lr"),
                self.hyperparameter(gi, "weight_decay"), hyper)
            for p, v in zip(params, new_params):
                p.copy_(v)
            for old, new in zip(states, new_states):
                for t, v in zip(old, new):
                    t.copy_(v)
        return loss

    def convert_state_dict(self, state_dict: dict) -> dict:
        convert = self.public.convert_state_dict
        return convert(state_dict) if convert is not None else state_dict


def _initial(slot: Slot, p: torch.Tensor, group: dict) -> torch.Tensor:
    """A new state tensor as `slot` describes it (its fill may name a param-group value)."""
    fill = group[slot.fill] if isinstance(slot.fill, str) else slot.fill
    shape = p.shape if slot.shape is None else slot.shape
    dtype = torch.float32 if slot.float32 else p.dtype
    if isinstance(fill, torch.Tensor):
        return torch.zeros(shape, dtype=dtype, device=p.device) + fill.detach().to(dtype).reshape(())
    return torch.full(shape, float(fill), dtype=dtype, device=p.device)


class _AdamWeightDecay:
    """The real API's `Adam.handle_weight_decay`. The real Adam keeps its (L2) weight
    decay under `l2_regularization_rate`, with `weight_decay` 0 and `correct_bias` True in
    every param group; this Adam keeps torch.optim's layout, where `weight_decay` is the
    L2 rate the update reads. `handle_weight_decay` brings param groups of the real
    layout into this one; it runs on every param group added (so a group given with
    `l2_regularization_rate` works) and on the param groups of a state dict being loaded
    (so a real-system Adam checkpoint keeps its weight decay)."""

    def handle_weight_decay(self, param_groups) -> None:
        """In place, for each group (a dict): an `l2_regularization_rate` key becomes the
        group's `weight_decay` (the L2 rate; it replaces a `weight_decay` given too, as
        in the real API, where the L2 rate wins), and `correct_bias` is True (Adam
        always corrects the bias). A group without that key keeps its `weight_decay`."""
        for group in param_groups:
            if "l2_regularization_rate" in group:
                group["weight_decay"] = group.pop("l2_regularization_rate")
            group["correct_bias"] = True

    def add_param_group(self, param_group: dict) -> None:
        super().add_param_group(param_group)
        self.handle_weight_decay(self.param_groups[-1:])

    def convert_state_dict(self, state_dict: dict) -> dict:
        state_dict = super().convert_state_dict(state_dict)
        if "param_groups" not in state_dict:
            return state_dict
        groups = [dict(g) for g in state_dict["param_groups"]]
        self.handle_weight_decay(groups)
        return {**state_dict, "param_groups": groups}


#: members of the real API that a built-in class has beyond its spec, by class name
_MEMBERS: dict[str, tuple[type, ...]] = {"Adam": (_AdamWeightDecay,)}


def build_optimizer_class(public: PublicOptimizer) -> type[SpecOptimizer]:
    """The public class `public.name` of cstorch.optim (with the `_MEMBERS` of that name)."""
    signature = inspect.Signature([
        inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=annotation,
                          default=inspect.Parameter.empty if default is REQUIRED else default)
        for name, annotation, default in public.parameters()])

    def __init__(self, params, *args, **kwargs):
        SpecOptimizer.__init__(self, params, *args, **kwargs)

    # the real signature, annotations included (evaluated objects: config builders read
    # them through inspect.signature and typing.get_type_hints)
    __init__.__signature__ = signature.replace(parameters=[
        inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        inspect.Parameter("params", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=ParamsT),
        *signature.parameters.values()])
    __init__.__annotations__ = {p.name: p.annotation for p in __init__.__signature__.parameters.values()
                                if p.annotation is not inspect.Parameter.empty}
    __init__.__qualname__ = f"{public.name}.__init__"
    op = getattr(torch.ops.cstorch, public.algorithm.name)
    return type(public.name, (*_MEMBERS.get(public.name, ()), SpecOptimizer), {
        "__init__": __init__, "__doc__": public.doc, "__module__": "cstorch.optim", "__qualname__": public.name,
        "public": public, "_signature": signature, "_op": op})


#: the built-in optimizer classes by name, one per registered public optimizer spec
BUILTIN_OPTIMIZERS: dict[str, type[SpecOptimizer]] = {p.name: build_optimizer_class(p) for p in public_optimizers()}
