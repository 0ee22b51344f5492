"""The process's mixed-precision setting and `autocast`.

`set_half_dtype("bfloat16" | "float16" | "cbfloat16" | torch dtype)` turns mixed precision
on: a step captured on CSX then runs under torch's autocast with that dtype, so matmuls
and convolutions compute in the half dtype while parameters, optimizer state and the
update stay float32 (the casts are ops of the captured graph). The setting is also
exported as CEREBRAS_MIXED_PRECISION / CEREBRAS_FP16_DTYPE for dataloader workers.

cbfloat16 is the wafer's own 16-bit format (1 sign, 6 exponent, 9 mantissa bits). The real
package represents it in torch by a proxy dtype, float16, and only the wafer's compiler
turns the proxy into cbfloat16; off the wafer the model computes in the proxy. cstorch does
the same: `set_half_dtype("cbfloat16")` returns float16 and the step computes in float16,
with one warning per process saying what differs from the wafer (float16's narrower
exponent range: overflow above 65504, so loss scaling matters, and the grad scaler keeps
float16's default maximum scale 2**15 rather than the wafer's 2**31).
"""
from __future__ import annotations

import contextlib
import os
import warnings
from typing import Union

import torch

from .._backend import current_backend_impl

ENABLED_ENV_VAR = "CEREBRAS_MIXED_PRECISION"
DTYPE_ENV_VAR = "CEREBRAS_FP16_DTYPE"
_HALF = {"float16": torch.float16, "bfloat16": torch.bfloat16}
#: the real API's 16-bit formats -> the torch dtype the model computes in (cbfloat16's proxy: float16)
_PROXY = {**_HALF, "cbfloat16": torch.float16}
CBFLOAT16_WARNING = (
    "fp16_type cbfloat16 is the wafer's own 16-bit format (6 exponent bits, 9 mantissa bits); XLA has "
    "no such type, so the step computes in float16, the proxy dtype the real package also uses off the "
    "wafer. Differences from the wafer: float16 overflows above 65504 (cbfloat16 reaches ~4e9) and keeps "
    "10 mantissa bits instead of 9; use dynamic loss scaling (the grad scaler's default maximum scale "
    "is float16's 2**15, not the wafer's 2**31).")


class _AmpState:
    def __init__(self):
        self.enabled = False
        self.half_dtype_str = "float16"


_state = _AmpState()


def set_half_dtype(value: Union[str, torch.dtype]) -> torch.dtype:
    """Use `value` (float16, bfloat16 or cbfloat16) as the half dtype and enable mixed
    precision; returns the torch dtype the model computes in (float16 for cbfloat16, its
    proxy, with a warning: see the module docstring).

    Args:
        value: "float16", "bfloat16" or "cbfloat16", or torch.float16 / torch.bfloat16.

    Differences from the real system:
        CSX computes in float32 until this is called (the real wafer always computes
        mixed). `cbfloat16` computes in float16, its proxy dtype, as the real
        package does off the wafer: float16's range, and a grad scaler maximum of
        2**15.
    """
    names = {v: k for k, v in _HALF.items()}
    if isinstance(value, torch.dtype) and value in names:
        name = names[value]
    elif isinstance(value, str) and value in _PROXY:
        name = value
    else:
        raise ValueError(
            f"Invalid half dtype: {value!r}. Accepted values are \"float16\", \"bfloat16\", \"cbfloat16\", "
            f"{torch.float16} and {torch.bfloat16}."
        )
    if name == "cbfloat16":
        warn_cbfloat16()
    _state.half_dtype_str = name
    os.environ[DTYPE_ENV_VAR] = name
    enable_mixed_precision(True)
    return _PROXY[name]


_warned_cbfloat16 = False


def warn_cbfloat16() -> None:
    """The one warning (per process) that cbfloat16 computes in float16 here."""
    global _warned_cbfloat16
    if not _warned_cbfloat16:
        _warned_cbfloat16 = True
        warnings.warn(CBFLOAT16_WARNING, stacklevel=3)


def get_half_dtype() -> torch.dtype:
    return _PROXY[_state.half_dtype_str]


def get_half_dtype_str() -> str:
    return _state.half_dtype_str


def mixed_precision() -> bool:
    return _state.enabled


def enable_mixed_precision(enable: bool = True) -> bool:
    """Turn mixed precision on or off (for this process and, through an environment
    variable, the processes it starts); returns `enable`.

    Args:
        enable: True: compute in the half dtype (`set_half_dtype`); False: in float32.
    """
    if not isinstance(enable, bool):
        raise ValueError(f"Expected a boolean value, got: {type(enable).__name__}")
    _state.enabled = enable
    os.environ[ENABLED_ENV_VAR] = str(int(enable))
    return enable


def get_floating_point_dtype(default: torch.dtype = torch.float32) -> torch.dtype:
    """The half dtype when mixed precision is on, else `default`.

    Args:
        default: the dtype returned when mixed precision is off.
    """
    return get_half_dtype() if mixed_precision() else default


def get_floating_point_dtype_str(default: str = "float32") -> str:
    """The half dtype's name when mixed precision is on, else `default`.

    Args:
        default: the name returned when mixed precision is off.
    """
    return get_half_dtype_str() if mixed_precision() else default


def is_cbfloat16_tensor(tensor: torch.Tensor) -> bool:
    """Whether `tensor` holds cbfloat16 values: the half dtype is cbfloat16 and the tensor
    has its proxy dtype (float16), as in the real API.

    Args:
        tensor: the tensor.
    """
    return _state.half_dtype_str == "cbfloat16" and tensor.dtype == _PROXY["cbfloat16"]


@contextlib.contextmanager
def autocast(dtype: torch.dtype | None = None):
    """torch.autocast on the CPU/GPU backends (CPU: bfloat16 only); a no-op on CSX,
    where `set_half_dtype` alone decides the compute dtype of the captured step.

    Args:
        dtype: the autocast dtype on CPU/GPU; None: the half dtype (`set_half_dtype`).
    """
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
    """Back to float32, the cbfloat16 warning not yet given (for tests)."""
    global _warned_cbfloat16
    _warned_cbfloat16 = False
    _state.enabled = False
    _state.half_dtype_str = "float16"
    os.environ.pop(ENABLED_ENV_VAR, None)
    os.environ.pop(DTYPE_ENV_VAR, None)
