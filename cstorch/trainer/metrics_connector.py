"""Where the Trainer's metrics go: `log_metrics` inside and outside the steps.

Inside a train step the values logged are step values: they are kept with the step's
loss, learning rate (param group 0, before the step's scheduler update) and loss scale,
and sent together by one step closure per step, on log steps only, with `throughput`
(samples/s between two log steps). Inside a validation step they go through a step
closure at the current global step, and a 0-d "loss" is collected for the run's mean
`eval/loss`. Outside the steps they are sent at once. `name_scope` prefixes names.
Scalars become floats; `Trainer.last_metrics` keeps the latest float of each name.
"""
from __future__ import annotations

import contextlib
import time
from typing import Optional

import cstorch

from .loggers import as_scalar


class MetricsConnector:
    """The Trainer's metric logging (module docstring)."""

    def __init__(self, trainer):
        self.trainer = trainer
        self._scopes: list[str] = []
        self._train_step: dict = {}  # what the running train step logged so far
        self._rate_mark: Optional[tuple[int, float]] = None
        self._eval_losses: list[float] = []
        self._record_closure = cstorch.step_closure(self._record)
        self._record_eval_loss_closure = cstorch.step_closure(self._record_eval_loss)

    # -- logging ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def name_scope(self, name: str):
        self._scopes.append(name.rstrip("/"))
        try:
            yield
        finally:
            self._scopes.pop()

    def log(self, metrics: dict) -> None:
        """`Trainer.log_metrics` (module docstring)."""
        t = self.trainer
        prefix = "".join(s + "/" for s in self._scopes)
        metrics = {prefix + k: v for k, v in metrics.items()}
        if t.step_kind == "train":
            self._train_step.update(metrics)
        elif t.step_kind is not None:
            self._record_closure(t.step_kind, metrics)
        else:
            self.send(metrics, step=t.global_step)

    def send(self, metrics: dict, step: Optional[int] = None, dest: Optional[list] = None) -> None:
        """`Trainer.log_metrics_dict`: `metrics` at `step` to the Logging callback and the
        loggers (only those in `dest`, when given)."""
        t = self.trainer
        step = t.global_step if step is None else step
        values = {k: as_scalar(v) for k, v in metrics.items()}
        t.last_metrics.update({k: v for k, v in values.items() if isinstance(v, float)})
        for target in [t.logging, *t.loggers]:
            if dest is None or target in dest or target is t.logging:
                target.log_metrics(values, step)

    # -- the train step ----------------------------------------------------------------------
    def clear_train_step(self) -> None:
        """Forget what a train step logged (when one starts, and when it ends)."""
        self._train_step = {}

    def end_train_step(self, **step_values) -> None:
        """The step's own values (loss, lr, loss scale) join what it logged; one record per
        step goes to a step closure."""
        self.log(step_values)
        self._record_closure("train", dict(self._train_step))

    def restart_rate(self) -> None:
        """A new stretch of steps: the next throughput is measured from its first log step."""
        self._rate_mark = None

    def _record(self, kind: str, metrics: dict) -> None:
        t = self.trainer
        if kind != "train":
            self.send(metrics, step=t.global_step)
            return
        step = t._closure_global_step()
        plan = t.fit_plan
        if plan is not None and not t.logging.is_log_step(step, plan.start, plan.end):
            return
        values = {k: float(v) for k, v in metrics.items()}
        if "lr" not in values and t.optimizer is not None:
            values["lr"] = float(t.optimizer.param_groups[0]["lr"])
        now = time.perf_counter()
        size = t.progress.batch_size
        if self._rate_mark is not None and size and now > self._rate_mark[1]:
            values["throughput"] = (step - self._rate_mark[0]) * size / (now - self._rate_mark[1])
        self._rate_mark = (step, now)
        self.send(values, step=step)

    # -- validation ----------------------------------------------------------------------------
    def eval_loss(self, loss) -> None:
        """A validation step's 0-d loss, collected for the run's mean."""
        self._record_eval_loss_closure(loss)

    def _record_eval_loss(self, loss) -> None:
        self._eval_losses.append(float(loss))

    def start_eval(self) -> None:
        self._eval_losses = []

    def end_eval(self) -> None:
        if self._eval_losses:
            self.send({"eval/loss": sum(self._eval_losses) / len(self._eval_losses)},
                      step=self.trainer.global_step)
