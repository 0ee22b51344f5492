"""The state a traced step may touch, and how it is bound to traced tensors.

State tensors are the compiled models' parameters and buffers and every tensor in the
cstorch optimizers' state and param groups, each counted once (tied weights share one
entry). Optimizer hyper-parameters named in `Optimizer.TENSOR_HYPERPARAMS` (the
learning rate, weight decay) that are Python numbers become per-step scalar inputs,
read from the param group at every call, so changing them never changes the graph.
Every other hyper-parameter is frozen into the graph; changing it later is an error.

The live schedulers' step counters (`scheduler.last_epoch`, int64 0-d) and the live
GradScalers' tensors (dynamic loss scale and counters) are state too, so
`scheduler.step()` and `scaler.update()` inside the step advance them on the device and
one executable serves the whole schedule; the schedulers' hyper-parameters are frozen
like the optimizers'. The registered metrics' state buffers (`cstorch.metrics`) are
state as well, so `metric.update()` inside the step accumulates on the device.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import torch
from torch.nn.utils.stateless import _reparametrize_module


class StepState:
    def __init__(self, models: list[torch.nn.Module], optimizers: list, schedulers: list | None = None,
                 grad_scalers: list | None = None, metrics: list | None = None):
        if schedulers is None:
            from .optim.scheduler import live_schedulers

            schedulers = live_schedulers()
        if grad_scalers is None:
            from .amp.grad_scaler import live_grad_scalers

            grad_scalers = live_grad_scalers()
        if metrics is None:
            from .metrics.metric import live_metrics

            metrics = live_metrics()
        self.models = list(models)
        self.optimizers = list(optimizers)
        self.schedulers = list(schedulers)
        self.names: list[str] = []
        self.tensors: list[torch.Tensor] = []
        seen: dict[int, int] = {}

        def add(name: str, t: torch.Tensor) -> None:
            if id(t) not in seen:
                seen[id(t)] = len(self.tensors)
                self.names.append(name)
                self.tensors.append(t)

        for mi, model in enumerate(self.models):
            prefix = self._model_prefix(mi)
            for n, p in model.named_parameters():
                add(f"{prefix}.{n}", p)
            for n, b in model.named_buffers():
                add(f"{prefix}.{n}", b)
        self.scalar_names: list[str] = []
        self._scalar_slots: list[tuple[int, int, str]] = []
        for oi, opt in enumerate(self.optimizers):
            index = {id(p): i for i, p in enumerate(p for g in opt.param_groups for p in g["params"])}
            for gi, group in enumerate(opt.param_groups):
                for p in group["params"]:
                    add(f"optimizer{oi}.param{index[id(p)]}", p)
                for key in opt.TENSOR_HYPERPARAMS:
                    v = group.get(key)
                    if isinstance(v, torch.Tensor):
                        add(f"optimizer{oi}.param_groups.{gi}.{key}", v)
                    elif isinstance(v, (int, float)) and not isinstance(v, bool):
                        self.scalar_names.append(f"optimizer{oi}.param_groups.{gi}.{key}")
                        self._scalar_slots.append((oi, gi, key))
            for p, st in opt.state.items():
                for k, v in st.items():
                    if isinstance(v, torch.Tensor):
                        add(f"optimizer{oi}.state.{index.get(id(p), '?')}.{k}", v)
        # (object, attribute) pairs whose tensors are state, bound by swapping the attribute
        self._attr_state: list[tuple[object, str]] = []
        for si, sched in enumerate(self.schedulers):
            add(f"scheduler{si}.last_epoch", sched.last_epoch)
            self._attr_state.append((sched, "last_epoch"))
        for gi, scaler in enumerate(grad_scalers):
            for attr, t in scaler.state_tensors().items():
                add(f"grad_scaler{gi}.{attr.lstrip('_')}", t)
                self._attr_state.append((scaler, attr))
        for mi, metric in enumerate(metrics):
            for attr, t in metric.state_tensors().items():
                add(f"metric{mi}.{metric.name}.{attr.lstrip('_')}", t)
                self._attr_state.append((metric, attr))
        self._frozen_models = list(self.models)
        self._frozen_optimizers = list(self.optimizers)
        self._frozen_schedulers = list(self.schedulers)

    def _model_prefix(self, mi: int) -> str:
        return "model" if len(self.models) == 1 else f"model{mi}"

    def restrict_to(self, used: set[int]) -> None:
        """Only models and optimizers whose tensors the compiled step uses (ids in `used`)
        constrain later calls; changing an unrelated model's mode is no graph change."""
        self._frozen_models = [m for m in self.models
                               if any(id(t) in used for t in (*m.parameters(), *m.buffers()))]
        self._frozen_optimizers = [o for o in self.optimizers
                                   if any(id(p) in used for g in o.param_groups for p in g["params"])]
        self._frozen_schedulers = [s for s in self.schedulers if id(s.last_epoch) in used]

    # -- per-step values ----------------------------------------------------------
    def scalar_values(self) -> list[float]:
        """The lifted hyper-parameters' current values."""
        return [float(self.optimizers[oi].param_groups[gi][key]) for oi, gi, key in self._scalar_slots]

    def scalars(self, values: list[float] | None = None) -> list[torch.Tensor]:
        """The lifted hyper-parameters (their current values by default) as float32 0-d tensors."""
        values = self.scalar_values() if values is None else values
        return [torch.tensor(v, dtype=torch.float32) for v in values]

    def frozen(self) -> dict[str, object]:
        """Everything the graph was specialised on that is not a tensor input."""
        out: dict[str, object] = {}
        for model in self._frozen_models:
            mi = self.models.index(model)
            for n, m in model.named_modules():
                out[f"{self._model_prefix(mi)}.{n or '<root>'}.training"] = m.training
        lifted = set(self._scalar_slots)
        for opt in self._frozen_optimizers:
            oi = self.optimizers.index(opt)
            for gi, group in enumerate(opt.param_groups):
                for k, v in group.items():
                    if k == "params" or (oi, gi, k) in lifted or isinstance(v, torch.Tensor):
                        continue
                    out[f"optimizer{oi}.param_groups[{gi}][{k!r}]"] = repr(v)
        for sched in self._frozen_schedulers:
            si = self.schedulers.index(sched)
            for k, v in sched._graph_constants().items():
                out[f"scheduler{si} ({type(sched).__name__}).{k}"] = v
        return out

    # -- capture ------------------------------------------------------------------
    @contextlib.contextmanager
    def bind(self, traced: list[torch.Tensor], traced_scalars: list[torch.Tensor]) -> Iterator[None]:
        """Within the block, the models and optimizers read the traced tensors."""
        sub = {id(t): tr for t, tr in zip(self.tensors, traced)}
        # looked up before the models are reparametrized: a metric inside a model has its
        # state swapped with the model's buffers already
        attr_state = [(obj, attr, sub[id(getattr(obj, attr))]) for obj, attr in self._attr_state]
        with contextlib.ExitStack() as stack:
            for model in self.models:
                mapping = {n: sub[id(p)] for n, p in model.named_parameters()}
                mapping.update({n: sub[id(b)] for n, b in model.named_buffers()})
                stack.enter_context(_reparametrize_module(model, mapping, tie_weights=True))
            for opt in self.optimizers:
                stack.enter_context(_bind_optimizer(opt, sub))
            for (oi, gi, key), value in zip(self._scalar_slots, traced_scalars):
                stack.enter_context(_swap_item(self.optimizers[oi].param_groups[gi], key, value))
            for obj, attr, value in attr_state:
                if getattr(obj, attr) is not value:
                    stack.enter_context(_swap_attr(obj, attr, value))
            yield


def copy_into(target: torch.Tensor, value, what: str = "state") -> None:
    """target <- value (a number, or a tensor of the same shape; one-element values fit
    any one-element target), in place and outside autograd. Loading state goes through
    here: a compiled step is bound to the tensor objects, so their identity must
    survive a load."""
    value = torch.as_tensor(value, dtype=target.dtype)
    if value.shape != target.shape and not (value.numel() == 1 == target.numel()):
        raise ValueError(f"Cannot load {what}: the checkpoint holds shape {list(value.shape)} but the current tensor "
                         f"has shape {list(target.shape)}. Was the checkpoint written for another model?")
    with torch.no_grad():
        target.copy_(value.reshape(target.shape))


@contextlib.contextmanager
def _swap_item(d: dict, key, value):
    old = d[key]
    d[key] = value
    try:
        yield
    finally:
        d[key] = old


@contextlib.contextmanager
def _swap_attr(obj, name: str, value):
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


@contextlib.contextmanager
def _bind_optimizer(opt, sub: dict[int, torch.Tensor]):
    saved_params = [g["params"] for g in opt.param_groups]
    saved_tensors = [{k: g[k] for k in opt.TENSOR_HYPERPARAMS if isinstance(g.get(k), torch.Tensor)}
                     for g in opt.param_groups]
    saved_state = opt.state
    try:
        for g in opt.param_groups:
            g["params"] = [sub[id(p)] for p in g["params"]]
            for k in opt.TENSOR_HYPERPARAMS:
                if isinstance(g.get(k), torch.Tensor):
                    g[k] = sub[id(g[k])]
        new_state = type(saved_state)(dict) if hasattr(saved_state, "default_factory") else {}
        for p, st in saved_state.items():
            new_state[sub[id(p)]] = {k: sub[id(v)] if isinstance(v, torch.Tensor) else v for k, v in st.items()}
        opt.state = new_state
        yield
    finally:
        opt.state = saved_state
        for g, params, tensors in zip(opt.param_groups, saved_params, saved_tensors):
            g["params"] = params
            g.update(tensors)
