"""A trainer YAML parsed once into typed, validated, immutable specs (pydantic models).

    base.py       Spec (the base: `parse(value, path, base_dir)` from YAML, or field values),
                  At (a YAML value and its key path)
    trainer.py    TrainerSpec: InitSpec, FitSpec, ValidateSpec, ValidateAllSpec
    classes.py    the classes a YAML names: ModelSpec, DataLoaderSpec, CallbackSpec, LoggerSpec,
                  and the Trainer's own callbacks' sections (PrecisionSpec, LoopSpec, ...)
    optim.py      OptimizerSpec, SchedulerSpec, LearningRateSpec
    backend.py    BackendSpec, and the one backend of a process (`check_one_backend`)

Every check that needs no backend and no model happens while a spec is made, with the
error naming the key path and the closest valid key; building (`cstorch.trainer.build`)
reads only the specs.
"""
from .backend import BackendSpec, check_one_backend
from .base import At, Spec
from .classes import (CallbackSpec, CheckpointSpec, ClassSpec, DataLoaderSpec, LoggerSpec, LoggingSpec, LoopSpec,
                      ModelSpec, OptionSpec, PrecisionSpec)
from .optim import LearningRateSpec, OptimizerSpec, SchedulerSpec
from .trainer import DEFAULT_MODEL_DIR, FitSpec, InitSpec, TrainerSpec, ValidateAllSpec, ValidateSpec

__all__ = ["Spec", "At", "TrainerSpec", "InitSpec", "FitSpec", "ValidateSpec", "ValidateAllSpec", "ClassSpec",
           "ModelSpec", "DataLoaderSpec", "CallbackSpec", "LoggerSpec", "OptionSpec", "PrecisionSpec", "LoopSpec",
           "CheckpointSpec", "LoggingSpec", "OptimizerSpec", "SchedulerSpec", "LearningRateSpec", "BackendSpec",
           "check_one_backend", "DEFAULT_MODEL_DIR"]
