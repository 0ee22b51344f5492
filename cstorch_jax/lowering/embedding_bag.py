"""Embedding bags and max-norm renormalisation: _embedding_bag (sum, mean, max, per-sample
weights, padding_idx, offsets) with its backwards, and embedding_renorm."""
from __future__ import annotations

import jax.numpy as jnp
import torch

from ..errors import UnsupportedOpError
from .indexing import _count_marks_upto
from .registry import register

aten = torch.ops.aten



@register(aten.embedding_renorm.default)
def embedding_renorm(weight, indices, max_norm, norm_type):
    """`weight` whose rows named in `indices` with a `norm_type`-norm above `max_norm`
    are scaled to norm max_norm (by max_norm / (norm + 1e-7), as torch)."""
    dt = weight.dtype
    a = jnp.abs(weight.astype(jnp.float32))
    p = float(norm_type)
    if p == float("inf"):
        norm = jnp.max(a, axis=1)
    elif p == 0:
        norm = jnp.sum((a != 0).astype(jnp.float32), axis=1)
    elif p == 1:
        norm = jnp.sum(a, axis=1)
    elif p == 2:
        norm = jnp.sqrt(jnp.sum(a * a, axis=1))
    else:
        norm = jnp.sum(a ** p, axis=1) ** (1.0 / p)
    named = jnp.zeros((weight.shape[0],), bool)
    if indices.size:
        named = named.at[indices.reshape(-1)].set(True)
    scale = jnp.float32(max_norm) / (norm + jnp.float32(1e-7))
    renorm = named & (norm > max_norm)
    return jnp.where(renorm[:, None], (weight.astype(jnp.float32) * scale[:, None]).astype(dt), weight)


_EMBEDDING_BAG_SUM, _EMBEDDING_BAG_MEAN, _EMBEDDING_BAG_MAX = 0, 1, 2


def _bag_of(indices, offsets, num_bags):
    """Bag of every index position: the last bag whose offset is <= the position. With
    include_last_offset (more offsets than bags) the extra offset closes the last bag,
    and positions at or past it get the out-of-range bag `num_bags` (no bag)."""
    n = indices.shape[0]
    pos = jnp.arange(n, dtype=jnp.int32)
    offsets = offsets.astype(jnp.int32)
    bag = _count_marks_upto(offsets[:num_bags], n) - 1
    if offsets.shape[0] > num_bags:
        bag = jnp.where(pos >= offsets[num_bags], num_bags, bag)
    return jnp.where(bag < 0, num_bags, bag)  # (torch requires offsets[0] == 0)


def _bag_sizes(indices, offsets, num_bags, padding_idx):
    """(non-padding indices per bag, bag of every index position)."""
    bag = _bag_of(indices, offsets, num_bags)
    keep = (indices != padding_idx).astype(jnp.int32)
    return jnp.zeros((num_bags,), jnp.int32).at[bag].add(keep, mode="drop"), bag


def _embedding_bag_core(weight, indices, offsets, mode, per_sample_weights, include_last_offset, padding_idx):
    if weight.ndim != 2 or indices.ndim != 1 or offsets.ndim != 1:
        raise UnsupportedOpError("_embedding_bag expects a 2-D weight and 1-D indices and offsets")
    num_bags = offsets.shape[0] - (1 if include_last_offset else 0)
    dim = weight.shape[1]
    dt = weight.dtype
    sizes, bag = _bag_sizes(indices, offsets, num_bags, padding_idx)
    keep = (indices != padding_idx) & (bag < num_bags)
    rows = weight[jnp.clip(indices, 0, weight.shape[0] - 1)]
    max_indices = jnp.zeros((num_bags,), jnp.int32)
    if mode in (_EMBEDDING_BAG_SUM, _EMBEDDING_BAG_MEAN):
        acc = jnp.promote_types(dt, jnp.float32)  # torch sums 16-bit rows in float32
        terms = rows.astype(acc)
        if per_sample_weights is not None:
            terms = terms * per_sample_weights.astype(acc)[:, None]
        terms = jnp.where(keep[:, None], terms, jnp.zeros((), acc))
        out = jnp.zeros((num_bags, dim), acc).at[bag].add(terms, mode="drop").astype(dt)
        if mode == _EMBEDDING_BAG_MEAN:
            out = out / jnp.maximum(sizes, 1).astype(dt)[:, None]
    elif mode == _EMBEDDING_BAG_MAX:
        # torch starts from the bag's first row and takes each later row that is strictly
        # larger: the first maximum wins; NaN wins only as the first row (then it stays)
        n = indices.shape[0]
        pos = jnp.arange(n, dtype=jnp.int32)
        bagc = jnp.clip(bag, 0, max(num_bags - 1, 0))
        first = jnp.full((num_bags,), n, jnp.int32).at[bag].min(jnp.where(keep, pos, n), mode="drop")
        first_nan = (keep & (pos == first[bagc]))[:, None] & jnp.isnan(rows)
        bag_starts_nan = jnp.zeros((num_bags, dim), bool).at[bag].max(first_nan, mode="drop")
        cand = jnp.where(keep[:, None] & ~jnp.isnan(rows), rows, jnp.array(-jnp.inf, dt))
        best = jnp.full((num_bags, dim), -jnp.inf, dt).at[bag].max(cand, mode="drop")
        hit = jnp.where(bag_starts_nan[bagc], first_nan, keep[:, None] & (rows == best[bagc]))
        winner = jnp.full((num_bags, dim), n, jnp.int32).at[bag].min(jnp.where(hit, pos[:, None], n), mode="drop")
        empty = (sizes == 0)[:, None]
        if n:
            src = jnp.minimum(winner, n - 1)
            out = jnp.where(empty, jnp.zeros((), dt), jnp.take_along_axis(rows, src, axis=0))
            max_indices = jnp.where(empty, 0, indices.astype(jnp.int32)[src])
        else:
            out = jnp.zeros((num_bags, dim), dt)
            max_indices = jnp.zeros((num_bags, dim), jnp.int32)
    else:
        raise UnsupportedOpError(f"_embedding_bag: mode={mode} is not 0 (sum), 1 (mean) or 2 (max)")
    return out, bag, sizes, max_indices


def _offset2bag_is_empty(weight, mode, padding_idx):
    """torch's CPU fast path for mode='sum' (float32/float16 weight, no padding index)
    returns an empty offset2bag."""
    return mode == _EMBEDDING_BAG_SUM and weight.dtype in (jnp.float32, jnp.float16) and padding_idx < 0


@register(aten._embedding_bag.default)
def embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                  per_sample_weights=None, include_last_offset=False, padding_idx=-1):
    """(output, offset2bag, bag_size, max_indices): output[b] is the sum, mean or max of
    the rows `weight[indices[offsets[b]:offsets[b+1]]]` (the last bag runs to the end
    of `indices`, or with include_last_offset to the last offset), skipping
    `padding_idx`; sum multiplies each row by its per-sample weight. Empty bags give 0.
    bag_size counts each bag's non-padding indices; max_indices holds the weight row of
    each max (mode 2)."""
    out, bag, sizes, max_indices = _embedding_bag_core(
        weight, indices, offsets, mode, per_sample_weights, include_last_offset, padding_idx)
    offset2bag = jnp.zeros((0,), jnp.int32) if _offset2bag_is_empty(weight, mode, padding_idx) else bag
    return out, offset2bag, sizes, max_indices


@register(aten._embedding_bag_forward_only.default)
def embedding_bag_forward_only(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                               per_sample_weights=None, include_last_offset=False, padding_idx=-1):
    """`_embedding_bag` without autograd; its bag_size has one entry per offset (the
    extra include_last_offset one is 0)."""
    out, offset2bag, sizes, max_indices = embedding_bag(
        weight, indices, offsets, scale_grad_by_freq, mode, sparse, per_sample_weights, include_last_offset,
        padding_idx)
    sizes = jnp.zeros((offsets.shape[0],), jnp.int32).at[: sizes.shape[0]].set(sizes)
    return out, offset2bag, sizes, max_indices


def _bags_for_backward(indices, offsets, offset2bag):
    """The bag of every index: `offset2bag` when the forward computed it, else from
    `offsets` (as torch's backward)."""
    if offset2bag.shape[0] == indices.shape[0] and indices.shape[0]:
        return offset2bag.astype(jnp.int32)
    return _bag_of(indices, offsets, offsets.shape[0])


@register(aten._embedding_bag_backward.default)
def embedding_bag_backward(grad, indices, offsets, offset2bag, bag_size, maximum_indices, num_weights,
                           scale_grad_by_freq, mode, sparse, per_sample_weights, padding_idx=-1):
    """Gradient of `_embedding_bag` for the weight, a dense (num_weights, dim) array."""
    if sparse:
        raise UnsupportedOpError(
            "embedding_bag with sparse=True needs a sparse gradient, which the XLA engine has no layout for; "
            "use sparse=False")
    bag = _bags_for_backward(indices, offsets, offset2bag)
    return _embedding_bag_weight_grad(grad, indices, bag, bag_size, maximum_indices, num_weights,
                                      scale_grad_by_freq, mode, per_sample_weights, padding_idx)


@register(aten._embedding_bag_dense_backward.default)
def embedding_bag_dense_backward(grad, indices, offset2bag, bag_size, maximum_indices, num_weights,
                                 scale_grad_by_freq, mode, per_sample_weights, padding_idx=-1):
    return _embedding_bag_weight_grad(grad, indices, offset2bag.astype(jnp.int32), bag_size, maximum_indices,
                                      num_weights, scale_grad_by_freq, mode, per_sample_weights, padding_idx)


def _embedding_bag_weight_grad(grad, indices, bag, bag_size, maximum_indices, num_weights, scale_grad_by_freq,
                               mode, per_sample_weights, padding_idx):
    """sum/mean: each non-padding index adds its bag's gradient to its row (times its
    per-sample weight; divided by the bag size for mean, and by the index's count in
    `indices` with scale_grad_by_freq); max: each non-empty bag's gradient goes to the
    rows that held its maxima."""
    dt = grad.dtype
    num_bags, dim = grad.shape
    out = jnp.zeros((num_weights, dim), dt)
    if mode == _EMBEDDING_BAG_MAX:
        nonempty = (bag_size[:num_bags] != 0)[:, None]
        cols = jnp.broadcast_to(jnp.arange(dim), maximum_indices.shape)
        return out.at[maximum_indices, cols].add(jnp.where(nonempty, grad, jnp.zeros((), dt)))
    if indices.shape[0] == 0 or num_bags == 0:
        return out
    bagc = jnp.clip(bag, 0, num_bags - 1)
    scale = jnp.ones(indices.shape, dt)
    if per_sample_weights is not None:
        scale = scale * per_sample_weights.astype(dt)
    if scale_grad_by_freq:
        counts = jnp.zeros((num_weights,), jnp.int32).at[indices].add(1)
        scale = scale / counts[indices].astype(dt)
    if mode == _EMBEDDING_BAG_MEAN:
        size = bag_size[bagc]
        scale = scale / jnp.where(size != 0, size, 1).astype(dt)
    counted = (indices != padding_idx) & (bag >= 0) & (bag < num_bags)
    scale = jnp.where(counted, scale, jnp.zeros((), dt))
    return out.at[indices].add(grad[bagc] * scale[:, None])


@register(aten._embedding_bag_per_sample_weights_backward.default)
def embedding_bag_per_sample_weights_backward(grad, weight, indices, offsets, offset2bag, mode, padding_idx=-1):
    """Gradient of mode='sum' embedding_bag for the per-sample weights: the dot product
    of each index's weight row with its bag's gradient (0 for the padding index)."""
    if mode != _EMBEDDING_BAG_SUM:
        raise UnsupportedOpError("embedding_bag: per_sample_weights are only supported with mode='sum'")
    if indices.shape[0] == 0 or grad.shape[0] == 0:
        return jnp.zeros(indices.shape, grad.dtype)
    bag = _bags_for_backward(indices, offsets, offset2bag)
    bagc = jnp.clip(bag, 0, grad.shape[0] - 1)
    dots = jnp.sum(grad[bagc] * weight[indices].astype(grad.dtype), axis=1)
    return jnp.where((indices != padding_idx) & (bag >= 0) & (bag < grad.shape[0]), dots, jnp.zeros((), grad.dtype))
