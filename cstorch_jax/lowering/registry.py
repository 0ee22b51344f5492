"""The ATen -> jax.numpy table: `LOWERINGS`, `RANDOM_OPS` and `register`, as defined in
`cstorch_jax.lowering_table`.

Importing this module (any module of `cstorch_jax.lowering`) loads every family of
lowerings, so the table read from here is complete. The table itself lives outside the
package so that the optimizer update ops (`cstorch_jax.optim`) register their lowerings
at import without loading the families: those load when a step is first compiled.
"""
from ..lowering_table import LOWERINGS, RANDOM_OPS, register

__all__ = ["LOWERINGS", "RANDOM_OPS", "register"]
