"""The 1.8 API's optimizers, schedulers, loss scaling and metrics, each run in a
compile_step over a 1.8 DataLoader on CSX and CPU and compared with eager torch: a
custom optimizer (with `state_names_to_sparsify`) and a custom scheduler (with
`_get_closed_form_lr`) as the guide defines them, `configure_lr_scheduler`'s forms,
`amp.optimizer_step` without a scaler and with `max_gradient_val`, the GradScaler's
`scale`/`unscale_`/`step`/`update`, `AccuracyMetric` and `PerplexityMetric`."""
from __future__ import annotations

import inspect

import pytest
import torch
import torch.nn.functional as F

import cerebras_pytorch.experimental as cstorch18
import cerebras_pytorch.experimental.metrics as metrics18
import cstorch
from cstorch._backend import _reset_backend

DEVICES = {"CSX": "wse_ws", "CPU": "cpu"}
STEPS = 5


def data_fn(batch_size: int = 4, classes: int = 3):
    g = torch.Generator().manual_seed(7)
    x = torch.randn(STEPS * batch_size, 6, generator=g)
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x[:, :classes].argmax(-1)),
                                       batch_size=batch_size)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(6, 8), torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


def train(device: str, make_optimizer, make_scheduler=None, step_body=None):
    """STEPS training steps of Net on `device` (a new 1.8 script); returns the model
    and what make_* built."""
    _reset_backend()
    cstorch.legacy18._reset()
    torch.manual_seed(0)
    model = Net()
    compiled = cstorch18.compile(model, backend=DEVICES[device])
    optimizer = make_optimizer(model)
    scheduler = make_scheduler(optimizer) if make_scheduler else None

    @cstorch18.compile_step
    def training_step(batch):
        x, y = batch
        loss = F.cross_entropy(compiled(x), y)
        if step_body is None:
            cstorch18.amp.optimizer_step(loss, optimizer, None)
        else:
            step_body(model, loss, optimizer)
        if scheduler is not None:
            scheduler.step()
        return loss

    for batch in cstorch18.utils.data.DataLoader(data_fn, num_steps=STEPS):
        training_step(batch)
    return model, optimizer, scheduler


def eager(step_fn, lr_at=lambda k: 0.1, momentum: float = 0.0) -> dict:
    """The same run in eager torch: torch.optim.SGD at lr_at(k) on step k, with
    `step_fn(model)` between backward and the optimizer step (clipping)."""
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=lr_at(0), momentum=momentum)
    for k, (x, y) in enumerate(data_fn()):
        for group in opt.param_groups:
            group["lr"] = lr_at(k)
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        step_fn(model)
        opt.step()
    return model.state_dict()


def assert_params(model, reference: dict) -> None:
    for name, value in reference.items():
        torch.testing.assert_close(model.state_dict()[name], value, rtol=1e-5, atol=1e-6, msg=lambda m: f"{name}: {m}")


# -- optimizers and schedulers ---------------------------------------------------------
class MomentumSGD18(cstorch18.optim.Optimizer):
    """A custom optimizer as the guide defines one: preinitialize, step, state_names_to_sparsify."""

    def __init__(self, params, lr: float = 0.1, momentum: float = 0.9):
        super().__init__(params, {"lr": lr, "momentum": momentum}, enable_global_step=True)

    def preinitialize(self):
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["momentum_buffer"] = torch.zeros_like(p)

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    buf = self.state[p]["momentum_buffer"]
                    buf.mul_(group["momentum"]).add_(p.grad)
                    p.sub_(group["lr"] * buf)
                    self.increment_global_step(p)

    def state_names_to_sparsify(self):
        return ["momentum_buffer"]


class Warmup18(cstorch18.optim.lr_scheduler.LRScheduler):
    """A custom scheduler as the guide defines one: `_get_closed_form_lr` over `last_epoch`."""

    def __init__(self, optimizer, peak: float, warmup_steps: int):
        self.peak = peak
        super().__init__(optimizer, total_iters=warmup_steps)

    def _get_closed_form_lr(self):
        return self.peak * torch.clamp((self.last_epoch + 1).float() / self.total_iters, max=1.0)


@pytest.mark.parametrize("device", DEVICES)
def test_custom_optimizer_by_name(device):
    model, opt, _ = train(device, lambda m: cstorch18.optim.configure_optimizer(
        optimizer_type="MomentumSGD18", params=m.parameters(), lr=0.1, momentum=0.9))
    assert type(opt) is MomentumSGD18 and isinstance(opt, cstorch18.optim.Optimizer)
    assert all(float(st["step"]) == STEPS for st in opt.state.values())
    assert_params(model, eager(lambda m: None, momentum=0.9))


def test_custom_optimizer_contract():
    params = [torch.nn.Parameter(torch.zeros(2))]

    class NoSparsifyNames(cstorch18.optim.Optimizer):
        def __init__(self, params):
            super().__init__(params, {"lr": 0.1})

        def preinitialize(self):
            pass

        def step(self, closure=None):
            pass

    with pytest.raises(TypeError, match="abstract method '?state_names_to_sparsify"):
        NoSparsifyNames(params)

    class WrongNames(MomentumSGD18):
        def state_names_to_sparsify(self):
            return ["exp_avg"]

    with pytest.raises(ValueError, match=r"names \['exp_avg'\], which preinitialize\(\) did not create"):
        WrongNames(params)
    assert isinstance(cstorch18.optim.SGD(params, lr=0.1), cstorch18.optim.Optimizer)  # the built-in ones are too


@pytest.mark.parametrize("device", DEVICES)
def test_custom_scheduler_closed_form(device):
    def lr_at(k):
        return 0.2 * min(1.0, (k + 1) / 3)

    model, _, scheduler = train(device, lambda m: cstorch18.optim.SGD(m.parameters(), lr=0.0),
                                lambda opt: Warmup18(opt, peak=0.2, warmup_steps=3))
    assert isinstance(scheduler, cstorch18.optim.lr_scheduler.LRScheduler) and scheduler.total_iters == 3
    assert int(scheduler.last_epoch) == STEPS
    assert float(scheduler.get_last_lr()[0]) == pytest.approx(lr_at(STEPS))
    assert_params(model, eager(lambda m: None, lr_at=lr_at))


def test_configure_lr_scheduler_forms():
    opt = cstorch18.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=1.0)
    lr = cstorch18.optim.lr_scheduler
    constant = cstorch18.optim.configure_lr_scheduler(opt, learning_rate=0.01)
    assert isinstance(constant, lr.ConstantLR) and float(opt.param_groups[0]["lr"]) == pytest.approx(0.01)
    linear = cstorch18.optim.configure_lr_scheduler(opt, learning_rate={
        "scheduler": "Linear", "initial_learning_rate": 0.1, "end_learning_rate": 0.0, "total_iters": 10})
    assert isinstance(linear, lr.LinearLR)
    warmup_then_decay = [
        {"scheduler": "Linear", "initial_learning_rate": 0.0, "end_learning_rate": 0.1, "total_iters": 5},
        {"scheduler": "CosineDecay", "initial_learning_rate": 0.1, "end_learning_rate": 0.0, "total_iters": 10}]
    sequential = cstorch18.optim.configure_lr_scheduler(opt, learning_rate=warmup_then_decay)
    assert isinstance(sequential, lr.SequentialLR)
    chained = cstorch18.optim.configure_lr_scheduler(opt, learning_rate=[
        {**warmup_then_decay[0], "main_scheduler": "ChainedLR"}, warmup_then_decay[1]])
    assert isinstance(chained, lr.ChainedScheduler)
    assert all(isinstance(s, lr.LRScheduler) for s in (constant, linear, sequential, chained))


# -- loss scaling and clipping ---------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
def test_optimizer_step_without_scaler_clips_by_value(device):
    model, _, _ = train(device, lambda m: cstorch18.optim.SGD(m.parameters(), lr=0.1),
                        step_body=lambda m, loss, opt: cstorch18.amp.optimizer_step(loss, opt, None,
                                                                                    max_gradient_val=0.01))
    assert_params(model, eager(lambda m: torch.nn.utils.clip_grad_value_(m.parameters(), 0.01)))


def test_optimizer_step_takes_one_name_of_the_value_clip():
    model = Net()
    opt = cstorch18.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="same setting"):
        cstorch18.amp.optimizer_step(model(torch.ones(1, 6)).sum(), opt, None, max_gradient_val=1.0,
                                     max_gradient_value=1.0)


@pytest.mark.parametrize("device", DEVICES)
def test_grad_scaler_protocol(device):
    scalers = []

    def make_optimizer(model):
        scalers.append(cstorch18.amp.GradScaler(loss_scale="dynamic"))
        return cstorch18.optim.SGD(model.parameters(), lr=0.1)

    def scaled_step(model, loss, optimizer):  # the guide's explicit GradScaler usage
        grad_scaler = scalers[0]
        optimizer.zero_grad()
        grad_scaler.scale(loss).backward()
        grad_scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        grad_scaler.step(optimizer)
        grad_scaler.update()

    model, _, _ = train(device, make_optimizer, step_body=scaled_step)
    # a dynamic scale of 2**15 scales exactly: the run is eager backward, clip, step
    assert_params(model, eager(lambda m: torch.nn.utils.clip_grad_norm_(m.parameters(), 0.5)))
    assert float(scalers[0].get_scale()) == 2.0 ** 15


def test_grad_scaler_1_8_defaults():
    params = inspect.signature(cstorch18.amp.GradScaler).parameters
    assert params["overflow_tolerance"].default == 0.05
    assert list(params) == ["loss_scale", "init_scale", "steps_per_increase", "min_loss_scale", "max_loss_scale",
                            "overflow_tolerance", "max_gradient_norm"]
    with pytest.warns(UserWarning, match="applies only in pipeline mode"):
        cstorch18.amp.GradScaler(loss_scale="dynamic", max_gradient_norm=1.0)


# -- metrics ---------------------------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
def test_accuracy_and_perplexity(device):
    torch.manual_seed(0)
    model = Net()
    compiled = cstorch18.compile(model, backend=DEVICES[device])
    compiled.eval()
    accuracy = metrics18.AccuracyMetric("accuracy", compute_on_system=True)
    perplexity = metrics18.PerplexityMetric("perplexity", compute_on_system=True)

    @cstorch18.compile_step
    def evaluation_step(batch):
        x, y = batch
        logits = compiled(x)
        accuracy(labels=y.clone(), predictions=logits.argmax(-1).int())
        perplexity(labels=y, loss=F.cross_entropy(logits, y, reduction="sum"))

    with torch.no_grad():
        for batch in cstorch18.utils.data.DataLoader(data_fn, num_steps=STEPS):
            evaluation_step(batch)
        x, y = data_fn().dataset.tensors
        logits = model(x)
    want = {"accuracy": (logits.argmax(-1) == y).float().mean().item(),
            "perplexity": F.cross_entropy(logits, y).exp().item()}
    got = dict(metrics18.compute_all_metrics())
    assert got.keys() == want.keys()
    for name in want:
        assert got[name] == pytest.approx(want[name], rel=1e-5)


def test_metrics_computed_off_the_system():
    on_host = metrics18.AccuracyMetric("host", compute_on_system=False)
    on_host(labels=torch.tensor([1, 2]), predictions=torch.tensor([1, 0]))  # CPU/no backend: the host computes
    assert float(on_host) == 0.5
    compiled = cstorch18.compile(Net(), backend="wse_ws")
    off_system = metrics18.AccuracyMetric("off", compute_on_system=False)

    @cstorch18.compile_step
    def evaluation_step(batch):
        off_system(labels=batch[1], predictions=compiled(batch[0]).argmax(-1))

    with pytest.raises(ValueError, match="compute_on_system=False.*pass compute_on_system=True"):
        for batch in cstorch18.utils.data.DataLoader(data_fn, num_steps=1):
            evaluation_step(batch)
