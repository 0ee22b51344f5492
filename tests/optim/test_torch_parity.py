"""Optimizers that torch.optim also has: the same parameters as torch.optim after 50
steps, on the CPU backend (eager) and on CSX (one compiled step), within 1e-5."""
import pytest
import torch

import cstorch
from optim_parity import assert_params_close, train_cstorch, train_eager, update_ops

# (name, cstorch class, torch class, keyword arguments given to both, cstorch update op)
CASES = [
    ("sgd", cstorch.optim.SGD, torch.optim.SGD, dict(lr=0.05), "sgd_update"),
    ("sgd-momentum-wd", cstorch.optim.SGD, torch.optim.SGD, dict(lr=0.05, momentum=0.9, weight_decay=0.01),
     "sgd_update"),
    ("sgd-nesterov-max", cstorch.optim.SGD, torch.optim.SGD,
     dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.01, maximize=False), "sgd_update"),
    ("adam", cstorch.optim.Adam, torch.optim.Adam, dict(lr=0.01, eps=1e-6), "adam_update"),
    ("adam-l2-amsgrad", cstorch.optim.Adam, torch.optim.Adam,
     dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.05, amsgrad=True), "adam_update"),
    ("adamw-wd", cstorch.optim.AdamW, torch.optim.AdamW, dict(lr=0.01, eps=1e-6, weight_decay=0.1),
     "adam_update"),
    ("adamw-amsgrad", cstorch.optim.AdamW, torch.optim.AdamW,
     dict(lr=0.01, eps=1e-6, weight_decay=0.1, amsgrad=True), "adam_update"),
    ("adadelta", cstorch.optim.Adadelta, torch.optim.Adadelta, dict(lr=1.0), "adadelta_update"),
    ("adadelta-wd-max", cstorch.optim.Adadelta, torch.optim.Adadelta,
     dict(lr=0.5, rho=0.8, eps=1e-5, weight_decay=0.05, maximize=True), "adadelta_update"),
    ("adagrad", cstorch.optim.Adagrad, torch.optim.Adagrad, dict(lr=0.05, eps=1e-6), "adagrad_update"),
    ("adagrad-decay-wd-init", cstorch.optim.Adagrad, torch.optim.Adagrad,
     dict(lr=0.1, lr_decay=0.02, weight_decay=0.05, initial_accumulator_value=0.1, eps=1e-6), "adagrad_update"),
    ("adagrad-max", cstorch.optim.Adagrad, torch.optim.Adagrad,
     dict(lr=0.01, lr_decay=0.01, eps=1e-10, maximize=True), "adagrad_update"),
    ("adamax", cstorch.optim.Adamax, torch.optim.Adamax, dict(lr=0.01, eps=1e-6), "adamax_update"),
    ("adamax-wd-max", cstorch.optim.Adamax, torch.optim.Adamax,
     dict(lr=0.005, betas=(0.8, 0.99), eps=1e-8, weight_decay=0.05, maximize=True), "adamax_update"),
    ("asgd", cstorch.optim.ASGD, torch.optim.ASGD, dict(lr=0.05), "asgd_update"),
    ("asgd-averaging-wd", cstorch.optim.ASGD, torch.optim.ASGD,
     dict(lr=0.05, lambd=0.01, alpha=0.5, t0=2, weight_decay=0.05), "asgd_update"),
    ("asgd-max", cstorch.optim.ASGD, torch.optim.ASGD, dict(lr=0.01, lambd=1e-3, t0=20, maximize=True),
     "asgd_update"),
    ("nadam", cstorch.optim.NAdam, torch.optim.NAdam, dict(lr=0.01), "nadam_update"),
    ("nadam-wd-decay", cstorch.optim.NAdam, torch.optim.NAdam,
     dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.05, momentum_decay=0.02), "nadam_update"),
    ("radam", cstorch.optim.RAdam, torch.optim.RAdam, dict(lr=0.01, eps=1e-6), "radam_update"),
    ("radam-wd", cstorch.optim.RAdam, torch.optim.RAdam,
     dict(lr=0.01, betas=(0.8, 0.99), eps=1e-8, weight_decay=0.05), "radam_update"),
    # rho_inf = 5.67: rectification from step 10 on, rho_t from the direct formula
    ("radam-small-beta2", cstorch.optim.RAdam, torch.optim.RAdam, dict(lr=0.01, betas=(0.9, 0.7), eps=1e-6),
     "radam_update"),
    # rho_inf = 3: never rectified
    ("radam-unrectified", cstorch.optim.RAdam, torch.optim.RAdam, dict(lr=0.01, betas=(0.9, 0.5), eps=1e-6),
     "radam_update"),
    ("rmsprop", cstorch.optim.RMSprop, torch.optim.RMSprop, dict(lr=0.01), "rmsprop_update"),
    ("rmsprop-momentum-wd", cstorch.optim.RMSprop, torch.optim.RMSprop,
     dict(lr=0.005, alpha=0.9, eps=1e-6, momentum=0.5, weight_decay=0.05), "rmsprop_update"),
    ("rmsprop-centered-momentum", cstorch.optim.RMSprop, torch.optim.RMSprop,
     dict(lr=0.002, alpha=0.9, eps=1e-6, momentum=0.9, centered=True), "rmsprop_update"),
    ("rprop", cstorch.optim.Rprop, torch.optim.Rprop, dict(lr=0.01), "rprop_update"),
    ("rprop-etas-sizes", cstorch.optim.Rprop, torch.optim.Rprop,
     dict(lr=0.005, etas=(0.3, 1.5), step_sizes=(1e-4, 0.05)), "rprop_update"),
]


@pytest.mark.parametrize("backend", ["CPU", "CSX"])
@pytest.mark.parametrize("name,cls,torch_cls,kw,op", CASES, ids=[c[0] for c in CASES])
def test_matches_torch_optim(name, cls, torch_cls, kw, op, backend):
    expected = train_eager(lambda ps: torch_cls(ps, **kw))
    actual, opt, step = train_cstorch(backend, lambda ps: cls(ps, **kw))
    assert_params_close(actual, expected, what=f"{name} on {backend}")
    if backend == "CSX":
        assert update_ops(step) == {f"cstorch.{op}.default": 1}, "one update op per param group"


@pytest.mark.parametrize("name,cls,torch_cls,kw,op", CASES, ids=[c[0] for c in CASES])
def test_state_dict_round_trips_with_torch(name, cls, torch_cls, kw, op):
    """A torch.optim state dict loads into the cstorch optimizer and training goes on as
    torch's would; the cstorch state dict loads back into torch.optim."""
    model = torch.nn.Linear(3, 2)
    target = torch.randn(4, 2)
    x = torch.randn(4, 3)
    ref_model, cs_model = model, torch.nn.Linear(3, 2)
    ref = torch_cls(ref_model.parameters(), **kw)
    for _ in range(3):
        ref.zero_grad()
        torch.nn.functional.mse_loss(ref_model(x), target).backward()
        ref.step()
    cs_model.load_state_dict(ref_model.state_dict())
    cs = cls(cs_model.parameters(), **kw)
    cs.load_state_dict(ref.state_dict())
    for m, o in ((ref_model, ref), (cs_model, cs)):
        for _ in range(3):
            o.zero_grad()
            torch.nn.functional.mse_loss(m(x), target).backward()
            o.step()
    for a, b in zip(cs_model.parameters(), ref_model.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    back = torch_cls(torch.nn.Linear(3, 2).parameters(), **kw)
    back.load_state_dict(cs.state_dict())
    for k, v in ref.state_dict()["state"].get(0, {}).items():
        if isinstance(v, torch.Tensor):
            torch.testing.assert_close(back.state_dict()["state"][0][k], v, rtol=1e-5, atol=1e-6)


# The real system's constructor defaults (they differ from torch.optim's in places).
REAL_DEFAULTS = {
    cstorch.optim.Adadelta: dict(lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, maximize=False),
    cstorch.optim.Adagrad: dict(lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-6,
                                maximize=False),
    cstorch.optim.Adamax: dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0, maximize=False),
    cstorch.optim.ASGD: dict(lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, maximize=False),
    cstorch.optim.NAdam: dict(lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3),
    cstorch.optim.RAdam: dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0),
    cstorch.optim.RMSprop: dict(lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False),
    cstorch.optim.Rprop: dict(lr=1e-3, etas=(0.5, 1.2), step_sizes=(1e-6, 50.0)),
}


@pytest.mark.parametrize("cls", list(REAL_DEFAULTS), ids=lambda c: c.__name__)
def test_real_signature_and_validation(cls):
    import inspect

    params = inspect.signature(cls).parameters
    assert list(params)[1:] == list(REAL_DEFAULTS[cls])
    assert {k: params[k].default for k in REAL_DEFAULTS[cls]} == REAL_DEFAULTS[cls]
    opt = cls([torch.nn.Parameter(torch.ones(2))])
    assert opt.param_groups[0]["lr"] == REAL_DEFAULTS[cls]["lr"]
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        cls([torch.nn.Parameter(torch.ones(2))], lr=-1.0)


@pytest.mark.parametrize("cls,kw,message", [
    (cstorch.optim.Adadelta, dict(rho=1.5), "Invalid rho value: 1.5"),
    (cstorch.optim.Adagrad, dict(lr_decay=-0.1), "Invalid lr_decay value: -0.1"),
    (cstorch.optim.Adagrad, dict(initial_accumulator_value=-1), "Invalid initial_accumulator_value value: -1"),
    (cstorch.optim.Adamax, dict(betas=(0.9, 1.0)), "Invalid beta parameter at index 1: 1.0"),
    (cstorch.optim.ASGD, dict(weight_decay=-1), "Invalid weight_decay value: -1"),
    (cstorch.optim.NAdam, dict(momentum_decay=-1), "Invalid momentum_decay value: -1"),
    (cstorch.optim.RAdam, dict(eps=-1), "Invalid epsilon value: -1"),
    (cstorch.optim.RMSprop, dict(alpha=-1), "Invalid alpha value: -1"),
    (cstorch.optim.RMSprop, dict(momentum=-1), "Invalid momentum value: -1"),
    (cstorch.optim.Rprop, dict(etas=(1.5, 1.2)), "Invalid eta values: 1.5, 1.2"),
], ids=lambda v: v.__name__ if isinstance(v, type) else None)
def test_invalid_hyperparameters(cls, kw, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        cls([torch.nn.Parameter(torch.ones(2))], **kw)


def test_adamax_loads_real_system_beta1_power():
    """The real Adamax keeps beta1^(t+1) (`beta1_power`) instead of torch's `step`."""
    p = torch.nn.Parameter(torch.ones(2))
    opt = cstorch.optim.Adamax([p], betas=(0.8, 0.999))
    state = {"exp_avg": torch.full((2,), 0.5), "exp_inf": torch.full((2,), 2.0), "beta1_power": torch.tensor(0.8 ** 4)}
    opt.load_state_dict({"state": {0: state}, "param_groups": [dict(opt.param_groups[0], params=[0])]})
    assert opt.state[p]["step"].item() == 3.0
    torch.testing.assert_close(opt.state[p]["exp_inf"], torch.full((2,), 2.0))


def test_adamw_loads_real_system_beta_powers():
    """The real AdamW keeps beta1^(t+1), beta2^(t+1) (`beta1_power`, `beta2_power`)
    instead of torch's `step`; such a state dict resumes as torch's would after t steps."""
    torch.manual_seed(0)
    model, x, target = torch.nn.Linear(3, 2), torch.randn(4, 3), torch.randn(4, 2)
    ref = torch.optim.AdamW(model.parameters(), lr=0.01, betas=(0.8, 0.99), eps=1e-6)
    cs_model = torch.nn.Linear(3, 2)
    for _ in range(4):
        ref.zero_grad()
        torch.nn.functional.mse_loss(model(x), target).backward()
        ref.step()
    cs_model.load_state_dict(model.state_dict())
    saved = ref.state_dict()
    real_layout = {i: {"exp_avg": st["exp_avg"], "exp_avg_sq": st["exp_avg_sq"],
                       "beta1_power": torch.tensor(0.8 ** 5), "beta2_power": torch.tensor(0.99 ** 5)}
                   for i, st in saved["state"].items()}
    cs = cstorch.optim.AdamW(cs_model.parameters(), lr=0.01, betas=(0.8, 0.99), eps=1e-6)
    cs.load_state_dict({"state": real_layout, "param_groups": saved["param_groups"]})
    assert all(float(st["step"]) == 4.0 for st in cs.state.values())
    for m, o in ((model, ref), (cs_model, cs)):
        o.zero_grad()
        torch.nn.functional.mse_loss(m(x), target).backward()
        o.step()
    for a, b in zip(cs_model.parameters(), model.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)
