"""Linear algebra beyond products: factorizations (LU, Cholesky, QR, SVD, eigh, LDL),
solvers, determinants, inverses and the matrix exponential.

Conventions, as in torch (and LAPACK):

- matrices are the last two dims; batch dims of two operands broadcast;
- LU pivots are 1-based int32 row swaps (`pivots[i]`: row i was swapped with row
  `pivots[i] - 1`), and `A = P @ L @ U`;
- `info` is LAPACK's: 0 on success, `i > 0` when the i-th (1-based) pivot failed.

A compiled graph cannot raise on a singular or indefinite input: the factorizations
return what XLA computes (inf/nan), and `info` says what LAPACK would have said.
On the CPU the factorizations run LAPACK's own algorithms, so signs of singular
vectors, eigenvectors and Householder reflectors match torch; other backends may pick
other signs (both are correct).
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import torch
from jax import lax

from ..compat import aten_overloads
from ..errors import UnsupportedOpError
from .dtype_policy import in_opmath
from .products import matmul
from .registry import register

aten = torch.ops.aten


# ---- helpers ----------------------------------------------------------------------------


def _mT(x):
    return jnp.swapaxes(x, -1, -2)


def _broadcast_batch(*xs):
    """The arrays expanded to their common batch shape (every dim but the last two)."""
    batch = jnp.broadcast_shapes(*(x.shape[:-2] for x in xs))
    return [jnp.broadcast_to(x, batch + x.shape[-2:]) for x in xs]


def _empty(dtype):
    """torch's placeholder for an output that was not asked for: shape [0]."""
    return jnp.zeros((0,), dtype)


def _tri_solve(a, b, *, lower, left=True, transpose=False, unit=False):
    """x with op(a) @ x = b (left) or x @ op(a) = b, where a is triangular (only its
    `lower`/upper triangle is read; `unit`: its diagonal is taken as ones) and
    op(a) = a.mT when `transpose`. Batch dims broadcast."""
    a, b = _broadcast_batch(a, b)
    if b.size == 0:
        return b
    return lax.linalg.triangular_solve(
        a, b, left_side=left, lower=lower, transpose_a=transpose, unit_diagonal=unit
    )


def _eye_like(a):
    return jnp.broadcast_to(jnp.eye(a.shape[-1], dtype=a.dtype), a.shape)


# ---- LU -----------------------------------------------------------------------------


def _lu(a):
    """Partial-pivot LU: (lu, 1-based int32 pivots, perm) with a[perm] = L @ U."""
    m, n = a.shape[-2:]
    if a.size == 0:
        k = min(m, n)
        return a, jnp.ones(a.shape[:-2] + (k,), jnp.int32), jnp.broadcast_to(jnp.arange(m, dtype=jnp.int32), a.shape[:-1])
    lu, pivots, perm = lax.linalg.lu(a)
    return lu, pivots.astype(jnp.int32) + 1, perm


def _perm_from_pivots(pivots, m):
    """The row permutation `perm` (a[perm] = L @ U) of 1-based LAPACK pivots."""
    if pivots.shape[-1] == 0 or m == 0:
        return jnp.broadcast_to(jnp.arange(m, dtype=jnp.int32), pivots.shape[:-1] + (m,))
    return lax.linalg.lu_pivots_to_permutation(pivots.astype(jnp.int32) - 1, m)


def _perm_matrix(perm, dtype):
    """P with P[perm[i], i] = 1, so that A = P @ L @ U."""
    return _mT(jax.nn.one_hot(perm, perm.shape[-1], dtype=dtype))


def _lu_info(lu):
    """getrf's info: 1-based index of the first exactly-zero diagonal entry of U, or 0."""
    d = jnp.diagonal(lu, axis1=-2, axis2=-1)
    if d.shape[-1] == 0:
        return jnp.zeros(lu.shape[:-2], jnp.int32)
    zero = d == 0
    return jnp.where(jnp.any(zero, axis=-1), jnp.argmax(zero, axis=-1) + 1, 0).astype(jnp.int32)


def _rows(b, idx):
    """b[..., idx[...], :]: rows of b gathered per batch."""
    idx = jnp.broadcast_to(idx[..., :, None], idx.shape + b.shape[-1:])
    return jnp.take_along_axis(b, idx, axis=-2)


def _lu_solve(lu, perm, b, *, left=True, adjoint=False):
    """Solve A X = B (left) or X A = B, with A^T in place of A when `adjoint`, from
    A = P L U given as the packed `lu` and its row permutation `perm`."""
    if not left:  # X op(A) = B  <=>  op(A)^T X^T = B^T
        return _mT(_lu_solve(lu, perm, _mT(b), left=True, adjoint=not adjoint))
    lu, b = _broadcast_batch(lu, b)
    perm = jnp.broadcast_to(perm, lu.shape[:-1])
    if b.size == 0:
        return b
    if not adjoint:  # X = U^-1 L^-1 P^T B, (P^T B)[i] = B[perm[i]]
        y = _tri_solve(lu, _rows(b, perm), lower=True, unit=True)
        return _tri_solve(lu, y, lower=False)
    # A^T X = B: X = P L^-T U^-T B, (P Z)[perm[i]] = Z[i]
    z = _tri_solve(lu, b, lower=False, transpose=True)
    z = _tri_solve(lu, z, lower=True, transpose=True, unit=True)
    return _rows(z, jnp.argsort(perm, axis=-1))


def _require_pivoting(op, pivot):
    if not pivot:
        raise UnsupportedOpError(
            f"{op}(pivot=False): LU without pivoting has no XLA lowering (torch supports it "
            f"only on CUDA). Use pivot=True."
        )


@register(aten.linalg_lu_factor_ex.default)
def linalg_lu_factor_ex(a, *, pivot=True, check_errors=False):
    """(LU, pivots, info) of partial-pivot LU (getrf)."""
    _require_pivoting("linalg.lu_factor_ex", pivot)
    lu, pivots, _ = _lu(a)
    return lu, pivots, _lu_info(lu)


@register(aten.linalg_lu.default)
def linalg_lu(a, *, pivot=True):
    """(P, L, U) with A = P @ L @ U; L is m x k unit lower, U is k x n upper, k = min(m, n)."""
    _require_pivoting("linalg.lu", pivot)
    lu, _, perm = _lu(a)
    return (_perm_matrix(perm, a.dtype),) + _unpack_lu(lu)


def _unpack_lu(lu):
    m, n = lu.shape[-2:]
    k = min(m, n)
    lower = jnp.tril(lu[..., :, :k], -1) + jnp.eye(m, k, dtype=lu.dtype)
    return lower, jnp.triu(lu[..., :k, :])


@register(aten.lu_unpack.default)
def lu_unpack(lu, pivots, unpack_data=True, unpack_pivots=True):
    """(P, L, U) from packed LU and 1-based pivots; what was not asked for is empty."""
    p = _perm_matrix(_perm_from_pivots(pivots, lu.shape[-2]), lu.dtype) if unpack_pivots else _empty(lu.dtype)
    if not unpack_data:
        return p, _empty(lu.dtype), _empty(lu.dtype)
    return (p,) + _unpack_lu(lu)


@register(aten.linalg_lu_solve.default)
def linalg_lu_solve(lu, pivots, b, *, left=True, adjoint=False):
    """Solve A X = B (X A = B when not `left`; A^H for A when `adjoint`) from lu_factor."""
    return _lu_solve(lu, _perm_from_pivots(pivots, lu.shape[-1]), b, left=left, adjoint=adjoint)


@register(aten._linalg_solve_ex.default)
def linalg_solve_ex(a, b, *, left=True, check_errors=False):
    """(X, LU, pivots, info) for A X = B (X A = B when not `left`). B is a (batch of)
    vector(s) when it is 1-d or has shape A.shape[:-1]. LU is the factorization of A
    itself, which the backward graph reads with adjoint=False."""
    vector = b.ndim == 1 or (b.ndim == a.ndim - 1 and b.shape == a.shape[:-1])
    lu, pivots, perm = _lu(a)
    x = _lu_solve(lu, perm, b[..., None] if vector else b, left=left)
    return (x[..., 0] if vector else x), lu, pivots, _lu_info(lu)


@register(aten.linalg_inv_ex.default)
def linalg_inv_ex(a, *, check_errors=False):
    """(A^-1, info) through partial-pivot LU."""
    lu, _, perm = _lu(a)
    return _lu_solve(lu, perm, _eye_like(a)), _lu_info(lu)


def _lu_of_transpose(a):
    """LU of A^T: what torch's det and slogdet factor for a contiguous real A; their
    backward graphs solve with this factorization (lu_solve, adjoint=False). torch
    factors A itself when A is not contiguous at trace time and then solves with
    adjoint=True; the captured graph no longer shows strides, so a det/slogdet of a
    non-contiguous view (det(x.mT)) gets a wrong gradient. Known limitation."""
    return _lu(_mT(a))


def _pivot_sign(pivots, dtype):
    """det(P): -1 per pivot that is a real swap."""
    swaps = jnp.sum(pivots != jnp.arange(1, pivots.shape[-1] + 1, dtype=jnp.int32), axis=-1)
    return jnp.where(swaps % 2 == 1, -1, 1).astype(dtype)


@register(aten._linalg_det.default)
def linalg_det(a):
    """(det, LU, pivots): det = prod(diag U) * det(P), from the LU of A^T."""
    lu, pivots, _ = _lu_of_transpose(a)
    diag = jnp.diagonal(lu, axis1=-2, axis2=-1)
    return jnp.prod(diag, axis=-1) * _pivot_sign(pivots, a.dtype), lu, pivots


@register(aten._linalg_slogdet.default)
def linalg_slogdet(a):
    """(sign, log|det|, LU, pivots) from the LU of A^T; a singular A gives sign 0 and
    log|det| = -inf."""
    lu, pivots, _ = _lu_of_transpose(a)
    diag = jnp.diagonal(lu, axis1=-2, axis2=-1)
    sign = jnp.prod(jnp.sign(diag), axis=-1) * _pivot_sign(pivots, a.dtype)
    return sign, jnp.sum(jnp.log(jnp.abs(diag)), axis=-1), lu, pivots


# ---- triangular and Cholesky -------------------------------------------------------------


@register(aten.linalg_solve_triangular.default)
def linalg_solve_triangular(a, b, *, upper, left=True, unitriangular=False):
    """X with A X = B (X A = B when not `left`), A upper or lower triangular."""
    return _tri_solve(a, b, lower=not upper, left=left, unit=unitriangular)


@register(aten.triangular_solve.default)
def triangular_solve(b, a, upper=True, transpose=False, unitriangular=False):
    """(X, A) with op(A) X = B, op(A) = A^T when `transpose`; A comes back broadcast to
    the batch shape."""
    b_, a_ = _broadcast_batch(b, a)
    return _tri_solve(a_, b_, lower=not upper, transpose=transpose, unit=unitriangular), a_


def _cholesky_lower(a, upper):
    """L (or U = L^T when `upper`) with A = L L^T, from A's lower (upper) triangle; nan
    when A is not positive definite."""
    src = _mT(a) if upper else a
    if a.size == 0:
        return a
    low = lax.linalg.cholesky(src, symmetrize_input=False)
    return _mT(low) if upper else low


def _cholesky_info(a, upper):
    """potrf's info: the order of the first leading minor of A (read from its lower, or
    upper, triangle) that is not positive definite; 0 when A is positive definite.
    Unblocked right-looking Cholesky; XLA drops it when info is not used."""
    n = a.shape[-1]
    if n == 0:
        return jnp.zeros(a.shape[:-2], jnp.int32)
    src = _mT(a) if upper else a
    sym = jnp.tril(src) + _mT(jnp.tril(src, -1))
    rows = jnp.arange(n)

    def step(k, carry):
        s, info = carry
        d = s[..., k, k]
        bad = ~(d > 0)
        info = jnp.where((info == 0) & bad, k + 1, info)
        col = s[..., :, k] / jnp.sqrt(jnp.where(bad, 1, d))[..., None]
        col = jnp.where(rows > k, col, 0)
        return s - col[..., :, None] * col[..., None, :], info

    return lax.fori_loop(0, n, step, (sym, jnp.zeros(a.shape[:-2], jnp.int32)))[1]


@register(aten.linalg_cholesky_ex.default)
def linalg_cholesky_ex(a, *, upper=False, check_errors=False):
    """(L, info), A = L L^T (A = U^T U when `upper`). For a matrix that is not positive
    definite L is nan (LAPACK leaves a partial factor) and info is potrf's."""
    return _cholesky_lower(a, upper), _cholesky_info(a, upper)


@register(*aten_overloads("cholesky.default"))  # removed in torch 2.15 (see compat.py)
def cholesky(a, upper=False):
    return _cholesky_lower(a, upper)


@register(aten.cholesky_solve.default)
def cholesky_solve(b, factor, upper=False):
    """X with A X = B, A = L L^T (A = U^T U when `upper`) given its Cholesky factor."""
    if upper:
        y = _tri_solve(factor, b, lower=False, transpose=True)
        return _tri_solve(factor, y, lower=False)
    y = _tri_solve(factor, b, lower=True)
    return _tri_solve(factor, y, lower=True, transpose=True)


@register(aten.cholesky_inverse.default)
def cholesky_inverse(factor, upper=False):
    """A^-1 for A = L L^T (A = U^T U when `upper`): L^-T L^-1 (U^-1 U^-T)."""
    inv = _tri_solve(factor, _eye_like(factor), lower=not upper)
    return matmul(inv, _mT(inv)) if upper else matmul(_mT(inv), inv)


# ---- QR, Householder -----------------------------------------------------------------------


@register(aten.linalg_qr.default)
def linalg_qr(a, mode="reduced"):
    """(Q, R) by Householder QR (geqrf + orgqr); mode 'r' leaves Q empty."""
    if mode == "r":
        return _empty(a.dtype), jnp.linalg.qr(a, mode="r")
    q, r = jnp.linalg.qr(a, mode=mode)
    return q, r


@register(aten.geqrf.default)
def geqrf(a):
    """LAPACK geqrf: R in the upper triangle, the Householder vectors below it, and tau."""
    h, tau = jnp.linalg.qr(a, mode="raw")
    return _mT(h), tau


@register(aten.linalg_householder_product.default)
def linalg_householder_product(a, tau):
    """orgqr: the first n columns of H_1 ... H_k, H_i = I - tau_i v_i v_i^T."""
    return lax.linalg.householder_product(a, tau)


@register(aten.ormqr.default)
def ormqr(a, tau, c, left=True, transpose=False):
    """Q C, Q^T C, C Q or C Q^T with Q = H_1 ... H_k given as (a, tau) from geqrf."""
    return lax.linalg.ormqr(a, tau, c, left=left, transpose=transpose)


# ---- spectral -----------------------------------------------------------------------------


@register(aten._linalg_svd.default)
def linalg_svd(a, full_matrices=False, compute_uv=True, *, driver=None):
    """(U, S, Vh), S descending; U and Vh are empty when not `compute_uv`. `driver`
    only picks a cuSOLVER routine in torch and does not change the result."""
    if not compute_uv:
        return _empty(a.dtype), jnp.linalg.svd(a, compute_uv=False), _empty(a.dtype)
    return tuple(jnp.linalg.svd(a, full_matrices=full_matrices))


@register(aten._linalg_eigh.default)
def linalg_eigh(a, UPLO="L", compute_v=True):
    """(eigenvalues ascending, eigenvectors as columns) of the symmetric matrix read from
    A's lower (UPLO='L') or upper triangle; eigenvectors empty when not `compute_v`."""
    v, w = lax.linalg.eigh(a, lower=UPLO.upper() == "L", symmetrize_input=False)
    return w, (v if compute_v else _empty(a.dtype))


def _pinv_tolerances(a, atol, rtol):
    """torch's (atol, rtol): rtol defaults to eps * max(m, n), or to 0 where atol > 0."""
    default = float(jnp.finfo(a.dtype).eps) * max(a.shape[-2], a.shape[-1])
    atol_ = jnp.zeros((), a.dtype) if atol is None else atol.astype(a.dtype)
    if rtol is not None:
        rtol_ = rtol.astype(a.dtype)
    elif atol is None:
        rtol_ = jnp.asarray(default, a.dtype)
    else:
        rtol_ = jnp.where(atol > 0, 0, default).astype(a.dtype)
    return atol_[..., None], rtol_[..., None]


@register(aten.linalg_pinv.atol_rtol_tensor)
def linalg_pinv(a, *, atol=None, rtol=None, hermitian=False):
    """Moore-Penrose inverse: V diag(1/s) U^T over the singular values s > max(atol,
    rtol * s_max) (eigendecomposition and |eigenvalues| when `hermitian`)."""
    m, n = a.shape[-2:]
    if a.size == 0:
        return jnp.zeros(a.shape[:-2] + (n, m), a.dtype)
    atol_, rtol_ = _pinv_tolerances(a, atol, rtol)
    if hermitian:
        v, w = lax.linalg.eigh(a, lower=True, symmetrize_input=False)
        s = jnp.abs(w)
        tol = jnp.maximum(atol_, rtol_ * jnp.max(s, axis=-1, keepdims=True))
        w_inv = jnp.where(s > tol, 1 / w, 0)
        return matmul(v * w_inv[..., None, :], _mT(v))
    u, s, vh = jnp.linalg.svd(a, full_matrices=False)
    tol = jnp.maximum(atol_, rtol_ * s[..., :1])
    s_inv = jnp.where(s > tol, 1 / s, 0)
    return matmul(_mT(vh) * s_inv[..., None, :], _mT(u))


@register(aten.linalg_matrix_exp.default)
@in_opmath
def linalg_matrix_exp(a):
    """exp(A) = sum_k A^k / k! (Pade approximation with scaling and squaring); 16-bit
    matrices in float32 (jax's expm has no 16-bit version)."""
    if a.size == 0:
        return a
    if a.shape[-1] == 1:
        return jnp.exp(a)
    flat = a.reshape((-1,) + a.shape[-2:])
    out = jax.vmap(lambda x: jax.scipy.linalg.expm(x, max_squarings=64))(flat)
    return out.reshape(a.shape)


# ---- LDL (Bunch-Kaufman) -------------------------------------------------------------------

_BK_ALPHA = (1 + math.sqrt(17)) / 8


def _batched(fn, *xs, core_ndims):
    """fn mapped over the flattened common batch dims of xs (each with `core_ndims`
    trailing dims)."""
    batch = jnp.broadcast_shapes(*(x.shape[: x.ndim - c] for x, c in zip(xs, core_ndims)))
    flat = [jnp.broadcast_to(x, batch + x.shape[x.ndim - c:]).reshape((-1,) + x.shape[x.ndim - c:])
            for x, c in zip(xs, core_ndims)]
    outs = jax.vmap(fn)(*flat)
    return tuple(o.reshape(batch + o.shape[1:]) for o in outs)


def _sytf2_lower(a):
    """LAPACK sytf2 (UPLO='L') on one matrix: Bunch-Kaufman LDL^T with 1x1 and 2x2
    pivots. Works on the full symmetric trailing block; returns (LD, ipiv, info) in
    LAPACK's packed form (tril(LD) holds L below D; a 2x2 pivot stores -p at both of
    its indices)."""
    n = a.shape[-1]
    idx = jnp.arange(n)
    w = jnp.tril(a) + _mT(jnp.tril(a, -1))

    def step(k, carry):
        w0, ipiv, info, skip = carry
        w = w0
        absakk = jnp.abs(w[k, k])
        colabs = jnp.where(idx > k, jnp.abs(w[:, k]), -1)
        imax = jnp.argmax(colabs)
        colmax = jnp.maximum(colabs[imax], 0)
        zero = (jnp.maximum(absakk, colmax) == 0) | jnp.isnan(absakk)
        rowmax = jnp.max(jnp.where((idx >= k) & (idx != imax), jnp.abs(w[imax, :]), 0))
        one = zero | (absakk >= _BK_ALPHA * colmax) | (absakk >= _BK_ALPHA * colmax * (colmax / rowmax))
        no_swap = one
        one = one | (jnp.abs(w[imax, imax]) >= _BK_ALPHA * rowmax)
        kp = jnp.where(no_swap, k, imax)
        two = ~one
        kk = jnp.where(two, k + 1, k)
        # symmetric interchange of kk and kp inside the trailing block
        perm = jnp.where(idx == kk, kp, jnp.where(idx == kp, kk, idx))
        trailing = (idx[:, None] >= k) & (idx[None, :] >= k)
        w = jnp.where(trailing, w[perm][:, perm], w)
        # 1x1 pivot: A -= x x^T / d, L = x / d
        below = idx > k
        d11 = 1 / w[k, k]
        x = jnp.where(below, w[:, k], 0)
        upd1 = w + x[:, None] * (-d11 * x)[None, :]
        upd1 = upd1.at[:, k].set(jnp.where(below, x * d11, w[:, k]))
        # 2x2 pivot on (k, k+1)
        k1 = jnp.minimum(k + 1, n - 1)
        d21 = w[k1, k]
        e11 = w[k1, k1] / d21
        e22 = w[k, k] / d21
        d21 = (1 / (e11 * e22 - 1)) / d21
        below2 = idx > k + 1
        wk = jnp.where(below2, d21 * (e11 * w[:, k] - w[:, k1]), 0)
        wkp1 = jnp.where(below2, d21 * (e22 * w[:, k1] - w[:, k]), 0)
        ck = jnp.where(below2, w[:, k], 0)
        ck1 = jnp.where(below2, w[:, k1], 0)
        upd2 = w - ck[:, None] * wk[None, :] - ck1[:, None] * wkp1[None, :]
        upd2 = upd2.at[:, k].set(jnp.where(below2, wk, w[:, k]))
        upd2 = upd2.at[:, k1].set(jnp.where(below2, wkp1, w[:, k1]))
        new = jnp.where(zero, w, jnp.where(two, upd2, upd1))
        # keep the trailing block symmetric from its lower triangle
        low = idx[:, None] >= idx[None, :]
        new = jnp.where(trailing & ~low, _mT(new), new)
        piv = jnp.where(two, -(kp + 1), kp + 1).astype(jnp.int32)
        new_ipiv = ipiv.at[k].set(piv)
        new_ipiv = jnp.where(two, new_ipiv.at[k1].set(piv), new_ipiv)
        info = jnp.where(zero & (info == 0) & ~skip, k + 1, info)
        return (jnp.where(skip, w0, new), jnp.where(skip, ipiv, new_ipiv), info, two & ~skip)

    init = (w, jnp.zeros((n,), jnp.int32), jnp.zeros((), jnp.int32), jnp.zeros((), bool))
    w, ipiv, info, _ = lax.fori_loop(0, n, step, init)
    return jnp.tril(w), ipiv, info


@register(aten.linalg_ldl_factor_ex.default)
def linalg_ldl_factor_ex(a, *, hermitian=False, check_errors=False):
    """(LD, pivots, info) of LAPACK sytrf (lower): P A P^T = L D L^T with D block
    diagonal (1x1 and 2x2 blocks), in LAPACK's packed form; the upper triangle of LD is
    zero. For real matrices `hermitian` changes nothing."""
    if a.size == 0:
        return a, jnp.zeros(a.shape[:-1], jnp.int32), jnp.zeros(a.shape[:-2], jnp.int32)
    return _batched(_sytf2_lower, a, core_ndims=(2,))


def _sytrs_lower(ld, ipiv, b):
    """LAPACK sytrs (UPLO='L') on one system: X with A X = B from sytrf's (LD, ipiv)."""
    n = ld.shape[-1]
    idx = jnp.arange(n)

    def swap(b, i, j):
        perm = jnp.where(idx == i, j, jnp.where(idx == j, i, idx))
        return b[perm]

    def forward(k, carry):  # L D Y = P B
        b, skip = carry
        p = ipiv[k]
        k1 = jnp.minimum(k + 1, n - 1)
        # 1x1
        b1 = swap(b, k, p - 1)
        b1 = b1 - jnp.where(idx > k, ld[:, k], 0)[:, None] * b1[k][None, :]
        b1 = b1.at[k].set(b1[k] / ld[k, k])
        # 2x2 on (k, k + 1)
        b2 = swap(b, k1, -p - 1)
        b2 = b2 - jnp.where(idx > k + 1, ld[:, k], 0)[:, None] * b2[k][None, :]
        b2 = b2 - jnp.where(idx > k + 1, ld[:, k1], 0)[:, None] * b2[k1][None, :]
        akm1k = ld[k1, k]
        akm1 = ld[k, k] / akm1k
        ak = ld[k1, k1] / akm1k
        denom = akm1 * ak - 1
        bkm1 = b2[k] / akm1k
        bk = b2[k1] / akm1k
        b2 = b2.at[k].set((ak * bkm1 - bk) / denom).at[k1].set((akm1 * bk - bkm1) / denom)
        two = p < 0
        new = jnp.where(two, b2, b1)
        return jnp.where(skip, b, new), two & ~skip

    def backward(i, carry):  # L^T P^T X = Y, k = n-1 ... 0
        b, skip = carry
        k = n - 1 - i
        p = ipiv[k]
        km1 = jnp.maximum(k - 1, 0)
        below = jnp.where(idx > k, 1, 0).astype(b.dtype)
        bk = b[k] - jnp.sum((below * ld[:, k])[:, None] * b, axis=0)
        new = b.at[k].set(bk)
        bkm1 = b[km1] - jnp.sum((below * ld[:, km1])[:, None] * b, axis=0)
        two = p < 0
        new = jnp.where(two, new.at[km1].set(bkm1), new)
        new = swap(new, k, jnp.where(two, -p - 1, p - 1))
        return jnp.where(skip, b, new), two & ~skip

    b, _ = lax.fori_loop(0, n, forward, (b, jnp.zeros((), bool)))
    b, _ = lax.fori_loop(0, n, backward, (b, jnp.zeros((), bool)))
    return (b,)


@register(aten.linalg_ldl_solve.default)
def linalg_ldl_solve(ld, pivots, b, *, hermitian=False):
    """X with A X = B from linalg.ldl_factor's (LD, pivots) (LAPACK sytrs, lower).
    Batch dims of LD and B broadcast."""
    batch = jnp.broadcast_shapes(ld.shape[:-2], b.shape[:-2])
    shape = batch + b.shape[-2:]
    if ld.shape[-1] == 0 or 0 in shape:
        return jnp.zeros(shape, b.dtype)
    ld, b = _broadcast_batch(ld, b)
    pivots = jnp.broadcast_to(pivots, ld.shape[:-1])
    return _batched(_sytrs_lower, ld, pivots, b, core_ndims=(2, 1, 2))[0]
