"""The benchmark models written by hand in jax.numpy (the hand-written JAX step of the suite).

`p` maps the torch parameter names (`model.named_parameters()`) to arrays, so the weights
are copied one to one from the torch initialisation and the layouts are torch's (Linear
weights `(out, in)`, convolutions NCHW/OIHW). `mlp_loss` and `gpt_loss` (3-D, the
idiomatic port) serve `benchmarks.step_overhead`; the suite's GPT, `gpt_loss_2d`, keeps the residual stream as
a 2-D `(B*T, d)` array so every Linear is a 2-D matmul (on XLA:CPU the backward pass of the
idiomatic 3-D `x @ W` emits large transposing fusions; the 2-D form measured ~1.5x faster),
which makes it the best hand-written port we know: the ceiling for a torch->JAX translation.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

__all__ = ["mlp_loss", "gpt_loss", "cnn_loss", "gpt_loss_2d", "gpt_loss_2d_scan", "stack_blocks"]


def _linear(p, name, x):
    y = x @ p[f"{name}.weight"].T
    bias = p.get(f"{name}.bias")
    return y if bias is None else y + bias


def _cross_entropy(logits, targets):
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, targets[:, None], axis=-1))


def mlp_loss(p, x, y, *, n_layers):
    h = x.reshape(x.shape[0], -1)
    for i in range(n_layers):
        h = _linear(p, f"layers.{i}", h)
        if i < n_layers - 1:
            h = jax.nn.relu(h)
    return _cross_entropy(h, y)


def _layer_norm(p, name, x, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    var = jnp.square(x - mean).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + eps) * p[f"{name}.weight"] + p[f"{name}.bias"]


def gpt_loss(p, idx, targets, *, n_layers, n_heads):
    B, T = idx.shape
    x = p["wte.weight"][idx] + p["wpe.weight"][:T]
    D = x.shape[-1]
    Dh = D // n_heads
    causal = jnp.tril(jnp.ones((T, T), dtype=bool))
    for i in range(n_layers):
        blk = f"blocks.{i}"
        q, k, v = jnp.split(_linear(p, f"{blk}.attn.qkv", _layer_norm(p, f"{blk}.ln1", x)), 3, axis=-1)
        q, k, v = (t.reshape(B, T, n_heads, Dh).transpose(0, 2, 1, 3) for t in (q, k, v))
        att = (q @ k.swapaxes(-1, -2)) / math.sqrt(Dh)
        att = jax.nn.softmax(jnp.where(causal, att, -jnp.inf), axis=-1)
        y = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, D)
        x = x + _linear(p, f"{blk}.attn.proj", y)
        h = jax.nn.gelu(_linear(p, f"{blk}.fc1", _layer_norm(p, f"{blk}.ln2", x)), approximate=False)
        x = x + _linear(p, f"{blk}.fc2", h)
    logits = _linear(p, "head", _layer_norm(p, "ln_f", x))
    return _cross_entropy(logits.reshape(B * T, -1), targets.reshape(-1))


def cnn_loss(p, x, y):
    """conv3x3 -> ReLU -> conv3x3 -> ReLU -> max-pool 2 -> linear, no padding, NCHW."""
    dn = ("NCHW", "OIHW", "NCHW")
    h = lax.conv_general_dilated(x, p["conv1.weight"], (1, 1), "VALID", dimension_numbers=dn)
    h = jax.nn.relu(h + p["conv1.bias"][None, :, None, None])
    h = lax.conv_general_dilated(h, p["conv2.weight"], (1, 1), "VALID", dimension_numbers=dn)
    h = jax.nn.relu(h + p["conv2.bias"][None, :, None, None])
    h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
    return _cross_entropy(_linear(p, "fc", h.reshape(h.shape[0], -1)), y)


def _block_2d(p, blk, x, B, T, n_heads, causal):
    """One pre-LN block of `gpt_loss_2d` on the `(B*T, d)` residual stream."""
    D = x.shape[-1]
    Dh = D // n_heads
    qkv = _linear(p, f"{blk}.attn.qkv", _layer_norm(p, f"{blk}.ln1", x))
    q, k, v = (t.reshape(B, T, n_heads, Dh).transpose(0, 2, 1, 3) for t in jnp.split(qkv, 3, axis=-1))
    att = (q @ k.swapaxes(-1, -2)) / math.sqrt(Dh)
    att = jax.nn.softmax(jnp.where(causal, att, -jnp.inf), axis=-1)
    y = (att @ v).transpose(0, 2, 1, 3).reshape(B * T, D)
    x = x + _linear(p, f"{blk}.attn.proj", y)
    h = jax.nn.gelu(_linear(p, f"{blk}.fc1", _layer_norm(p, f"{blk}.ln2", x)), approximate=False)
    return x + _linear(p, f"{blk}.fc2", h)


def gpt_loss_2d(p, idx, targets, *, n_layers, n_heads):
    """`benchmarks.models.GPT` (pre-LN, causal softmax attention, exact GELU, untied head),
    with the residual stream flattened to `(B*T, d)`."""
    B, T = idx.shape
    D = p["wte.weight"].shape[1]
    x = (p["wte.weight"][idx] + p["wpe.weight"][:T]).reshape(B * T, D)
    causal = jnp.tril(jnp.ones((T, T), dtype=bool))
    for i in range(n_layers):
        x = _block_2d(p, f"blocks.{i}", x, B, T, n_heads, causal)
    logits = _linear(p, "head", _layer_norm(p, "ln_f", x))
    return _cross_entropy(logits, targets.reshape(-1))


def stack_blocks(p, n_layers):
    """`p` with the blocks' parameters stacked over the layers: `blocks.<name>` of shape
    `(n_layers, ...)` in place of `blocks.<i>.<name>` (the layout `gpt_loss_2d_scan` takes)."""
    names = [k[len("blocks.0."):] for k in p if k.startswith("blocks.0.")]
    out = {k: v for k, v in p.items() if not k.startswith("blocks.")}
    out.update({f"blocks.{n}": jnp.stack([p[f"blocks.{i}.{n}"] for i in range(n_layers)]) for n in names})
    return out


def gpt_loss_2d_scan(p, idx, targets, *, n_heads):
    """`gpt_loss_2d` with the blocks as one `lax.scan` over their stacked parameters
    (`stack_blocks`): XLA compiles one block, whatever the depth."""
    B, T = idx.shape
    D = p["wte.weight"].shape[1]
    x = (p["wte.weight"][idx] + p["wpe.weight"][:T]).reshape(B * T, D)
    causal = jnp.tril(jnp.ones((T, T), dtype=bool))
    blocks = {k[len("blocks."):]: v for k, v in p.items() if k.startswith("blocks.")}

    def body(x, layer):
        return _block_2d({f"b.{k}": v for k, v in layer.items()}, "b", x, B, T, n_heads, causal), None

    x, _ = lax.scan(body, x, blocks)
    logits = _linear(p, "head", _layer_norm(p, "ln_f", x))
    return _cross_entropy(logits, targets.reshape(-1))
