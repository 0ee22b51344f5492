"""Control flow: torch's higher-order ops whose operands include graphs.

`torch.cond(pred, true_fn, false_fn, operands)` becomes `jax.lax.cond`: each branch, a
captured fx graph, is lowered as a jax function of the operands (`to_jax_function`), so
only the branch `pred` selects runs. A random op inside a branch draws from the key the
cond node is given (`interpreter`: the node's place among the graph's random nodes).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from .interpreter import subgraph_function, to_jax_function
from .registry import register


@register(torch.ops.higher_order.cond)
def cond(pred, true_fn, false_fn, operands, key=None):
    """`true_fn(*operands)` where `pred` is true, else `false_fn(*operands)` (lists of
    tensors of the same shapes and dtypes)."""
    key = jnp.zeros((2,), jnp.uint32) if key is None else key
    on_true, on_false = to_jax_function(true_fn), to_jax_function(false_fn)
    operands = tuple(operands)
    if isinstance(pred, bool):  # a Python bool: the choice is known when the step is traced
        return (on_true if pred else on_false)(key, *operands)
    return jax.lax.cond(jnp.asarray(pred).reshape(()).astype(bool), lambda ops: on_true(key, *ops),
                        lambda ops: on_false(key, *ops), operands)


@register(torch.ops.higher_order.invoke_subgraph)
def invoke_subgraph(subgraph, identifier, *operands, key=None, first_draw=0):
    """`subgraph(*operands)`, a graph the step calls once per repeated layer
    (`cstorch_jax.repeated_blocks`): lowered once, as one jitted jax function, so jax traces
    it once however many layers call it. Its random ops draw as they would inlined at the
    call (`interpreter.INLINE_DRAWS`): from `key`, at indices from `first_draw` on."""
    key = jnp.zeros((2,), jnp.uint32) if key is None else key
    return subgraph_function(subgraph)(key, jnp.uint32(first_draw), *operands)
