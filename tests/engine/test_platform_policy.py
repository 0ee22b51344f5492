"""The platform switch (`cstorch_jax/platform_policy.py`), exercised on CPU: the CPU-only
machinery (channels-last pass, BLAS GEMM routing, glibc memory policy, XLA:CPU options) is on
for "cpu" and off for a GPU, and a step compiled under the GPU policy still equals eager torch."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

import cstorch_jax
from cstorch_jax import placement, platform_policy
from cstorch_jax.passes import gemm_routing
from cstorch_jax.platform_policy import expected_platform, policy_for


def test_cpu_turns_its_machinery_on_and_a_gpu_turns_it_off():
    cpu = policy_for("cpu")
    assert (cpu.channels_last, cpu.blas_gemm, cpu.host_memory_policy) == (True, True, True)
    assert cpu.compiler_options() and cpu.compiler_options(computes_in_16_bit=True) != cpu.compiler_options()
    for name in ("gpu", "cuda", "rocm", "tpu"):
        other = policy_for(name)
        assert (other.channels_last, other.blas_gemm, other.host_memory_policy) == (False, False, False)
        assert other.compiler_options() == {} and other.compiler_options(True) == {}


class _ConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3)
        self.fc = torch.nn.Linear(8 * 6 * 6, 5)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).flatten(1)).square().mean()


def _step_graph_and_grads(monkeypatch, platform: str):
    monkeypatch.setattr(placement.Placement, "platform", property(lambda self: platform))
    for name in ("MIN_MACS", "MIN_MACS_PLAIN", "MIN_DEPTH"):  # route the small products too
        monkeypatch.setattr(gemm_routing, name, 1)
    torch.manual_seed(0)
    net, x = _ConvNet(), torch.randn(4, 3, 8, 8)
    params = dict(net.named_parameters())

    def loss_and_grads(p, x):
        loss = torch.func.functional_call(net, p, (x,))
        return (loss, *torch.autograd.grad(loss, list(p.values())))

    fn = cstorch_jax.jit(loss_and_grads)
    got = fn(params, x)
    targets = {str(n.target) for n in fn.executable(params, x).graph_module.graph.nodes if n.op == "call_function"}
    want = loss_and_grads(params, x)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)
    return targets


def test_the_gpu_policy_lowers_the_captured_graph_unchanged(monkeypatch):
    on_cpu = _step_graph_and_grads(monkeypatch, "cpu")
    assert "cstorch.gemm.default" in on_cpu  # the CPU passes ran
    on_gpu = _step_graph_and_grads(monkeypatch, "gpu")
    assert "cstorch.gemm.default" not in on_gpu


@pytest.mark.parametrize("env, want", [
    ({"JAX_PLATFORMS": "cpu"}, "cpu"),
    ({"JAX_PLATFORMS": "cuda,cpu"}, "gpu"),
    ({"JAX_PLATFORMS": "rocm"}, "gpu"),
    ({"JAX_PLATFORMS": "tpu"}, "tpu"),
])
def test_expected_platform_follows_jax_platforms(monkeypatch, env, want):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert expected_platform() == want


def test_expected_platform_needs_a_plugin_and_a_device(monkeypatch):
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)

    class EntryPoint:
        name = "xla_cuda13"

    monkeypatch.setattr(platform_policy.importlib.metadata, "entry_points", lambda group: [EntryPoint()])
    monkeypatch.setattr(platform_policy.os.path, "exists", lambda path: False)
    assert expected_platform() == "cpu"  # plugin installed, no GPU in the machine
    monkeypatch.setattr(platform_policy.os.path, "exists", lambda path: path == "/dev/nvidiactl")
    assert expected_platform() == "gpu"


@pytest.mark.parametrize("platforms, applied", [("cpu", True), ("cuda", False)])
def test_memory_policy_is_applied_when_a_csx_backend_starts_only_for_cpu(platforms, applied):
    """Importing cstorch changes nothing in the process; the CSX backend applies the
    policy where the platform wants it (before JAX starts: not late)."""
    env = {**os.environ, "JAX_PLATFORMS": platforms}
    env.pop("CSTORCH_MALLOC_POLICY", None)
    # no GPU here: for "cuda" only the decision is checked (a CSX backend would start JAX on it)
    start = "cstorch.backend('CSX')" if platforms == "cpu" else "cstorch_jax.apply_host_policies()"
    code = ("import json, cstorch, cstorch_jax, cstorch_jax.memory_policy as m\n"
            f"at_import = m.status()\n{start}\nprint(json.dumps([at_import, m.status()]))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    at_import, status = json.loads(out.stdout.strip().splitlines()[-1])
    assert at_import["applied"] is False and at_import["reason"].startswith("not applied yet"), at_import
    assert status["applied"] is applied, status
    if applied:
        assert status["late"] is False, status
    else:
        assert status["reason"] == "not used on gpu"


def test_memory_policy_applied_after_jax_started_says_so():
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env.pop("CSTORCH_MALLOC_POLICY", None)
    code = ("import json, jax, cstorch, cstorch_jax.memory_policy as m\n"
            "jax.devices()\n"
            "cstorch.backend('CPU')\n"
            "eager = m.status()\n"
            "import cstorch._backend as b; b._reset_backend()\n"
            "cstorch.backend('CSX')\n"
            "print(json.dumps([eager, m.status()]))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    eager, status = json.loads(out.stdout.strip().splitlines()[-1])
    assert eager["applied"] is False, eager  # the eager CPU backend runs no XLA: nothing to apply
    assert status["applied"] is True and status["late"] is True, status
    assert "after JAX started" in status["reason"]