"""The real API's scheduler members beyond step(): `increment_last_epoch`,
`update_last_value`, `update_groups` (the halves step() is made of), `set_scale_fn`
(cyclic schedulers) and `set_value_lambda` (multiplicative ones).

A schedule driven by the halves must equal the same schedule driven by step(), bit for
bit, on the CPU backend and inside a compiled CSX step; the hooks are checked against
their closed forms and against torch.optim.lr_scheduler given the same function.
"""
from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

import cstorch
from cstorch._backend import _reset_backend
from cstorch.amp import skip
from cstorch.optim import lr_scheduler as L
from cstorch.optim import weight_decay_scheduler as W
from test_schedulers import (
    CASES, REL, TL, WD_CASES, X, assert_values, cstorch_values, ref_cosine_decay, ref_cyclic, ref_polynomial, ref_step,
    tagged_optimizer, torch_values,
)


def _step(sched):
    sched.step()


def _halves(sched):
    sched.increment_last_epoch()
    sched.update_last_value()


def _by_groups(sched):
    sched.increment_last_epoch()
    sched.update_groups(sched.get())


ADVANCES = {"halves": _halves, "update_groups": _by_groups}


def drive(make, steps, advance, key="lr", lr=0.1, weight_decay=0.0):
    """Param group 0's `key` used by optimizer steps 0..steps on the CPU backend, with
    `advance(scheduler)` after each optimizer step; also the final step and parameters."""
    _reset_backend()
    cstorch.backend("CPU")
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1)
    opt = cstorch.optim.SGD(model.parameters(), lr=lr, weight_decay=weight_decay)
    sched = make(opt)
    held, epoch = opt.param_groups[0][key], sched.last_epoch
    values = []
    for _ in range(steps + 1):
        values.append(float(held))
        model(X).sum().backward()
        opt.step()
        opt.zero_grad()
        advance(sched)
    assert opt.param_groups[0][key] is held and sched.last_epoch is epoch, "updated in place"
    return values, int(epoch), [p.detach().clone() for p in model.parameters()]


@pytest.mark.parametrize("advance", ADVANCES)
@pytest.mark.parametrize("name,steps,make,ref", [c[:4] for c in CASES], ids=[c[0] for c in CASES])
def test_the_halves_equal_step(name, steps, make, ref, advance):
    by_step = drive(make, steps, _step)
    by_halves = drive(make, steps, ADVANCES[advance])
    assert by_halves[0] == by_step[0] and by_halves[1] == by_step[1] == steps + 1
    for a, b in zip(by_halves[2], by_step[2]):
        assert torch.equal(a, b)
    assert_values(by_halves[0], [ref(t) for t in range(steps + 1)], f"{name} driven by {advance}")


@pytest.mark.parametrize("name,make,ref", WD_CASES, ids=[c[0] for c in WD_CASES])
def test_the_halves_equal_step_for_weight_decay(name, make, ref):
    kw = dict(key="weight_decay", lr=0.07, weight_decay=0.3)
    by_halves = drive(make, 20, _halves, **kw)
    assert by_halves[0] == drive(make, 20, _step, **kw)[0]
    assert_values(by_halves[0], [ref(t) for t in range(21)], name)


def test_each_half_does_only_its_part():
    opt = cstorch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.3)
    sched = L.StepLR(opt, 0.1, 1, 0.5)
    lr = opt.param_groups[0]["lr"]
    sched.increment_last_epoch()
    assert int(sched.last_epoch) == 1 and float(lr) == pytest.approx(0.1, rel=REL), "the groups keep f(0)"
    assert float(sched.get()[0]) == pytest.approx(0.05, rel=REL)
    for _ in range(2):  # update_last_value does not advance
        sched.update_last_value()
        assert int(sched.last_epoch) == 1 and float(lr) == pytest.approx(0.05, rel=REL)
    assert opt.param_groups[0]["lr"] is lr
    assert float(sched.get_last_value()[0]) == float(lr)


def test_increment_last_epoch_holds_on_a_skipped_step():
    opt = cstorch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.1)
    sched = L.StepLR(opt, 0.1, 1, 0.5)
    try:
        for applied, expected in [(True, 1), (False, 1), (True, 2), (False, 2), (True, 3)]:
            skip.record_step_applied(opt, torch.tensor(applied))
            sched.increment_last_epoch()
            sched.update_last_value()
            assert int(sched.last_epoch) == expected
            assert float(opt.param_groups[0]["lr"]) == pytest.approx(ref_step(expected, 0.1, 1, 0.5), rel=REL)
    finally:
        skip.clear()


def test_update_groups_writes_the_given_values_in_place():
    opt = tagged_optimizer()  # groups 0 and 2 carry the tag "decay"
    sched = L.StepLR(opt, 0.5, 1, 0.5, param_group_tags="decay")
    held = [g["lr"] for g in opt.param_groups]
    sched.update_groups([0.3, None, torch.tensor(0.2, dtype=torch.float64), None])
    assert [g["lr"] is h for g, h in zip(opt.param_groups, held)] == [True] * 4
    assert float(held[0]) == pytest.approx(0.3) and float(held[2]) == pytest.approx(0.2)
    assert held[1] == 0.1 and held[3] == 0.1, "groups the scheduler leaves out are untouched"
    assert [None if v is None else float(v) for v in sched.get_last_value()] == [float(held[0]), None,
                                                                                 float(held[2]), None]
    with pytest.raises(ValueError, match="one value per param group"):
        sched.update_groups([0.3])
    with pytest.raises(ValueError, match="param group 1 is not scheduled"):
        sched.update_groups([0.3, 0.1, None, None])
    with pytest.raises(ValueError, match="one-element"):
        sched.update_groups([torch.ones(2), None, None, None])


def test_scale_per_param_by_halves_scales_each_group():
    def run(advance):
        _reset_backend()
        w, b = torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(1))
        opt = cstorch.optim.SGD([{"params": [w], "adjust_learning_rate": 0.5}, {"params": [b]}], lr=0.1)
        sched = L.ScalePerParamLR(opt, L.StepLR(opt, 0.1, 3, 0.5))
        out = []
        for _ in range(10):
            out.append([float(g["lr"]) for g in opt.param_groups])
            advance(sched)
        return out

    values = run(_halves)
    assert values == run(_step)
    for t, got in enumerate(values):
        assert_values(got, [0.5 * ref_step(t, 0.1, 3, 0.5), ref_step(t, 0.1, 3, 0.5)], f"step {t}")


def test_members_of_an_owned_child_are_errors():
    opt = cstorch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.1)
    a, b = L.ConstantLR(opt, 0.1), L.ExponentialLR(opt, 0.1, 1, 0.5)
    seq = L.SequentialLR(opt, [a, b], [2])  # noqa: F841 (children know their owner by a weak reference)
    for call in (a.increment_last_epoch, a.update_last_value, lambda: b.update_groups([0.2])):
        with pytest.raises(RuntimeError, match="part of a SequentialLR"):
            call()


# --------------------------------------------------------------------------------------
# set_scale_fn, set_value_lambda
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode,scale_mode,ref", [
    ("triangular", "cycle", lambda x: 1.0),
    ("triangular2", "cycle", lambda x: 0.5 ** (x - 1)),
    ("exp_range", "iterations", lambda x: 0.97 ** x),
])
@pytest.mark.parametrize("cls", [L.CyclicLR, W.CyclicWD])
def test_set_scale_fn_is_the_mode_scale(cls, mode, scale_mode, ref):
    opt = cstorch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.1)
    given = "iterations" if scale_mode == "cycle" else "cycle"  # the mode decides, as in the real API
    sched = cls(opt, 0.01, 0.1, 4, mode=mode, gamma=0.97, scale_mode=given)
    assert sched.scale_mode == scale_mode
    sched.scale_mode = given
    fn = sched.set_scale_fn()
    assert sched.scale_mode == scale_mode
    for x in (1.0, 2.0, 3.0, 7.0, 40.0):
        assert float(fn(torch.tensor(x))) == pytest.approx(ref(x), rel=REL)


class HarmonicCyclicLR(L.CyclicLR):
    """A custom amplitude scale; `scale_mode` stays as given."""

    def set_scale_fn(self):
        return lambda x: 1.0 / (x + 1.0)


@pytest.mark.parametrize("scale_mode", ["cycle", "iterations"])
def test_an_overridden_set_scale_fn_drives_the_schedule_like_torch(scale_mode):
    def scale(x):
        return 1.0 / (x + 1.0)

    steps = 30
    actual = cstorch_values(lambda o: HarmonicCyclicLR(o, 0.01, 0.1, step_size_up=3, step_size_down=5,
                                                       scale_mode=scale_mode), steps)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = torch_values(lambda o: TL.CyclicLR(o, 0.01, 0.1, step_size_up=3, step_size_down=5, scale_fn=scale,
                                                      scale_mode=scale_mode, cycle_momentum=False), steps, lr=0.01)
    assert_values(actual, expected, f"custom scale on the {scale_mode}")
    plain = cstorch_values(lambda o: L.CyclicLR(o, 0.01, 0.1, step_size_up=3, step_size_down=5), steps)
    assert plain == pytest.approx([ref_cyclic(t, 0.01, 0.1, 3, 5, "triangular") for t in range(steps + 1)], rel=REL)
    assert actual != pytest.approx(plain, rel=REL), "the override must be what drives the schedule"


class NinetyPercentLR(L.MultiplicativeLR):
    def set_value_lambda(self):
        return lambda s: 0.9


class NinetyPercentWD(W.MultiplicativeWD):
    def set_value_lambda(self):
        return lambda s: torch.tensor(0.9)


def test_set_value_lambda_is_the_multiplicative_factor():
    opt = cstorch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.1)
    for sched in (L.MultiplicativeLR(opt, 0.1, 0.95), W.MultiplicativeWD(opt, 0.1, 0.95)):
        assert float(sched.set_value_lambda()(torch.tensor(3.0))) == pytest.approx(0.95)
    steps = 30
    actual = cstorch_values(lambda o: NinetyPercentLR(o, 0.1, 0.5), steps)  # the override replaces coefficient=0.5
    assert_values(actual, [0.1 * 0.9 ** t for t in range(steps + 1)], "overridden factor vs formula")
    expected = torch_values(lambda o: TL.MultiplicativeLR(o, lr_lambda=lambda e: 0.9), steps, lr=0.1)
    assert_values(actual, expected, "overridden factor vs torch.optim.lr_scheduler.MultiplicativeLR")
    wd = cstorch_values(lambda o: NinetyPercentWD(o, 0.2, 0.5), steps, key="weight_decay", weight_decay=0.2)
    assert_values(wd, [0.2 * 0.9 ** t for t in range(steps + 1)], "overridden weight-decay factor")


# --------------------------------------------------------------------------------------
# inside a compiled CSX step
# --------------------------------------------------------------------------------------
WARMUP, DECAY, PEAK, END, CSX_STEPS = 5, 12, 0.05, 0.001, 24


def _lr_ref(t):
    return ref_polynomial(t, 0.0, PEAK, WARMUP) if t < WARMUP else ref_cosine_decay(t - WARMUP, PEAK, END, DECAY)


def _batches(n):
    g = torch.Generator().manual_seed(1)
    w = torch.randn(4, 2, generator=g)
    return [(x, x @ w) for x in (torch.randn(2, 4, generator=g) for _ in range(n))]


def _train(backend_type, advance):
    _reset_backend()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    compiled = cstorch.compile(model, cstorch.backend(backend_type))
    opt = cstorch.optim.SGD(model.parameters(), lr=0.0, weight_decay=0.01)
    lr_sched = L.SequentialLR(opt, [L.LinearLR(opt, 0.0, PEAK, WARMUP), L.CosineDecayLR(opt, PEAK, END, DECAY)],
                              milestones=[WARMUP])
    wd_sched = W.CyclicWD(opt, 0.0, 0.01, 3)
    traces = []

    @cstorch.trace
    def step(x, y):
        traces.append(1)
        loss = F.mse_loss(compiled(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        advance(lr_sched)
        advance(wd_sched)
        return loss

    loader = cstorch.utils.data.DataLoader(_batches, CSX_STEPS)
    for x, y in cstorch.utils.data.DataExecutor(loader, num_steps=CSX_STEPS):
        step(x, y)
    group = opt.param_groups[0]
    out = dict(params=[p.detach().clone() for p in model.parameters()], lr=float(group["lr"]),
               wd=float(group["weight_decay"]), epochs=(int(lr_sched.last_epoch), int(wd_sched.last_epoch)),
               traces=len(traces))
    _reset_backend()
    return out


@pytest.mark.parametrize("advance", ADVANCES)
def test_the_halves_inside_a_compiled_csx_step_equal_step_on_cpu(advance):
    from train_script import assert_close_rel

    csx = _train("CSX", ADVANCES[advance])
    cpu = _train("CPU", _step)
    assert csx["traces"] == 1 and cpu["traces"] == CSX_STEPS
    assert csx["epochs"] == cpu["epochs"] == (CSX_STEPS, CSX_STEPS)
    assert csx["lr"] == pytest.approx(_lr_ref(CSX_STEPS), rel=REL) and cpu["lr"] == pytest.approx(csx["lr"], rel=REL)
    assert csx["wd"] == pytest.approx(ref_cyclic(CSX_STEPS, 0.0, 0.01, 3, 3, "triangular"), rel=REL, abs=1e-9)
    for a, b in zip(csx["params"], cpu["params"]):
        assert_close_rel(a, b, rel=REL, what="CSX (halves) vs CPU (step)")
