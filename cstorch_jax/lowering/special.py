"""Special functions: the gamma family, error functions, Hurwitz zeta, incomplete gamma,
Bessel and Airy functions, and the classical orthogonal polynomials.

Everything computes in float32 (integer, bool and 16-bit inputs are promoted; the
interpreter casts the result to torch's dtype). Where jax.scipy.special has an accurate
float32 version it is used; the rest is written here from the standard mathematics:

- Bessel J0, J1, Y0, Y1: Miller's backward recurrence with the Neumann series for Y
  (0 < |x| <= 25), Hankel's asymptotic expansion beyond;
- modified Bessel K0, K1 (and e^x-scaled): the ascending series for x <= 1, the
  trapezoidal rule on K_nu(x) = int_0^inf exp(-x cosh t) cosh(nu t) dt (spectrally
  accurate: the integrand is analytic and decays double-exponentially) for x <= 12, the
  asymptotic expansion beyond;
- Airy Ai: Taylor-series integration of y'' = x y from x = 0 on [-5.25, 1], the
  oscillatory asymptotic expansion below, Ai(x) = sqrt(x/3) K_{1/3}(2/3 x^1.5) / pi above.

Edge values (zeros, poles, infinities, NaN, out-of-domain arguments) follow torch's CPU
kernels; each function's docstring states them.
"""
from __future__ import annotations

import math

import jax.numpy as jnp
import jax.scipy.special as jss
import numpy as np
import torch
from jax import lax

from .registry import register

aten = torch.ops.aten

_F32 = jnp.float32
_PI = math.pi
_EULER = 0.57721566490153286061
_INF = float("inf")
_NAN = float("nan")


def _float(x):
    """float32 operand: integer, bool and 16-bit float inputs are promoted (torch computes
    16-bit special functions in float32 too)."""
    x = jnp.asarray(x)
    return x if x.dtype == _F32 else x.astype(_F32)


def _c(value):
    """A float32 constant."""
    return jnp.asarray(value, _F32)


def _float2(a, b):
    a, b = jnp.broadcast_arrays(_float(a), _float(b))
    return a, b


# ---- gamma family -----------------------------------------------------------------------


@register(aten.lgamma.default)
def lgamma(x):
    """log|Gamma(x)|; +inf at the poles 0, -1, -2, ..."""
    return jss.gammaln(_float(x))


@register(aten.digamma.default)
def digamma(x):
    """psi(x) = Gamma'(x) / Gamma(x); psi(+-0) = -+inf, NaN at the negative integers."""
    x = _float(x)
    return jnp.where(x == 0, jnp.copysign(_c(_INF), -x), jss.digamma(x))


def _trigamma(x):
    """psi'(x), evaluated like torch's float32 kernel: for x < 0.5 the reflection
    psi'(x) = pi^2 / sin^2(pi x) - psi'(1 - x) with pi x rounded to float32 (that rounding
    sets torch's own error near the negative poles, so we keep it), then six steps of
    psi'(y) = 1/y^2 + psi'(y + 1) and the asymptotic series
    psi'(y) ~ 1/y + 1/(2y^2) + 1/(6y^3) - 1/(30y^5) + 1/(42y^7)."""
    reflect = x < 0.5
    s = jnp.sin(_c(_PI) * x)
    y = jnp.where(reflect, 1 - x, x)
    acc = jnp.zeros_like(x)
    for _ in range(6):
        acc = acc + 1 / (y * y)
        y = y + 1
    iyy = 1 / (y * y)
    acc = acc + (1 + 1 / (2 * y) + iyy * (_c(1 / 6) - iyy * (_c(1 / 30) - iyy * _c(1 / 42)))) / y
    return jnp.where(reflect, _c(_PI * _PI) / (s * s) - acc, acc)


def _cot_derivative_poly(n: int) -> list[int]:
    """Coefficients (lowest power first) of Q_n with d^n/du^n cot(u) = Q_n(cot u):
    Q_0 = c, Q_{k+1}(c) = -(1 + c^2) Q_k'(c)."""
    q = [0, 1]
    for _ in range(n):
        d = [i * q[i] for i in range(1, len(q))] + [0]  # Q' (padded)
        nxt = [0] * (len(d) + 2)
        for i, v in enumerate(d):
            nxt[i] -= v
            nxt[i + 2] -= v
        while len(nxt) > 1 and nxt[-1] == 0:
            nxt.pop()
        q = nxt
    return q


def _polyval(coeffs, x):
    """sum_i coeffs[i] x^i (Horner, lowest power first)."""
    acc = jnp.zeros_like(x)
    for v in reversed(coeffs):
        acc = acc * x + v
    return acc


def _cot_pi(x):
    """cot(pi x) from the exact reduction r = x - round(x): 1 / tan(pi r) for |r| <= 1/4,
    else sign(r) tan(pi (1/2 - |r|)), so that it is exactly 0 at the half-integers."""
    r = x - jnp.round(x)
    ar = jnp.abs(r)
    near_pole = ar <= 0.25
    return jnp.where(near_pole, 1 / jnp.tan(_PI * r), jnp.sign(r) * jnp.tan(_PI * (0.5 - ar)))


def _polygamma_high(n: int, x):
    """psi^(n)(x) for n >= 2: (-1)^(n+1) n! zeta(n+1, x) for x > 0; for x < 0 the
    reflection psi^(n)(x) = (-1)^n psi^(n)(1 - x) - pi^(n+1) Q_n(cot(pi x)), which avoids
    the cancellation of the direct sum. +inf (n odd) or -inf (n even) at 0, -1, -2, ...
    (torch's zeta has a pole there)."""
    neg = x < 0
    q = jnp.where(neg, 1 - x, x)
    sign = 1.0 if n % 2 else -1.0
    pos_part = sign * math.factorial(n) * _hurwitz_zeta_positive(float(n + 1), q)
    c = _cot_pi(x)
    coeffs = [float(v) for v in _cot_derivative_poly(n)]
    reflected = (-1.0) ** n * pos_part - _c(_PI ** (n + 1)) * _polyval(coeffs, c)
    out = jnp.where(neg, reflected, pos_part)
    pole = (x <= 0) & (x == jnp.floor(x))
    out = jnp.where(pole, _c(_INF if n % 2 else -_INF), out)
    return jnp.where(jnp.isposinf(x), _NAN, out)  # torch's zeta gives NaN at q = inf


@register(aten.polygamma.default)
def polygamma(n, x):
    """psi^(n)(x), the n-th derivative of digamma."""
    x = _float(x)
    if n == 0:
        return digamma(x)
    if n == 1:
        return _trigamma(x)
    return _polygamma_high(n, x)


# ---- Hurwitz zeta -----------------------------------------------------------------------

# B_2j / (2j)! for j = 1..8 (Euler-Maclaurin)
_BERNOULLI_OVER_FACT = [
    1 / 12, -1 / 720, 1 / 30240, -1 / 1209600, 1 / 47900160,
    -691 / 1307674368000, 1 / 74724249600, -3617 / 10670622842880000,
]
_ZETA_SHIFT = 10  # direct terms until q + k >= 10


def _zeta_tail(s, a):
    """sum_{k>=0} (a + k)^-s for a >= 10 by Euler-Maclaurin:
    a^(1-s)/(s-1) + a^-s/2 + sum_j B_2j/(2j)! s(s+1)...(s+2j-2) a^(-s-2j+1)."""
    a_s = jnp.power(a, -s)
    tail = a * a_s / (s - 1) + 0.5 * a_s
    term = a_s / a * s  # s a^(-s-1), then times (s+2j-1)(s+2j) / a^2 per step
    for j, b in enumerate(_BERNOULLI_OVER_FACT):
        if j:
            term = term * (s + 2 * j - 1) * (s + 2 * j) / (a * a)
        tail = tail + b * term
    return tail


def _hurwitz_zeta_positive(s, q):
    """zeta(s, q) = sum_{k>=0} (q + k)^-s for s > 1, q > 0 (float32): ten direct terms,
    then the Euler-Maclaurin tail."""
    s = jnp.asarray(s, _F32)
    acc = jnp.zeros(jnp.broadcast_shapes(s.shape, q.shape), _F32)
    for k in range(_ZETA_SHIFT):
        acc = acc + jnp.power(q + k, -s)
    return acc + _zeta_tail(s, q + _ZETA_SHIFT)


def _hurwitz_zeta(s, q):
    """zeta(s, q) for s > 1 and any q that is not 0, -1, -2, ...; for q < 0 (s an integer)
    the direct sum runs until q + k >= 10, a data-dependent trip count."""
    n_direct = jnp.maximum(_ZETA_SHIFT, jnp.ceil(_ZETA_SHIFT - q)).astype(jnp.int32)
    n_direct = jnp.where(jnp.isfinite(q), n_direct, _ZETA_SHIFT)

    def body(k, acc):
        kf = k.astype(_F32)
        return acc + jnp.where(k < n_direct, jnp.power(q + kf, -s), 0)

    acc = lax.fori_loop(jnp.int32(0), jnp.max(n_direct, initial=_ZETA_SHIFT), body, jnp.zeros_like(q))
    return acc + _zeta_tail(s, q + n_direct.astype(_F32))


@register(aten.special_zeta.default, aten.special_zeta.self_scalar, aten.special_zeta.other_scalar)
def special_zeta(x, q):
    """Hurwitz zeta(x, q) = sum_{k>=0} (q + k)^-x, as torch: inf at x == 1, NaN for x < 1;
    for q <= 0: inf when q is an integer, NaN unless x is an integer."""
    x, q = _float2(x, q)
    safe_x = jnp.where(x > 1, x, 2.0)
    safe_q = jnp.where((q > 0) | (q != jnp.floor(q)), q, 0.5)
    out = _hurwitz_zeta(safe_x, safe_q)
    # torch's values at infinite arguments (its summation meets inf * 0 for some of them)
    x_inf = jnp.where(q == 1, 1.0, jnp.where(q < 1, _INF, _NAN))
    out = jnp.where(jnp.isposinf(x), x_inf, jnp.where(jnp.isposinf(q), _NAN, out))
    out = jnp.where(jnp.isnan(x) | jnp.isnan(q), _NAN, out)
    # torch's rules, first match wins: x == 1, x < 1, then q a non-positive integer, and
    # q < 0 with a non-integer x
    non_positive = jnp.where(q == jnp.floor(q), _INF, jnp.where(x != jnp.floor(x), _NAN, out))
    out = jnp.where(q <= 0, non_positive, out)
    return jnp.where(x == 1, _INF, jnp.where(x < 1, _NAN, out))


# ---- incomplete gamma -------------------------------------------------------------------


def _log1p_minus_x(t):
    """log(1 + t) - t without cancellation for small t: with u = t / (2 + t),
    log(1 + t) = 2 atanh(u), so log(1 + t) - t = -u t + 2 (u^3/3 + u^5/5 + ...)."""
    small = jnp.abs(t) < 0.5
    ts = jnp.where(small, t, 0)
    u = ts / (2 + ts)
    u2 = u * u
    series = jnp.zeros_like(u)
    for k in range(15, 1, -2):
        series = (series + 1.0 / k) * u2
    series = 2 * u * series  # 2 (u^3/3 + ... + u^15/15)
    return jnp.where(small, -u * ts + series, jnp.log1p(t) - t)


def _igamma_prefactor(a, x):
    """x^a e^-x / Gamma(a + 1). For a >= 10 through Stirling's series, so that the large
    terms a log x and x do not cancel in float32:
    exp(a (log1p(t) - t) - stirlerr(a)) / sqrt(2 pi a) with t = (x - a) / a."""
    big = a >= 10
    ab = jnp.where(big, a, 10.0)
    t = (x - ab) / ab
    ia2 = 1 / (ab * ab)
    stirlerr = (1 / 12 - ia2 * (1 / 360 - ia2 * (1 / 1260 - ia2 / 1680))) / ab
    large = jnp.exp(ab * _log1p_minus_x(t) - stirlerr) / jnp.sqrt(2 * _PI * ab)
    small = jnp.exp(a * jnp.log(x) - x - jss.gammaln(a + 1))
    return jnp.where(big, large, small)


_IGAMMA_MAX_ITER = 100000  # a safety bound: with Temme's expansion near x = a, both loops converge fast
_TINY = 1e-30


def _igamma_series(a, x, active):
    """sum_{k>=0} x^k / ((a+1)(a+2)...(a+k)) (converges for all x; used for x < a + 1).
    A lane stops adding once its term is below 1e-8 of its sum."""

    def cond(c):
        k, _, _, _, done = c
        return (k < _IGAMMA_MAX_ITER) & ~jnp.all(done)

    def body(c):
        k, ap, term, total, done = c
        ap = ap + 1
        term = term * x / ap
        total = jnp.where(done, total, total + term)
        return k + 1, ap, term, total, done | (term <= 1e-8 * total)

    one = jnp.ones_like(a)
    return lax.while_loop(cond, body, (jnp.int32(0), a, one, one, ~active))[3]


def _igammac_fraction(a, x, active):
    """Legendre's continued fraction Gamma(a, x) e^x x^-a =
    1/(x+1-a- 1(1-a)/(x+3-a- 2(2-a)/(x+5-a- ...))) by the modified Lentz method
    (used for x >= a + 1). A lane stops once its factor is within 2e-7 of 1 (float32
    cannot resolve less, and iterating on would only accumulate rounding)."""
    b = x + 1 - a
    c = jnp.full_like(a, 1 / _TINY)
    d = 1 / jnp.where(b == 0, _TINY, b)

    def cond(st):
        i, _, _, _, _, done = st
        return (i < _IGAMMA_MAX_ITER) & ~jnp.all(done)

    def body(st):
        i, b, c, d, h, done = st
        i1 = (i + 1).astype(a.dtype)
        an = -i1 * (i1 - a)
        b = b + 2
        d = an * d + b
        d = 1 / jnp.where(d == 0, _TINY, d)
        c = b + an / c
        c = jnp.where(c == 0, _TINY, c)
        delta = c * d
        h = jnp.where(done, h, h * delta)
        return i + 1, b, c, d, h, done | (jnp.abs(delta - 1) <= 2e-7)

    st = (jnp.int32(0), b, c, d, d, ~active)
    return lax.while_loop(cond, body, st)[4]


# Temme's uniform expansion Q(a, x) = erfc(eta sqrt(a/2)) / 2 + R, with
# R = exp(-a eta^2 / 2) / sqrt(2 pi a) (C0(eta) + C1(eta) / a), lambda = x / a,
# eta = sign(lambda - 1) sqrt(2 (lambda - 1 - log lambda)). Taylor coefficients in eta of
# C0 = 1/(lambda - 1) - 1/eta and C1 = 1/eta^3 - 1/(lambda-1)^3 - 1/(lambda-1)^2 - 1/(12(lambda-1)),
# from the reversion of the series of eta(lambda) (exact rational arithmetic, then rounded).
_TEMME_C0 = [-1 / 3, 1 / 12, -2 / 135, 1 / 864, 1 / 2835, -1.787551440329218e-04, 3.919263178522438e-05,
             -2.185448510679992e-06, -1.854062210715160e-06, 8.296711340953087e-07, -1.766595273682608e-07,
             6.707853543401498e-09, 1.026180978424031e-08, -4.382036018453353e-09]
_TEMME_C1 = [-1 / 540, -1 / 288, 1 / 378, -9.902263374485596e-04, 2.057613168724280e-04, -4.018775720164609e-07,
             -1.809855033448998e-05, 7.649160916081110e-06, -1.612090089456345e-06, 4.647127802807434e-09,
             1.378633446915721e-07, -5.752545603517705e-08, 1.195162859977815e-08, -1.754324171974765e-11]
_TEMME_MIN_A = 50.0  # the next term, C2 / a^2 with C2(0) = 25/6048, is below 1e-7 from here
_TEMME_MAX_T = 0.3  # |x - a| / a; beyond it the series and the fraction converge quickly


def _igamma_temme(a, x):
    """(P, Q) by Temme's uniform asymptotic expansion (a >= 50, |x/a - 1| < 0.3)."""
    t = (x - a) / a
    half_a_eta2 = -a * _log1p_minus_x(t)  # a eta^2 / 2
    eta = jnp.sign(t) * jnp.sqrt(-2 * _log1p_minus_x(t))
    z = eta * jnp.sqrt(a / 2)
    r = jnp.exp(-half_a_eta2) / jnp.sqrt(2 * _PI * a) * (_polyval(_TEMME_C0, eta) + _polyval(_TEMME_C1, eta) / a)
    return 0.5 * jss.erfc(-z) - r, 0.5 * jss.erfc(z) + r


def _igamma_pq(a, x):
    """(P(a, x), Q(a, x)), the regularized lower and upper incomplete gamma functions,
    for a > 0, 0 < x < inf (NaN for NaN arguments; the callers apply the other edges):
    Temme's expansion for large a near x = a, else the series for x < a + 1 and the
    continued fraction otherwise, the other one being 1 minus."""
    a_in, x_in = a, x
    ok = (a > 0) & (x > 0) & jnp.isfinite(a) & jnp.isfinite(x)
    a = jnp.where(ok, a, 1.0)
    x = jnp.where(ok, x, 1.0)
    temme = (a >= _TEMME_MIN_A) & (jnp.abs(x - a) < _TEMME_MAX_T * a)
    use_series = x < a + 1
    pref = _igamma_prefactor(a, x)
    p_series = pref * _igamma_series(a, jnp.where(use_series, x, 0.0), ok & use_series & ~temme)
    xf = jnp.where(use_series, a + 2, x)  # keep the fraction well-defined on series lanes
    q_frac = a * pref * _igammac_fraction(a, xf, ok & ~use_series & ~temme)
    p = jnp.where(use_series, p_series, 1 - q_frac)
    q = jnp.where(use_series, 1 - p_series, q_frac)
    p_t, q_t = _igamma_temme(jnp.where(temme, a, 100.0), jnp.where(temme, x, 100.0))
    p, q = jnp.where(temme, p_t, p), jnp.where(temme, q_t, q)
    nan = jnp.isnan(a_in) | jnp.isnan(x_in)
    return jnp.where(nan, _NAN, jnp.clip(p, 0, 1)), jnp.where(nan, _NAN, jnp.clip(q, 0, 1))


def _igamma_edges(a, x, value, lower: bool):
    """torch's domain rules, first match wins (NaN is not caught up front): NaN for a < 0
    or x < 0; a == 0: P = 1, Q = 0 for x > 0, else NaN; x == 0: P = 0, Q = 1;
    a == inf: NaN if x == inf, else P = 0, Q = 1; x == inf: P = 1, Q = 0."""
    one, zero = (1.0, 0.0) if lower else (0.0, 1.0)
    out = jnp.where(jnp.isinf(x), one, value)
    out = jnp.where(jnp.isinf(a), jnp.where(jnp.isinf(x), _NAN, zero), out)
    out = jnp.where(x == 0, zero, out)
    out = jnp.where(a == 0, jnp.where(x > 0, one, _NAN), out)
    return jnp.where((a < 0) | (x < 0), _NAN, out)


@register(aten.igamma.default)
def igamma(a, x):
    """P(a, x) = gamma(a, x) / Gamma(a), the regularized lower incomplete gamma function."""
    a, x = _float2(a, x)
    return _igamma_edges(a, x, _igamma_pq(a, x)[0], lower=True)


@register(aten.igammac.default)
def igammac(a, x):
    """Q(a, x) = 1 - P(a, x), the regularized upper incomplete gamma function."""
    a, x = _float2(a, x)
    return _igamma_edges(a, x, _igamma_pq(a, x)[1], lower=False)


# ---- error functions and normal distribution -------------------------------------------


@register(aten.erfc.default)
def erfc(x):
    return jss.erfc(_float(x))


def _split(x):
    """x = hi + lo with hi holding the top 12 bits (Dekker), so products of halves are exact."""
    t = 4097.0 * x
    hi = t - (t - x)
    return hi, x - hi


def _two_prod(a, b):
    """(p, e) with p = fl(a b) and p + e = a b exactly (Dekker's product)."""
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _exp_of_square(x):
    """exp(x^2) without the rounding error of x*x: x^2 = hi + lo exactly, and
    exp(hi + lo) = exp(hi) (1 + lo) to float32 precision (|lo| <= ulp(hi) / 2). Written as
    e + e lo: XLA rewrites exp(a) * exp(b) into exp(a + b), which would drop lo."""
    hi, lo = _two_prod(x, x)
    e = jnp.exp(hi)
    return jnp.where(jnp.isinf(e), e, e + e * lo)


def _erfcx_asymptotic(x):
    """erfcx(x) ~ 1/(x sqrt(pi)) sum_k (-1)^k (2k-1)!! / (2x^2)^k; accurate to ~1e-9 for
    x >= 5 with 12 terms."""
    t = 1 / (2 * x * x)
    coef = [1.0]
    for k in range(1, 13):
        coef.append(coef[-1] * -(2 * k - 1))
    poly = _polyval(coef, t)
    return poly / (x * math.sqrt(_PI))


@register(aten.special_erfcx.default)
def special_erfcx(x):
    """erfcx(x) = exp(x^2) erfc(x): exp(x^2) erfc(x) with an exact x^2 below x = 5, the
    asymptotic series above; inf below x ~ -9.4 (exp(x^2) overflows), as torch."""
    x = _float(x)
    large = x >= 5
    xs = jnp.where(large, 0.0, x)
    direct = _exp_of_square(xs) * jss.erfc(xs)
    out = jnp.where(large, _erfcx_asymptotic(jnp.where(large, x, 5.0)), direct)
    return jnp.where(x < -10, _INF, out)


@register(aten.special_ndtri.default)
def special_ndtri(p):
    """Phi^-1(p), the standard normal quantile; -inf at 0, inf at 1, NaN outside [0, 1]."""
    return jss.ndtri(_float(p))


# ---- modified Bessel functions of the first kind --------------------------------------


@register(aten.i0.default, aten.special_modified_bessel_i0.default)
def i0(x):
    return jss.i0(_float(x))


@register(aten.special_i0e.default)
def special_i0e(x):
    return jss.i0e(_float(x))


@register(aten.special_i1.default, aten.special_modified_bessel_i1.default)
def special_i1(x):
    return jss.i1(_float(x))


@register(aten.special_i1e.default)
def special_i1e(x):
    return jss.i1e(_float(x))


# ---- Bessel functions of the first and second kind, orders 0 and 1 ----------------------

_MILLER_START = 60  # even; J_60(x) is negligible for x <= 25
_MILLER_MAX = 25.0
_SMALL_ARG = 1e-6


def _sign_of_half(m):
    """(-1)^(m // 2) as float32."""
    return jnp.where((m // 2) % 2 == 0, 1.0, -1.0).astype(_F32)


def _bessel_miller(x):
    """(J0, J1, Y0, Y1) for 1e-6 <= x <= 25 by Miller's algorithm: p_k proportional to
    J_k from p_{k-1} = (2k/x) p_k - p_{k+1} downward from k = 60, normalized with
    J0 + 2 sum J_2k = 1; the Neumann series give
    Y0 = 2/pi [(log(x/2) + gamma) J0 - 2 sum_k (-1)^k J_2k / k] and its derivative
    Y1 = 2/pi [(log(x/2) + gamma) J1 - J0 / x + sum_k (-1)^k (J_2k-1 - J_2k+1) / k].
    The sums are kept with the same scale as p and rescaled together when p grows."""
    n = _MILLER_START

    def body(i, c):
        pk, pk1, norm, s_even, s_odd = c
        k = n - i
        m = k - 1  # index of the value computed in this step
        pm = (2 * k.astype(_F32) / x) * pk - pk1
        mf = m.astype(_F32)
        even = (m % 2 == 0) & (m > 0)
        norm = norm + jnp.where(even, 2 * pm, 0)
        s_even = s_even + jnp.where(even, _sign_of_half(m) * pm / (mf / 2), 0)
        # p_m enters sum_j (-1)^j (p_2j-1 - p_2j+1) / j as j = (m+1)/2 and as j = (m-1)/2
        j_up, j_down = (m + 1) // 2, (m - 1) // 2
        up = _sign_of_half(2 * j_up) * pm / j_up.astype(_F32)
        down = jnp.where(j_down >= 1, _sign_of_half(2 * j_down) * pm / jnp.maximum(j_down, 1).astype(_F32), 0)
        s_odd = s_odd + jnp.where(m % 2 == 1, up - down, 0)
        scale = jnp.where(jnp.abs(pm) > 1e20, _c(1e-20), _c(1.0))
        return pm * scale, pk * scale, norm * scale, s_even * scale, s_odd * scale

    start = jnp.full_like(x, 1e-30)
    zero = jnp.zeros_like(x)
    init = (start, zero, 2 * start, _sign_of_half(jnp.int32(n)) * start / (n // 2), zero)
    p0, p1, norm, s_even, s_odd = lax.fori_loop(jnp.int32(0), jnp.int32(n), body, init)
    norm = norm + p0
    j0, j1 = p0 / norm, p1 / norm
    log_term = jnp.log(x / 2) + _EULER
    y0 = (2 / _PI) * (log_term * j0 - 2 * s_even / norm)
    y1 = (2 / _PI) * (log_term * j1 - j0 / x + s_odd / norm)
    return j0, j1, y0, y1


def _hankel_coefficients(nu: float, count: int) -> list[float]:
    """a_k(nu) = (4nu^2 - 1)(4nu^2 - 9)...(4nu^2 - (2k-1)^2) / (k! 8^k), k = 0..count-1."""
    out, v = [], 1.0
    for k in range(count):
        if k:
            v *= (4 * nu * nu - (2 * k - 1) ** 2) / (k * 8)
        out.append(v)
    return out


def _hankel_pq(nu: float, x):
    """P and Q of Hankel's expansion J_nu = sqrt(2/(pi x)) (P cos chi - Q sin chi),
    Y_nu = sqrt(2/(pi x)) (P sin chi + Q cos chi), chi = x - (nu/2 + 1/4) pi; 16 terms,
    accurate to ~1e-12 for x >= 25."""
    a = _hankel_coefficients(nu, 16)
    z = 1 / (x * x)
    p = _polyval([(-1) ** k * a[2 * k] for k in range(8)], z)
    q = _polyval([(-1) ** k * a[2 * k + 1] for k in range(8)], z) / x
    return p, q


def _bessel_asymptotic(x):
    """(J0, J1, Y0, Y1) for x >= 25. cos and sin of chi = x - pi/4 (or x - 3pi/4) come
    from cos x and sin x, which float32 x gives without the rounding of x - pi/4."""
    amp = jnp.sqrt(2 / (_PI * x))
    cx, sx = jnp.cos(x), jnp.sin(x)
    r = math.sqrt(0.5)
    c0, s0 = (cx + sx) * r, (sx - cx) * r  # chi = x - pi/4
    c1, s1 = (sx - cx) * r, -(sx + cx) * r  # chi = x - 3pi/4
    p0, q0 = _hankel_pq(0.0, x)
    p1, q1 = _hankel_pq(1.0, x)
    return (amp * (p0 * c0 - q0 * s0), amp * (p1 * c1 - q1 * s1),
            amp * (p0 * s0 + q0 * c0), amp * (p1 * s1 + q1 * c1))


def _bessel_jy(x):
    """(J0, J1, Y0, Y1) of |x| (Y is then fixed up by the callers for x <= 0)."""
    ax = jnp.abs(x)
    mid = (ax >= _SMALL_ARG) & (ax <= _MILLER_MAX)
    m = _bessel_miller(jnp.where(mid, ax, 1.0))
    big = ax > _MILLER_MAX
    a = _bessel_asymptotic(jnp.where(big, ax, 2 * _MILLER_MAX))
    tiny = ax  # |x| < 1e-6: J0 = 1, J1 = x/2, Y0 = 2/pi (log(x/2) + gamma), Y1 = -2/(pi x)
    s = (jnp.ones_like(ax), tiny / 2, (2 / _PI) * (jnp.log(tiny / 2) + _EULER), -2 / (_PI * tiny))
    return tuple(jnp.where(big, av, jnp.where(mid, mv, sv)) for av, mv, sv in zip(a, m, s))


@register(aten.special_bessel_j0.default)
def special_bessel_j0(x):
    """J0(x), even; NaN at +-inf (as torch)."""
    x = _float(x)
    return jnp.where(jnp.isinf(x) | jnp.isnan(x), _NAN, _bessel_jy(x)[0])


@register(aten.special_bessel_j1.default)
def special_bessel_j1(x):
    """J1(x), odd; NaN at +-inf (as torch)."""
    x = _float(x)
    out = _bessel_jy(x)[1]
    return jnp.where(jnp.isinf(x) | jnp.isnan(x), _NAN, jnp.where(x < 0, -out, out))


def _y_edges(x, value):
    """Y0, Y1: -inf at 0, NaN for x < 0, 0 at +inf (as torch)."""
    out = jnp.where(x == 0, -_INF, jnp.where(x < 0, _NAN, value))
    return jnp.where(jnp.isposinf(x) | jnp.isnan(x), _NAN, out)


@register(aten.special_bessel_y0.default)
def special_bessel_y0(x):
    x = _float(x)
    return _y_edges(x, _bessel_jy(x)[2])


@register(aten.special_bessel_y1.default)
def special_bessel_y1(x):
    x = _float(x)
    return _y_edges(x, _bessel_jy(x)[3])


@register(aten.special_spherical_bessel_j0.default)
def special_spherical_bessel_j0(x):
    """j0(x) = sin(x) / x; its Taylor series 1 - x^2/6 + x^4/120 - ... below |x| = 0.5;
    0 at +-inf."""
    x = _float(x)
    small = jnp.abs(x) < 0.5
    xs = jnp.where(small, x, 1.0)
    coef = [1.0]
    for k in range(1, 7):
        coef.append(coef[-1] * -1.0 / ((2 * k) * (2 * k + 1)))
    series = _polyval(coef, xs * xs)
    xl = jnp.where(small, 1.0, x)
    out = jnp.where(small, series, jnp.sin(xl) / xl)
    return jnp.where(jnp.isinf(x), 0.0, out)


# ---- modified Bessel functions of the second kind, and Airy Ai ---------------------------

_K_STEP = 0.125
_K_NODES = np.arange(41) * _K_STEP  # t in [0, 5]: x (cosh t - 1) >= 72 at the end for x >= 1
_K_SERIES_MAX = 1.0
_K_ASYMPTOTIC_MIN = 12.0


def _scaled_k_trapezoid(nu: float, x):
    """e^x K_nu(x) = int_0^inf exp(-x (cosh t - 1)) cosh(nu t) dt by the trapezoidal rule,
    step 1/8 on [0, 5]: error below 1e-9 relative for 0.6 <= x <= 12."""
    cm1 = jnp.asarray(np.cosh(_K_NODES) - 1, _F32)
    w = np.cosh(nu * _K_NODES) * _K_STEP
    w[0] *= 0.5
    f = jnp.exp(-x[..., None] * cm1) * jnp.asarray(w, _F32)
    return jnp.sum(f, axis=-1)


def _scaled_k_asymptotic(nu: float, x):
    """e^x K_nu(x) ~ sqrt(pi/(2x)) sum_k a_k(nu) / x^k; 20 terms, ~1e-10 for x >= 12."""
    a = _hankel_coefficients(nu, 20)
    return jnp.sqrt(_PI / (2 * x)) * _polyval(a, 1 / x)


def _harmonic(k: int) -> float:
    return sum(1.0 / j for j in range(1, k + 1))


def _k_series(x):
    """(K0, K1) for 0 < x <= 1 from the ascending series
    K0 = -(log(x/2) + gamma) I0 + sum_k H_k (x^2/4)^k / (k!)^2,
    K1 = 1/x + log(x/2) I1 - x/4 sum_k (psi(k+1) + psi(k+2)) (x^2/4)^k / (k! (k+1)!)."""
    z = x * x / 4
    log_half = jnp.log(x / 2)
    c0 = [_harmonic(k) / math.factorial(k) ** 2 for k in range(12)]
    k0 = -(log_half + _EULER) * jss.i0(x) + _polyval(c0, z)
    c1 = [(_harmonic(k) + _harmonic(k + 1) - 2 * _EULER) / (math.factorial(k) * math.factorial(k + 1)) for k in range(12)]
    k1 = 1 / x + log_half * jss.i1(x) - x / 4 * _polyval(c1, z)
    return k0, k1


def _scaled_k(nu: int, x):
    """e^x K_nu(x) for x > 0, nu in {0, 1}."""
    series = x <= _K_SERIES_MAX
    big = x >= _K_ASYMPTOTIC_MIN
    xs = jnp.where(series, x, 0.5)
    xm = jnp.where(series | big, 2.0, x)
    xb = jnp.where(big, x, 2 * _K_ASYMPTOTIC_MIN)
    s = _k_series(xs)[nu] * jnp.exp(xs)
    return jnp.where(series, s, jnp.where(big, _scaled_k_asymptotic(nu, xb), _scaled_k_trapezoid(nu, xm)))


def _k_edges(x, value):
    """K and scaled K: inf at 0, NaN for x < 0 (and NaN)."""
    return jnp.where(x == 0, _INF, jnp.where((x < 0) | jnp.isnan(x), _NAN, value))


def _k_unscaled(nu: int, x):
    """K_nu(x) = e^-x (e^x K_nu(x)); the series directly where it applies."""
    series = x <= _K_SERIES_MAX
    xs = jnp.where(series & (x > 0), x, 0.5)
    xp = jnp.where(x > 0, x, 1.0)
    return jnp.where(series, _k_series(xs)[nu], jnp.exp(-xp) * _scaled_k(nu, xp))


@register(aten.special_modified_bessel_k0.default)
def special_modified_bessel_k0(x):
    x = _float(x)
    return _k_edges(x, _k_unscaled(0, x))


@register(aten.special_modified_bessel_k1.default)
def special_modified_bessel_k1(x):
    x = _float(x)
    return _k_edges(x, _k_unscaled(1, x))


@register(aten.special_scaled_modified_bessel_k0.default)
def special_scaled_modified_bessel_k0(x):
    """e^x K0(x)."""
    x = _float(x)
    return _k_edges(x, _scaled_k(0, jnp.where(x > 0, x, 1.0)))


@register(aten.special_scaled_modified_bessel_k1.default)
def special_scaled_modified_bessel_k1(x):
    """e^x K1(x)."""
    x = _float(x)
    return _k_edges(x, _scaled_k(1, jnp.where(x > 0, x, 1.0)))


_AI0 = 0.355028053887817239260  # Ai(0)
_AIP0 = -0.258819403792806798405  # Ai'(0)
_AIRY_TAYLOR_MIN = -5.25  # zeta = 2/3 |x|^1.5 >= 8 below: the asymptotic series is ~1e-8
_AIRY_TAYLOR_MAX = 1.0
_AIRY_STEPS = 16
_AIRY_TERMS = 18


def _airy_taylor(x):
    """Ai(x) for -5.25 <= x <= 1: integrate y'' = t y from t = 0 in 16 equal steps; each
    step sums 18 terms of the local Taylor series, whose coefficients obey
    a_{k+2} = (t0 a_k + a_{k-1}) / ((k+1)(k+2))."""
    h = x / _AIRY_STEPS
    h2, h3 = h * h, h * h * h
    safe_h = jnp.where(h == 0, 1.0, h)

    def step(i, c):
        y, dy = c
        t0 = i.astype(_F32) * h
        b = [y, dy * h, t0 * y * h2 / 2]  # b_k = a_k h^k
        for k in range(1, _AIRY_TERMS - 2):
            b.append((t0 * h2 * b[k] + h3 * b[k - 1]) / ((k + 1) * (k + 2)))
        y_new = sum(b[1:], b[0])
        dy_new = sum((k * b[k] for k in range(2, len(b))), b[1]) / safe_h
        return y_new, dy_new

    y, _ = lax.fori_loop(jnp.int32(0), jnp.int32(_AIRY_STEPS), step, (jnp.full_like(x, _AI0), jnp.full_like(x, _AIP0)))
    return y


def _airy_zeta(z):
    """zeta = 2/3 z^1.5 as an unevaluated sum hi + lo, good to ~1e-14 relative: the phase
    of Ai(-z) for large z needs more than float32's 24 bits."""
    s = jnp.sqrt(z)
    p, e = _two_prod(s, s)
    r = ((z - p) - e) / (2 * s)  # sqrt(z) = s + r
    big, small = _two_prod(z, s)
    small = small + z * r  # z^1.5 = big + small
    c_hi = np.float32(2 / 3)
    c_lo = np.float32(2 / 3 - float(c_hi))
    hi, lo = _two_prod(big, c_hi)
    return hi, lo + big * c_lo + small * c_hi


def _airy_negative(x):
    """Ai(-z) ~ pi^-1/2 z^-1/4 [sin(zeta + pi/4) sum_k (-1)^k c_2k zeta^-2k
    - cos(zeta + pi/4) sum_k (-1)^k c_2k+1 zeta^-2k-1], zeta = 2/3 z^1.5,
    c_k = Gamma(3k + 1/2) / (54^k k! Gamma(k + 1/2)); for z >= 5.25."""
    z = -x
    zeta, zeta_lo = _airy_zeta(z)
    c = [math.exp(math.lgamma(3 * k + 0.5) - k * math.log(54) - math.lgamma(k + 1) - math.lgamma(k + 0.5))
         for k in range(24)]
    iz2 = 1 / (zeta * zeta)
    p = _polyval([(-1) ** k * c[2 * k] for k in range(12)], iz2)
    q = _polyval([(-1) ** k * c[2 * k + 1] for k in range(12)], iz2) / zeta
    r = math.sqrt(0.5)
    sn, cs = jnp.sin(zeta), jnp.cos(zeta)
    s4, c4 = (sn + cs) * r, (cs - sn) * r  # sin and cos of zeta_hi + pi/4
    sl, cl = jnp.sin(zeta_lo), jnp.cos(zeta_lo)
    s_phase, c_phase = s4 * cl + c4 * sl, c4 * cl - s4 * sl
    return (s_phase * p - c_phase * q) / (math.sqrt(_PI) * jnp.sqrt(jnp.sqrt(z)))


def _airy_positive(x):
    """Ai(x) = sqrt(x/3) / pi K_{1/3}(zeta), zeta = 2/3 x^1.5, for x >= 1."""
    zeta = (2 / 3) * x * jnp.sqrt(x)
    big = zeta >= _K_ASYMPTOTIC_MIN
    scaled = jnp.where(big, _scaled_k_asymptotic(1 / 3, jnp.where(big, zeta, 2 * _K_ASYMPTOTIC_MIN)),
                       _scaled_k_trapezoid(1 / 3, jnp.where(big, 1.0, zeta)))
    return jnp.sqrt(x / 3) / _PI * jnp.exp(-zeta) * scaled


@register(aten.special_airy_ai.default)
def special_airy_ai(x):
    """Ai(x); NaN at +-inf and 0 above x = 103.892, as torch."""
    x = _float(x)
    neg = x < _AIRY_TAYLOR_MIN
    pos = x > _AIRY_TAYLOR_MAX
    mid = _airy_taylor(jnp.where(neg | pos, 0.0, x))
    n = _airy_negative(jnp.where(neg & jnp.isfinite(x), x, 2 * _AIRY_TAYLOR_MIN))
    p = _airy_positive(jnp.where(pos & jnp.isfinite(x), x, 2 * _AIRY_TAYLOR_MAX))
    out = jnp.where(neg, n, jnp.where(pos, p, mid))
    out = jnp.where(x > 103.892, 0.0, out)
    return jnp.where(jnp.isinf(x), _NAN, out)


# ---- orthogonal polynomials of a tensor degree n ------------------------------------------
#
# torch truncates a floating n toward zero, and NaN or infinite n count as negative
# (value 0). The closed forms use n as a float; the three-term recurrences run in a
# lax.while_loop whose trip count is the largest degree that needs one, and, like torch's
# loops, a lane stops once its value is NaN. Loop counters are int32, so a recurrence of
# degree >= 2**31 gives NaN (torch would loop that many times).

_MAX_LOOP_DEGREE = 2.0 ** 31


def _degree(x, n):
    """(x, n) as float32, broadcast; n truncated toward zero, non-finite n -> -1."""
    x = _float(x)
    nf = _float(n)
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
