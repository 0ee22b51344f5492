"""The benchmark models written by hand in jax.numpy (the hand-written JAX step of the suite).

`p` maps the torch parameter names (`model.named_parameters()`) to arrays, so the weights
are copied one to one from the torch initialisation and the layouts are torch's (Linear
weights `(out, in)`, convolutions NCHW/OIHW). The MLP and the helpers are those of
`benchmarks.step_overhead`; the CNN is new, and the GPT here keeps the residual stream as
a 2-D `(B*T, d)` array so every Linear is a 2-D matmul (on XLA:CPU the backward pass of the
idiomatic 3-D `x @ W` emits large transposing fusions; the 2-D form measured ~1.5x faster),
which makes it the best hand-written port we know: the ceiling for a torch->JAX translation.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

from .step_overhead import _cross_entropy, _layer_norm, _linear, mlp_loss

__all__ = ["mlp_loss", "cnn_loss", "gpt_loss_2d"]


def cnn_loss(p, x, y):
    """conv3x3 -> ReLU -> conv3x3 -> ReLU -> max-pool 2 -> linear, no padding, NCHW."""
    dn = ("NCHW", "OIHW", "NCHW")
    h = lax.conv_general_dilated(x, p["conv1.weight"], (1, 1), "VALID", dimension_numbers=dn)
    h = jax.nn.relu(h + p["conv1.bias"][None, :, None, None])
    h = lax.conv_general_dilated(h, p["conv2.weight"], (1, 1), "VALID", dimension_numbers=dn)
    h = jax.nn.relu(h + p["conv2.bias"][None, :, None, None])
    h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
    return _cross_entropy(_linear(p, "fc", h.reshape(h.shape[0], -1)), y)


def gpt_loss_2d(p, idx, targets, *, n_layers, n_heads):
    """`benchmarks.models.GPT` (pre-LN, causal softmax attention, exact GELU, untied head),
    with the residual stream flattened to `(B*T, d)`."""
    B, T = idx.shape
    D = p["wte.weight"].shape[1]
    Dh = D // n_heads
    x = (p["wte.weight"][idx] + p["wpe.weight"][:T]).reshape(B * T, D)
    causal = jnp.tril(jnp.ones((T, T), dtype=bool))
    for i in range(n_layers):
        blk = f"blocks.{i}"
        qkv = _linear(p, f"{blk}.attn.qkv", _layer_norm(p, f"{blk}.ln1", x))
        q, k, v = (t.reshape(B, T, n_heads, Dh).transpose(0, 2, 1, 3) for t in jnp.split(qkv, 3, axis=-1))
        att = (q @ k.swapaxes(-1, -2)) / math.sqrt(Dh)
        att = jax.nn.softmax(jnp.where(causal, att, -jnp.inf), axis=-1)
        y = (att @ v).transpose(0, 2, 1, 3).reshape(B * T, D)
        x = x + _linear(p, f"{blk}.attn.proj", y)
        h = jax.nn.gelu(_linear(p, f"{blk}.fc1", _layer_norm(p, f"{blk}.ln2", x)), approximate=False)
        x = x + _linear(p, f"{blk}.fc2", h)
    logits = _linear(p, "head", _layer_norm(p, "ln_f", x))
    return _cross_entropy(logits, targets.reshape(-1))
