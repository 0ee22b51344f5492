"""Elementwise ops: unary math, binary arithmetic, comparisons, logic, selection.

Float-valued math computes on `opmath(x)` (dtype_policy.py): integer, bool and 16-bit
inputs in float32, as torch's CPU kernels do; binary arithmetic on 16-bit floats too
(`@in_opmath`), so a Python scalar such as the 0.1 of `x * 0.1` is not rounded to 16 bits
first. The interpreter then casts every result to the dtype torch reports for the node,
which is the one rounding to 16 bits. Selections, comparisons and sign manipulation are
exact and compute in the input dtype.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from .dtype_policy import in_opmath, opmath
from .registry import register

aten = torch.ops.aten


def _unary(op, fn, float_only=True):
    register(op)(lambda x: fn(opmath(x)) if float_only else fn(x))


for _op, _fn in [
    (aten.exp.default, jnp.exp),
    (aten.exp2.default, jnp.exp2),
    (aten.expm1.default, jnp.expm1),
    (aten.log.default, jnp.log),
    (aten.log2.default, jnp.log2),
    (aten.log10.default, jnp.log10),
    (aten.log1p.default, jnp.log1p),
    (aten.sqrt.default, jnp.sqrt),
    (aten.rsqrt.default, jax.lax.rsqrt),
    (aten.reciprocal.default, lambda x: 1.0 / x),
    (aten.sin.default, jnp.sin),
    (aten.cos.default, jnp.cos),
    (aten.tan.default, jnp.tan),
    (aten.asin.default, jnp.arcsin),
    (aten.acos.default, jnp.arccos),
    (aten.atan.default, jnp.arctan),
    (aten.sinh.default, jnp.sinh),
    (aten.cosh.default, jnp.cosh),
    (aten.tanh.default, jnp.tanh),
    (aten.asinh.default, jnp.arcsinh),
    (aten.acosh.default, jnp.arccosh),
    (aten.atanh.default, jnp.arctanh),
    (aten.sigmoid.default, jax.nn.sigmoid),
    (aten.erf.default, jax.scipy.special.erf),
    (aten.erfinv.default, jax.scipy.special.erfinv),
]:
    _unary(_op, _fn)

for _op, _fn in [
    (aten.abs.default, jnp.abs),
    (aten.neg.default, jnp.negative),
    (aten.floor.default, jnp.floor),
    (aten.ceil.default, jnp.ceil),
    (aten.trunc.default, jnp.trunc),
    (aten.round.default, jnp.round),  # half to even, as torch
    (aten.relu.default, lambda x: jnp.maximum(x, jnp.zeros((), x.dtype))),
    (aten.isnan.default, jnp.isnan),
    (aten.isinf.default, jnp.isinf),
    (aten.logical_not.default, jnp.logical_not),
    (aten.bitwise_not.default, lambda x: jnp.logical_not(x) if x.dtype == jnp.bool_ else jnp.invert(x)),
]:
    _unary(_op, _fn, float_only=False)


@register(aten.sign.default)
def sign(x):
    """-1, 0 or 1; torch's sign of NaN is 0 (jnp.sign gives NaN)."""
    if x.dtype == jnp.bool_:
        return x
    one = jnp.ones((), x.dtype)
    return jnp.where(x > 0, one, jnp.where(x < 0, -one, jnp.zeros((), x.dtype)))


@register(aten.round.decimals)
def round_decimals(x, *, decimals=0):
    """torch's rule: round-half-even of x * 10**d, divided back (x / 10**-d for d < 0)."""
    x = opmath(x)
    scale = jnp.asarray(10.0 ** abs(decimals), x.dtype)
    if decimals < 0:
        return jnp.round(x / scale) * scale
    return jnp.round(x * scale) / scale


@register(aten.gelu.default)
def gelu(x, approximate="none"):
    return jax.nn.gelu(opmath(x), approximate=approximate == "tanh")


@register(aten.silu.default)
def silu(x):
    return jax.nn.silu(opmath(x))


@register(aten.leaky_relu.default)
@in_opmath
def leaky_relu(x, negative_slope=0.01):
    return jnp.where(x > 0, x, x * negative_slope)


@register(aten.hardtanh.default)
def hardtanh(x, min_val=-1.0, max_val=1.0):
    return jnp.clip(x, min_val, max_val)


# ---- binary arithmetic -------------------------------------------------------------


@register(aten.add.Tensor, aten.add.Scalar)
@in_opmath
def add(a, b, alpha=1):
    return a + (b * alpha if alpha != 1 else b)


@register(aten.sub.Tensor, aten.sub.Scalar)
@in_opmath
def sub(a, b, alpha=1):
    return a - (b * alpha if alpha != 1 else b)


@register(aten.rsub.Tensor, aten.rsub.Scalar)
@in_opmath
def rsub(a, b, alpha=1):
    return b - (a * alpha if alpha != 1 else a)


@register(aten.mul.Tensor, aten.mul.Scalar)
@in_opmath
def mul(a, b):
    if isinstance(a, jax.Array) and a.dtype == jnp.bool_ and isinstance(b, jax.Array) and b.dtype == jnp.bool_:
        return jnp.logical_and(a, b)
    return a * b


def _is_integral(x) -> bool:
    if isinstance(x, bool):
        return True
    if isinstance(x, int):
        return True
    if isinstance(x, float):
        return False
    return not jnp.issubdtype(jnp.asarray(x).dtype, jnp.inexact)


@register(aten.div.Tensor, aten.div.Scalar)
@in_opmath
def div(a, b):
    return jnp.true_divide(a, b)


@register(aten.div.Tensor_mode, aten.div.Scalar_mode)
@in_opmath
def div_mode(a, b, rounding_mode=None):
    if rounding_mode is None:
        return jnp.true_divide(a, b)
    if _is_integral(a) and _is_integral(b):
        if rounding_mode == "floor":
            return jnp.floor_divide(a, b)
        dt = jnp.result_type(a, b)
        a_, b_ = jnp.broadcast_arrays(jnp.asarray(a, dt), jnp.asarray(b, dt))
        return jax.lax.div(a_, b_)  # integer division rounding toward zero, as C and torch
    if rounding_mode == "trunc":
        return jnp.trunc(jnp.true_divide(a, b))
    return _div_flooropmath(a, b)


def _div_flooropmath(a, b):
    """torch's floating floor division (c10::div_floor_floating), not floor(a / b).

    The quotient is rebuilt from fmod so it is exact: torch.div(1., 0.1, rounding_mode="floor")
    is 9 (as Python's 1 // 0.1), while floor(1 / 0.1) is 10. Division by zero gives the
    IEEE a / b, and a zero quotient takes the sign of a / b.
    """
    dt = jnp.result_type(a, b)
    if not jnp.issubdtype(dt, jnp.inexact):
        dt = jnp.float32
    a, b = jnp.broadcast_arrays(jnp.asarray(a, dt), jnp.asarray(b, dt))
    zero = jnp.zeros((), dt)
    mod = jnp.fmod(a, b)
    div = (a - mod) / b
    div = jnp.where((mod != 0) & ((b < 0) != (mod < 0)), div - 1, div)
    floordiv = jnp.floor(div)
    floordiv = jnp.where(div - floordiv > 0.5, floordiv + 1, floordiv)
    true_div = a / b
    floordiv = jnp.where(div != 0, floordiv, jnp.copysign(zero, true_div))
    return jnp.where(b == 0, true_div, floordiv)


@register(aten.floor_divide.default)
def floor_divide(a, b):
    return div_mode(a, b, "floor")


@register(aten.remainder.Tensor, aten.remainder.Scalar, aten.remainder.Scalar_Tensor)
@in_opmath
def remainder(a, b):
    return jnp.remainder(a, b)  # sign of the divisor, as torch


@register(aten.fmod.Tensor, aten.fmod.Scalar)
@in_opmath
def fmod(a, b):
    return jnp.fmod(a, b)  # sign of the dividend, as torch


@register(aten.pow.Tensor_Scalar, aten.pow.Tensor_Tensor, aten.pow.Scalar)
@in_opmath
def pow_(a, b):
    if isinstance(b, (int, float)) and not isinstance(b, bool):
        if b == 2:
            return a * a
        if b == 0.5 and not _is_integral(a):
            return jnp.sqrt(a)
    return jnp.power(a, b)


@register(aten.maximum.default)
def maximum(a, b):
    return jnp.maximum(a, b)  # NaN propagates, as torch


@register(aten.minimum.default)
def minimum(a, b):
    return jnp.minimum(a, b)


@register(aten.atan2.default)
def atan2(a, b):
    return jnp.arctan2(opmath(a), opmath(b))


@register(aten.clamp.default, aten.clamp.Tensor)
def clamp(x, min=None, max=None):
    if min is not None:
        x = jnp.maximum(x, min)
    if max is not None:
        x = jnp.minimum(x, max)
    return x


@register(aten.clamp_min.default, aten.clamp_min.Tensor)
def clamp_min(x, min):
    return jnp.maximum(x, min)


@register(aten.clamp_max.default, aten.clamp_max.Tensor)
def clamp_max(x, max):
    return jnp.minimum(x, max)


@register(aten.where.self)
def where(cond, a, b):
    return jnp.where(cond, a, b)


# ---- comparisons and logic ---------------------------------------------------------

for _name, _fn in [("eq", jnp.equal), ("ne", jnp.not_equal), ("lt", jnp.less), ("le", jnp.less_equal),
                   ("gt", jnp.greater), ("ge", jnp.greater_equal)]:
    _packet = getattr(aten, _name)
    register(_packet.Tensor, _packet.Scalar)(_fn)

register(aten.logical_and.default)(jnp.logical_and)
register(aten.logical_or.default)(jnp.logical_or)
register(aten.logical_xor.default)(jnp.logical_xor)


def _bitwise(logical, bitwise):
    def fn(a, b):
        if jnp.asarray(a).dtype == jnp.bool_ and jnp.asarray(b).dtype == jnp.bool_:
            return logical(a, b)
        return bitwise(a, b)

    return fn


register(aten.bitwise_and.Tensor, aten.bitwise_and.Scalar)(_bitwise(jnp.logical_and, jnp.bitwise_and))
register(aten.bitwise_or.Tensor, aten.bitwise_or.Scalar)(_bitwise(jnp.logical_or, jnp.bitwise_or))
register(aten.bitwise_xor.Tensor, aten.bitwise_xor.Scalar)(_bitwise(jnp.logical_xor, jnp.bitwise_xor))


# ---- sign and floating-point manipulation -------------------------------------------


@register(aten.copysign.Tensor, aten.copysign.Scalar)
def copysign(a, b):
    """|a| with the sign bit of b (so -0.0 and -NaN count as negative); always floating."""
    a = opmath(a)
    return jnp.copysign(a, jnp.asarray(b, a.dtype))


@register(aten.signbit.default)
def signbit(x):
    """The sign bit: True for -0.0 and negative NaN too; x < 0 for integers."""
    x = jnp.asarray(x)
    if jnp.issubdtype(x.dtype, jnp.inexact):
        return jnp.signbit(x)
    return x < 0


@register(aten.angle.default)
def angle(x):
    """Argument of a real number: pi for x < 0, 0 otherwise (also for -0.0), NaN for NaN."""
    x = opmath(x)
    return jnp.where(jnp.isnan(x), x, jnp.where(x < 0, jnp.asarray(jnp.pi, x.dtype), jnp.zeros((), x.dtype)))


@register(aten.fmax.default)
def fmax(a, b):
    """max ignoring NaN (NaN only if both are NaN); on ties the first argument, as torch."""
    return jnp.where((a >= b) | jnp.isnan(b), a, b)


@register(aten.fmin.default)
def fmin(a, b):
    """min ignoring NaN (NaN only if both are NaN); on ties the first argument, as torch."""
    return jnp.where((a <= b) | jnp.isnan(b), a, b)


@register(aten.hypot.default)
def hypot(a, b):
    """sqrt(a^2 + b^2) without overflow; inf if either is inf, even against NaN."""
    return jnp.hypot(opmath(a), opmath(b))


@register(aten.nextafter.default)
def nextafter(a, b):
    """The next representable value after a in the direction of b (denormals included)."""
    return jnp.nextafter(a, b)


def _exact_pow2(k):
    """2.0 ** k for integral float32 k in [-126, 127], built from its exponent bits."""
    bits = (k.astype(jnp.int32) + 127) << 23
    return jax.lax.bitcast_convert_type(bits, jnp.float32)


@register(aten.ldexp.Tensor)
def ldexp(x, other):
    """x * 2**other, as torch's mul(x, pow(2, other)) in float32: 2**other is inf from
    128 on and 0 below -149 (so ldexp(0, 128) is NaN); integral exponents are applied
    exactly, in two normal-range factors below -126 (XLA flushes subnormals to zero)."""
    x = opmath(x)
    k = jnp.asarray(other).astype(x.dtype)
    integral = k == jnp.round(k)
    kc = jnp.clip(jnp.where(integral, k, 0), -149, 127)
    k1 = jnp.clip(kc, -126, 127)
    exact = x * _exact_pow2(k1) * _exact_pow2(kc - k1)
    exact = jnp.where(k >= 128, x * jnp.inf, jnp.where(k < -149, x * 0, exact))
    return jnp.where(integral, exact, x * jnp.power(jnp.asarray(2, x.dtype), k))


@register(aten.frexp.Tensor)
def frexp(x):
    """(mantissa, exponent) with x = mantissa * 2**exponent, 0.5 <= |mantissa| < 1;
    (x, 0) for 0, inf and NaN. Read from the float32 bits (16-bit inputs widen exactly),
    so subnormals are decomposed too."""
    x = jnp.asarray(x).astype(jnp.float32)
    bits = jax.lax.bitcast_convert_type(x, jnp.int32)
    sign = bits & jnp.int32(-(2**31))
    field = (bits >> 23) & 0xFF
    frac = bits & 0x7FFFFF
    normal_exp = field - 126
    normal_mant = sign | (126 << 23) | frac
    # subnormal: value = frac * 2**-149 with frac of bit length L = 32 - clz(frac)
    length = 32 - jax.lax.clz(frac)
    sub_exp = length - 149
    sub_mant = sign | (126 << 23) | ((frac << jnp.clip(24 - length, 0, 23)) & 0x7FFFFF)
    subnormal = field == 0
    mant = jax.lax.bitcast_convert_type(jnp.where(subnormal, sub_mant, normal_mant), jnp.float32)
    exp = jnp.where(subnormal, sub_exp, normal_exp)
    special = (x == 0) | ~jnp.isfinite(x)
    return jnp.where(special, x, mant), jnp.where(special, 0, exp).astype(jnp.int32)


@register(aten.elu.default)
def elu(x, alpha=1.0, scale=1.0, input_scale=1.0):
    """scale * x for x > 0, else scale * alpha * (exp(x * input_scale) - 1); 16-bit
    inputs compute in float32, as torch's CPU kernel."""
    x = opmath(x)
    return jnp.where(x > 0, x * scale, jnp.expm1(x * input_scale) * (alpha * scale))
