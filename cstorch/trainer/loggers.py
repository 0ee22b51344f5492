"""Loggers: where the trainer's logged metrics go.

A `Logger` is a callback with `log_metrics(metrics, step)`, called on every log step
(train metrics: `loss`, `lr`, `loss_scale` with dynamic loss scaling, `throughput` in
samples/s), after every validation (`eval/loss` and the model's metrics) and whenever a
callback calls `trainer.log_metrics(...)`. Scalars arrive as plain floats (`as_scalar`);
other values arrive as they were logged: `TensorBoardLogger` writes a `str` and a
`pandas.DataFrame` (as a Markdown table) as text and a tensor with dimensions as a tensor
summary, and warns about anything else; `CSVLogger` and `ProgressLogger` keep scalars only.
The default loggers are `ProgressLogger`, `TensorBoardLogger` and `CSVLogger`.
"""
from __future__ import annotations

import contextlib
import csv
import os
import warnings
from typing import Optional

from ..utils._console import above_bar
from .callbacks.base import Callback


def as_scalar(value):
    """`float(value)` for a Python number or a 0-d tensor/array; any other value unchanged."""
    if isinstance(value, (int, float)) or (hasattr(value, "dtype") and getattr(value, "ndim", None) == 0):
        return float(value)
    return value


class Logger(Callback):
    """Where logged metrics go: `log_metrics(metrics, step)` on every log step (see the
    module docstring)."""

    def log_metrics(self, metrics: dict, step: int) -> None:
        raise NotImplementedError

    def destination(self) -> Optional[str]:
        """Where this logger writes, in words, for the lines a run starts and ends with
        (None: nothing to name, as for the console bar)."""
        return None

    def flush(self) -> None: ...


class TensorBoardLogger(Logger):
    """Scalars into TensorBoard event files under `summary_dir` (default: the trainer's
    `summary_dir`, `<model_dir>/<timestamp>`), readable with
    `cstorch.utils.tensorboard.SummaryReader` or TensorBoard itself.

    Args:
        summary_dir: the folder of the event files; None: the trainer's `model_dir/<timestamp>`.
        legacy_event_dirs: the real Trainer's per-mode event folders (no effect here; a warning).
    """

    def __init__(self, summary_dir: Optional[str] = None, legacy_event_dirs: bool = False):
        if legacy_event_dirs:
            warnings.warn("TensorBoardLogger(legacy_event_dirs=True) has no effect: events go to summary_dir")
        self.summary_dir = summary_dir
        self.writer = None

    def pre_setup(self, trainer):  # open before any callback's setup may log
        from cstorch.utils.tensorboard import SummaryWriter

        self.summary_dir = os.path.abspath(self.summary_dir or trainer.summary_dir)
        self.writer = SummaryWriter(log_dir=self.summary_dir)

    def destination(self) -> Optional[str]:
        if self.summary_dir is None:
            return None
        return f"TensorBoard events: {self.summary_dir}"

    def log_metrics(self, metrics: dict, step: int) -> None:
        import torch

        for name, value in metrics.items():
            if isinstance(value, float):
                self.writer.add_scalar(name, value, step)
            elif isinstance(value, str):
                self.writer.add_text(name, value, step)
            elif isinstance(value, torch.Tensor):
                self.writer.add_tensor(name, value, step)
            elif type(value).__name__ == "DataFrame" and hasattr(value, "to_markdown"):
                self.writer.add_text(name, value.to_markdown(tablefmt="github"), step)
            else:
                warnings.warn(f"TensorBoardLogger cannot log {name!r}, a {type(value).__name__}: log numbers, "
                              f"strings, tensors or pandas DataFrames")

    def flush(self) -> None:
        if self.writer is not None:
            self.writer.flush()

    def on_fit_end(self, trainer, loop):
        self.flush()

    def on_validate_end(self, trainer, model, loop):
        self.flush()

    def finalize(self):
        if self.writer is not None:
            self.writer.close()
            self.writer = None


class CSVLogger(Logger):
    """One row `step,name,value` per logged scalar (other values are left to the
    TensorBoardLogger), appended to `path` (default
    `<summary_dir>/metrics.csv`), flushed at every log step so a killed run keeps its
    rows.

    Args:
        path: the CSV file; None: `model_dir/<timestamp>/metrics.csv`.
    """

    def __init__(self, path: Optional[str] = None):
        self.path = path
        self._file = None
        self._writer = None

    def pre_setup(self, trainer):  # open before any callback's setup may log
        self.path = os.path.abspath(self.path or os.path.join(trainer.summary_dir, "metrics.csv"))
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        fresh = not os.path.exists(self.path) or os.path.getsize(self.path) == 0
        self._file = open(self.path, "a", newline="")
        self._writer = csv.writer(self._file)
        if fresh:
            self._writer.writerow(["step", "name", "value"])

    def destination(self) -> Optional[str]:
        return None if self.path is None else f"metrics (CSV): {self.path}"

    def log_metrics(self, metrics: dict, step: int) -> None:
        for name, value in metrics.items():
            if isinstance(value, float):
                self._writer.writerow([step, name, repr(value)])
        self._file.flush()

    def finalize(self):
        if self._file is not None:
            self._file.close()
            self._file = None


class ProgressLogger(Logger):
    """A tqdm bar over the fit's global steps showing the last logged loss; tqdm adds the
    rate (steps/s). `enabled="auto"` shows it only when stderr is a terminal. While a
    trainer with a ProgressLogger runs, the executor's own pipeline bar is off. While the
    bar is shown, log records and warnings are written above it, never onto its line
    (`cstorch.utils._console.above_bar`).

    Args:
        enabled: True, False, or "auto": only when stderr is a terminal.
    """

    def __init__(self, enabled="auto"):
        if enabled not in (True, False, "auto"):
            raise ValueError(f"ProgressLogger enabled must be True, False or 'auto', got {enabled!r}")
        self.enabled = enabled
        self._bar = None
        self._console = contextlib.ExitStack()

    def _show(self) -> bool:
        import sys

        return sys.stderr.isatty() if self.enabled == "auto" else bool(self.enabled)

    def on_fit_start(self, trainer, train_dataloader, val_dataloader, loop):
        if self._show():
            from tqdm.auto import tqdm

            plan = trainer.fit_plan
            self._bar = tqdm(total=plan.end, initial=plan.start, unit="step", desc="train", dynamic_ncols=True)
            self._console.enter_context(above_bar(self._bar))

    def on_train_batch_end(self, trainer, model, outputs, batch, batch_idx):
        if self._bar is not None:
            self._bar.update(trainer.global_step - self._bar.n)

    def log_metrics(self, metrics: dict, step: int) -> None:
        if self._bar is not None and "loss" in metrics:
            self._bar.set_postfix(loss=f"{metrics['loss']:.4f}", refresh=False)

    def on_fit_end(self, trainer, loop):
        self.finalize()

    def on_fit_exception(self, trainer, exception):
        self.finalize()

    def finalize(self):
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        self._console.close()
