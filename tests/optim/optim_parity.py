"""Shared harness for optimizer tests: one small regression model trained for STEPS
steps by eager torch.optim (or a reference rule) and by a cstorch optimizer on the CPU
and CSX backends, comparing every parameter afterwards."""
from __future__ import annotations

import copy
from typing import Callable

import torch
import torch.nn.functional as F

import cstorch
from cstorch._backend import _reset_backend

STEPS = 50


def make_model() -> torch.nn.Module:
    """Parameters of rank 1 and 2 (biases and matrices), two param groups' worth."""
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))


def make_batches(steps: int = STEPS) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    teacher = torch.randn(6, 3, generator=g)
    out = []
    for _ in range(steps):
        x = torch.randn(16, 6, generator=g)
        out.append((x, torch.sin(x @ teacher)))
    return out


def loss_of(model, x, y):
    return F.mse_loss(model(x), y)


def train_eager(make_opt: Callable, steps: int = STEPS, model=None) -> dict[str, torch.Tensor]:
    """Plain eager torch (no backend): `make_opt(params)` may build a torch.optim
    optimizer or a cstorch one. Returns the final parameters."""
    model = copy.deepcopy(model or make_model())
    opt = make_opt(model.parameters())
    for x, y in make_batches(steps):
        opt.zero_grad()
        loss_of(model, x, y).backward()
        opt.step()
    return {k: v.detach().clone() for k, v in model.named_parameters()}


def train_cstorch(backend_type: str, make_opt: Callable, steps: int = STEPS, model=None):
    """The same loop as a cstorch script on `backend_type`. Returns (parameters,
    optimizer, traced step)."""
    _reset_backend()
    model = copy.deepcopy(model or make_model())
    backend = cstorch.backend(backend_type)
    compiled = cstorch.compile(model, backend)
    opt = make_opt(model.parameters())

    @cstorch.trace
    def step(x, y):
        loss = loss_of(compiled, x, y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    loader = cstorch.utils.data.DataLoader(make_batches, steps)
    for x, y in cstorch.utils.data.DataExecutor(loader, num_steps=steps):
        step(x, y)
    params = {k: v.detach().clone() for k, v in model.named_parameters()}
    _reset_backend()
    return params, opt, step


def assert_params_close(actual: dict, expected: dict, rel: float = 1e-5, what: str = "") -> None:
    """Every parameter within `rel` of the expected one, relative to its largest entry,
    and the parameters really moved away from their initial values."""
    from train_script import assert_close_rel

    start = dict(make_model().named_parameters())
    assert actual.keys() == expected.keys()
    for k in expected:
        assert_close_rel(actual[k], expected[k], rel=rel, what=f"{what} {k}")
        assert not torch.allclose(expected[k], start[k]), f"{what} {k} did not move"


def update_ops(step) -> dict[str, int]:
    """The cstorch update ops of a compiled step and how often each appears."""
    return {k: v for k, v in step.executable.captured.ops().items() if k.startswith("cstorch.")}
