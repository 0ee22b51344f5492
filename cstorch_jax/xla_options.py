"""The XLA compiler options cstorch compiles every step with, per platform.

On CPU, XLA hands dots, convolutions and reductions to the YNNPACK library by default
(`xla_cpu_experimental_ynn_fusion_type`). Measured on the 2-core CPU of
`benchmarks/RESULTS.md`: YNNPACK's convolution runs 3-4x slower than XLA's own (Eigen)
one — a 3x3 convolution 64x26x26x32 -> 64 takes 44 ms against 10-11 ms, and torch's
oneDNN 17.5 ms — while its dots are as fast as or faster than Eigen's (MLP step 0.84x
eager torch with them, 1.09x without) and its reductions are faster than XLA's loops
(GPT step 177 -> 166 ms, CNN 43.3 -> 40.8 ms with them; jax 0.10.2). So cstorch keeps
YNNPACK for individual dots and for reductions, never for convolutions: the reduction
fusion takes a bias gradient (the sum over a convolution's output) but leaves the
convolution to Eigen (checked in the optimized HLO of the benchmark CNN).

The options change which kernels run, never the math: every one computes the same
float32 dot, convolution or sum (summation order aside). That does not hold for
YNNPACK's reduction fusions in a program that computes in 16-bit floats: they take the
elementwise ops around a reduce into the library fusion and lose the float32 opmath of
the 16-bit chain -- a bfloat16 layer norm's input gradient came out 8x less accurate than
eager torch's (error against float64 1.79; XLA's own loops 0.22, eager 0.19;
tests/lowering/test_planted_bugs.py). Such programs (`set_half_dtype`, 16-bit
tensors) keep YNNPACK for dots only. An option the user sets in `XLA_FLAGS` wins over
cstorch's value for it.
"""
from __future__ import annotations

import os

YNN = "xla_cpu_experimental_ynn_fusion_type"
CPU_OPTIONS = {YNN: "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT,LIBRARY_FUSION_TYPE_REDUCE"}
CPU_OPTIONS_16_BIT = {YNN: "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT"}  # see the module docstring


def compiler_options(platform: str, computes_in_16_bit: bool = False) -> dict[str, str]:
    """The options for `jax.stages.Lowered.compile(compiler_options=...)` on `platform`
    ("cpu", "gpu", ...) for a program that does (`computes_in_16_bit`) or does not hold
    float16/bfloat16 values, without those the user set in the XLA_FLAGS environment
    variable."""
    options = {} if platform != "cpu" else CPU_OPTIONS_16_BIT if computes_in_16_bit else CPU_OPTIONS
    user = os.environ.get("XLA_FLAGS", "")
    return {k: v for k, v in options.items() if f"--{k}=" not in user}
