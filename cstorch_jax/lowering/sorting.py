"""Sorting and order statistics: sort, topk, kthvalue, median, mode; binary search
(searchsorted, bucketize); histograms (histc, histogram, histogramdd).

torch's order puts every NaN after +inf (NaN is the largest value) and treats -0.0 and
+0.0 as equal. `_order_key` maps each element to an integer with exactly that order, so
every sort here is an integer sort, stable on ties (equal keys keep their index order).

Where torch's CPU kernels leave the index of tied elements to an unstable algorithm
(unstable sort, topk, kthvalue, median on ties), the lowering returns the stable
choice: any of the tied indices is a correct answer, and the values are identical.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import torch

from ..errors import UnsupportedOpError
from .registry import register

aten = torch.ops.aten


# ---- order keys and sorting ---------------------------------------------------------------


def _order_key(x):
    """An integer array ordered as torch orders `x`: -0.0 == +0.0, every NaN is equal
    and above +inf. Floats map through their sign-magnitude bits; ints and bools are
    their own keys."""
    if x.dtype == jnp.bool_:
        return x.astype(jnp.int8)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        return x
    bits = jnp.finfo(x.dtype).bits
    ity = {16: jnp.int16, 32: jnp.int32}[bits]
    canonical = jnp.where(jnp.isnan(x), jnp.array(jnp.nan, x.dtype), jnp.where(x == 0, jnp.zeros((), x.dtype), x))
    b = jax.lax.bitcast_convert_type(canonical, ity)
    magnitude = jnp.array(2 ** (bits - 1) - 1, ity)
    return jnp.where(b < 0, b ^ magnitude, b)  # negative floats: larger magnitude, smaller key


def _argsort_last(x, descending=False):
    """Stable argsort along the last axis in torch's order (NaN largest); descending
    sorts the reversed key ~k = -k - 1 (no overflow), so ties still keep index order."""
    key = _order_key(x)
    if descending:
        key = jnp.invert(key)
    iota = jax.lax.broadcasted_iota(jnp.int32, x.shape, x.ndim - 1)
    _, perm = jax.lax.sort((key, iota), dimension=x.ndim - 1, is_stable=True, num_keys=1)
    return perm


def _sort(x, dim, descending):
    if x.ndim == 0:
        return x, jnp.zeros((), jnp.int32)
    dim = dim % x.ndim
    xt = jnp.moveaxis(x, dim, -1)
    perm = _argsort_last(xt, descending)
    values = jnp.take_along_axis(xt, perm, axis=-1)
    return jnp.moveaxis(values, -1, dim), jnp.moveaxis(perm, -1, dim)


@register(aten.sort.default)
def sort(x, dim=-1, descending=False):
    """Values and indices along `dim`, NaN last (first when descending). Unstable
    sorting may order ties any way; this one is stable."""
    return _sort(x, dim, descending)


@register(aten.sort.stable)
def sort_stable(x, *, stable=None, dim=-1, descending=False):
    """Ties keep their original order, in both directions (as torch's stable sort)."""
    return _sort(x, dim, descending)


@register(aten.topk.default)
def topk(x, k, dim=-1, largest=True, sorted=True):
    """The k largest (smallest) elements along `dim`, NaN counted as the largest, in
    sorted order (also when sorted=False: torch leaves the order unspecified then); ties
    go to the lower index."""
    if x.ndim == 0:
        return x, jnp.zeros((), jnp.int32)
    dim = dim % x.ndim
    xt = jnp.moveaxis(x, dim, -1)
    key = _order_key(xt)
    if not largest:
        key = jnp.invert(key)
    if k == 0:
        idx = jnp.zeros(xt.shape[:-1] + (0,), jnp.int32)
    else:
        _, idx = jax.lax.top_k(key, k)
    values = jnp.take_along_axis(xt, idx, axis=-1)
    return jnp.moveaxis(values, -1, dim), jnp.moveaxis(idx, -1, dim)


def _select_rank(x, dim, keepdim, rank_fn):
    """(value, index) of the element at sorted position `rank_fn(rows)` (one integer per
    row; rows are `x` with `dim` last), with torch's 0-d and keepdim conventions."""
    if x.ndim == 0:
        return x, jnp.zeros((), jnp.int32)
    dim = dim % x.ndim
    xt = jnp.moveaxis(x, dim, -1)
    perm = _argsort_last(xt)
    pos = rank_fn(xt)[..., None]
    idx = jnp.take_along_axis(perm, pos, axis=-1)
    values = jnp.take_along_axis(xt, idx, axis=-1)
    if keepdim:
        return jnp.moveaxis(values, -1, dim), jnp.moveaxis(idx, -1, dim)
    return values[..., 0], idx[..., 0]


@register(aten.kthvalue.default)
def kthvalue(x, k, dim=-1, keepdim=False):
    """The k-th smallest element (1-based) along `dim`, NaN counted as the largest."""
    n = x.shape[dim % x.ndim] if x.ndim else 1
    if not 1 <= k <= n:
        raise UnsupportedOpError(f"kthvalue: k={k} is out of range for a dimension of size {n}")
    return _select_rank(x, dim, keepdim, lambda xt: jnp.full(xt.shape[:-1], k - 1, jnp.int32))


def _median_rank(xt):
    """torch's median: the lower median ((n - 1) // 2-th smallest); a row holding NaN
    has median NaN, reported at its first NaN (the first NaN of the stable order)."""
    n = xt.shape[-1]
    if not jnp.issubdtype(xt.dtype, jnp.floating):
        return jnp.full(xt.shape[:-1], (n - 1) // 2, jnp.int32)
    nans = jnp.sum(jnp.isnan(xt), axis=-1, dtype=jnp.int32)
    return jnp.where(nans > 0, n - nans, (n - 1) // 2).astype(jnp.int32)


def _nanmedian_rank(xt):
    """torch's nanmedian: the lower median of the non-NaN elements; NaN (at the first
    NaN) when every element is NaN."""
    n = xt.shape[-1]
    if not jnp.issubdtype(xt.dtype, jnp.floating):
        return jnp.full(xt.shape[:-1], (n - 1) // 2, jnp.int32)
    valid = n - jnp.sum(jnp.isnan(xt), axis=-1, dtype=jnp.int32)
    return jnp.maximum((valid - 1) // 2, 0).astype(jnp.int32)


def _check_nonempty(x, dim, op):
    if x.ndim and x.shape[dim % x.ndim] == 0:
        raise UnsupportedOpError(f"{op} of an empty dimension: torch raises; reduce over a non-empty dim")


@register(aten.median.dim)
def median_dim(x, dim, keepdim=False):
    _check_nonempty(x, dim, "median")
    return _select_rank(x, dim, keepdim, _median_rank)


@register(aten.nanmedian.dim)
def nanmedian_dim(x, dim, keepdim=False):
    _check_nonempty(x, dim, "nanmedian")
    return _select_rank(x, dim, keepdim, _nanmedian_rank)


@register(aten.median.default)
def median(x):
    """Median of all elements; NaN when the tensor is empty (as torch)."""
    if x.size == 0:
        return jnp.array(jnp.nan, x.dtype)
    return median_dim(x.reshape(-1), 0)[0]


@register(aten.nanmedian.default)
def nanmedian(x):
    if x.size == 0:
        return jnp.array(jnp.nan, x.dtype)
    return nanmedian_dim(x.reshape(-1), 0)[0]


@register(aten.mode.default)
def mode(x, dim=-1, keepdim=False):
    """The most frequent value along `dim` and the index of its last occurrence; among
    equally frequent values the smallest wins. NaNs never compare equal, so each NaN
    counts once (as in torch)."""
    if x.ndim == 0:
        return x, jnp.zeros((), jnp.int32)
    _check_nonempty(x, dim, "mode")
    dim = dim % x.ndim
    xt = jnp.moveaxis(x, dim, -1)
    perm = _argsort_last(xt)
    key = jnp.take_along_axis(_order_key(xt), perm, axis=-1)
    s = jnp.take_along_axis(xt, perm, axis=-1)
    new_run = jnp.concatenate([jnp.ones(key.shape[:-1] + (1,), bool), key[..., 1:] != key[..., :-1]], axis=-1)
    if jnp.issubdtype(xt.dtype, jnp.floating):
        new_run = new_run | jnp.isnan(s)
    iota = jax.lax.broadcasted_iota(jnp.int32, key.shape, key.ndim - 1)
    run_start = jax.lax.cummax(jnp.where(new_run, iota, 0), axis=key.ndim - 1)
    run_len = iota - run_start + 1
    # first position reaching the longest run = end of the first (smallest) longest run,
    # which in a stable order holds the value's last occurrence
    pos = jnp.argmax(run_len, axis=-1, keepdims=True).astype(jnp.int32)
    idx = jnp.take_along_axis(perm, pos, axis=-1)
    values = jnp.take_along_axis(xt, idx, axis=-1)
    if keepdim:
        return jnp.moveaxis(values, -1, dim), jnp.moveaxis(idx, -1, dim)
    return values[..., 0], idx[..., 0]


# ---- binary search ------------------------------------------------------------------------


def _binary_search(boundaries, values, right, sorter=None):
    """torch's bucketization search, step for step: over each row of `boundaries` (the
    last dim; one row for all values when 1-D, else rows matching values' leading
    dims), the first position p with `boundaries[p] >= v` (`> v` when right), visiting
    the midpoints torch's loop visits. So unsorted rows and NaNs give torch's answers:
    a NaN value lands at the end, NaN boundaries count as smaller than every value."""
    n = boundaries.shape[-1]
    values = jnp.asarray(values)
    start = jnp.zeros(values.shape, jnp.int32)
    end = jnp.full(values.shape, n, jnp.int32)
    if n == 0:
        return start
    dtype = jnp.result_type(boundaries, values)
    boundaries, values = boundaries.astype(dtype), values.astype(dtype)
    for _ in range(n.bit_length()):
        active = start < end
        mid = start + ((end - start) >> 1)
        pos = jnp.minimum(mid, n - 1)
        if sorter is not None:
            pos = _gather_rows(sorter, pos).astype(jnp.int32)
        mid_val = _gather_rows(boundaries, pos)
        go_right = ~(mid_val > values) if right else ~(mid_val >= values)
        start = jnp.where(active & go_right, mid + 1, start)
        end = jnp.where(active & ~go_right, mid, end)
    return start


def _gather_rows(table, pos):
    """table[pos] for a 1-D table, else table[..., pos] row by row."""
    if table.ndim == 1:
        return table[pos]
    return jnp.take_along_axis(table, pos, axis=-1)


def _right(right, side, op):
    if side is not None and side not in ("left", "right"):
        raise UnsupportedOpError(f"{op}: side must be 'left' or 'right', got {side!r}")
    return bool(right) or side == "right"


@register(aten.searchsorted.Tensor)
def searchsorted(sorted_sequence, x, *, out_int32=False, right=False, side=None, sorter=None):
    """Insertion positions of `x` in the rows of `sorted_sequence` (left: first position
    with seq[p] >= x; right: first with seq[p] > x), reading seq through `sorter` when
    given."""
    return _binary_search(sorted_sequence, x, _right(right, side, "searchsorted"), sorter)


@register(aten.searchsorted.Scalar)
def searchsorted_scalar(sorted_sequence, x, *, out_int32=False, right=False, side=None, sorter=None):
    value = jnp.full(sorted_sequence.shape[:-1] + (1,), x, jnp.result_type(sorted_sequence.dtype, type(x)))
    out = _binary_search(sorted_sequence, value, _right(right, side, "searchsorted"), sorter)
    return out.reshape(sorted_sequence.shape[:-1]) if sorted_sequence.ndim > 1 else out.reshape(())


@register(aten.bucketize.Tensor)
def bucketize(x, boundaries, *, out_int32=False, right=False):
    """Bucket of each element for 1-D `boundaries`: right=False gives the first i with
    x <= boundaries[i], right=True the first i with x < boundaries[i]."""
    return _binary_search(boundaries, x, right)


@register(aten.bucketize.Scalar)
def bucketize_scalar(x, boundaries, *, out_int32=False, right=False):
    return _binary_search(boundaries, jnp.asarray(x, jnp.result_type(boundaries.dtype, type(x))), right)


# ---- histograms -----------------------------------------------------------------------------


def _rounded(dtype):
    """Float32 arithmetic rounded to `dtype` after every operation: how torch's CPU
    kernels compute with c10::Half / c10::BFloat16 scalars (a no-op for float32)."""
    return lambda v: jnp.asarray(v, jnp.float32).astype(dtype).astype(jnp.float32)


def _linspace_edges(lo, hi, bins, dtype):
    """torch.linspace(lo, hi, bins + 1) as torch's CPU kernel computes it in `dtype`:
    start + step * i for the first half, end - step * (steps - 1 - i) for the rest."""
    r = _rounded(dtype)
    steps = bins + 1
    lo, hi = r(lo), r(hi)
    step = r(r(hi - lo) / r(steps - 1))
    i = jnp.arange(steps)
    first = r(lo + r(step * r(i)))
    second = r(hi - r(step * r(steps - 1 - i)))
    return jnp.where(i < steps // 2, first, second).astype(dtype)


def _bin_positions(col, edges, method):
    """Bin of each element of `col` and whether it is counted, as torch's histogram
    kernel: elements outside [edges[0], edges[-1]] (and NaN) are skipped; the last bin
    includes its right edge. `method` is torch's bin selection: "linear" (histc),
    "linear_search" (linear guess corrected against the edges) or "binary"."""
    nbe = edges.shape[0]
    left, right = edges[0], edges[-1]
    counted = (col >= left) & (col <= right)
    if method == "binary":
        pos = _binary_search(edges, col, True) - 1
    else:
        r = _rounded(col.dtype)
        guess = r(r(r(col - left) * r(nbe - 1)) / r(right - left))
        pos = jnp.where(counted, guess, 0).astype(jnp.int32)
        if method == "linear_search":
            lo = jnp.maximum(pos - 1, 0)
            hi = jnp.minimum(pos + 2, nbe)
            count = jnp.zeros_like(pos)
            for j in range(3):  # upper_bound over edges[lo:hi] (at most 3 edges)
                e = lo + j
                count = count + ((e < hi) & (edges[jnp.minimum(e, nbe - 1)] <= col)).astype(jnp.int32)
            pos = lo + count - 1
    pos = jnp.where(pos == nbe - 1, pos - 1, pos)
    return jnp.clip(pos, 0, nbe - 2), counted


def _histogramdd(x, edges, weight, density, method):
    """Histogram of the rows of `x` (M, D) over the D edge sequences `edges`."""
    dtype = x.dtype
    shape = tuple(int(e.shape[0]) - 1 for e in edges)
    flat = jnp.zeros((x.shape[0],), jnp.int32)
    counted = jnp.ones((x.shape[0],), bool)
    for d, e in enumerate(edges):
        pos, ok = _bin_positions(x[:, d], e.astype(dtype), method)
        flat = flat * shape[d] + pos
        counted = counted & ok
    size = int(np.prod(shape))
    if weight is None:
        hist = jnp.zeros((size,), jnp.int32).at[flat].add(counted.astype(jnp.int32), mode="drop").astype(dtype)
    else:
        w = jnp.where(counted, weight.reshape(-1).astype(dtype), jnp.zeros((), dtype))
        hist = jnp.zeros((size,), dtype).at[flat].add(w, mode="drop")
    hist = hist.reshape(shape)
    if density:
        hist = hist / jnp.sum(hist)
        for d, e in enumerate(edges):
            widths = jnp.diff(e.astype(dtype))
            hist = hist / widths.reshape(tuple(-1 if i == d else 1 for i in range(len(edges))))
    return hist


def _nan_if_no_range(hist, edges):
    """A histogram whose data range was not finite (torch raises) is all NaN."""
    bad = jnp.any(jnp.stack([jnp.isnan(e[0]) | jnp.isnan(e[-1]) for e in edges]))
    return jnp.where(bad, jnp.array(jnp.nan, hist.dtype), hist)


def _require_float(x, op):
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise UnsupportedOpError(f"{op} of a {x.dtype} tensor: torch supports floating-point inputs only")


def _outer_edges(x2d, range_, op):
    """(lo, hi) per dim, as torch's histogram: `range` when given, else the data's min
    and max per column (0 and 1 for empty input); an empty range widens by 0.5 each
    side. Data-dependent non-finite ranges (torch raises) make the edges NaN."""
    d = x2d.shape[1]
    if range_ is not None:
        if len(range_) != 2 * d:
            raise UnsupportedOpError(f"{op}: range needs {2 * d} elements, got {len(range_)}")
        out = []
        for i in range(d):
            lo, hi = float(range_[2 * i]), float(range_[2 * i + 1])
            if not (np.isfinite(lo) and np.isfinite(hi)) or lo > hi:
                raise UnsupportedOpError(f"{op}: range [{lo}, {hi}] must be finite with min <= max (torch raises)")
            if lo == hi:
                lo, hi = lo - 0.5, hi + 0.5
            out.append((jnp.asarray(lo, x2d.dtype), jnp.asarray(hi, x2d.dtype)))
        return out
    if x2d.shape[0] == 0:
        return [(jnp.zeros((), x2d.dtype), jnp.ones((), x2d.dtype))] * d
    lo, hi = jnp.min(x2d, axis=0), jnp.max(x2d, axis=0)
    bad = ~(jnp.isfinite(lo) & jnp.isfinite(hi))
    same = lo == hi
    half = jnp.asarray(0.5, x2d.dtype)
    lo = jnp.where(bad, jnp.nan, jnp.where(same, lo - half, lo))
    hi = jnp.where(bad, jnp.nan, jnp.where(same, hi + half, hi))
    return [(lo[i], hi[i]) for i in range(d)]


@register(aten.histc.default)
def histc(x, bins=100, min=0, max=0):
    """Counts of `x` in `bins` equal bins over [min, max] (the data's range when
    min == max, widened by 1 each side when that is empty); values outside the range
    and NaN are not counted. A data range that is not finite (torch raises) gives NaN."""
    _require_float(x, "histc")
    lo, hi = float(min), float(max)
    flat = x.reshape(-1)
    if lo == hi and flat.size:
        lo_t, hi_t = jnp.min(flat), jnp.max(flat)
        one = jnp.ones((), x.dtype)
        same = lo_t == hi_t
        lo_t, hi_t = jnp.where(same, lo_t - one, lo_t), jnp.where(same, hi_t + one, hi_t)
        bad = ~(jnp.isfinite(lo_t) & jnp.isfinite(hi_t))
    else:
        if lo == hi:
            lo, hi = lo - 1, hi + 1
        if not (np.isfinite(lo) and np.isfinite(hi)) or lo >= hi:
            raise UnsupportedOpError(f"histc: range [{lo}, {hi}] must be finite with min < max (torch raises)")
        lo_t, hi_t, bad = jnp.asarray(lo, x.dtype), jnp.asarray(hi, x.dtype), False
    edges = _linspace_edges(lo_t, hi_t, bins, x.dtype)
    hist = _histogramdd(flat.reshape(-1, 1), [edges], None, False, "linear")
    return jnp.where(bad, jnp.nan, hist)


@register(aten.histogram.bin_ct)
def histogram_bin_ct(x, bins=100, *, range=None, weight=None, density=False):
    """(hist, bin_edges) of all elements of `x` over `bins` equal bins (see
    `_outer_edges` for the range)."""
    _require_float(x, "histogram")
    x2d = x.reshape(-1, 1)
    lo, hi = _outer_edges(x2d, range, "histogram")[0]
    edges = _linspace_edges(lo, hi, bins, x.dtype)
    hist = _histogramdd(x2d, [edges], weight, density, "linear_search")
    return _nan_if_no_range(hist, [edges]), edges


@register(aten.histogram.bins_tensor)
def histogram_bins_tensor(x, bins, *, weight=None, density=False):
    """(hist, bins) of all elements of `x` over the edge sequence `bins`."""
    _require_float(x, "histogram")
    return _histogramdd(x.reshape(-1, 1), [bins], weight, density, "binary"), bins


def _rows(x):
    return x.reshape(-1, x.shape[-1])


@register(aten._histogramdd_bin_edges.default)
def histogramdd_bin_edges(x, bins, *, range=None, weight=None, density=False):
    """The edge sequences of histogramdd with bin counts: linspace over each column's
    range."""
    _require_float(x, "histogramdd")
    outer = _outer_edges(_rows(x), range, "histogramdd")
    return [_linspace_edges(lo, hi, n, x.dtype) for (lo, hi), n in zip(outer, bins)]


@register(aten._histogramdd_from_bin_cts.default)
def histogramdd_from_bin_cts(x, bins, *, range=None, weight=None, density=False):
    edges = histogramdd_bin_edges(x, bins, range=range)
    return _nan_if_no_range(_histogramdd(_rows(x), edges, weight, density, "linear_search"), edges)


@register(aten._histogramdd_from_bin_tensors.default)
def histogramdd_from_bin_tensors(x, bins, *, weight=None, density=False):
    _require_float(x, "histogramdd")
    return _histogramdd(_rows(x), list(bins), weight, density, "binary")
