"""Special functions: the gamma family, error functions, Hurwitz zeta and the incomplete
gamma functions, with the float32 helpers that bessel.py and polynomials.py share.

Everything computes in float32: operands go through `dtype_policy.opmath` (integer, bool
and 16-bit inputs are promoted; the interpreter casts the result to torch's dtype). Where jax.scipy.special has an accurate
float32 version it is used; the rest is written here from the standard mathematics.

Edge values (zeros, poles, infinities, NaN, out-of-domain arguments) follow torch's CPU
kernels; each function's docstring states them.
"""
from __future__ import annotations

import math

import jax.numpy as jnp
import jax.scipy.special as jss
import torch
from jax import lax

from .dtype_policy import opmath
from .registry import register

aten = torch.ops.aten

_F32 = jnp.float32
_PI = math.pi
_EULER = 0.57721566490153286061
_INF = float("inf")
_NAN = float("nan")



def _c(value):
    """A float32 constant."""
    return jnp.asarray(value, _F32)


def _float2(a, b):
    a, b = jnp.broadcast_arrays(opmath(a), opmath(b))
    return a, b


# ---- gamma family -----------------------------------------------------------------------


@register(aten.lgamma.default)
def lgamma(x):
    """log|Gamma(x)|; +inf at the poles 0, -1, -2, ..."""
    return jss.gammaln(opmath(x))


@register(aten.digamma.default)
def digamma(x):
    """psi(x) = Gamma'(x) / Gamma(x); psi(+-0) = -+inf, NaN at the negative integers."""
    x = opmath(x)
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
    x = opmath(x)
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
    return jss.erfc(opmath(x))


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
    x = opmath(x)
    large = x >= 5
    xs = jnp.where(large, 0.0, x)
    direct = _exp_of_square(xs) * jss.erfc(xs)
    out = jnp.where(large, _erfcx_asymptotic(jnp.where(large, x, 5.0)), direct)
    return jnp.where(x < -10, _INF, out)


@register(aten.special_ndtri.default)
def special_ndtri(p):
    """Phi^-1(p), the standard normal quantile; -inf at 0, inf at 1, NaN outside [0, 1]."""
    return jss.ndtri(opmath(p))
