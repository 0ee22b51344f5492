"""The real API's GradScaler members beyond the scaling protocol: `update_scale`,
`clip_gradients_and_return_isfinite` and `state_dict(destination)`, eagerly and inside
a compiled step, against the documented loss-scale rule and torch's gradient clipping."""
from __future__ import annotations

import copy
import warnings
from collections import OrderedDict

import pytest
import torch

import cstorch
from cstorch._backend import _reset_backend
from optim_parity import assert_params_close, loss_of, make_batches, make_model
from test_amp import _expected_scales, _poisoned_batches, _train_on


def _sgd(model):
    return cstorch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)


def test_update_scale_follows_the_rule():
    steps, bad = 14, {2, 3, 9}
    opt = _sgd(make_model())
    scaler = cstorch.amp.GradScaler(loss_scale="dynamic", init_scale=2.0 ** 10, steps_per_increase=3)
    held = scaler.get_scale()
    scales = []
    for k in range(steps):
        scaler.isfinite = torch.tensor(k not in bad)
        scaler.update_scale([opt])
        scales.append(float(scaler.get_scale()))
    assert scales == _expected_scales(steps, bad, 2.0 ** 10, 3)
    assert scaler.get_scale() is held, "updated in place"
    assert int(scaler.state_dict()["steps_since_rescale"]) == 1  # clean steps 10-12 double it at 12; then 13

    clamped = cstorch.amp.GradScaler(loss_scale="dynamic", init_scale=2.0, min_loss_scale=1.0)
    for _ in range(2):
        clamped.isfinite = torch.tensor(False)
        clamped.update_scale([opt])
    assert float(clamped.get_scale()) == 1.0 and float(clamped.get_non_clamped_scale()) == 0.5

    static = cstorch.amp.GradScaler(loss_scale=256.0)
    static.update_scale([opt])
    assert static.get_scale() == 256.0 and static.state_dict() == {"loss_scale": 256.0}


@pytest.mark.parametrize("finite", [True, False])
def test_update_scale_decides_from_the_gradients_when_no_step_did(finite):
    model = make_model()
    opt = _sgd(model)
    scaler = cstorch.amp.GradScaler(loss_scale="dynamic", init_scale=8.0)
    x, y = make_batches(1)[0]
    if not finite:
        x = x.clone()
        x[0, 0] = float("inf")
    scaler.scale(loss_of(model, x, y)).backward()
    scaler.unscale_(opt)
    scaler.update_scale([opt])
    assert float(scaler.get_scale()) == (8.0 if finite else 4.0)
    assert bool(scaler.isfinite) is finite


def _scaled_grads(scaler, model, opt, x, y):
    scaler.scale(loss_of(model, x, y)).backward()
    scaler.unscale_(opt)


def test_clip_gradients_and_return_isfinite_clips_like_torch():
    model = make_model()
    ref = copy.deepcopy(model)
    opt = _sgd(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the built-in clipping is deprecated
        scaler = cstorch.amp.GradScaler(loss_scale="dynamic", init_scale=8.0, max_gradient_norm=0.05)
    x, y = make_batches(1)[0]
    _scaled_grads(scaler, model, opt, x, y)
    isfinite = scaler.clip_gradients_and_return_isfinite([opt])
    assert isfinite.dtype == torch.bool and isfinite.dim() == 0 and bool(isfinite)
    assert scaler.isfinite is isfinite, "the decision step_if_finite applies"
    loss_of(ref, x, y).backward()
    torch.nn.utils.clip_grad_norm_(ref.parameters(), 0.05)
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("loss_scale", ["dynamic", 4.0])
def test_clip_gradients_and_return_isfinite_detects_non_finite_gradients(loss_scale):
    x, y = make_batches(1)[0]
    bad = x.clone()
    bad[0, 0] = float("nan")
    for batch, expected in ((x, True), (bad, False)):
        model = make_model()
        opt = _sgd(model)
        scaler = cstorch.amp.GradScaler(loss_scale=loss_scale)
        _scaled_grads(scaler, model, opt, batch, y)
        grads = torch.cat([p.grad.flatten() for p in model.parameters()])
        assert bool(scaler.clip_gradients_and_return_isfinite([opt])) is expected is bool(torch.isfinite(grads).all())


@pytest.mark.parametrize("loss_scale", ["dynamic", 4.0])
def test_state_dict_into_a_destination(loss_scale):
    scaler = cstorch.amp.GradScaler(loss_scale=loss_scale, init_scale=16.0)
    destination = OrderedDict(other=1)
    out = scaler.state_dict(destination)
    assert out is destination and list(out)[0] == "other"
    own = scaler.state_dict()
    assert {k: v for k, v in out.items() if k != "other"}.keys() == own.keys()
    assert all(out[k] is v for k, v in own.items()), "the state tensors themselves, as state_dict() gives them"
    if loss_scale == "dynamic":
        assert set(own) == {"loss_scale", "steps_since_rescale", "overflows_since_rescale", "num_skipped_steps"}
        other = cstorch.amp.GradScaler(loss_scale="dynamic")
        other.load_state_dict(scaler.state_dict(destination=None))
        assert float(other.get_scale()) == 16.0
    else:
        assert own == {"loss_scale": 4.0}


def _run(backend_type, batches, body):
    """Train on `batches` with `body(compiled, opt, scaler, x, y)` as the traced step
    (dynamic scaling, initial scale 2**10, doubling after 3 clean steps); returns the
    final parameters and (scale, skipped steps) after each step."""
    _reset_backend()
    model = make_model()
    compiled = cstorch.compile(model, cstorch.backend(backend_type))
    opt = _sgd(model)
    scaler = cstorch.amp.GradScaler(loss_scale="dynamic", init_scale=2.0 ** 10, steps_per_increase=3)
    seen = []

    @cstorch.trace
    def step(x, y):
        body(compiled, opt, scaler, x, y)
        return scaler.get_scale(), scaler.get_num_skipped_steps()

    @cstorch.step_closure
    def record(*values):
        seen.append(tuple(float(v) for v in values))

    loader = cstorch.utils.data.DataLoader(lambda: batches)
    for x, y in cstorch.utils.data.DataExecutor(loader, num_steps=len(batches)):
        record(*step(x, y))
    params = {k: v.detach().clone() for k, v in model.named_parameters()}
    _reset_backend()
    return params, seen


def _step_by_members(compiled, opt, scaler, x, y):
    """The real GradScaler.step's parts, called one by one."""
    scaler.scale(loss_of(compiled, x, y)).backward()
    scaler.unscale_(opt)
    scaler.clip_gradients_and_return_isfinite([opt])
    scaler.step_if_finite(opt)
    scaler.update()
    opt.zero_grad()


def _update_scale_only(compiled, opt, scaler, x, y):
    """No loss scaling: the scaler's counters follow the batch's finiteness."""
    scaler.isfinite = torch.isfinite(x).all()
    scaler.update_scale([opt])
    scaler.isfinite = None


@pytest.mark.parametrize("backend", ["CPU", "CSX"])
def test_the_members_inside_a_traced_step(backend):
    steps, bad = 10, {2, 3}
    batches = _poisoned_batches(steps, bad)
    params, seen = _run(backend, batches, _step_by_members)
    assert [s[0] for s in seen] == _expected_scales(steps, bad, 2.0 ** 10, 3)
    assert [s[1] for s in seen] == [sum(1 for b in bad if b <= k) for k in range(steps)]
    clean = [b for k, b in enumerate(make_batches(steps)) if k not in bad]
    expected = _train_on(clean, lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9))
    assert_params_close(params, expected, what=f"members of GradScaler.step on {backend}")

    _, seen = _run(backend, batches, _update_scale_only)
    assert [s[0] for s in seen] == _expected_scales(steps, bad, 2.0 ** 10, 3)
