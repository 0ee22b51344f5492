"""The process memory policy (`cstorch_jax/memory_policy.py`): a steady-state CSX step
takes (almost) no page faults, where glibc's defaults take one per fresh page of the
step's temporary buffer every step. Each configuration runs in a fresh process, since
the policy is applied once, when the first CSX backend is created."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from cstorch_jax import memory_policy

SCRIPT = textwrap.dedent("""
    import json, resource, torch, cstorch
    import cstorch_jax.memory_policy as policy

    class M(torch.nn.Module):   # ~66 MB of XLA temporaries per step, far above glibc's mmap threshold
        def __init__(self):
            super().__init__()
            self.scale = torch.nn.Parameter(torch.ones(1024))

        def forward(self, x):
            h = x * self.scale
            return (torch.softmax(h, 1) * h.sigmoid()).logsumexp(1).mean() + h.cumsum(1).mean()

    torch.manual_seed(0)
    model = M()
    backend = cstorch.backend("CSX")
    compiled = cstorch.compile(model, backend)
    opt = cstorch.optim.SGD(model.parameters(), lr=0.1)

    @cstorch.trace
    def step(x):
        loss = compiled(x)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    x = torch.randn(4096, 1024)
    cstorch.backends.csx.performance.progress = False
    faults = []
    n = 12
    for (b,) in cstorch.utils.data.DataExecutor(cstorch.utils.data.DataLoader(lambda: [(x,)] * n), num_steps=n):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        float(step(b))
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    print(json.dumps({"status": policy.status(), "faults": faults[4:]}))
""")


def _run(env_value):
    env = dict(os.environ)
    env.pop(memory_policy.ENV, None)
    if env_value is not None:
        env[memory_policy.ENV] = env_value
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(memory_policy._glibc() is None, reason="the policy is glibc's mallopt; this C library is not glibc")
def test_steady_state_steps_take_no_page_faults_with_the_policy():
    on = _run(None)
    off = _run("0")
    assert on["status"]["applied"] and not off["status"]["applied"]
    per_step_on = sorted(on["faults"])[len(on["faults"]) // 2]
    per_step_off = sorted(off["faults"])[len(off["faults"]) // 2]
    # 66 MB of temporaries = ~16k fresh 4 KiB pages per step under glibc's defaults
    assert per_step_off > 5000, off
    assert per_step_on < 100, on


def test_opt_out_and_idempotence(monkeypatch):
    assert memory_policy.apply() == memory_policy.status()["applied"]
    monkeypatch.setenv(memory_policy.ENV, "off")
    assert memory_policy._disabled_by_user() == f"{memory_policy.ENV}=off"
