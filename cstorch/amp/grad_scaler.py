"""`cstorch.amp.GradScaler`: static or dynamic loss scaling, entirely as tensor math, so
a whole scaled step (including a skipped one) is one captured graph.

Static (`loss_scale` a number, default 1.0): the loss is multiplied by the scale and
the gradients divided by it before the optimizer step.

Dynamic (`loss_scale="dynamic"`): the state is four tensors, `loss_scale` (float32),
`steps_since_rescale`, `overflows_since_rescale`, `num_skipped_steps` (int64). A step
is finite when the global norm of the unscaled gradients is below inf (a NaN or inf
anywhere makes it infinite). A non-finite step leaves the parameters and optimizer
state as they were (`torch.where` on every tensor the optimizer owns) and counts as
skipped; schedulers do not advance either (the finite check is
`clip_gradients_and_return_isfinite`). `update()` then applies `update_scale`:

    steps += 1;  overflows += not finite
    if overflows / steps > overflow_tolerance:  scale /= 2;  steps = overflows = 0
    if steps >= steps_per_increase:              scale *= 2;  steps = overflows = 0
    scale = clamp(scale, min_loss_scale, max_loss_scale)

so the scale halves at once on an overflow (tolerance 0) and doubles after
`steps_per_increase` clean steps (the real system's code compares with `>` and doubles
one step later). Unlike the real system, which scales only
on CSX, the same arithmetic runs on every backend (the CPU backend stays a reference
for CSX numerics). A scaler registers with the run (`cstorch.state.registry`) when it is
created; it scales the gradients of the run's optimizers.
"""
from __future__ import annotations

import enum
import warnings
import weakref
from typing import ClassVar, Iterator, Mapping, Union

import torch

from .. import _backend
from ..optim.optimizer import live_optimizers
from ..state import copy_into
from ..state import swap_attributes
from ..optim import if_finite


def live_grad_scalers() -> list["GradScaler"]:
    """The run's grad scalers that are still referenced, in creation order."""
    return _backend.run_registry().objects("grad_scaler")


class _OptState(enum.Enum):
    READY = enum.auto()
    SCALED = enum.auto()
    UNSCALED = enum.auto()
    STEPPED = enum.auto()


_TENSOR_STATE = ("_loss_scale", "_steps_since_rescale", "_overflows_since_rescale", "_num_skipped_steps")


class GradScaler:
    """Static or dynamic loss scaling as tensor math (see the module docstring for the rule).

    Args:
        loss_scale: "dynamic", or a number: a static scale; None: 1.0 (no scaling).
        init_scale: the first dynamic scale; None: 2**15 (capped at `max_loss_scale`).
        steps_per_increase: the clean steps after which a dynamic scale doubles; None: 2000.
        min_loss_scale: the least dynamic scale (>= 2**-14); None: 2**-14.
        max_loss_scale: the largest dynamic scale; None: 2**15.
        overflow_tolerance: the fraction of overflowing steps since the last change above which a dynamic
            scale halves (0: at the first overflow).
        max_gradient_norm: deprecated: clip the gradients to this global norm inside the scaler (dynamic
            scaling only; use `optimizer_step(max_gradient_norm=...)`).

    Differences from the real system:
        Scaling runs on every backend (the real one is a no-op off CSX). With dynamic
        scaling the scale doubles after exactly `steps_per_increase` clean steps (the real
        code doubles one step later). Under `cbfloat16` (computed in float16) the scale's
        maximum is 2**15.
    """

    state_kind: ClassVar[str] = "grad_scaler"

    def __init__(self, loss_scale: Union[str, float, None] = None, init_scale: float | None = None,
                 steps_per_increase: int | None = None, min_loss_scale: float | None = None,
                 max_loss_scale: float | None = None, overflow_tolerance: float = 0.0,
                 max_gradient_norm: float | None = None):
        loss_scale = loss_scale or 1.0
        default_max = 2.0 ** 15
        self._min_loss_scale = min_loss_scale or 2.0 ** -14
        self._max_loss_scale = max_loss_scale or default_max
        self._steps_per_increase = steps_per_increase or 2000
        self._overflow_tolerance = overflow_tolerance
        self._max_gradient_norm = None
        self.dynamic = loss_scale == "dynamic"
        if self.dynamic:
            if self._min_loss_scale < 2.0 ** -14:
                raise ValueError(f"min_loss_scale too small: {self._min_loss_scale} < 2**-14")
            if overflow_tolerance < 0:
                raise ValueError(f"overflow_tolerance must be >= 0, got {overflow_tolerance}")
            if max_gradient_norm:
                warnings.warn("Global gradient clipping inside GradScaler is deprecated; use "
                              "torch.nn.utils.clip_grad_norm_ or optimizer_step(max_gradient_norm=...)")
                self._max_gradient_norm = float(max_gradient_norm)
            self._loss_scale = torch.tensor(min(self._max_loss_scale, init_scale or default_max),
                                            dtype=torch.float32)
            self._steps_since_rescale = torch.zeros((), dtype=torch.int64)
            self._overflows_since_rescale = torch.zeros((), dtype=torch.int64)
            self._num_skipped_steps = torch.zeros((), dtype=torch.int64)
        else:
            if isinstance(loss_scale, str):
                raise ValueError(f"loss_scale must be a number or \"dynamic\", got {loss_scale!r}")
            self._loss_scale = float(loss_scale)
        self._squared_norms: list[torch.Tensor] = []
        self.isfinite: torch.Tensor | None = None
        self._non_clamped_loss_scale: torch.Tensor | None = None
        self._opt_states: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
        _backend.run_registry().register(self)

    # -- the run's protocol (cstorch.state.Stateful) ------------------------------------
    def state_tensors(self) -> dict[str, torch.Tensor]:
        """The scaler's tensor state by attribute name (empty for static scaling)."""
        return {k: getattr(self, k) for k in _TENSOR_STATE if isinstance(getattr(self, k, None), torch.Tensor)}

    def step_state(self) -> Iterator[tuple[str, torch.Tensor]]:
        for attr, t in self.state_tensors().items():
            yield attr.lstrip("_"), t

    def bind_step_state(self, traced: Mapping[int, torch.Tensor]):
        return swap_attributes(self, {attr: traced[id(t)] for attr, t in self.state_tensors().items()})

    def graph_constants(self, prefix: str) -> dict[str, object]:
        return {}

    # -- the scaling protocol ------------------------------------------------------------
    def _optimizers(self):
        return live_optimizers()

    def _state_of(self, optimizer) -> _OptState:
        return self._opt_states.get(optimizer, _OptState.READY)

    def _scale_is_one(self) -> bool:
        return not self.dynamic and self._loss_scale == 1.0

    def scale(self, loss: torch.Tensor) -> torch.Tensor:
        """loss * scale, in float32."""
        for opt in self._optimizers():
            state = self._state_of(opt)
            if self._scale_is_one():
                self._opt_states[opt] = _OptState.UNSCALED
            elif state is _OptState.READY:
                self._opt_states[opt] = _OptState.SCALED
            elif state is not _OptState.SCALED:
                raise RuntimeError("Optimizer parameter gradients already scaled: call update() after step() "
                                   "before scaling the next loss.")
        return loss.float() if self._scale_is_one() else loss.float() * self._loss_scale

    def unscale_(self, optimizer) -> None:
        """Divide `optimizer`'s gradients by the scale, in place (once per step)."""
        state = self._state_of(optimizer)
        if state is _OptState.UNSCALED:
            return
        if state is _OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step(); call update() first.")
        self._opt_states[optimizer] = _OptState.UNSCALED
        if self._scale_is_one():
            return
        inv_scale = (1.0 / self._loss_scale) if self.dynamic else torch.tensor(1.0 / self._loss_scale)
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.grad.mul_(inv_scale)
                    if self.dynamic:
                        self._squared_norms.append(torch.sum(p.grad.float() * p.grad.float()))

    def clip_gradients_and_return_isfinite(self, optimizers) -> torch.Tensor:
        """Whether this step's gradients are finite: a bool 0-d tensor, `global_norm < inf`,
        also kept as `self.isfinite` (the decision `step_if_finite` applies). The global L2
        norm is that of the gradients `unscale_` divided this step (dynamic scaling
        records them); where none were recorded (static scaling, nothing unscaled yet) it
        is that of the current gradients of `optimizers`. With the deprecated
        `max_gradient_norm`, the gradients of `optimizers` are then multiplied by
        min(1, max_gradient_norm / (norm + 1e-6)), torch's clip_grad_norm_ rule. Tensor
        math only (no host read): it runs the same eagerly and inside a traced step."""
        optimizers = list(optimizers)
        grads = [p.grad for opt in optimizers for g in opt.param_groups for p in g["params"] if p.grad is not None]
        with torch.no_grad():
            norms = self._squared_norms or [torch.sum(g.float() * g.float()) for g in grads]
            norms = norms or [torch.zeros((), dtype=torch.float32)]
            global_norm = torch.sqrt(torch.sum(torch.stack(norms)))
            self.isfinite = global_norm < float("inf")
            if self._max_gradient_norm:
                coef = torch.clamp(self._max_gradient_norm / (global_norm + 1e-6), max=1.0)
                for g in grads:
                    g.mul_(coef.to(g.dtype))
        return self.isfinite

    def step(self, optimizer, *args, **kwargs):
        """Unscale (if not done yet) and step `optimizer`; with dynamic scaling a step
        with non-finite gradients changes nothing."""
        if self._state_of(optimizer) is _OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        for opt in self._optimizers():
            if self._state_of(opt) is _OptState.SCALED:
                self.unscale_(opt)
        if self.dynamic and self.isfinite is None:
            self.clip_gradients_and_return_isfinite(self._optimizers())
        result = self.step_if_finite(optimizer, *args, **kwargs)
        self._opt_states[optimizer] = _OptState.STEPPED
        return result

    def step_if_finite(self, optimizer, *args, **kwargs):
        """optimizer.step(), kept only where the gradients were finite (dynamic scaling)."""
        if not self.dynamic:
            return optimizer.step(*args, **kwargs)
        if self.isfinite is None:
            self.clip_gradients_and_return_isfinite(self._optimizers())
        result = if_finite.step_if_finite(optimizer, self.isfinite, *args, **kwargs)
        with torch.no_grad():
            self._num_skipped_steps.add_(1 - self.isfinite.long())
        return result

    def update(self, new_scale=None) -> None:
        """Adjust the dynamic scale after every optimizer has stepped (`update_scale`)
        and start the next step's scaling protocol."""
        if new_scale:
            raise ValueError("cstorch.amp.GradScaler.update() does not take a new_scale")
        self.update_scale(self._optimizers())
        self.isfinite = None
        self._squared_norms = []
        self._opt_states = weakref.WeakKeyDictionary()

    def update_scale(self, optimizers) -> None:
        """One step of the dynamic loss-scale rule (see the module docstring) from this
        step's finiteness: `self.isfinite` as the step decided it, or, when no step did,
        `clip_gradients_and_return_isfinite(optimizers)`. Consumes this step's recorded
        gradient norms. Nothing with static scaling. Tensor math only, in place."""
        if not self.dynamic:
            return
        isfinite = self.clip_gradients_and_return_isfinite(optimizers) if self.isfinite is None else self.isfinite
        self._squared_norms = []
        with torch.no_grad():
            overflow = 1 - isfinite.long()
            self._steps_since_rescale.add_(1)
            self._overflows_since_rescale.add_(overflow)
            ratio = self._overflows_since_rescale.float() / self._steps_since_rescale.float()
            decrease = (ratio > self._overflow_tolerance).long()
            self._loss_scale.div_((1 + decrease).float())
            self._steps_since_rescale.mul_(1 - decrease)
            self._overflows_since_rescale.mul_(1 - decrease)
            increase = (self._steps_since_rescale >= self._steps_per_increase).long()
            self._loss_scale.mul_((1 + increase).float())
            self._steps_since_rescale.mul_(1 - increase)
            self._overflows_since_rescale.mul_(1 - increase)
            self._loss_scale.clamp_(max=self._max_loss_scale)
            self._non_clamped_loss_scale = self._loss_scale.clone()
            self._loss_scale.clamp_(min=self._min_loss_scale)

    # -- queries and state dict ------------------------------------------------------------
    def get_scale(self):
        return self._loss_scale

    def get_non_clamped_scale(self):
        """The scale before clamping to min_loss_scale in the last update."""
        if self.dynamic and self._non_clamped_loss_scale is not None:
            return self._non_clamped_loss_scale
        return self._loss_scale

    def get_num_skipped_steps(self) -> torch.Tensor:
        return self._num_skipped_steps if self.dynamic else torch.zeros((), dtype=torch.int64)

    def state_dict(self, destination=None) -> dict:
        """The scaler's state: `loss_scale` and, with dynamic scaling, the int64 counters
        `steps_since_rescale`, `overflows_since_rescale` and `num_skipped_steps` (the
        state tensors themselves). With `destination` (a dict), the entries are written
        into it and it is returned. Unlike the real system, whose dict is empty off CSX,
        every backend saves the state (every backend scales)."""
        state = {"loss_scale": self._loss_scale}
        if self.dynamic:
            state.update(steps_since_rescale=self._steps_since_rescale,
                         overflows_since_rescale=self._overflows_since_rescale,
                         num_skipped_steps=self._num_skipped_steps)
        if destination is None:
            return state
        destination.update(state)
        return destination

    def load_state_dict(self, state_dict: dict) -> None:
        """Values are copied into the existing tensors (a compiled step is bound to them)."""
        for key, value in state_dict.items():
            attr = f"_{key}"
            if attr not in _TENSOR_STATE:
                raise KeyError(f"unexpected GradScaler state {key!r}; expected some of "
                               f"{[k[1:] for k in _TENSOR_STATE]}")
            current = getattr(self, attr)
            if isinstance(current, torch.Tensor):
                copy_into(current, value, f"GradScaler state {key!r}")
            elif self.dynamic is False and attr == "_loss_scale":
                self._loss_scale = float(value)
