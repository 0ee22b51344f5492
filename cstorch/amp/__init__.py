"""`cstorch.amp`: loss scaling (`GradScaler`, `optimizer_step`) and mixed precision
(`set_half_dtype`, `autocast`)."""
from . import skip
from .grad_scaler import GradScaler
from .optimizer_step import optimizer_step
from .precision import (
    autocast,
    enable_mixed_precision,
    get_floating_point_dtype,
    get_floating_point_dtype_str,
    get_half_dtype,
    get_half_dtype_str,
    is_cbfloat16_tensor,
    mixed_precision,
    set_half_dtype,
)

__all__ = [
    "GradScaler", "optimizer_step", "set_half_dtype", "get_half_dtype", "get_half_dtype_str", "mixed_precision",
    "enable_mixed_precision", "get_floating_point_dtype", "get_floating_point_dtype_str", "is_cbfloat16_tensor",
    "autocast",
]
