"""The Model Zoo `Trainer` on cstorch (also `cerebras.modelzoo.Trainer`): a whole
experiment — model, optimizer, schedulers, precision, loop, checkpoints, logging — from
Python or from YAML (`cstorch fit params.yaml`), and the older runner API over it."""
from . import callbacks, loggers
from .callbacks import (
    Callback,
    Checkpoint,
    CoreCallback,
    KeepNCheckpoints,
    Logging,
    MixedPrecision,
    ModelEvalMetrics,
    TrainingLoop,
    ValidationCallback,
    ValidationLoop,
    register_global_callback,
)
from .build import configure_trainer_from_config, run_trainer
from .config import ConfigError
from .loggers import CSVLogger, Logger, ProgressLogger, TensorBoardLogger
from .model_dir_lock import ModelDirInUseError, ModelDirLockLostError
from .registry import register_data_processor, register_model
from .legacy.base_model import PyTorchBaseModel
from .legacy.device_runners import PyTorchCSCompiler, PyTorchCSRunner, PyTorchRunner
from .legacy.runner import PyTorchBaseRunner, run
from .trainer import Trainer

__all__ = [
    "Trainer", "callbacks", "loggers", "Callback", "CoreCallback", "ValidationCallback", "register_global_callback",
    "Checkpoint", "KeepNCheckpoints", "Logging", "MixedPrecision", "ModelEvalMetrics", "TrainingLoop",
    "ValidationLoop", "Logger", "TensorBoardLogger", "CSVLogger", "ProgressLogger", "ConfigError", "ModelDirInUseError",
    "ModelDirLockLostError",
    "configure_trainer_from_config", "run_trainer", "register_model", "register_data_processor",
    "PyTorchBaseRunner", "PyTorchBaseModel", "PyTorchRunner", "PyTorchCSCompiler", "PyTorchCSRunner", "run",
]
