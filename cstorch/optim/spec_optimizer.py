"""The generic facade optimizer: every built-in optimizer class is `SpecOptimizer` bound
to one `cstorch_jax.optim.PublicOptimizer` (its signature, checks and param-group
defaults) and that class's algorithm (state layout and update op).

`build_optimizer_class(public)` builds the class: its `__init__` takes the real API's
arguments (the signature `inspect.signature` shows), checks them, and creates every
state tensor from the algorithm's layout (`preinitialize`); `step()` runs one update op
per param group with the group's learning rate and weight decay as 0-d tensors
(`Optimizer.hyperparameter`) and its frozen hyper-parameters, and writes the new
values back into the parameters and state in place (`cstorch_jax.write_back.assign`: in a
captured step, without a copy op).
"""
from __future__ import annotations

import inspect
from typing import ClassVar

import torch

from cstorch_jax.write_back import assign
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
                assign(p, v)
            for old, new in zip(states, new_states):
                for t, v in zip(old, new):
                    assign(t, v)
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

#: what each argument of the built-in optimizers means (the "Args" section of each class's
#: docstring): the common meaning, then an optimizer's own where it differs
_ARGUMENTS: dict[str, str] = {
    "params": "the parameters to optimize: an iterable of tensors, of (name, tensor) pairs, or of dicts, "
              "each a param group with its own \"params\" and its own values of the arguments below.",
    "lr": "the learning rate.",
    "betas": "(beta1, beta2): the decay rates of the running averages of the gradient and of its square.",
    "eps": "added to the denominator for numerical stability.",
    "weight_decay": "L2 regularisation: `weight_decay * p` is added to the gradient.",
    "maximize": "maximize the objective instead of minimizing it (the gradient's sign is flipped).",
    "momentum": "the momentum factor (0: no momentum buffer).",
    "nesterov": "Nesterov momentum.",
}
_OWN_ARGUMENTS: dict[str, dict[str, str]] = {
    "SGD": {
        "dampening": "the fraction of the gradient left out of the momentum buffer (`1 - dampening` of it "
                     "enters).",
        "nesterov": "Nesterov momentum (needs `momentum > 0` and `dampening == 0`).",
    },
    "Adadelta": {
        "lr": "the factor applied to each update.",
        "rho": "the decay rate of the running averages of squared gradients and squared updates (<= 1).",
        "eps": "added inside both square roots.",
    },
    "Adafactor": {
        "lr": "the step size when `relative_step` is False; None with `relative_step=True`.",
        "eps": "(eps1, eps2): eps1 is added to the squared gradient, eps2 is the least parameter RMS used "
               "by `scale_parameter`.",
        "clip_threshold": "the update's RMS is capped at this value (not 0).",
        "decay_rate": "d <= 0: at step t the running averages of the squared gradient keep `1 - t^d` of "
                      "their previous value.",
        "beta1": "the decay rate of a first moment of the update; None: no first moment.",
        "weight_decay": "decoupled weight decay, scaled by the step size: `p -= weight_decay * alpha * p`.",
        "scale_parameter": "multiply the step size by `max(eps2, RMS(p))`.",
        "relative_step": "take the step size from the step count t, `min(1e-2, 1 / sqrt(t))` (pass "
                         "`lr=None`).",
        "warmup_init": "with `relative_step`: the step size is `min(1e-6 * t, 1 / sqrt(t))`, which grows "
                       "during the first steps.",
    },
    "Adagrad": {
        "lr_decay": "the step size at step t is `lr / (1 + (t - 1) * lr_decay)`.",
        "initial_accumulator_value": "the starting value of the sum of squared gradients.",
        "eps": "added to the square root of the sum of squared gradients.",
    },
    "Adam": {
        "eps": "added to the square root of the bias-corrected second moment.",
        "amsgrad": "divide by the largest second moment seen so far (AMSGrad).",
    },
    "AdamW": {
        "eps": "added to the square root of the bias-corrected second moment.",
        "weight_decay": "decoupled weight decay: `p *= 1 - lr * weight_decay` before each update.",
        "correct_bias": "divide the moments by their bias corrections `1 - beta^t`; False drops them "
                        "(BERT's variant).",
        "amsgrad": "divide by the largest second moment seen so far (AMSGrad).",
    },
    "Adamax": {
        "betas": "(beta1, beta2): the decay rates of the first moment and of the infinity norm.",
        "eps": "added to `|g|` in the infinity norm.",
    },
    "ASGD": {
        "lambd": "the decay term: `p *= 1 - lambd * eta` at every step, and the step size eta decays as "
                 "`lr / (1 + lambd * lr * t)^alpha`.",
        "alpha": "the power of the step size's decay.",
        "t0": "the step from which the average of the parameters starts.",
    },
    "Lamb": {
        "eps": "added to the square root of the second moment.",
        "weight_decay": "added to the Adam direction (`weight_decay * p`) before the trust ratio.",
        "adam": "fix the trust ratio at 1 (Adam's direction without bias correction).",
    },
    "Lion": {
        "betas": "(beta1, beta2): beta1 mixes the momentum into the gradient whose sign is the update, "
                 "beta2 is the momentum's decay rate.",
        "weight_decay": "decoupled weight decay: `p *= 1 - lr * weight_decay` before each update.",
    },
    "Muon": {
        "lr": "the learning rate, scaled for each parameter by `0.2 * sqrt(max(rows, columns))`.",
        "weight_decay": "decoupled weight decay with the scaled learning rate.",
        "momentum": "the decay rate of the momentum buffer (0: no buffer).",
        "ns_steps": "the number of Newton-Schulz iterations that orthogonalize the update.",
    },
    "NAdam": {
        "momentum_decay": "how fast the momentum factor `beta1 * (1 - 0.5 * 0.96^(t * momentum_decay))` "
                          "approaches beta1.",
    },
    "RMSprop": {
        "alpha": "the decay rate of the running average of squared gradients.",
        "centered": "divide by an estimate of the gradient's variance (the average of squared gradients "
                    "minus the squared average gradient) instead of the average of squared gradients.",
    },
    "Rprop": {
        "lr": "the initial step size of every element.",
        "etas": "(etaminus, etaplus): the factors that shrink a step size after the gradient's sign "
                "changed and grow it when the sign is kept (0 < etaminus < 1 < etaplus).",
        "step_sizes": "(min, max): the bounds of the step sizes.",
    },
}


def _docstring(public: PublicOptimizer) -> str:
    """The class docstring: the spec's text with an "Args" section describing every
    argument, before the "Differences from the real system" section when there is one."""
    own = _OWN_ARGUMENTS.get(public.name, {})
    names = ["params", *(name for name, _, _ in public.parameters())]
    lines = ["Args:"] + [f"    {name}: {own.get(name) or _ARGUMENTS.get(name, '')}".rstrip() for name in names]
    text, marker, differences = public.doc.partition("Differences from the real system:")
    return "\n\n".join(part for part in (text.strip(), "\n".join(lines), marker + differences) if part)


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
        "__init__": __init__, "__doc__": _docstring(public), "__module__": "cstorch.optim", "__qualname__": public.name,
        "public": public, "_signature": signature, "_op": op})


#: the built-in optimizer classes by name, one per registered public optimizer spec
BUILTIN_OPTIMIZERS: dict[str, type[SpecOptimizer]] = {p.name: build_optimizer_class(p) for p in public_optimizers()}
