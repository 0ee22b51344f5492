"""cstorch's XLA compiler options: which ones, when they apply, and that a compiled
step really carries them (checked on the optimized HLO, where YNNPACK fusions show)."""
import re

import numpy as np
import torch

import cstorch_jax
from cstorch_jax.placement import SingleDevice
from cstorch_jax.xla_options import CPU_OPTIONS, YNN, compiler_options


def test_cpu_options_keep_ynnpack_for_dots_and_reductions():
    assert compiler_options("cpu") == CPU_OPTIONS
    assert CPU_OPTIONS[YNN] == "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT,LIBRARY_FUSION_TYPE_REDUCE"
    assert compiler_options("gpu") == {}


def test_programs_computing_in_16_bit_keep_ynnpack_for_dots_only():
    assert compiler_options("cpu", computes_in_16_bit=True) == {YNN: "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT"}
    assert compiler_options("gpu", computes_in_16_bit=True) == {}


def test_an_option_set_in_xla_flags_wins(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", f"--{YNN}= --xla_cpu_enable_fast_math=false")
    assert YNN not in compiler_options("cpu")


def _custom_fusion_ops(hlo: str) -> list[set[str]]:
    """The HLO op names inside every library (kCustom) fusion of an optimized module."""
    ops = []
    for name in re.findall(r"kind=kCustom, calls=%([\w.\-]+)", hlo):
        body = re.search(r"\n%" + re.escape(name) + r" .*?\n\}", hlo, re.S).group(0)
        ops.append(set(re.findall(r" ([a-z\-]+)\(", body)))
    return ops


def test_compiled_step_runs_convolutions_outside_ynnpack_and_matches_torch():
    g = torch.Generator().manual_seed(0)
    x, w, v = (torch.randn(*shape, generator=g) for shape in ((4, 8, 10, 10), (16, 8, 3, 3), (16 * 8 * 8, 32)))

    def fn(x, w, v):
        y = torch.nn.functional.conv2d(x, w)
        return y.flatten(1) @ v, y.sum((0, 2, 3))  # the sum: what a bias gradient computes

    step = cstorch_jax.jit(fn)
    hlo = str(step.lower(x, w, v).hlo)
    assert "convolution(" in hlo
    fusions = _custom_fusion_ops(hlo)
    assert not any("convolution" in ops for ops in fusions), fusions
    assert any("dot" in ops for ops in fusions), "the dot should still go to YNNPACK"
    assert any("reduce" in ops for ops in fusions), "the sum over the convolution's output should go to YNNPACK"
    # Against float64 truth, each element within a few float32 roundings of the sum of its
    # terms' magnitudes: the outputs (~300) come from ~7,000 terms, so an element near zero
    # carries an absolute error that a fixed tolerance cannot bound (CI once saw 3.6e-4 at 2.35).
    truth = fn(x.double(), w.double(), v.double())
    magnitude = fn(x.double().abs(), w.double().abs(), v.double().abs())
    for got, want, size in zip(step(x, w, v), truth, magnitude):
        error = (got.double() - want).abs()
        assert (error <= 8 * torch.finfo(torch.float32).eps * size).all(), (error / size).max()


def test_a_bfloat16_step_leaves_its_reductions_to_xla():
    """The reduction of a bfloat16 layer norm (and its backward) runs in XLA's own loops,
    not in a YNNPACK fusion (which loses the float32 opmath there); its dot still goes to
    YNNPACK."""
    x, w = torch.randn(64, 768, dtype=torch.bfloat16), torch.randn(768, 16, dtype=torch.bfloat16)

    def fn(x, w):
        return torch.nn.functional.layer_norm(x, (768,)) @ w

    hlo = str(cstorch_jax.jit(fn).lower(x, w).hlo)
    fusions = _custom_fusion_ops(hlo)
    assert any("dot" in ops for ops in fusions), fusions
    assert not any("reduce" in ops for ops in fusions), fusions
    assert "reduce(" in hlo


def test_single_device_cpu_batches_are_fresh_host_arrays():
    t = torch.arange(6, dtype=torch.int64).reshape(2, 3)
    (a,) = SingleDevice().batch_arrays([t], ["x"])
    assert isinstance(a, np.ndarray) and a.dtype == np.int32
    t.add_(10)  # the copy does not alias torch memory
    assert a.tolist() == [[0, 1, 2], [3, 4, 5]]
