"""Optimizers torch.optim lacks (Adafactor, Lamb, Lion, Muon), checked against reference
implementations written here from the published algorithms (with the real system's
choices): plain torch ops in float64 on cloned tensors, a code path independent of the
jnp rules. 50 steps of the optim_parity model; the cstorch optimizer on the CPU backend
(eager) and on CSX (one compiled step) must end within 1e-5 of the reference.

Also: state_dict round trips resume identically, invalid hyper-parameters raise, and a
user's own cstorch.optim.Optimizer written with plain torch ops runs on CSX.

torch.optim.Muon is NOT the real system's math, so it is no parity target: it adds the
gradient to the Nesterov look-ahead as (1 - momentum) * g + momentum * b (the real
system: g + momentum * b), decays the weights with the unadjusted lr (the real system:
the adjusted one), adjusts the lr by sqrt(max(1, A/B)) by default (the real system:
0.2 sqrt(max(A, B)), torch's adjust_lr_fn="match_rms_adamw") and iterates in bfloat16.
Where those choices coincide (nesterov=False, weight_decay=0, "match_rms_adamw") one
step agrees to bfloat16 precision, which test_muon_matches_torch_muon_where_math_agrees
checks.
"""
from __future__ import annotations

import copy
import math

import pytest
import torch

import cstorch
from optim_parity import (assert_params_close, loss_of, make_batches, make_model, train_cstorch, train_eager,
                          update_ops)
from train_script import assert_close_rel


# -- reference implementations (float64, torch ops) ------------------------------------

class _Reference(torch.optim.Optimizer):
    """Keeps float64 state; `update(p, g, state, group)` returns the new float64 p."""

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    new = self.update(p.detach().clone().double(), p.grad.detach().clone().double(),
                                      self.state[p], group)
                    p.copy_(new.to(p.dtype))


def _rms(x):
    return x.pow(2).mean().sqrt()


class RefLion(_Reference):
    """Lion paper, Algorithm 2: c = b1 m + (1-b1) g; theta -= lr (sign(c) + wd theta);
    m = b2 m + (1-b2) g."""

    def update(self, p, g, st, group):
        b1, b2 = group["betas"]
        m = st.get("m", torch.zeros_like(p))
        c = b1 * m + (1 - b1) * g
        p = p - group["lr"] * (torch.sign(c) + group["weight_decay"] * p)
        st["m"] = b2 * m + (1 - b2) * g
        return p


class RefLamb(_Reference):
    """LAMB paper, Algorithm 2 without bias correction; phi(z) = min(z, 10); the ratio
    is 1 when a norm is zero (always 1 with adam=True)."""

    def update(self, p, g, st, group):
        b1, b2 = group["betas"]
        st["m"] = m = b1 * st.get("m", torch.zeros_like(p)) + (1 - b1) * g
        st["v"] = v = b2 * st.get("v", torch.zeros_like(p)) + (1 - b2) * g * g
        r = m / (v.sqrt() + group["eps"]) + group["weight_decay"] * p
        phi = min(torch.linalg.vector_norm(p).item(), 10.0)
        r_norm = torch.linalg.vector_norm(r).item()
        ratio = 1.0 if group["adam"] or phi == 0 or r_norm == 0 else phi / r_norm
        return p - group["lr"] * ratio * r


class RefAdafactor(_Reference):
    """Adafactor paper, Algorithms 4 (factored) / 5 (not), with the paper's row and
    column SUMS (V = R C / 1^T R), plus HF's relative step, parameter scaling, update
    clipping, optional first moment and decoupled weight decay."""

    def update(self, p, g, st, group):
        eps1, eps2 = group["eps"]
        t = st["t"] = st.get("t", 0) + 1
        if group["relative_step"]:
            rho = min(1e-6 * t if group["warmup_init"] else 1e-2, 1 / math.sqrt(t))
        else:
            rho = group["lr"]
        alpha = max(eps2, _rms(p).item()) * rho if group["scale_parameter"] else rho
        beta2 = 1 - t ** group["decay_rate"]
        g2 = g * g + eps1
        if p.dim() >= 2:
            st["R"] = R = beta2 * st.get("R", 0) + (1 - beta2) * g2.sum(-1)
            st["C"] = C = beta2 * st.get("C", 0) + (1 - beta2) * g2.sum(-2)
            v = torch.einsum("...i,...j->...ij", R, C) / R.sum(-1)[..., None, None]
        else:
            st["V"] = v = beta2 * st.get("V", 0) + (1 - beta2) * g2
        u = g / v.sqrt()
        u = u / max(1.0, _rms(u).item() / group["clip_threshold"])
        if group["beta1"] is not None:
            st["m"] = u = group["beta1"] * st.get("m", 0) + (1 - group["beta1"]) * alpha * u
        else:
            u = alpha * u
        return p - group["weight_decay"] * alpha * p - u


class RefMuon(_Reference):
    """Keller Jordan's Muon with the real system's choices: EMA momentum, Nesterov as
    g + mu b, quintic Newton-Schulz (a, b, c) = (3.4445, -4.7750, 2.0315) on the wide
    orientation after Frobenius normalisation, lr scaled by 0.2 sqrt(max(A, B)) for both
    the update and the decoupled weight decay."""

    def update(self, p, g, st, group):
        mu = group["momentum"]
        if mu:
            st["b"] = b = mu * st.get("b", torch.zeros_like(p)) + (1 - mu) * g
        else:
            b = g
        u = g + mu * b if group["nesterov"] else b
        X = u.reshape(u.shape[0], -1) if u.dim() == 4 else u
        transposed = X.shape[-2] > X.shape[-1]
        if transposed:
            X = X.transpose(-2, -1)
        X = X / (torch.linalg.matrix_norm(X, keepdim=True) + 1e-7)
        for _ in range(group["ns_steps"]):
            A = X @ X.transpose(-2, -1)
            X = 3.4445 * X - 4.7750 * (A @ X) + 2.0315 * (A @ (A @ X))
        if transposed:
            X = X.transpose(-2, -1)
        lr = group["lr"] * 0.2 * max(p.shape[0], p.shape[1]) ** 0.5
        return p * (1 - lr * group["weight_decay"]) - lr * X.reshape(p.shape)


def ref(cls, **kw):
    """A reference optimizer factory with the cstorch class's defaults filled in."""
    return lambda ps: cls(ps, kw)


def by_rank(ps, matrices: dict, vectors: dict):
    """Two param groups: parameters of two or more dimensions, and the rest."""
    ps = list(ps)
    return [{"params": [p for p in ps if p.dim() >= 2], **matrices},
            {"params": [p for p in ps if p.dim() < 2], **vectors}]


def matrices_only() -> torch.nn.Module:
    """The parity model without its biases (Muon takes matrices only)."""
    model = make_model()
    for layer in (model[0], model[2]):
        layer.bias = None
    return model


def edge_model() -> torch.nn.Module:
    """The parity model with one matrix of norm above 10 (LAMB's phi clips it) and a
    zero bias (LAMB's ratio falls back to 1; Adafactor's RMS floor eps2 applies)."""
    model = make_model()
    with torch.no_grad():
        model[0].weight.mul_(8.0)
        model[2].bias.zero_()
    return model


AF = dict(eps=(1e-30, 1e-3), clip_threshold=1.0, decay_rate=-0.8, beta1=None, weight_decay=0.0,
          scale_parameter=True, relative_step=False, warmup_init=False)
LAMB = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0, adam=False)
LION = dict(lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0)
MUON = dict(lr=0.02, weight_decay=0.01, momentum=0.95, nesterov=True, ns_steps=5)

# (id, cstorch optimizer factory, reference factory, number of param groups, model)
CASES = [
    ("adafactor-lr", lambda ps: cstorch.optim.Adafactor(ps, lr=0.02),
     ref(RefAdafactor, **{**AF, "lr": 0.02}), 1, None),
    ("adafactor-beta1-wd-clip-unscaled",
     lambda ps: cstorch.optim.Adafactor(ps, lr=0.01, beta1=0.9, weight_decay=0.05, clip_threshold=0.5,
                                        scale_parameter=False),
     ref(RefAdafactor, **{**AF, "lr": 0.01, "beta1": 0.9, "weight_decay": 0.05, "clip_threshold": 0.5,
                          "scale_parameter": False}), 1, None),
    ("adafactor-relative-step", lambda ps: cstorch.optim.Adafactor(ps, lr=None, relative_step=True),
     ref(RefAdafactor, **{**AF, "lr": None, "relative_step": True}), 1, edge_model),
    ("adafactor-warmup-beta1-decay-groups",
     lambda ps: cstorch.optim.Adafactor(by_rank(ps, dict(weight_decay=0.1), {}), lr=None, relative_step=True,
                                        warmup_init=True, beta1=0.8, decay_rate=-0.6, eps=(1e-20, 1e-2)),
     lambda ps: RefAdafactor(by_rank(ps, dict(weight_decay=0.1), {}),
                             {**AF, "lr": None, "relative_step": True, "warmup_init": True, "beta1": 0.8,
                              "decay_rate": -0.6, "eps": (1e-20, 1e-2)}), 2, None),
    ("lamb", lambda ps: cstorch.optim.Lamb(ps, lr=0.01), ref(RefLamb, **{**LAMB, "lr": 0.01}), 1, None),
    ("lamb-wd-groups-betas",
     lambda ps: cstorch.optim.Lamb(by_rank(ps, dict(weight_decay=0.05), {}), lr=0.02, betas=(0.8, 0.99), eps=1e-4),
     lambda ps: RefLamb(by_rank(ps, dict(weight_decay=0.05), {}),
                        {**LAMB, "lr": 0.02, "betas": (0.8, 0.99), "eps": 1e-4}), 2, edge_model),
    ("lamb-adam", lambda ps: cstorch.optim.Lamb(ps, lr=0.01, weight_decay=0.01, adam=True),
     ref(RefLamb, **{**LAMB, "lr": 0.01, "weight_decay": 0.01, "adam": True}), 1, None),
    ("lion", lambda ps: cstorch.optim.Lion(ps, lr=1e-3), ref(RefLion, **{**LION, "lr": 1e-3}), 1, None),
    ("lion-wd-betas", lambda ps: cstorch.optim.Lion(ps, lr=2e-3, betas=(0.8, 0.95), weight_decay=0.1),
     ref(RefLion, lr=2e-3, betas=(0.8, 0.95), weight_decay=0.1), 1, None),
    ("muon-defaults", lambda ps: cstorch.optim.Muon(ps), ref(RefMuon, **MUON), 1, matrices_only),
    ("muon-plain-momentum-ns3",
     lambda ps: cstorch.optim.Muon(ps, lr=0.01, weight_decay=0.0, momentum=0.9, nesterov=False, ns_steps=3),
     ref(RefMuon, lr=0.01, weight_decay=0.0, momentum=0.9, nesterov=False, ns_steps=3), 1, matrices_only),
    ("muon-no-momentum-wd", lambda ps: cstorch.optim.Muon(ps, lr=0.005, weight_decay=0.1, momentum=0.0),
     ref(RefMuon, **{**MUON, "lr": 0.005, "weight_decay": 0.1, "momentum": 0.0}), 1, matrices_only),
]
OPS = {"adafactor": "adafactor_update", "lamb": "lamb_update", "lion": "lion_update", "muon": "muon_update"}


@pytest.mark.parametrize("name,make_opt,make_ref,groups,model", CASES, ids=[c[0] for c in CASES])
def test_matches_reference(name, make_opt, make_ref, groups, model):
    model = model() if model else None
    expected = train_eager(make_ref, model=model)
    for backend in ("CPU", "CSX"):
        actual, opt, step = train_cstorch(backend, make_opt, model=model)
        assert_params_close(actual, expected, what=f"{name} on {backend}")
        if backend == "CSX":
            op = OPS[name.split("-")[0]]
            assert update_ops(step) == {f"cstorch.{op}.default": groups}, "one update op per param group"


def test_muon_matches_torch_muon_where_math_agrees():
    """One step, where the two definitions coincide; torch iterates in bfloat16, so the
    steps agree to about 2e-2 (a wrong lr scaling or coefficient would be far off)."""
    start = dict(matrices_only().named_parameters())
    ours = train_eager(lambda ps: cstorch.optim.Muon(ps, lr=0.05, weight_decay=0.0, nesterov=False), steps=1,
                       model=matrices_only())
    theirs = train_eager(lambda ps: torch.optim.Muon(ps, lr=0.05, weight_decay=0.0, nesterov=False,
                                                     adjust_lr_fn="match_rms_adamw"), steps=1, model=matrices_only())
    for k, s0 in start.items():
        ours_step, torch_step = ours[k] - s0, theirs[k] - s0
        err = (ours_step - torch_step).norm() / torch_step.norm()
        assert err <= 5e-2, f"{k}: relative error {err:.3g} (bfloat16 gives about 2e-2)"


HIGHER_RANK = [
    ("adafactor", lambda ps: cstorch.optim.Adafactor(ps, lr=0.01, beta1=0.9),
     lambda ps: RefAdafactor(ps, {**AF, "lr": 0.01, "beta1": 0.9})),
    ("muon", lambda ps: cstorch.optim.Muon(ps), lambda ps: RefMuon(ps, MUON)),
]


@pytest.mark.parametrize("name,make_opt,make_ref", HIGHER_RANK, ids=[c[0] for c in HIGHER_RANK])
def test_higher_rank_parameters(name, make_opt, make_ref):
    """A stack of matrices (3-D) and a conv kernel (4-D; Muon flattens it to
    (out, in * kh * kw)) with fixed gradients, 5 eager steps."""
    g = torch.Generator().manual_seed(2)
    shapes = [(2, 5, 3), (4, 3, 3, 3)]
    start = [torch.randn(s, generator=g) for s in shapes]
    grads = [[torch.randn(s, generator=g) for s in shapes] for _ in range(5)]
    finals = []
    for make in (make_opt, make_ref):
        params = [torch.nn.Parameter(t.clone()) for t in start]
        opt = make(params)
        for step_grads in grads:
            for p, gr in zip(params, step_grads):
                p.grad = gr.clone()
            opt.step()
        finals.append(params)
    for a, b, s0 in zip(*finals, start):
        assert_close_rel(a.detach(), b.detach(), what=f"{name} {tuple(s0.shape)}")
        assert not torch.allclose(b, s0)


# -- state dicts ------------------------------------------------------------------------

ROUND_TRIP = [
    ("adafactor", lambda ps: cstorch.optim.Adafactor(ps, lr=0.01, beta1=0.9, weight_decay=0.01), None,
     {"step", "exp_avg", "exp_avg_sq_row", "exp_avg_sq_col"}, {"step", "exp_avg", "exp_avg_sq"}),
    ("adafactor-relative", lambda ps: cstorch.optim.Adafactor(ps, lr=None, relative_step=True), None,
     {"step", "exp_avg_sq_row", "exp_avg_sq_col"}, {"step", "exp_avg_sq"}),
    ("lamb", lambda ps: cstorch.optim.Lamb(ps, lr=0.01, weight_decay=0.01), None,
     {"exp_avg", "exp_avg_sq"}, {"exp_avg", "exp_avg_sq"}),
    ("lion", lambda ps: cstorch.optim.Lion(ps, lr=1e-3, weight_decay=0.01), None, {"exp_avg"}, {"exp_avg"}),
    ("muon", lambda ps: cstorch.optim.Muon(ps), matrices_only, {"momentum_buffer"}, None),
]


def _train(model, opt, batches):
    for x, y in batches:
        opt.zero_grad()
        loss_of(model, x, y).backward()
        opt.step()


@pytest.mark.parametrize("name,make_opt,make_net,matrix_keys,vector_keys", ROUND_TRIP, ids=[c[0] for c in ROUND_TRIP])
def test_state_dict_round_trip_resumes(name, make_opt, make_net, matrix_keys, vector_keys):
    batches = make_batches(10)
    model = (make_net or make_model)()
    opt = make_opt(model.parameters())
    _train(model, opt, batches[:5])
    saved_model, saved_opt = copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict())
    for st, p in zip(saved_opt["state"].values(), model.parameters()):
        assert set(st) == (matrix_keys if p.dim() >= 2 else vector_keys), f"{name}: state keys"
    _train(model, opt, batches[5:])

    resumed = (make_net or make_model)()
    resumed.load_state_dict(saved_model)
    opt2 = make_opt(resumed.parameters())
    opt2.load_state_dict(saved_opt)
    _train(resumed, opt2, batches[5:])
    for (k, a), b in zip(resumed.named_parameters(), model.parameters()):
        assert torch.equal(a, b), f"{name}: {k} differs after resuming"
    for st_a, st_b in zip(opt2.state.values(), opt.state.values()):
        for k in st_b:
            assert torch.equal(st_a[k], st_b[k]), f"{name}: state {k} differs after resuming"


# -- invalid hyper-parameters ----------------------------------------------------------------

INVALID = [
    (cstorch.optim.Lion, dict(lr=-1.0), "Invalid learning rate: -1.0"),
    (cstorch.optim.Lion, dict(betas=(1.0, 0.99)), "Invalid beta parameter at index 0: 1.0"),
    (cstorch.optim.Lion, dict(betas=(0.9, -0.1)), "Invalid beta parameter at index 1: -0.1"),
    (cstorch.optim.Lion, dict(weight_decay=-0.1), "Invalid weight decay value: -0.1"),
    (cstorch.optim.Lamb, dict(lr=-1e-3), "Invalid learning rate: -0.001"),
    (cstorch.optim.Lamb, dict(eps=-1.0), "Invalid epsilon value: -1.0"),
    (cstorch.optim.Lamb, dict(betas=(0.9, 1.5)), "Invalid beta parameter at index 1: 1.5"),
    (cstorch.optim.Lamb, dict(weight_decay=-1.0), "Invalid weight_decay value: -1.0"),
    (cstorch.optim.Muon, dict(lr=-0.02), "Invalid learning rate: -0.02"),
    (cstorch.optim.Muon, dict(weight_decay=1.0), "Invalid weight decay parameter: 1.0"),
    (cstorch.optim.Muon, dict(momentum=1.0), "Invalid momentum parameter: 1.0"),
    (cstorch.optim.Muon, dict(ns_steps=-1), "Invalid number of steps: -1"),
    (cstorch.optim.Adafactor, dict(lr=-0.1), "Invalid learning rate: -0.1"),
    (cstorch.optim.Adafactor, dict(lr=None), "Invalid learning rate: None"),
    (cstorch.optim.Adafactor, dict(lr=0.1, relative_step=True), "Invalid learning rate: cannot combine"),
    (cstorch.optim.Adafactor, dict(lr=0.1, warmup_init=True), "Invalid warmup_init: True"),
    (cstorch.optim.Adafactor, dict(lr=0.1, eps=(1e-30,)), "Invalid epsilon value"),
    (cstorch.optim.Adafactor, dict(lr=0.1, eps=(1e-30, -1.0)), "Invalid epsilon value"),
    (cstorch.optim.Adafactor, dict(lr=0.1, clip_threshold=0.0), "Invalid clip_threshold: 0.0"),
    (cstorch.optim.Adafactor, dict(lr=0.1, decay_rate=0.5), "Invalid decay_rate: 0.5"),
    (cstorch.optim.Adafactor, dict(lr=0.1, beta1=1.0), "Invalid beta1: 1.0"),
    (cstorch.optim.Adafactor, dict(lr=0.1, weight_decay=-0.5), "Invalid weight_decay value: -0.5"),
]


@pytest.mark.parametrize("cls,kw,message", INVALID, ids=[f"{c[0].__name__}-{next(iter(c[1]))}" for c in INVALID])
def test_invalid_hyperparameters_raise(cls, kw, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        cls(matrices_only().parameters(), **kw)


def test_muon_rejects_vectors_and_names_the_alternative():
    with pytest.raises(ValueError, match=r"shape \(8,\).*AdamW"):
        cstorch.optim.Muon(make_model().parameters())


# -- a user's own optimizer, plain torch ops --------------------------------------------

class ClippedSignMomentum(cstorch.optim.Optimizer):
    """A user-written optimizer as the real docs describe one: state created in
    preinitialize, lr used through tensor arithmetic, torch.where instead of a Python
    branch on values. Momentum b = mu b + g; step = clip * sign(b) where |b| > clip,
    else b (sign-SGD for large momenta, momentum SGD for small ones)."""

    def __init__(self, params, lr=0.01, momentum=0.9, clip=0.05):
        super().__init__(params, dict(lr=lr, momentum=momentum, clip=clip))

    def preinitialize(self):
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["momentum_buffer"] = torch.zeros_like(p)

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            lr, clip = group["lr"], group["clip"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                buf = self.state[p]["momentum_buffer"]
                buf.mul_(group["momentum"]).add_(p.grad)
                direction = torch.where(buf.abs() > clip, clip * torch.sign(buf), buf)
                p.sub_(lr * direction)


@pytest.mark.parametrize("lr", [0.5, torch.tensor(0.5)], ids=["float-lr", "tensor-lr"])
def test_user_optimizer_with_torch_ops_runs_on_csx(lr):
    make = lambda ps: ClippedSignMomentum(ps, lr=lr.clone() if isinstance(lr, torch.Tensor) else lr)  # noqa: E731
    expected, _, _ = train_cstorch("CPU", make)
    actual, opt, step = train_cstorch("CSX", make)
    assert_params_close(actual, expected, what="user optimizer on CSX")
    assert not update_ops(step), "the user's optimizer is ordinary torch ops, no update op"
    assert_params_close(expected, train_eager(make), what="user optimizer on the CPU backend")
