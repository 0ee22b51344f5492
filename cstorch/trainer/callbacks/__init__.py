"""Trainer callbacks: the `Callback` base with every hook, the core option callbacks
(loop, checkpoint, precision, logging) and a few ready-made ones. The loggers are
re-exported here so a YAML `callbacks:` or `loggers:` entry finds them by class name.

Differences from the real system:
    The Model Zoo's other callbacks (profilers, `ComputeNorm`, `Lora`, ...) are not
    included.
"""
from .base import Callback, CoreCallback, ValidationCallback, register_global_callback
from .checkpoint import Checkpoint, KeepNCheckpoints
from .logs import Logging, ModelEvalMetrics
from .loop import TrainingLoop, ValidationLoop
from .precision import MixedPrecision
from ..loggers import CSVLogger, Logger, ProgressLogger, TensorBoardLogger

__all__ = [
    "Callback", "CoreCallback", "ValidationCallback", "register_global_callback", "Checkpoint", "KeepNCheckpoints",
    "Logging", "ModelEvalMetrics", "TrainingLoop", "ValidationLoop", "MixedPrecision", "Logger",
    "TensorBoardLogger", "CSVLogger", "ProgressLogger",
]
