"""cstorch.optim schedulers: closed forms of the step, driving param-group tensors.

Every schedule is checked, step by step, against its formula written independently
here in float64 Python math and, where the semantics agree, against the scheduler of
the same name in torch.optim.lr_scheduler. The CSX run of a whole schedule is in
test_scheduler_csx.py, configure_lr_scheduler in test_scheduler_config.py.
"""
from __future__ import annotations

import copy
import math
import warnings

import pytest
import torch

import cstorch
from cstorch._backend import _reset_backend
from cstorch.amp import skip
from cstorch.optim import lr_scheduler as L
from cstorch.optim import weight_decay_scheduler as W

TL = torch.optim.lr_scheduler
REL = 1e-5


# --------------------------------------------------------------------------------------
# references: textbook formulas, float64
# --------------------------------------------------------------------------------------
def half_cos(x):
    return (1.0 + math.cos(math.pi * x)) / 2.0


def ref_polynomial(t, init, end, T, power=1.0, cycle=False):
    if cycle:  # Keras PolynomialDecay(cycle=True)
        horizon = T * (1 if t == 0 else math.ceil(t / T))
        return (init - end) * (1 - t / horizon) ** power + end
    return (init - end) * (1 - min(t, T) / T) ** power + end


def ref_exponential(t, init, T, rate, staircase=False):
    e = t / T
    return init * rate ** (math.floor(e) if staircase else e)


def ref_inverse_time(t, init, k, T, rate, staircase=False):
    r = t ** k / T
    return init / (1 + rate * (math.floor(r) if staircase else r))


def ref_inverse_sqrt(t, init, scale, warmup):
    return init * scale / math.sqrt(max(t, warmup))


def ref_cosine_decay(t, init, end, T):
    return end + (init - end) * half_cos(min(t, T) / T)


def ref_cosine_annealing(t, init, T, eta_min):
    return eta_min + (init - eta_min) * half_cos(t / T)


def ref_warm_restarts(t, init, T0, eta_min):
    return eta_min + (init - eta_min) * half_cos((t % T0) / T0)


def ref_step(t, init, size, gamma):
    return init * gamma ** (t // size)


def ref_multistep(t, init, gamma, milestones):
    return init * gamma ** sum(1 for m in milestones if t >= m)


def ref_cyclic(t, base, peak, up, down, mode, gamma=1.0):
    total = up + down
    cycle = math.floor(1 + t / total)
    x = 1 + t / total - cycle
    ratio = up / total
    scale = x / ratio if x <= ratio else (x - 1) / (ratio - 1)
    amp = (peak - base) * scale
    if mode == "triangular2":
        amp /= 2 ** (cycle - 1)
    elif mode == "exp_range":
        amp *= gamma ** t
    return base + amp


def ref_onecycle(t, init, peak, N, pct, fdiv, three_phase=False, strategy="cos"):
    low = init / fdiv
    if three_phase:
        phases = [(pct * N - 1, init, peak), (2 * pct * N - 2, peak, init), (N - 1, init, low)]
    else:
        phases = [(pct * N - 1, init, peak), (N - 1, peak, low)]
    t = min(t, N - 1)  # decision: hold the minimum after the last step
    start = 0.0
    for i, (end, a, b) in enumerate(phases):
        if t <= end or i == len(phases) - 1:
            p = (t - start) / (end - start)
            if strategy == "cos":
                return b + (a - b) * half_cos(p)
            return a + (b - a) * p
        start = end


def ref_piecewise(t, vals, milestones):
    return vals[sum(1 for m in milestones if t >= m)]


# --------------------------------------------------------------------------------------
# drivers
# --------------------------------------------------------------------------------------
X = torch.randn(3, 2, generator=torch.Generator().manual_seed(0))


def cstorch_values(make_sched, steps, key="lr", lr=0.1, weight_decay=0.0):
    """Values of param group 0's `key` used by optimizer steps 0..steps on the CPU
    backend, with `scheduler.step()` after every `optimizer.step()`."""
    _reset_backend()
    cstorch.backend("CPU")
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1)
    opt = cstorch.optim.SGD(model.parameters(), lr=lr, weight_decay=weight_decay)
    sched = make_sched(opt)
    held = opt.param_groups[0][key]
    assert isinstance(held, torch.Tensor) and held.dtype == torch.float32 and held.dim() == 0
    out = []
    for t in range(steps + 1):
        assert opt.param_groups[0][key] is held, "the group's tensor must be updated in place"
        assert int(sched.last_epoch) == t and sched.last_epoch.dtype == torch.int64
        out.append(float(held))
        model(X).sum().backward()
        opt.step()
        opt.zero_grad()
        sched.step()
    return out


def torch_values(make_sched, steps, lr=0.1):
    """The same loop with torch.optim.SGD and a torch.optim.lr_scheduler scheduler."""
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=lr)
    sched = make_sched(opt)
    out = []
    for _ in range(steps + 1):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


def assert_values(actual, expected, what):
    assert len(actual) == len(expected)
    scale = max(abs(e) for e in expected) or 1.0
    for t, (a, e) in enumerate(zip(actual, expected)):
        assert abs(a - e) <= REL * abs(e) + 1e-9 * scale, f"{what}: step {t}: got {a!r}, expected {e!r}"


class OneOverSqrtLR(L.LambdaLR):
    """A LambdaLR subclass with one factor (torch's LambdaLR semantics)."""

    def set_value_lambda(self):
        return [lambda s: torch.rsqrt(s + 1.0)]


# (id, steps, cstorch factory, reference f(t), torch factory or None, torch's base lr)
CASES = [
    ("constant", 12, lambda o: L.ConstantLR(o, 0.03), lambda t: 0.03, None, None),
    ("polynomial-p2", 30, lambda o: L.PolynomialLR(o, 0.1, 0.0, 20, power=2.0),
     lambda t: ref_polynomial(t, 0.1, 0.0, 20, 2.0), lambda o: TL.PolynomialLR(o, total_iters=20, power=2.0), 0.1),
    ("polynomial-end", 30, lambda o: L.PolynomialLR(o, 0.1, 0.01, 20, power=0.5),
     lambda t: ref_polynomial(t, 0.1, 0.01, 20, 0.5), None, None),
    ("polynomial-cycle", 45, lambda o: L.PolynomialLR(o, 0.1, 0.01, 10, power=1.5, cycle=True),
     lambda t: ref_polynomial(t, 0.1, 0.01, 10, 1.5, cycle=True), None, None),
    ("linear", 30, lambda o: L.LinearLR(o, 0.01, 0.1, 20), lambda t: ref_polynomial(t, 0.01, 0.1, 20),
     lambda o: TL.LinearLR(o, start_factor=0.1, end_factor=1.0, total_iters=20), 0.1),
    ("exponential", 40, lambda o: L.ExponentialLR(o, 0.1, 1, 0.9), lambda t: ref_exponential(t, 0.1, 1, 0.9),
     lambda o: TL.ExponentialLR(o, gamma=0.9), 0.1),
    ("exponential-smooth", 30, lambda o: L.ExponentialLR(o, 0.1, 7, 0.5), lambda t: ref_exponential(t, 0.1, 7, 0.5),
     None, None),
    ("exponential-staircase", 30, lambda o: L.ExponentialLR(o, 0.1, 7, 0.5, staircase=True),
     lambda t: ref_exponential(t, 0.1, 7, 0.5, True), lambda o: TL.StepLR(o, step_size=7, gamma=0.5), 0.1),
    ("inverse-time", 30, lambda o: L.InverseExponentialTimeDecayLR(o, 0.1, 2, 10, 0.5),
     lambda t: ref_inverse_time(t, 0.1, 2, 10, 0.5), None, None),
    ("inverse-time-staircase", 30, lambda o: L.InverseExponentialTimeDecayLR(o, 0.1, 1.5, 4, 0.3, staircase=True),
     lambda t: ref_inverse_time(t, 0.1, 1.5, 4, 0.3, True), None, None),
    ("inverse-sqrt", 30, lambda o: L.InverseSquareRootDecayLR(o, 0.1, 2.0, 5),
     lambda t: ref_inverse_sqrt(t, 0.1, 2.0, 5), None, None),
    ("cosine-decay", 40, lambda o: L.CosineDecayLR(o, 0.1, 0.001, 30), lambda t: ref_cosine_decay(t, 0.1, 0.001, 30),
     None, None),
    ("cosine-decay-to-zero", 30, lambda o: L.CosineDecayLR(o, 0.1, 0.0, 30), lambda t: ref_cosine_decay(t, 0.1, 0, 30),
     lambda o: TL.CosineAnnealingLR(o, T_max=30, eta_min=0.0), 0.1),
    ("cosine-annealing", 45, lambda o: L.CosineAnnealingLR(o, 0.1, 10, eta_min=0.01),
     lambda t: ref_cosine_annealing(t, 0.1, 10, 0.01), lambda o: TL.CosineAnnealingLR(o, T_max=10, eta_min=0.01), 0.1),
    ("warm-restarts", 40, lambda o: L.CosineAnnealingWarmRestarts(o, 0.1, 7, eta_min=0.001),
     lambda t: ref_warm_restarts(t, 0.1, 7, 0.001),
     lambda o: TL.CosineAnnealingWarmRestarts(o, T_0=7, T_mult=1, eta_min=0.001), 0.1),
    ("step", 30, lambda o: L.StepLR(o, 0.1, 4, 0.5), lambda t: ref_step(t, 0.1, 4, 0.5),
     lambda o: TL.StepLR(o, step_size=4, gamma=0.5), 0.1),
    ("multistep", 25, lambda o: L.MultiStepLR(o, 0.1, 0.3, [3, 8, 8, 15]),
     lambda t: ref_multistep(t, 0.1, 0.3, [3, 8, 8, 15]),
     lambda o: TL.MultiStepLR(o, milestones=[3, 8, 8, 15], gamma=0.3), 0.1),
    ("multiplicative", 40, lambda o: L.MultiplicativeLR(o, 0.1, 0.95), lambda t: 0.1 * 0.95 ** t,
     lambda o: TL.MultiplicativeLR(o, lr_lambda=lambda e: 0.95), 0.1),
    ("lambda-demo", 20, lambda o: L.LambdaLR(o, 0.1), lambda t: (0.1 * t / 30) * (0.1 * 0.95 ** t), None, None),
    ("lambda-subclass", 20, lambda o: OneOverSqrtLR(o, 0.1), lambda t: 0.1 / math.sqrt(t + 1),
     lambda o: TL.LambdaLR(o, lr_lambda=lambda e: 1 / math.sqrt(e + 1)), 0.1),
    ("cyclic-triangular", 40, lambda o: L.CyclicLR(o, 0.01, 0.1, step_size_up=5, step_size_down=3),
     lambda t: ref_cyclic(t, 0.01, 0.1, 5, 3, "triangular"),
     lambda o: TL.CyclicLR(o, 0.01, 0.1, step_size_up=5, step_size_down=3, cycle_momentum=False), 0.01),
    ("cyclic-triangular2", 40, lambda o: L.CyclicLR(o, 0.01, 0.1, step_size_up=4, mode="triangular2"),
     lambda t: ref_cyclic(t, 0.01, 0.1, 4, 4, "triangular2"),
     lambda o: TL.CyclicLR(o, 0.01, 0.1, step_size_up=4, mode="triangular2", cycle_momentum=False), 0.01),
    ("cyclic-exp-range", 40, lambda o: L.CyclicLR(o, 0.01, 0.1, step_size_up=3, step_size_down=6, mode="exp_range",
                                                  gamma=0.97),
     lambda t: ref_cyclic(t, 0.01, 0.1, 3, 6, "exp_range", 0.97),
     lambda o: TL.CyclicLR(o, 0.01, 0.1, step_size_up=3, step_size_down=6, mode="exp_range", gamma=0.97,
                           cycle_momentum=False), 0.01),
    ("onecycle-cos", 49, lambda o: L.OneCycleLR(o, 0.1 / 25, 0.1, total_steps=50, pct_start=0.3),
     lambda t: ref_onecycle(t, 0.1 / 25, 0.1, 50, 0.3, 1e4),
     lambda o: TL.OneCycleLR(o, max_lr=0.1, total_steps=50, pct_start=0.3, cycle_momentum=False), 0.1),
    ("onecycle-linear-3phase", 39, lambda o: L.OneCycleLR(o, 0.01, 0.1, total_steps=40, pct_start=0.25,
                                                          final_div_factor=100, three_phase=True,
                                                          anneal_strategy="linear"),
     lambda t: ref_onecycle(t, 0.01, 0.1, 40, 0.25, 100, True, "linear"),
     lambda o: TL.OneCycleLR(o, max_lr=0.1, total_steps=40, pct_start=0.25, div_factor=10, final_div_factor=100,
                             three_phase=True, anneal_strategy="linear", cycle_momentum=False), 0.1),
    ("onecycle-after-end", 30, lambda o: L.OneCycleLR(o, 0.01, 0.1, total_steps=20, pct_start=0.4),
     lambda t: ref_onecycle(t, 0.01, 0.1, 20, 0.4, 1e4), None, None),
    ("piecewise", 20, lambda o: L.PiecewiseConstantLR(o, [0.1, 0.05, 0.01], [5, 12]),
     lambda t: ref_piecewise(t, [0.1, 0.05, 0.01], [5, 12]), None, None),
    ("sequential", 45, lambda o: L.SequentialLR(o, [L.LinearLR(o, 0.01, 0.1, 10), L.CosineAnnealingLR(o, 0.1, 20)],
                                                milestones=[10]),
     lambda t: ref_polynomial(t, 0.01, 0.1, 10) if t < 10 else ref_cosine_annealing(t - 10, 0.1, 20, 0.0),
     lambda o: TL.SequentialLR(o, [TL.LinearLR(o, 0.1, 1.0, 10), TL.CosineAnnealingLR(o, 20)], milestones=[10]),
     0.1),
    ("sequential-3", 40, lambda o: L.SequentialLR(o, [L.ConstantLR(o, 0.02), L.StepLR(o, 0.1, 3, 0.5),
                                                      L.ExponentialLR(o, 0.05, 2, 0.8)], milestones=[4, 15]),
     lambda t: 0.02 if t < 4 else ref_step(t - 4, 0.1, 3, 0.5) if t < 15 else ref_exponential(t - 15, 0.05, 2, 0.8),
     None, None),
    ("chained", 30, lambda o: L.ChainedLR([L.ExponentialLR(o, 0.1, 1, 0.9), L.StepLR(o, 0.5, 4, 0.5)]),
     lambda t: 0.1 * 0.9 ** t * 0.5 ** (t // 4),
     lambda o: TL.ChainedScheduler([TL.ExponentialLR(o, gamma=0.9), TL.StepLR(o, step_size=4, gamma=0.5)]), 0.1),
]


@pytest.mark.parametrize("name,steps,make,ref,make_torch,torch_lr", CASES, ids=[c[0] for c in CASES])
def test_closed_form(name, steps, make, ref, make_torch, torch_lr):
    actual = cstorch_values(make, steps)
    assert_values(actual, [ref(t) for t in range(steps + 1)], f"{name} vs formula")
    if make_torch is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = torch_values(make_torch, steps, lr=torch_lr)
        assert_values(actual, expected, f"{name} vs torch.optim.lr_scheduler")


def test_chained_scheduler_alias_and_nested_sequences():
    """ChainedScheduler is ChainedLR; a SequentialLR nested in a SequentialLR uses local steps."""
    assert issubclass(L.ChainedScheduler, L.ChainedLR) and cstorch.optim.ChainedScheduler is L.ChainedScheduler

    def make(o):
        inner = L.SequentialLR(o, [L.ConstantLR(o, 0.05), L.LinearLR(o, 0.05, 0.0, 5)], milestones=[3])
        return L.SequentialLR(o, [L.ConstantLR(o, 0.1), inner], milestones=[4])

    def ref(t):
        if t < 4:
            return 0.1
        return 0.05 if t - 4 < 3 else ref_polynomial(t - 7, 0.05, 0.0, 5)

    assert_values(cstorch_values(make, 16), [ref(t) for t in range(17)], "nested sequential")


def test_scale_per_param_scales_each_group():
    _reset_backend()
    w, b = torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(1))
    opt = cstorch.optim.SGD([{"params": [w], "adjust_learning_rate": 0.5}, {"params": [b]}], lr=0.1)
    sched = L.ScalePerParamLR(opt, L.StepLR(opt, 0.1, 3, 0.5))
    for t in range(10):
        got = [float(g["lr"]) for g in opt.param_groups]
        assert_values(got, [0.5 * ref_step(t, 0.1, 3, 0.5), ref_step(t, 0.1, 3, 0.5)], f"step {t}")
        sched.step()
    assert [float(v) for v in sched.get_last_lr()] == [float(g["lr"]) for g in opt.param_groups]


# --------------------------------------------------------------------------------------
# weight decay
# --------------------------------------------------------------------------------------
WD_CASES = [
    ("cosine-decay-wd", lambda o: W.CosineDecayWD(o, initial_val=0.1, end_val=0.01, total_iters=20),
     lambda t: ref_cosine_decay(t, 0.1, 0.01, 20)),
    ("polynomial-wd", lambda o: W.PolynomialWD(o, 0.2, 0.0, 15, power=2.0), lambda t: ref_polynomial(t, 0.2, 0, 15, 2)),
    ("piecewise-wd", lambda o: W.PiecewiseConstantWD(o, vals=[0.0, 0.1, 0.05], milestones=[4, 9]),
     lambda t: ref_piecewise(t, [0.0, 0.1, 0.05], [4, 9])),
    ("cyclic-wd", lambda o: W.CyclicWD(o, base_val=0.0, max_val=0.1, step_size_up=4),
     lambda t: ref_cyclic(t, 0.0, 0.1, 4, 4, "triangular")),
    ("sequential-wd", lambda o: W.SequentialWD(o, [W.ConstantWD(o, val=0.0), W.StepWD(o, 0.1, 5, 0.1)], [6]),
     lambda t: 0.0 if t < 6 else ref_step(t - 6, 0.1, 5, 0.1)),
]


@pytest.mark.parametrize("name,make,ref", WD_CASES, ids=[c[0] for c in WD_CASES])
def test_weight_decay_twins(name, make, ref):
    values = cstorch_values(make, 20, key="weight_decay", lr=0.07, weight_decay=0.3)
    assert_values(values, [ref(t) for t in range(21)], name)


def test_weight_decay_scheduler_leaves_lr_alone_and_reaches_the_update():
    """A WD scheduler writes only "weight_decay"; SGD uses it: with lr fixed, the k-th
    update equals torch.optim.SGD's with weight_decay = f(k)."""
    _reset_backend()
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1)
    ref_model = copy.deepcopy(model)
    opt = cstorch.optim.SGD(model.parameters(), lr=0.1, weight_decay=0.5)
    sched = W.StepWD(opt, 0.5, 2, 0.1)
    ref_opt = torch.optim.SGD(ref_model.parameters(), lr=0.1, weight_decay=0.5)
    for t in range(6):
        assert opt.param_groups[0]["lr"] == 0.1 and not isinstance(opt.param_groups[0]["lr"], torch.Tensor)
        for g in ref_opt.param_groups:
            g["weight_decay"] = ref_step(t, 0.5, 2, 0.1)
        for m, o in ((model, opt), (ref_model, ref_opt)):
            m(X).sum().backward()
            o.step()
            o.zero_grad()
        sched.step()
    for a, b in zip(model.parameters(), ref_model.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)
    assert isinstance(sched, W.WeightDecayScheduler) and sched.param_group_key == "weight_decay"


# --------------------------------------------------------------------------------------
# param_group_tags
# --------------------------------------------------------------------------------------
def tagged_optimizer():
    ps = [torch.nn.Parameter(torch.ones(1)) for _ in range(4)]
    return cstorch.optim.SGD([
        {"params": [ps[0]], "tags": "decay"},
        {"params": [ps[1]]},
        {"params": [ps[2]], "tags": ["decay", "head"]},
        {"params": [ps[3]], "tags": "head"},
    ], lr=0.1)


@pytest.mark.parametrize("tags,expected", [
    ("decay", [True, False, True, False]),
    (["head"], [False, False, True, True]),
    ([None], [False, True, False, False]),
    ([None, "head"], [False, True, True, True]),
    (None, [True, True, True, True]),
])
def test_param_group_tags_select_groups(tags, expected):
    opt = tagged_optimizer()
    sched = L.StepLR(opt, 0.5, 1, 0.5, param_group_tags=tags)
    for _ in range(3):
        sched.step()
    got = [float(g["lr"]) != 0.1 for g in opt.param_groups]
    assert got == expected
    for g, applies in zip(opt.param_groups, expected):
        if applies:
            assert float(g["lr"]) == pytest.approx(0.5 * 0.5 ** 3, rel=REL)
        else:
            assert g["lr"] == 0.1 and not isinstance(g["lr"], torch.Tensor)
    assert [v is not None for v in sched.get()] == expected
    assert [v is not None for v in sched.get_last_lr()] == expected


def test_param_group_tag_errors():
    opt = tagged_optimizer()
    with pytest.raises(ValueError, match="duplicate.*'decay'"):
        L.ConstantLR(opt, 0.1, param_group_tags=["decay", "decay"])
    with pytest.raises(ValueError, match="'typo'") as e:
        L.ConstantLR(opt, 0.1, param_group_tags=["decay", "typo"])
    assert "'head'" in str(e.value), "the error lists the available tags"
    with pytest.raises(TypeError, match="param_group_tags"):
        L.ConstantLR(opt, 0.1, param_group_tags=3)
    untagged = cstorch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.1)
    with pytest.raises(ValueError, match="'x'"):
        L.ConstantLR(untagged, 0.1, param_group_tags="x")
    # composites: children with other tags than the composite
    a = L.ConstantLR(opt, 0.1, param_group_tags="decay")
    b = L.ConstantLR(opt, 0.2, param_group_tags="head")
    with pytest.raises(ValueError, match="param_group_tags"):
        L.SequentialLR(opt, [a, b], [3])


# --------------------------------------------------------------------------------------
# argument validation
# --------------------------------------------------------------------------------------
def test_invalid_arguments():
    opt = cstorch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.1)
    other = cstorch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.1)
    torch_opt = torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.1)
    with pytest.raises(TypeError, match="cstorch.optim.Optimizer"):
        L.ConstantLR(torch_opt, 0.1)
    with pytest.raises(ValueError, match="T_mult"):
        L.CosineAnnealingWarmRestarts(opt, 0.1, T_0=5, T_mult=2)
    with pytest.raises(ValueError, match="total_iters"):
        L.CosineDecayLR(opt, 0.1, 0.0, 0)
    with pytest.raises(TypeError, match="total_iters"):
        L.LinearLR(opt, 0.1, 0.0, 2.5)
    with pytest.raises(TypeError, match="initial_val|initial_learning_rate"):
        L.StepLR(opt, "0.1", 3, 0.5)
    with pytest.raises(ValueError, match="mode"):
        L.CyclicLR(opt, 0.01, 0.1, mode="sawtooth")
    with pytest.raises(ValueError, match="anneal_strategy"):
        L.OneCycleLR(opt, 0.01, 0.1, anneal_strategy="poly")
    with pytest.raises(ValueError, match="phase"):
        L.OneCycleLR(opt, 0.01, 0.1, total_steps=4, pct_start=0.25)
    with pytest.raises(ValueError, match="one more value than milestones"):
        L.PiecewiseConstantLR(opt, [0.1, 0.01], [3, 6])
    with pytest.raises(ValueError, match="one milestone fewer"):
        L.SequentialLR(opt, [L.ConstantLR(opt, 0.1), L.ConstantLR(opt, 0.2)], [2, 4])
    with pytest.raises(TypeError, match="integer"):
        L.SequentialLR(opt, [L.ConstantLR(opt, 0.1), L.ConstantLR(opt, 0.2)], [2.5])
    with pytest.raises(ValueError, match="same optimizer"):
        L.SequentialLR(opt, [L.ConstantLR(opt, 0.1), L.ConstantLR(other, 0.2)], [2])
    with pytest.raises(ValueError, match="'weight_decay'"):
        L.SequentialLR(opt, [L.ConstantLR(opt, 0.1), W.ConstantWD(opt, 0.2)], [2])
    with pytest.raises(ValueError, match="initial value"):
        L.ChainedLR([L.ConstantLR(opt, 0.1), L.LinearLR(opt, 0.0, 0.1, 5)])
    with pytest.raises(TypeError, match="takes no arguments"):
        L.ConstantLR(opt, 0.1).step(3)


def test_children_of_a_composite_are_owned():
    """Children are evaluated by the composite: they are no live schedulers of their own and
    stepping them directly is an error that says what to do."""
    from cstorch.optim.scheduler import live_schedulers

    opt = cstorch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.1)
    a, b = L.ConstantLR(opt, 0.1), L.ExponentialLR(opt, 0.1, 1, 0.5)
    seq = L.SequentialLR(opt, [a, b], [2])
    live = live_schedulers()
    assert seq in live and a not in live and b not in live
    with pytest.raises(RuntimeError, match="SequentialLR"):
        a.step()
    with pytest.raises(ValueError, match="already belongs"):
        L.ChainedLR([b, L.ConstantLR(opt, 0.3)])


# --------------------------------------------------------------------------------------
# skipped steps, state dicts
# --------------------------------------------------------------------------------------
def test_a_skipped_step_does_not_advance_the_schedule():
    opt = cstorch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.1)
    sched = L.StepLR(opt, 0.1, 1, 0.5)
    try:
        for applied, expected_epoch in [(True, 1), (False, 1), (True, 2), (False, 2)]:
            skip.record_step_applied(opt, torch.tensor(applied))
            sched.step()
            assert int(sched.last_epoch) == expected_epoch
            assert float(opt.param_groups[0]["lr"]) == pytest.approx(ref_step(expected_epoch, 0.1, 1, 0.5))
    finally:
        skip.clear()


@pytest.mark.parametrize("kind", ["simple", "sequential", "scale-per-param"])
def test_state_dict_round_trip_resumes(kind):
    def build(opt):
        if kind == "simple":
            return L.CosineDecayLR(opt, 0.1, 0.01, 12), lambda t: ref_cosine_decay(t, 0.1, 0.01, 12)
        if kind == "sequential":
            return (L.SequentialLR(opt, [L.LinearLR(opt, 0.0, 0.1, 4), L.StepLR(opt, 0.1, 3, 0.5)], [4]),
                    lambda t: ref_polynomial(t, 0.0, 0.1, 4) if t < 4 else ref_step(t - 4, 0.1, 3, 0.5))
        return L.ScalePerParamLR(opt, L.ExponentialLR(opt, 0.1, 2, 0.5)), lambda t: 0.5 * ref_exponential(t, 0.1, 2, .5)

    def make_opt():
        return cstorch.optim.SGD([{"params": [torch.nn.Parameter(torch.ones(1))], "adjust_learning_rate": 0.5}],
                                 lr=0.3)

    opt = make_opt()
    sched, ref = build(opt)
    for _ in range(7):
        sched.step()
    state = copy.deepcopy(sched.state_dict())
    assert int(state["last_epoch"]) == 7 and "optimizer" not in state
    assert float(state["_last_value"][0]) == pytest.approx(ref(7), rel=REL)

    opt2 = make_opt()
    sched2, _ = build(opt2)
    lr_tensor, epoch_tensor = opt2.param_groups[0]["lr"], sched2.last_epoch
    before = copy.deepcopy(state)
    sched2.load_state_dict(state)
    assert state.keys() == before.keys(), "load_state_dict must not modify its argument"
    assert sched2.last_epoch is epoch_tensor and opt2.param_groups[0]["lr"] is lr_tensor, "loaded in place"
    for t in range(7, 14):
        assert int(sched2.last_epoch) == t
        assert float(opt2.param_groups[0]["lr"]) == pytest.approx(ref(t), rel=REL)
        sched2.step()


def test_lr_state_dict_uses_learning_rate_names():
    opt = cstorch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.1)
    state = L.CyclicLR(opt, 0.01, 0.1, step_size_up=4).state_dict()
    assert state["base_lr"] == 0.01 and state["max_lr"] == 0.1 and isinstance(state["last_epoch"], torch.Tensor)
    state = W.CyclicWD(opt, 0.01, 0.1, step_size_up=4).state_dict()
    assert state["base_val"] == 0.01 and state["max_val"] == 0.1
