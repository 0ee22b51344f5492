"""Run state: the objects that carry it and what a traced step lifts from them.

- `registry`: the `Stateful` protocol (models, optimizers, schedulers, grad scalers,
  metrics) and the run-owned `StateRegistry` each object registers with when created;
- `step`: `StepState`, the state tensors one traced step reads and writes, collected
  from the registry kind after kind and bound to the traced tensors while it is captured.
"""
from .registry import KINDS, ModelState, Stateful, StateRegistry, swap_attributes, swap_module_tensors
from .step import StepState, copy_into

__all__ = ["KINDS", "ModelState", "StateRegistry", "Stateful", "StepState", "copy_into", "swap_attributes",
           "swap_module_tensors"]
