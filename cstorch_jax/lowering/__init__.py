"""ATen -> jax.numpy lowering: one module per op family, `registry.LOWERINGS` as the
table of contents, `interpreter.to_jax_function` to run a captured graph."""
from . import (  # noqa: F401  (each module registers its lowerings)
    bessel, channels_last, control_flow, conv, creation, distances, embedding_bag, fft, gemm, indexing, linear_algebra, nn,
    pointwise, polynomials, pooling, products, random, reduction, sampling, shape, sorting, special,
)
from .interpreter import missing_lowerings, to_jax_function, uses_rng
from .registry import LOWERINGS, RANDOM_OPS, register

__all__ = ["LOWERINGS", "RANDOM_OPS", "register", "to_jax_function", "missing_lowerings", "uses_rng"]
