"""torch <-> jax dtypes and host/device conversion of tensors.

Integer policy: jax runs with x64 disabled, so torch.int64 is computed as int32.
Inputs are checked on the host: an int64 value outside the int32 range is an error,
never a silent wrap. Outputs whose torch dtype is int64 come back as int64.
float64 and complex128 have no exact 32-bit equivalent and are rejected.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import torch

from .errors import UnsupportedDTypeError

_TORCH_TO_JAX = {
    torch.float32: jnp.float32,
    torch.float16: jnp.float16,
    torch.bfloat16: jnp.bfloat16,
    torch.int64: jnp.int32,
    torch.int32: jnp.int32,
    torch.int16: jnp.int16,
    torch.int8: jnp.int8,
    torch.uint8: jnp.uint8,
    torch.bool: jnp.bool_,
    torch.complex64: jnp.complex64,
}

_NUMPY_OF_TORCH = {
    torch.float32: np.float32,
    torch.float16: np.float16,
    torch.bfloat16: ml_dtypes.bfloat16,
    torch.int64: np.int64,
    torch.int32: np.int32,
    torch.int16: np.int16,
    torch.int8: np.int8,
    torch.uint8: np.uint8,
    torch.bool: np.bool_,
    torch.complex64: np.complex64,
}

_INT32 = np.iinfo(np.int32)


def jax_dtype(dtype: torch.dtype):
    """The jax dtype that computes a torch dtype (int64 -> int32)."""
    try:
        return _TORCH_TO_JAX[dtype]
    except KeyError:
        raise UnsupportedDTypeError(
            f"{dtype} is not supported by the XLA engine (jax runs with 64-bit types "
            f"disabled). Use torch.float32 (or a 16-bit float) for floating-point data."
        ) from None


def is_floating(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point


def host_array(t: torch.Tensor, name: str = "tensor") -> np.ndarray:
    """A fresh (C-contiguous) numpy copy of a torch tensor in the dtype the engine
    computes it in; an int64 value outside the int32 range is an UnsupportedDTypeError."""
    if t.requires_grad:
        t = t.detach()
    if not t.is_cpu:
        t = t.cpu()
    dtype = t.dtype
    jax_dtype(dtype)  # refuses a dtype the engine lacks
    if dtype == torch.bfloat16:
        return t.contiguous().view(torch.int16).numpy().view(ml_dtypes.bfloat16).copy()
    if dtype == torch.int64:
        arr = t.numpy()
        if arr.size and (arr.min() < _INT32.min or arr.max() > _INT32.max):
            raise UnsupportedDTypeError(
                f"{name} holds int64 values outside the int32 range "
                f"[{arr.min()}, {arr.max()}]; the XLA engine computes int64 as int32. "
                f"Keep integer data (labels, indices) below 2**31."
            )
        return arr.astype(np.int32)
    return t.numpy().copy()  # every other dtype the engine computes as numpy holds it


def to_jax(t: torch.Tensor, name: str = "tensor") -> jax.Array:
    """Copy a host torch tensor into a fresh device array (never aliases torch memory)."""
    return jax.device_put(host_array(t, name))


def host_dtype(dtype: torch.dtype) -> np.dtype:
    """The numpy dtype of a torch dtype on the host (int64 stays int64)."""
    return np.dtype(_NUMPY_OF_TORCH[dtype])


def to_numpy(a, dtype: torch.dtype) -> np.ndarray:
    """Materialise a device array as numpy with the numpy twin of a torch dtype."""
    return np.asarray(a).astype(_NUMPY_OF_TORCH[dtype], copy=False)


def to_torch(a, dtype: torch.dtype) -> torch.Tensor:
    """Materialise a device array as a host torch tensor of the given torch dtype."""
    arr = np.asarray(a)
    if dtype == torch.bfloat16:
        return torch.from_numpy(np.array(arr.astype(ml_dtypes.bfloat16).view(np.int16))).view(torch.bfloat16)
    return torch.from_numpy(np.array(arr.astype(_NUMPY_OF_TORCH[dtype], copy=False), copy=True))
