"""The classical orthogonal polynomials of a tensor degree n (Chebyshev T, U, V, W and their
shifted forms, Hermite H and He, Laguerre L, Legendre P), by their three-term recurrences
run for n steps in a lax loop whose trip count comes from the data."""
from __future__ import annotations


import jax.numpy as jnp
import torch
from jax import lax

from .dtype_policy import opmath
from .registry import register
from .special import _F32, _NAN

aten = torch.ops.aten

#
# torch truncates a floating n toward zero, and NaN or infinite n count as negative
# (value 0). The closed forms use n as a float; the three-term recurrences run in a
# lax.while_loop whose trip count is the largest degree that needs one, and, like torch's
# loops, a lane stops once its value is NaN. Loop counters are int32, so a recurrence of
# degree >= 2**31 gives NaN (torch would loop that many times).

_MAX_LOOP_DEGREE = 2.0 ** 31


def _degree(x, n):
    """(x, n) as float32, broadcast; n truncated toward zero, non-finite n -> -1."""
    x = opmath(x)
    nf = opmath(n)
    nf = jnp.where(jnp.isfinite(nf), jnp.trunc(nf), -1.0)
    return jnp.broadcast_arrays(x, nf)


def _recurrence(n, q0, q1, step):
    """q_n of q_j = step(j, q_{j-1}, q_{j-2}) (j >= 2, a float32 scalar) from q_0 and q_1,
    for float n >= 2; other lanes return q_0 (n <= 0), q_1 (n == 1) or NaN (n >= 2**31)."""
    huge = n >= _MAX_LOOP_DEGREE
    n_loop = jnp.where(huge, 0, jnp.clip(n, -1, _MAX_LOOP_DEGREE / 2)).astype(jnp.int32)
    n_max = jnp.max(n_loop, initial=1)

    def cond(c):
        j, q, _ = c
        return (j <= n_max) & jnp.any((j <= n_loop) & ~jnp.isnan(q))

    def body(c):
        j, q, p = c
        r = step(j.astype(_F32), q, p)
        live = (j <= n_loop) & ~jnp.isnan(q)
        return j + 1, jnp.where(live, r, q), jnp.where(live, q, p)

    q = lax.while_loop(cond, body, (jnp.int32(2), q1, q0))[1]
    q = jnp.where(n <= 0, q0, q)
    return jnp.where(huge, _NAN, q)


def _odd_sign(n, value):
    """value for even n, -value for odd n (n a float integer)."""
    return jnp.where(jnp.fmod(n, 2) == 0, value, -value)


_CHEBYSHEV_ENDS = {  # (value at y = 1, value at y = -1) as functions of n
    "t": (lambda n: jnp.ones_like(n), lambda n: _odd_sign(n, jnp.ones_like(n))),
    "u": (lambda n: n + 1, lambda n: _odd_sign(n, n + 1)),
    "v": (lambda n: jnp.ones_like(n), lambda n: _odd_sign(n, 2 * n + 1)),
    "w": (lambda n: 2 * n + 1, lambda n: _odd_sign(n, jnp.ones_like(n))),
}
_TRIG_FROM = {"t": 6, "u": 8, "v": 8, "w": 8}
_SHIFTED_TRIG_FROM = {"t": 6, "u": 6, "v": 6, "w": 4}


def _chebyshev(kind: str, y, n, shifted: bool):
    """Chebyshev polynomial of the first to fourth kind ('t', 'u', 'v', 'w') at y, as torch:
    fixed values at y = +-1, for n above a threshold on |y| < 1 the trigonometric forms
    T = cos(n theta), U = sin((n+1) theta) / sin(theta), V = cos((n+1/2) theta) / cos(theta/2),
    W = sin((n+1/2) theta) / sin(theta/2) with theta = acos(y), the recurrence
    q_j = 2y q_{j-1} - q_{j-2} elsewhere; 0 for n < 0."""
    one = jnp.ones_like(y)
    at_one, at_minus_one = _CHEBYSHEV_ENDS[kind]
    trig_from = (_SHIFTED_TRIG_FROM if shifted else _TRIG_FROM)[kind]
    q1 = {"t": y, "u": y + y, "v": y + y - 1, "w": y + y + 1}[kind]
    trig = (n > trig_from) & (jnp.abs(y) < 1)
    rec_n = jnp.where(trig | (jnp.abs(y) == 1), 0, n)
    rec = _recurrence(rec_n, one, q1, lambda j, q, p: (y + y) * q - p)
    theta = jnp.arccos(jnp.where(trig, y, 0.0))
    if kind == "t":
        tr = jnp.cos(n * theta)
    elif kind == "u":
        s = jnp.sin(theta)
        tr = jnp.where(s != 0, jnp.sin((n + 1) * theta) / s, (n + 1) * jnp.cos((n + 1) * theta) / y)
    elif kind == "v":
        tr = jnp.where(jnp.sin(theta / 2) != 1, jnp.cos((n + 0.5) * theta) / jnp.cos(theta / 2),
                       _odd_sign(n, 2 * n + 1))
    else:  # cos(theta/2) == 1 next to y = 1; torch's fallback differs for the shifted form
        fallback = _odd_sign(n, one) if shifted else jnp.where(y > 0, 2 * n + 1, _odd_sign(n, one))
        tr = jnp.where(jnp.cos(theta / 2) != 1, jnp.sin((n + 0.5) * theta) / jnp.sin(theta / 2), fallback)
    out = jnp.where(trig, tr, rec)
    out = jnp.where(y == 1, at_one(n), jnp.where(y == -1, at_minus_one(n), out))
    return jnp.where(n < 0, 0.0, out)


def _register_chebyshev(kind: str):
    packet = getattr(aten, f"special_chebyshev_polynomial_{kind}")
    shifted_packet = getattr(aten, f"special_shifted_chebyshev_polynomial_{kind}")

    @register(packet.default, packet.x_scalar, packet.n_scalar)
    def chebyshev(x, n):
        x, n = _degree(x, n)
        return _chebyshev(kind, x, n, shifted=False)

    @register(shifted_packet.default, shifted_packet.x_scalar, shifted_packet.n_scalar)
    def shifted_chebyshev(x, n):
        """The Chebyshev polynomial at y = 2x - 1 (y = +-1 exactly when x = 1 or 0)."""
        x, n = _degree(x, n)
        return _chebyshev(kind, x + x - 1, n, shifted=True)

    return chebyshev, shifted_chebyshev


for _kind in "tuvw":
    _register_chebyshev(_kind)


_HERMITE_MAX_DEGREE = 128  # torch's float32 limit: NaN above


def _hermite(x, n, q1, step):
    big = n > _HERMITE_MAX_DEGREE
    out = _recurrence(jnp.where(big, 0, n), jnp.ones_like(x), q1, step)
    return jnp.where(n < 0, 0.0, jnp.where(big, _NAN, out))


@register(aten.special_hermite_polynomial_h.default, aten.special_hermite_polynomial_h.x_scalar,
          aten.special_hermite_polynomial_h.n_scalar)
def special_hermite_polynomial_h(x, n):
    """Physicists' Hermite H_n: H_j = 2x H_{j-1} - 2(j-1) H_{j-2}; NaN for n > 128."""
    x, n = _degree(x, n)
    return _hermite(x, n, x + x, lambda j, q, p: (x + x) * q - (2 * j - 2) * p)


@register(aten.special_hermite_polynomial_he.default, aten.special_hermite_polynomial_he.x_scalar,
          aten.special_hermite_polynomial_he.n_scalar)
def special_hermite_polynomial_he(x, n):
    """Probabilists' Hermite He_n: He_j = x He_{j-1} - (j-1) He_{j-2}; NaN for n > 128."""
    x, n = _degree(x, n)
    return _hermite(x, n, x, lambda j, q, p: x * q - (j - 1) * p)


@register(aten.special_laguerre_polynomial_l.default, aten.special_laguerre_polynomial_l.x_scalar,
          aten.special_laguerre_polynomial_l.n_scalar)
def special_laguerre_polynomial_l(x, n):
    """Laguerre L_n: L_j = ((2(j-1) + 1 - x) L_{j-1} - (j-1) L_{j-2}) / j; 1 at x == 0."""
    x, n = _degree(x, n)

    def step(j, q, p):
        k = j - 1
        return ((k + k + (1 - x)) * q - k * p) / j

    out = _recurrence(jnp.where(x == 0, 0, n), jnp.ones_like(x), 1 - x, step)
    return jnp.where(n < 0, 0.0, jnp.where(x == 0, 1.0, out))


@register(aten.special_legendre_polynomial_p.default, aten.special_legendre_polynomial_p.x_scalar,
          aten.special_legendre_polynomial_p.n_scalar)
def special_legendre_polynomial_p(x, n):
    """Legendre P_n: P_j = ((2(j-1) + 1) x P_{j-1} - (j-1) P_{j-2}) / j; +-1 at x = +-1."""
    x, n = _degree(x, n)
    ends = jnp.abs(x) == 1

    def step(j, q, p):
        k = j - 1
        return ((k + k + 1) * x * q - k * p) / j

    out = _recurrence(jnp.where(ends, 0, n), jnp.ones_like(x), x, step)
    out = jnp.where(ends, jnp.where((x > 0) | (jnp.fmod(n, 2) == 0), 1.0, -1.0), out)
    return jnp.where(n < 0, 0.0, out)
