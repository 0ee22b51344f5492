"""The process's mixed-precision setting and `autocast`.

`set_half_dtype("bfloat16" | "float16" | torch dtype)` turns mixed precision on: a step
captured on CSX then runs under torch's autocast with that dtype, so matmuls and
convolutions compute in the half dtype while parameters, optimizer state and the
update stay float32 (the casts are ops of the captured graph). The setting is also
exported as CEREBRAS_MIXED_PRECISION / CEREBRAS_FP16_DTYPE for dataloader workers.
"""
from __future__ import annotations

import contextlib
import os
from typing import Union

import torch

from .._backend import current_backend_impl

ENABLED_ENV_VAR = "CEREBRAS_MIXED_PRECISION"
DTYPE_ENV_VAR = "CEREBRAS_FP16_DTYPE"
_HALF = {"float16": torch.float16, "bfloat16": torch.bfloat16}


class _AmpState:
    def __init__(self):
        self.enabled = False
        self.half_dtype_str = "float16"


_state = _AmpState()


def set_half_dtype(value: Union[str, torch.dtype]) -> torch.dtype:
    """Use `value` (float16 or bfloat16) as the half dtype and enable mixed precision;
    returns the torch dtype."""
    if value == "cbfloat16":
        raise NotImplementedError(
            "cbfloat16 is the wafer's own 16-bit format and has no XLA equivalent; use "
            "cstorch.amp.set_half_dtype('bfloat16') (float32's exponent range) or 'float16' with dynamic loss scaling."
        )
    names = {v: k for k, v in _HALF.items()}
    if isinstance(value, torch.dtype) and value in names:
        name = names[value]
    elif isinstance(value, str) and value in _HALF:
        name = value
    else:
        raise ValueError(
            f"Invalid half dtype: {value!r}. Accepted values are \"float16\", \"bfloat16\", {torch.float16} and "
            f"{torch.bfloat16}."
        )
    _state.half_dtype_str = name
    os.environ[DTYPE_ENV_VAR] = name
    enable_mixed_precision(True)
    return _HALF[name]


def get_half_dtype() -> torch.dtype:
    return _HALF[_state.half_dtype_str]


def get_half_dtype_str() -> str:
    return _state.half_dtype_str


def mixed_precision() -> bool:
    return _state.enabled


def enable_mixed_precision(enable: bool = True) -> bool:
    if not isinstance(enable, bool):
        raise ValueError(f"Expected a boolean value, got: {type(enable).__name__}")
    _state.enabled = enable
    os.environ[ENABLED_ENV_VAR] = str(int(enable))
    return enable


def get_floating_point_dtype(default: torch.dtype = torch.float32) -> torch.dtype:
    """The half dtype when mixed precision is on, else `default`."""
    return get_half_dtype() if mixed_precision() else default


def get_floating_point_dtype_str(default: str = "float32") -> str:
    return get_half_dtype_str() if mixed_precision() else default


def is_cbfloat16_tensor(tensor: torch.Tensor) -> bool:
    """Always False: cbfloat16 is not supported here."""
    return False


@contextlib.contextmanager
def autocast(dtype: torch.dtype | None = None):
    """torch.autocast on the CPU/GPU backends (CPU: bfloat16 only); a no-op on CSX,
    where `set_half_dtype` alone decides the compute dtype of the captured step."""
    backend = current_backend_impl()
    if backend.is_csx:
        yield None
        return
    dtype = dtype or get_half_dtype()
    if backend.is_cpu and dtype != torch.bfloat16:
        raise ValueError(
            "Mixed precision on CPU is only supported with bfloat16. Call "
            "cstorch.amp.set_half_dtype(torch.bfloat16) or pass dtype=torch.bfloat16 to cstorch.amp.autocast()."
        )
    with torch.autocast(backend.torch_device.type, dtype=dtype) as ctx:
        yield ctx


def capture_autocast() -> contextlib.AbstractContextManager:
    """The autocast a CSX capture runs the step under: the half dtype when mixed
    precision is on, nothing otherwise."""
    if not mixed_precision():
        return contextlib.nullcontext()
    return torch.autocast("cpu", dtype=get_half_dtype())


def _reset() -> None:
    """Back to float32 (for tests)."""
    _state.enabled = False
    _state.half_dtype_str = "float16"
    os.environ.pop(ENABLED_ENV_VAR, None)
    os.environ.pop(DTYPE_ENV_VAR, None)
