"""ATen -> jax.numpy lowering: one module per op family, `registry.LOWERINGS` as the
table of contents, `interpreter.to_jax_function` to run a captured graph."""
from . import conv, creation, fft, indexing, linalg, linear_algebra, nn, pointwise, pooling, random, reduction, shape, sorting, special  # noqa: F401  (register)
from .interpreter import missing_lowerings, to_jax_function, uses_rng
from .registry import LOWERINGS, RANDOM_OPS, register

__all__ = ["LOWERINGS", "RANDOM_OPS", "register", "to_jax_function", "missing_lowerings", "uses_rng"]
