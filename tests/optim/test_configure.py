"""configure_optimizer / configure_param_groups, tensor hyper-parameters, and the
Optimizer contract (all state before the first step, none created by step())."""
import warnings

import pytest
import torch

import cstorch
from cstorch.optim import configure_optimizer, configure_param_groups
from optim_parity import assert_params_close, train_cstorch, train_eager


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4), torch.nn.ReLU(), torch.nn.Linear(4, 2))


def test_configure_optimizer_finds_the_class_by_name_and_maps_learning_rate():
    opt = configure_optimizer("adamw", _model().parameters(), learning_rate=0.01, weight_decay=0.1)
    assert type(opt) is cstorch.optim.AdamW
    assert opt.param_groups[0]["lr"] == 0.01 and opt.param_groups[0]["weight_decay"] == 0.1
    assert type(configure_optimizer("RMSprop", _model().parameters(), learning_rate=0.1)) is cstorch.optim.RMSprop


def test_configure_optimizer_with_a_schedule_uses_a_placeholder_lr():
    opt = configure_optimizer("SGD", _model().parameters(), learning_rate={"scheduler": "constant", "learning_rate": 1})
    assert opt.param_groups[0]["lr"] == 0.1


def test_configure_optimizer_errors_and_warnings():
    with pytest.raises(ValueError, match="Invalid optimizer type 'nope'.*AdamW"):
        configure_optimizer("nope", _model().parameters())
    with pytest.raises(ValueError, match="weight_decay_rate -> weight_decay"):
        configure_optimizer("sgd", _model().parameters(), learning_rate=0.1, weight_decay_rate=0.1)
    with pytest.raises(ValueError, match="beta1 -> betas"):
        configure_optimizer("adam", _model().parameters(), beta1=0.9)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt = configure_optimizer("sgd", _model().parameters(), learning_rate=0.1, not_an_arg=3)
    assert type(opt) is cstorch.optim.SGD
    assert any("not_an_arg" in str(w.message) for w in caught)


def test_configure_param_groups_splits_by_weight_decay_and_lr_scale():
    model = _model()
    cfg = {"weight_decay": 0.1, "adjust_learning_rate": {"3.": 0.5}, "lr": 0.1}
    groups = configure_param_groups(model, cfg)
    assert cfg == {"lr": 0.1}
    names = {tuple(g["param_names"]): (g["weight_decay"], g["adjust_learning_rate"]) for g in groups}
    assert names == {
        ("0.weight",): (0.1, 1.0),
        ("0.bias", "1.weight", "1.bias"): (0.0, 1.0),  # biases and norm weights: no decay
        ("3.weight",): (0.1, 0.5),
        ("3.bias",): (0.0, 0.5),
    }
    opt = configure_optimizer("sgd", groups, **cfg)
    assert [g["weight_decay"] for g in opt.param_groups] == [0.1, 0.0, 0.1, 0.0]


@pytest.mark.parametrize("backend", ["CPU", "CSX"])
@pytest.mark.parametrize("cls,torch_cls,kw", [
    (cstorch.optim.SGD, torch.optim.SGD, dict(momentum=0.9)),
    (cstorch.optim.AdamW, torch.optim.AdamW, dict(eps=1e-6)),
], ids=["sgd", "adamw"])
def test_lr_and_weight_decay_may_be_0d_tensors(cls, torch_cls, kw, backend):
    expected = train_eager(lambda ps: torch_cls(ps, lr=0.02, weight_decay=0.05, **kw))
    actual, opt, _ = train_cstorch(
        backend, lambda ps: cls(ps, lr=torch.tensor(0.02), weight_decay=torch.tensor(0.05), **kw))
    assert_params_close(actual, expected, what=f"{cls.__name__} with tensor hyper-parameters on {backend}")


@pytest.mark.parametrize("name", [n for n in cstorch.optim.__all__ if n in (
    "SGD", "Adam", "AdamW", "Adadelta", "Adagrad", "Adamax", "ASGD", "NAdam", "RAdam", "RMSprop", "Rprop",
    "Adafactor", "Lamb", "Lion", "Muon")])
def test_all_state_exists_before_the_first_step_and_step_creates_none(name):
    cls = getattr(cstorch.optim, name)
    weight = torch.nn.Parameter(torch.randn(4, 3))
    params = [weight] if name == "Muon" else [weight, torch.nn.Parameter(torch.randn(3))]
    kw = {"lr": 0.01} if name in ("SGD", "Adafactor") else {}
    opt = cls(params, **kw)
    before = {id(p): {k: v for k, v in opt.state[p].items()} for p in params}
    assert all(before[id(p)] for p in params) or name == "SGD"
    (sum((p * p).sum() for p in params)).backward()
    opt.step()
    for p in params:
        after = opt.state[p]
        assert after.keys() == before[id(p)].keys()
        assert all(after[k] is before[id(p)][k] for k in after), "state tensors are updated in place"
