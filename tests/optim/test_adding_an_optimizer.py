"""Adding an optimizer is adding one module to `cstorch_jax/optim/algorithms/`.

The test proves the claim on a copy of the source tree: one new module (Signum, sign-SGD
with momentum, Bernstein et al. 2018) is dropped into the copy's algorithms folder and
nothing else is touched; in a fresh process on that copy `cstorch.optim.Signum` exists,
takes its arguments, defaults and checks from the module, keeps its state in its state
dict, and trains on the CPU backend and on CSX exactly as the closed form computed with
torch ops:

    m' = beta * m + (1 - beta) * g          (m starts at zero)
    p' = p - lr * sign(m')
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SIGNUM_MODULE = '''
"""Signum: m' = beta * m + (1 - beta) * g, p' = p - lr * sign(m'). State: `momentum`."""
from typing import NamedTuple

import jax.numpy as jnp

from ..registry import register
from ..spec import REQUIRED, Algorithm, PublicOptimizer, Slot, check_hyperparameter, like_param
from ..transforms import Transform, chain, scale_by_learning_rate


class SignumHyper(NamedTuple):
    beta: float


class SignumState(NamedTuple):
    momentum: Slot


def scale_by_sign_of_momentum():
    def init(hp, shape):
        return SignumState(like_param())

    def apply(update, state, hp):
        m = hp.beta * state.momentum + (1 - hp.beta) * update.u
        return update._replace(u=jnp.sign(m)), SignumState(m)
    return Transform(init, apply)


SIGNUM_ALGORITHM = Algorithm("signum_update", SignumHyper, chain(scale_by_sign_of_momentum(), scale_by_learning_rate()))


def _check(a):
    check_hyperparameter(a["lr"], label="learning rate")
    check_hyperparameter(a["beta"], high=1.0, label="beta")


register(SIGNUM_ALGORITHM, PublicOptimizer(
    "Signum", SIGNUM_ALGORITHM, signature=(("lr", REQUIRED), ("beta", 0.9)), check=_check,
    defaults=lambda a: dict(lr=a["lr"], beta=a["beta"]), hyper=lambda g: SignumHyper(float(g["beta"]))))
'''

SCRIPT = '''
import json, sys
import torch
import cstorch

torch.manual_seed(0)
model0 = torch.nn.Linear(4, 3)
batches = [(torch.randn(8, 4), torch.randn(8, 3)) for _ in range(4)]
LR, BETA = 0.05, 0.8


def closed_form():
    params = {n: p.detach().clone().requires_grad_() for n, p in model0.named_parameters()}
    m = {n: torch.zeros_like(p) for n, p in params.items()}
    for x, y in batches:
        loss = ((x @ params["weight"].T + params["bias"] - y) ** 2).mean()
        grads = torch.autograd.grad(loss, list(params.values()))
        with torch.no_grad():
            for (n, p), g in zip(params.items(), grads):
                m[n] = BETA * m[n] + (1 - BETA) * g
                p -= LR * torch.sign(m[n])
    return {n: p.detach() for n, p in params.items()}


def train(backend_type):
    from cstorch._backend import _reset_backend
    _reset_backend()
    model = torch.nn.Linear(4, 3)
    model.load_state_dict(model0.state_dict())
    backend = cstorch.backend(backend_type)
    compiled = cstorch.compile(model, backend)
    opt = cstorch.optim.Signum(model.parameters(), lr=LR, beta=BETA)

    @cstorch.trace
    def step(x, y):
        loss = ((compiled(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    for x, y in cstorch.utils.data.DataExecutor(cstorch.utils.data.DataLoader(lambda: batches),
                                                num_steps=len(batches)):
        step(x, y)
    return {n: p.detach().clone() for n, p in model.named_parameters()}, opt.state_dict()


want = closed_form()
out = {"defaults": cstorch.optim.Signum(model0.parameters(), lr=0.1).defaults}
try:
    cstorch.optim.Signum(model0.parameters(), lr=0.1, beta=1.5)
except ValueError as e:
    out["bad_beta"] = str(e)
for backend_type in ("CPU", "CSX"):
    got, state = train(backend_type)
    out[backend_type] = max((got[n] - want[n]).abs().max().item() for n in want)
    out[backend_type + "_state_keys"] = sorted(state["state"][0])
print(json.dumps(out))
'''


@pytest.mark.slow
def test_one_new_module_adds_an_optimizer_to_both_backends(tmp_path):
    for package in ("cstorch", "cstorch_jax", "cerebras"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "cstorch_jax" / "optim" / "algorithms" / "signum.py").write_text(SIGNUM_MODULE)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600, env={"PYTHONPATH": str(tmp_path), "CSTORCH_CACHE": "0",
                                                        "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["defaults"]["lr"] == 0.1 and out["defaults"]["beta"] == 0.9
    assert "beta" in out["bad_beta"]
    for backend_type in ("CPU", "CSX"):
        assert out[backend_type] <= 1e-6, (backend_type, out[backend_type])
        assert out[backend_type + "_state_keys"] == ["momentum"]


def test_the_source_tree_has_no_signum():
    """The module above is the test's own: the real tree does not define it."""
    assert not (ROOT / "cstorch_jax" / "optim" / "algorithms" / "signum.py").exists()
