"""`cstorch.amp`: loss scaling (`GradScaler`, `optimizer_step`) and mixed precision
(`set_half_dtype`, `autocast`)."""
from ..optim import if_finite as skip  # noqa: F401  (the non-finite skip: records, the wrapper)
from .casts import (disable_casts, float_function, half_function, init, promote_function, register_float_function,
                    register_half_function, register_promote_function)
from .conditional_update import isfinite, setup_optimizer, update_if_finite
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
    "autocast", "isfinite", "update_if_finite", "setup_optimizer", "disable_casts", "half_function", "float_function",
    "promote_function", "register_half_function", "register_float_function", "register_promote_function", "init",
]
