"""`Logging`: which steps log, the log level, and a console line per logged step;
`ModelEvalMetrics`: the model's `cstorch.metrics` logged after each validation."""
from __future__ import annotations

import logging
import sys
import warnings

from cstorch.metrics import Metric

from ..checks import show
from .base import Callback, CoreCallback

log = logging.getLogger("cstorch.trainer")


#: the unit a metric is printed with on the console (its scalar name stays bare)
UNITS = {"throughput": "samples/s"}


def format_metric(name: str, value) -> str:
    """`value` as the console shows metric `name`: a rate with its unit and one decimal
    (`throughput=24364.2 samples/s`), other floats with 5 significant digits (scientific
    below 1e-3 and from 1e4 on)."""
    unit = UNITS.get(name.rsplit("/", 1)[-1])
    if unit is not None and isinstance(value, float):
        return f"{value:.1f} {unit}"
    if isinstance(value, float) and (abs(value) >= 1e4 or (value != 0 and abs(value) < 1e-3)):
        return f"{value:.4e}"
    return f"{value:.5g}" if isinstance(value, float) else str(value)


class Logging(CoreCallback):
    """A step logs when `(global_step - start) % log_steps == 0`, `start` being the global
    step the fit started at, and on the fit's last step. `log_level` sets the level of the
    "cstorch" loggers; logged metrics are also written to the "cstorch.trainer" logger
    (INFO), which gets a stderr handler when neither it nor the root logger has one.

    Args:
        log_steps: log every this many steps (>= 1).
        log_level: the level of the "cstorch" loggers: "DEBUG", "INFO", "WARNING" or "ERROR".
        wsc_log_level: the wafer-scale cluster's log levels (no effect here; a warning).
        enable_act_frequency: the wafer-scale cluster's activation frequency (no effect here; a warning).
    """

    def __init__(self, log_steps: int = 1, log_level: str = "INFO", wsc_log_level=None,
                 enable_act_frequency: bool = False):
        if not isinstance(log_steps, int) or isinstance(log_steps, bool) or log_steps < 1:
            raise ValueError(f"log_steps must be an integer >= 1, got {show(log_steps)}")
        level = logging.getLevelName(str(log_level).upper())
        if not isinstance(level, int):
            raise ValueError(f"log_level must be a logging level name (DEBUG, INFO, WARNING, ERROR), got "
                             f"{show(log_level)}")
        if wsc_log_level is not None or enable_act_frequency:
            warnings.warn("Logging: wsc_log_level and enable_act_frequency configure the wafer-scale cluster's "
                          "logs and have no effect here")
        self.log_steps = log_steps
        self.log_level = level

    def setup(self, trainer):
        logging.getLogger("cstorch").setLevel(self.log_level)
        if not log.handlers and not logging.getLogger().handlers:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s: %(message)s", "%H:%M:%S"))
            log.addHandler(handler)

    def is_log_step(self, global_step: int, start: int, end: int) -> bool:
        return (global_step - start) % self.log_steps == 0 or global_step == end

    def log_metrics(self, metrics: dict, step: int) -> None:
        shown = ", ".join(f"{k}={format_metric(k, v)}" for k, v in metrics.items() if isinstance(v, float))
        if shown and log.isEnabledFor(logging.INFO):
            log.info("| step %d | %s", step, shown)


class ModelEvalMetrics(Callback):
    """After each validation, log `float(metric)` of every `cstorch.metrics.Metric` in the
    model that was updated, under the metric's name, then reset it for the next validation."""

    def on_validate_end(self, trainer, model, loop):
        values = {}
        for module in model.modules():
            if isinstance(module, Metric) and module.num_updates > 0:
                values[module.name] = float(module)
                module.reset()
        if values:
            trainer.log_metrics_dict(values, step=trainer.global_step)
