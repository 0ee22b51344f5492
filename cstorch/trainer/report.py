"""What a run says on the console (the "cstorch.trainer" logger, INFO) before it starts
and when it ends, so a reader of the terminal knows where everything went.

Before a `fit`, `validate` or `validate_all` (after a checkpoint was loaded, before any
progress bar): the run, its global steps and device, the model_dir, and where each
output goes: the checkpoints (`Checkpoint.describe`) and each logger's files
(`Logger.destination`: the CSV file of metrics, the TensorBoard event folder).

After a `fit` (below the finished progress bar): the steps run and the wall time, the
last logged loss, the last validation's metrics when this fit validated, and the last
checkpoint written by this fit. After a validation run: its batches, wall time and the
metrics it logged.
"""
from __future__ import annotations

import logging
import time

from .callbacks.logs import format_metric

log = logging.getLogger("cstorch.trainer")


def _outputs(trainer) -> list[str]:
    lines = [trainer.checkpoint.describe()]
    for logger in trainer.loggers:
        where = logger.destination()
        if where:
            lines.append(where)
    return lines


def announce(trainer, what: str) -> None:
    """The lines a run starts with (module docstring); `what` says which run it is."""
    log.info("%s on %s, model_dir %s", what, trainer.backend.backend_type.name, trainer.model_dir)
    for line in _outputs(trainer):
        log.info("  %s", line)


def _metrics_text(metrics: dict) -> str:
    return ", ".join(f"{k}={format_metric(k, v)}" for k, v in metrics.items())


class FitReport:
    """Times one `fit` and writes its summary (module docstring)."""

    def __init__(self, trainer, plan):
        self.trainer = trainer
        self.plan = plan
        self.started = time.perf_counter()
        self.saved_before = len(trainer._checkpoints.saved)

    def summary(self) -> None:
        t, plan = self.trainer, self.plan
        seconds = time.perf_counter() - self.started
        steps = t.global_step - plan.start
        done = f"fit done: {steps} step{'s' if steps != 1 else ''} (global step {plan.start} -> {t.global_step}) " \
               f"in {seconds:.1f} s"
        if steps and "loss" in t.last_metrics:
            done += f", final loss {_metrics_text({'loss': t.last_metrics['loss']}).split('=', 1)[1]}"
        log.info("%s", done)
        evals = {k: v for k, v in t.last_metrics.items() if k.startswith("eval/")}
        if plan.validate_at and evals:
            log.info("  last validation: %s", _metrics_text(evals))
        saved = t._checkpoints.saved[self.saved_before:]
        log.info("  last checkpoint: %s", saved[-1] if saved else "none written by this fit")
        for logger in t.loggers:
            where = logger.destination()
            if where:
                log.info("  %s", where)


class ValidationReport:
    """Times one validation run and writes its summary (module docstring)."""

    def __init__(self, trainer, what: str):
        self.trainer = trainer
        self.what = what
        self.started = time.perf_counter()
        self.before = dict(trainer.last_metrics)

    def summary(self, batches: int) -> None:
        t = self.trainer
        seconds = time.perf_counter() - self.started
        new = {k: v for k, v in t.last_metrics.items() if k.startswith("eval/") and self.before.get(k) is not v}
        text = f"{self.what} done: {batches} batch{'es' if batches != 1 else ''} in {seconds:.1f} s"
        log.info("%s%s", text, f": {_metrics_text(new)}" if new else "")
