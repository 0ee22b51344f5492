"""Bessel functions: modified I0, I1 (and e^-|x|-scaled) from jax.scipy.special; J0, J1, Y0,
Y1; modified K0, K1 (and e^x-scaled); the spherical j0; and Airy Ai.

- J0, J1, Y0, Y1: Miller's backward recurrence with the Neumann series for Y
  (0 < |x| <= 25), Hankel's asymptotic expansion beyond;
- K0, K1: the ascending series for x <= 1, the trapezoidal rule on
  K_nu(x) = int_0^inf exp(-x cosh t) cosh(nu t) dt (spectrally accurate: the integrand is
  analytic and decays double-exponentially) for x <= 12, the asymptotic expansion beyond;
- Airy Ai: Taylor-series integration of y'' = x y from x = 0 on [-5.25, 1], the
  oscillatory asymptotic expansion below, Ai(x) = sqrt(x/3) K_{1/3}(2/3 x^1.5) / pi above.

Everything computes in float32; edge values follow torch's CPU kernels."""
from __future__ import annotations

import math

import jax.numpy as jnp
import jax.scipy.special as jss
import numpy as np
import torch
from jax import lax

from .dtype_policy import opmath
from .registry import register
from .special import _EULER, _F32, _INF, _NAN, _PI, _c, _polyval, _two_prod

aten = torch.ops.aten



@register(aten.i0.default, aten.special_modified_bessel_i0.default)
def i0(x):
    return jss.i0(opmath(x))


@register(aten.special_i0e.default)
def special_i0e(x):
    return jss.i0e(opmath(x))


@register(aten.special_i1.default, aten.special_modified_bessel_i1.default)
def special_i1(x):
    return jss.i1(opmath(x))


@register(aten.special_i1e.default)
def special_i1e(x):
    return jss.i1e(opmath(x))


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
    x = opmath(x)
    return jnp.where(jnp.isinf(x) | jnp.isnan(x), _NAN, _bessel_jy(x)[0])


@register(aten.special_bessel_j1.default)
def special_bessel_j1(x):
    """J1(x), odd; NaN at +-inf (as torch)."""
    x = opmath(x)
    out = _bessel_jy(x)[1]
    return jnp.where(jnp.isinf(x) | jnp.isnan(x), _NAN, jnp.where(x < 0, -out, out))


def _y_edges(x, value):
    """Y0, Y1: -inf at 0, NaN for x < 0, 0 at +inf (as torch)."""
    out = jnp.where(x == 0, -_INF, jnp.where(x < 0, _NAN, value))
    return jnp.where(jnp.isposinf(x) | jnp.isnan(x), _NAN, out)


@register(aten.special_bessel_y0.default)
def special_bessel_y0(x):
    x = opmath(x)
    return _y_edges(x, _bessel_jy(x)[2])


@register(aten.special_bessel_y1.default)
def special_bessel_y1(x):
    x = opmath(x)
    return _y_edges(x, _bessel_jy(x)[3])


@register(aten.special_spherical_bessel_j0.default)
def special_spherical_bessel_j0(x):
    """j0(x) = sin(x) / x; its Taylor series 1 - x^2/6 + x^4/120 - ... below |x| = 0.5;
    0 at +-inf."""
    x = opmath(x)
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
    x = opmath(x)
    return _k_edges(x, _k_unscaled(0, x))


@register(aten.special_modified_bessel_k1.default)
def special_modified_bessel_k1(x):
    x = opmath(x)
    return _k_edges(x, _k_unscaled(1, x))


@register(aten.special_scaled_modified_bessel_k0.default)
def special_scaled_modified_bessel_k0(x):
    """e^x K0(x)."""
    x = opmath(x)
    return _k_edges(x, _scaled_k(0, jnp.where(x > 0, x, 1.0)))


@register(aten.special_scaled_modified_bessel_k1.default)
def special_scaled_modified_bessel_k1(x):
    """e^x K1(x)."""
    x = opmath(x)
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
    x = opmath(x)
    neg = x < _AIRY_TAYLOR_MIN
    pos = x > _AIRY_TAYLOR_MAX
    mid = _airy_taylor(jnp.where(neg | pos, 0.0, x))
    n = _airy_negative(jnp.where(neg & jnp.isfinite(x), x, 2 * _AIRY_TAYLOR_MIN))
    p = _airy_positive(jnp.where(pos & jnp.isfinite(x), x, 2 * _AIRY_TAYLOR_MAX))
    out = jnp.where(neg, n, jnp.where(pos, p, mid))
    out = jnp.where(x > 103.892, 0.0, out)
    return jnp.where(jnp.isinf(x), _NAN, out)
