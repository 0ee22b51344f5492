"""One training script, run unchanged on the CSX or the CPU backend (as a user would)."""
from __future__ import annotations

import copy

import torch
import torch.nn.functional as F

import cstorch
from cstorch._backend import _reset_backend


def make_optimizer(name, params):
    if name == "sgd":
        return cstorch.optim.SGD(params, lr=0.05, momentum=0.9, weight_decay=1e-3)
    if name == "adamw":
        return cstorch.optim.AdamW(params, lr=1e-2, betas=(0.9, 0.99), weight_decay=0.01)
    raise ValueError(name)


def train(backend_type, model, batches, opt_name="sgd", loss_fn=None, seed=0):
    """Train a deep copy of `model` on `batches` (one step each); return the per-step
    losses seen by a step closure, and the final model and optimizer state dicts."""
    _reset_backend()
    torch.manual_seed(seed)
    model = copy.deepcopy(model)
    loss_fn = loss_fn or (lambda m, x, y: F.cross_entropy(m(x), y))
    backend = cstorch.backend(backend_type)
    compiled = cstorch.compile(model, backend)
    opt = make_optimizer(opt_name, model.parameters())
    losses = []

    @cstorch.trace
    def train_step(x, y):
        loss = loss_fn(compiled, x, y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    @cstorch.step_closure
    def record(loss):
        losses.append(loss.item())

    loader = cstorch.utils.data.DataLoader(lambda: batches)
    for x, y in cstorch.utils.data.DataExecutor(loader, num_steps=len(batches)):
        record(train_step(x, y))
    return losses, model.state_dict(), opt.state_dict(), train_step


def assert_close_rel(actual, expected, rel=1e-5, what="", atol=0.0):
    """|actual - expected| <= max(rel * max|expected|, atol) elementwise: relative to the
    tensor's scale, with an optional absolute floor for tensors that are all near zero."""
    actual, expected = torch.as_tensor(actual), torch.as_tensor(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    if not expected.is_floating_point():
        assert torch.equal(actual, expected), what
        return
    scale = expected.abs().max().clamp_min(1e-12)
    diff = (actual - expected).abs().max()
    err = diff / scale
    assert err <= rel or diff <= atol, f"{what}: relative error {err:.3g} > {rel} (max |diff| {diff:.3g})"
