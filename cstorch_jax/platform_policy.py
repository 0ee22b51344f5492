"""What cstorch does differently per XLA platform: the one place that switches it.

Some of the engine's machinery exists only for XLA:CPU and is wrong or useless elsewhere.
`policy_for(platform)` is the table; every user asks it instead of testing the platform name:

| machinery                                   | cpu | gpu (cuda, rocm) and others |
|---------------------------------------------|-----|-----------------------------|
| channels-last convolutions (`passes/channels_last.py`): Eigen's convolutions want NHWC | on | off: XLA:GPU assigns convolution layouts itself (cuDNN) |
| large float32 products to torch's MKL `sgemm` (`passes/gemm_routing.py`, `native/`) | on | off: the handler is a host function; XLA:GPU calls cuBLAS |
| glibc memory policy (`memory_policy.py`): no mmap per step for XLA:CPU's temporaries | on | off: device buffers are not malloc'ed on the host |
| compiler options (`xla_options.py`)          | YNNPACK for dots (and reductions unless the program computes in 16 bits) | none: XLA's defaults |

On every platform the lowerings ask for `precision=HIGHEST` with float32 accumulation
(`lowering/`): float32 products are not rounded to TF32 on a GPU (torch's default,
`torch.backends.cuda.matmul.allow_tf32 = False`), and bfloat16/float16 operands stay 16-bit
in the dot with a float32 accumulator, as torch's CUDA kernels compute them.

The memory policy is applied when a CSX backend is created (`apply_host_policies`), which is
usually before JAX starts its thread pools, that is before the platform is known from JAX
itself; `expected_platform()` predicts it from the environment without starting a backend.
"""
from __future__ import annotations

import dataclasses
import importlib.metadata
import os

import jax

from . import memory_policy, xla_options

GPU_PLATFORMS = ("gpu", "cuda", "rocm")


@dataclasses.dataclass(frozen=True)
class PlatformPolicy:
    """The machinery switched on for one XLA platform (see the module's table)."""

    platform: str
    channels_last: bool
    blas_gemm: bool
    host_memory_policy: bool

    def compiler_options(self, computes_in_16_bit: bool = False) -> dict[str, str]:
        """The XLA compiler options for a program on this platform (`xla_options.py`)."""
        return xla_options.compiler_options(self.platform, computes_in_16_bit)


CPU = PlatformPolicy("cpu", channels_last=True, blas_gemm=True, host_memory_policy=True)


def policy_for(platform: str) -> PlatformPolicy:
    """The policy of an XLA platform name ("cpu", "gpu", "cuda", "rocm", "tpu", ...)."""
    if platform == "cpu":
        return CPU
    return PlatformPolicy(platform, channels_last=False, blas_gemm=False, host_memory_policy=False)


def expected_platform() -> str:
    """The platform JAX will choose, predicted without starting it: the first entry of
    `JAX_PLATFORMS` when set; else "gpu" when a CUDA/ROCm PJRT plugin is installed and an
    NVIDIA/AMD device node exists; else "cpu"."""
    chosen = os.environ.get("JAX_PLATFORMS", "").split(",")[0].strip().lower()
    if chosen:
        return "gpu" if chosen in GPU_PLATFORMS else chosen
    plugins = {ep.name for ep in importlib.metadata.entry_points(group="jax_plugins")}
    has_cuda = any("cuda" in name for name in plugins) and os.path.exists("/dev/nvidiactl")
    has_rocm = any("rocm" in name for name in plugins) and os.path.exists("/dev/kfd")
    return "gpu" if has_cuda or has_rocm else "cpu"


def jax_started() -> bool:
    """Whether JAX has created its backends (and with them its thread pools); asks without
    starting anything."""
    from jax._src import xla_bridge  # the one public-enough probe: jax has no API for it

    return xla_bridge.backends_are_initialized()


def apply_host_policies() -> None:
    """Where the platform wants it, the host memory policy (`memory_policy.apply`, opt-out
    `CSTORCH_MALLOC_POLICY=0`). Called when a CSX backend is created (`cstorch.backend("CSX")`),
    never at import: importing cstorch or cstorch_jax changes nothing in the process.

    The platform is JAX's own once JAX has started a backend, else the one it will choose
    (`expected_platform`, which starts nothing). The policy is best applied before JAX starts
    its thread pools (a thread that already owns a malloc arena keeps it); applied later it
    still holds for the main arena and every new thread, and `memory_policy.status()` says
    that it came late. Idempotent."""
    started = jax_started()
    platform = jax.default_backend() if started else expected_platform()
    if policy_for(platform).host_memory_policy:
        memory_policy.apply(after_jax_started=started)
    else:
        memory_policy.skip(f"not used on {platform}")
