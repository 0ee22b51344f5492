"""The XLA compiler options cstorch compiles every step with, per platform.

On CPU, XLA hands dots, convolutions and reductions to the YNNPACK library by default
(`xla_cpu_experimental_ynn_fusion_type`). Measured on the 2-core CPU of
`benchmarks/RESULTS.md` (jax 0.10.2): YNNPACK's convolution runs 3-4x slower than XLA's
own (Eigen) one — a 3x3 convolution 64x26x26x32 -> 64 takes 44 ms against 10-11 ms,
and torch's oneDNN 17.5 ms — while its dots are as fast as or faster than Eigen's
(MLP step 0.84x eager torch with them, 1.09x without). So cstorch keeps YNNPACK for
individual dots only. Reductions are left out as well: the reduction fusion would pull
a convolution followed by a sum (a bias gradient) back into YNNPACK.

The options change which kernels run, never the math: every one computes the same
float32 dot or convolution (summation order aside). An option the user sets in
`XLA_FLAGS` wins over cstorch's value for it.
"""
from __future__ import annotations

import os

CPU_OPTIONS = {
    "xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT",
}


def compiler_options(platform: str) -> dict[str, str]:
    """The options for `jax.stages.Lowered.compile(compiler_options=...)` on `platform`
    ("cpu", "gpu", ...), without those the user set in the XLA_FLAGS environment variable."""
    options = CPU_OPTIONS if platform == "cpu" else {}
    user = os.environ.get("XLA_FLAGS", "")
    return {k: v for k, v in options.items() if f"--{k}=" not in user}
