"""Schedulers on CSX: one compiled step serves the whole schedule."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import cstorch
from cstorch._backend import _reset_backend
from cstorch.amp import skip
from test_schedulers import REL, ref_cosine_decay, ref_polynomial, ref_step

# --------------------------------------------------------------------------------------
# CSX: one compiled step serves the whole schedule
# --------------------------------------------------------------------------------------
CSX_STEPS = 1000
WARMUP, DECAY, PEAK, END = 100, 800, 0.05, 0.001


def warmup_cosine_ref(t):
    return ref_polynomial(t, 0.0, PEAK, WARMUP) if t < WARMUP else ref_cosine_decay(t - WARMUP, PEAK, END, DECAY)


def tiny_batches(n):
    g = torch.Generator().manual_seed(1)
    w, b = torch.randn(4, 2, generator=g), torch.randn(2, generator=g)
    out = []
    for _ in range(n):
        x = torch.randn(2, 4, generator=g)
        out.append((x, x @ w + b))
    return out


def train_with_schedule(backend_type, steps=CSX_STEPS, edit_after_compile=None):
    _reset_backend()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    backend = cstorch.backend(backend_type)
    compiled = cstorch.compile(model, backend)
    opt = cstorch.optim.SGD(model.parameters(), lr=0.0)
    sched = cstorch.optim.SequentialLR(opt, [cstorch.optim.LinearLR(opt, 0.0, PEAK, WARMUP),
                                             cstorch.optim.CosineDecayLR(opt, PEAK, END, DECAY)], milestones=[WARMUP])
    lr_tensor, epoch_tensor = opt.param_groups[0]["lr"], sched.last_epoch
    traces, executables = [], set()

    @cstorch.trace
    def step(x, y):
        traces.append(1)  # Python runs once per capture on CSX, every step on CPU
        loss = F.mse_loss(compiled(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        sched.step()
        return loss

    loader = cstorch.utils.data.DataLoader(tiny_batches, steps)
    for i, (x, y) in enumerate(cstorch.utils.data.DataExecutor(loader, num_steps=steps)):
        step(x, y)
        if backend_type == "CSX":
            executables.add(id(step.executable))
        if edit_after_compile is not None and i == 0:
            edit_after_compile(sched)
    params = {k: v.detach().clone() for k, v in model.named_parameters()}
    assert opt.param_groups[0]["lr"] is lr_tensor and sched.last_epoch is epoch_tensor
    result = dict(params=params, lr=lr_tensor.clone(), epoch=epoch_tensor.clone(), traces=len(traces),
                  executables=executables, step=step)
    _reset_backend()
    return result


def train_reference(steps=CSX_STEPS):
    """Eager torch.optim.SGD whose learning rate is set by hand to the formula."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    for t, (x, y) in enumerate(tiny_batches(steps)):
        opt.param_groups[0]["lr"] = warmup_cosine_ref(t)
        F.mse_loss(model(x), y).backward()
        opt.step()
        opt.zero_grad()
    return {k: v.detach().clone() for k, v in model.named_parameters()}


def test_csx_one_compile_serves_the_whole_schedule():
    from train_script import assert_close_rel

    csx = train_with_schedule("CSX")
    assert csx["traces"] == 1, "the step was captured more than once"
    assert len(csx["executables"]) == 1, "the compiled executable changed during the run"
    ops = csx["step"].executable.captured.ops()
    assert ops.get("cstorch.sgd_update.default") == 1 and ops.get("aten.cos.default", 0) >= 1
    assert int(csx["epoch"]) == CSX_STEPS
    assert float(csx["lr"]) == pytest.approx(warmup_cosine_ref(CSX_STEPS), rel=REL)

    cpu = train_with_schedule("CPU")
    assert cpu["traces"] == CSX_STEPS and int(cpu["epoch"]) == CSX_STEPS
    assert float(cpu["lr"]) == pytest.approx(warmup_cosine_ref(CSX_STEPS), rel=REL)
    reference = train_reference()
    torch.manual_seed(0)
    start = dict(torch.nn.Linear(4, 2).named_parameters())
    for k in reference:
        assert not torch.allclose(reference[k], start[k]), f"{k} did not train"
        assert_close_rel(cpu["params"][k], reference[k], rel=REL, what=f"CPU {k} vs torch with the formula's lr")
        assert_close_rel(csx["params"][k], cpu["params"][k], rel=REL, what=f"CSX {k} vs CPU")


def test_csx_changing_a_frozen_scheduler_hyperparameter_is_an_error():
    def edit(sched):
        sched._schedulers[1].end_learning_rate = 0.5

    with pytest.raises(cstorch.StaticGraphError, match="end_learning_rate"):
        train_with_schedule("CSX", steps=3, edit_after_compile=edit)


@pytest.mark.parametrize("member", ["step", "increment_last_epoch"])
def test_csx_step_outside_the_traced_step_is_an_error(member):
    """During a CSX run the counter lives on the device: a host-side step (or its first
    half, `increment_last_epoch`) would be lost."""
    _reset_backend()
    model = torch.nn.Linear(4, 2)
    compiled = cstorch.compile(model, cstorch.backend("CSX"))
    opt = cstorch.optim.SGD(model.parameters(), lr=0.1)
    sched = cstorch.optim.StepLR(opt, 0.1, 2, 0.5)

    @cstorch.trace
    def step(x, y):
        loss = F.mse_loss(compiled(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    loader = cstorch.utils.data.DataLoader(tiny_batches, 2)
    with pytest.raises(RuntimeError, match=rf"{member}\(\) was called during a CSX run.*inside the traced step"):
        for x, y in cstorch.utils.data.DataExecutor(loader, num_steps=2):
            step(x, y)
            getattr(sched, member)()
    _reset_backend()


def test_grad_scaler_skipped_step_holds_the_schedule_cpu():
    """With dynamic loss scaling, the step whose gradients are infinite is skipped and the
    schedule does not advance for it (CPU backend)."""
    _reset_backend()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    compiled = cstorch.compile(model, cstorch.backend("CPU"))
    opt = cstorch.optim.SGD(model.parameters(), lr=0.1)
    sched = cstorch.optim.StepLR(opt, 0.1, 1, 0.5)
    scaler = cstorch.amp.GradScaler(loss_scale="dynamic")
    epochs = []
    try:
        for i in range(5):
            x = torch.randn(2, 4)
            if i == 2:
                x[0, 0] = float("inf")
            loss = F.mse_loss(compiled(x), torch.ones(2, 2))
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
            sched.step()
            epochs.append(int(sched.last_epoch))
    finally:
        skip.clear()
    assert epochs == [1, 2, 2, 3, 4]
    assert float(opt.param_groups[0]["lr"]) == pytest.approx(ref_step(4, 0.1, 1, 0.5), rel=REL)
