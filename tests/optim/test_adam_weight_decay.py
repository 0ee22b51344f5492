"""`cstorch.optim.Adam.handle_weight_decay`: the real Adam keeps its L2 weight decay
under `l2_regularization_rate` (with `weight_decay` 0); param groups and checkpoints of
that layout must train exactly like torch.optim.Adam with that weight decay."""
from __future__ import annotations

import copy

import pytest
import torch

import cstorch
from optim_parity import assert_params_close, loss_of, make_batches, make_model, train_cstorch, train_eager

BETAS, EPS, LR, L2 = (0.9, 0.99), 1e-6, 0.01, 0.2


def test_handle_weight_decay_brings_real_groups_into_torch_layout():
    opt = cstorch.optim.Adam([torch.nn.Parameter(torch.ones(2))])
    groups = [
        {"params": [0], "weight_decay": 0.0, "l2_regularization_rate": 0.1, "correct_bias": True},
        {"params": [1], "weight_decay": 0.3, "l2_regularization_rate": 0.05, "correct_bias": False},
        {"params": [2], "weight_decay": 0.02},
    ]
    assert opt.handle_weight_decay(groups) is None
    assert groups == [
        {"params": [0], "weight_decay": 0.1, "correct_bias": True},
        {"params": [1], "weight_decay": 0.05, "correct_bias": True},  # the L2 rate wins, bias always corrected
        {"params": [2], "weight_decay": 0.02, "correct_bias": True},
    ]
    assert not hasattr(cstorch.optim.AdamW, "handle_weight_decay"), "only the real API's Adam has it"


def _two_groups(make):
    """make(first layer's params, the others') from a params iterator."""
    def build(params):
        ps = list(params)
        return make(ps[:2], ps[2:])
    return build


def _torch_adam(first, rest):
    return torch.optim.Adam([{"params": first, "weight_decay": L2}, {"params": rest}], lr=LR, betas=BETAS, eps=EPS)


def _real_layout_adam(first, rest):
    return cstorch.optim.Adam([{"params": first, "l2_regularization_rate": L2}, {"params": rest}], lr=LR,
                              betas=BETAS, eps=EPS)


@pytest.mark.parametrize("backend", [None, "CPU", "CSX"])
def test_real_layout_param_groups_train_like_torch_adam_with_weight_decay(backend):
    expected = train_eager(_two_groups(_torch_adam), steps=20)
    if backend is None:
        actual = train_eager(_two_groups(_real_layout_adam), steps=20)
    else:
        actual, opt, _ = train_cstorch(backend, _two_groups(_real_layout_adam), steps=20)
        assert [g["weight_decay"] for g in opt.param_groups] == [L2, 0.0]
        assert all("l2_regularization_rate" not in g for g in opt.param_groups)
    assert_params_close(actual, expected, what=f"Adam with l2_regularization_rate ({backend or 'eager'})")
    unregularised = train_eager(lambda ps: torch.optim.Adam(ps, lr=LR, betas=BETAS, eps=EPS), steps=20)
    with pytest.raises(AssertionError):  # the weight decay matters at this tolerance
        assert_params_close(unregularised, expected)


def _real_checkpoint(torch_state: dict) -> dict:
    """torch.optim.Adam's state dict in the real system's layout: `beta1_power` /
    `beta2_power` = beta^(t+1) instead of `step`, the L2 rate under
    `l2_regularization_rate` with `weight_decay` 0."""
    state = {}
    for i, st in torch_state["state"].items():
        t = float(st["step"])
        state[i] = {"exp_avg": st["exp_avg"].clone(), "exp_avg_sq": st["exp_avg_sq"].clone(),
                    "beta1_power": torch.tensor(BETAS[0] ** (t + 1)), "beta2_power": torch.tensor(BETAS[1] ** (t + 1))}
    groups = [{"lr": g["lr"], "betas": g["betas"], "eps": g["eps"], "weight_decay": 0.0,
               "l2_regularization_rate": g["weight_decay"], "correct_bias": True, "amsgrad": False,
               "params": list(g["params"])} for g in torch_state["param_groups"]]
    return {"state": state, "param_groups": groups}


def test_a_real_system_checkpoint_keeps_its_weight_decay():
    """Train torch.optim.Adam(weight_decay) 5 steps, save it in the real system's layout,
    load that into cstorch.optim.Adam and go on 10 steps: the same as torch going on."""
    batches = make_batches(15)
    model = make_model()
    ref = torch.optim.Adam(model.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=L2)
    for x, y in batches[:5]:
        ref.zero_grad()
        loss_of(model, x, y).backward()
        ref.step()
    checkpoint = _real_checkpoint(ref.state_dict())
    saved = copy.deepcopy(checkpoint)

    ours_model = copy.deepcopy(model)
    ours = cstorch.optim.Adam(ours_model.parameters(), lr=0.5, betas=BETAS, eps=EPS)
    ours.load_state_dict(checkpoint)
    assert ours.param_groups[0]["weight_decay"] == L2 and ours.param_groups[0]["lr"] == LR
    assert checkpoint["param_groups"] == saved["param_groups"], "the caller's state dict is left as it was"
    for x, y in batches[5:]:
        for m, o in ((model, ref), (ours_model, ours)):
            o.zero_grad()
            loss_of(m, x, y).backward()
            o.step()
    expected = {k: v.detach().clone() for k, v in model.named_parameters()}
    assert_params_close({k: v.detach().clone() for k, v in ours_model.named_parameters()}, expected,
                        what="Adam resumed from a real-system checkpoint")
