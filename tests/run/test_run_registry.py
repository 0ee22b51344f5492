"""One run owns its state: stateful objects register with the run's registry
(`cstorch.state.registry`), whether they are made before or after `cstorch.backend(...)`, and
a backend reset forgets them all."""
import pytest
import torch
import torch.nn.functional as F

import cstorch
from cstorch._backend import _reset_backend
from cstorch.amp.grad_scaler import live_grad_scalers
from cstorch.metrics import Metric
from cstorch.metrics.metric import live_metrics
from cstorch.optim.optimizer import live_optimizers
from cstorch.optim.scheduler import live_schedulers

STEPS = 4


def _batches():
    g = torch.Generator().manual_seed(3)
    return [(torch.randn(4, 3, generator=g), torch.randn(4, 2, generator=g)) for _ in range(STEPS)]


def _objects():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    opt = cstorch.optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.1)
    sched = cstorch.optim.LinearLR(opt, 0.05, 0.01, STEPS)
    scaler = cstorch.amp.GradScaler(loss_scale="dynamic")
    metric = cstorch.metrics.MeanMetric("loss")
    return model, opt, sched, scaler, metric


def _train(backend_type: str, order: str):
    _reset_backend()
    if order == "objects first":
        model, opt, sched, scaler, metric = _objects()
        backend = cstorch.backend(backend_type)
    else:
        backend = cstorch.backend(backend_type)
        model, opt, sched, scaler, metric = _objects()
    compiled = cstorch.compile(model, backend)

    @cstorch.trace
    def step(x, y):
        loss = F.mse_loss(compiled(x), y)
        cstorch.amp.optimizer_step(loss, opt, scaler)
        sched.step()
        metric(loss)
        return loss

    assert live_optimizers() == [opt] and live_schedulers() == [sched] and live_grad_scalers() == [scaler]
    assert live_metrics() == [metric] and backend.models == [model]
    for x, y in cstorch.utils.data.DataExecutor(cstorch.utils.data.DataLoader(_batches), num_steps=STEPS):
        step(x, y)
    out = {k: v.detach().clone() for k, v in model.state_dict().items()}
    out.update(epoch=sched.last_epoch.clone(), scale=scaler.get_scale().clone(), metric=torch.tensor(float(metric)),
               exp_avg=opt.state[model.weight]["exp_avg"].clone())
    return out


@pytest.mark.parametrize("order", ["objects first", "backend first"])
def test_objects_made_before_or_after_the_backend_are_state_of_its_steps(order):
    """Made before the backend, the objects wait in the pending registry, which the
    backend adopts: the CSX run lifts their state and ends where the CPU run does."""
    cpu = _train("CPU", order)
    csx = _train("CSX", order)
    assert int(csx["epoch"]) == STEPS, "the scheduler stepped on the device"
    for k, v in cpu.items():
        torch.testing.assert_close(csx[k], v, rtol=1e-5, atol=1e-6, msg=k)


def test_a_backend_reset_forgets_every_object():
    model, opt, sched, scaler, metric = _objects()
    backend = cstorch.backend("CPU")
    cstorch.compile(model, backend)
    assert backend.registry.objects("optimizer") == [opt] and Metric.registry["loss"] == [metric]
    _reset_backend()
    assert not live_optimizers() and not live_schedulers() and not live_grad_scalers() and not live_metrics()
    assert not Metric.registry
    later = cstorch.backend("CPU")
    assert later.models == [] and later.registry.objects("optimizer") == []


def test_a_failed_backend_creation_leaves_the_pending_objects():
    opt = cstorch.optim.SGD([torch.nn.Parameter(torch.ones(2))], lr=0.1)
    with pytest.raises(TypeError, match="unexpected keyword"):
        cstorch.backend("CPU", not_an_option=1)
    assert cstorch.backend("CPU").registry.objects("optimizer") == [opt]


def test_an_object_nobody_references_leaves_the_registry():
    cstorch.backend("CPU")
    opt = cstorch.optim.SGD([torch.nn.Parameter(torch.ones(2))], lr=0.1)
    cstorch.optim.SGD([torch.nn.Parameter(torch.ones(2))], lr=0.1)  # dropped at once
    assert live_optimizers() == [opt]


def test_objects_of_an_earlier_run_are_not_state_of_a_later_step():
    """A scheduler and a grad scaler of an earlier run that are still alive (held by a
    reference cycle until the garbage collector runs, or by a test's variable) are not
    lifted into a step compiled after a backend reset: the step's state is the new
    run's model and optimizer only, all float32 (an int64 scheduler counter from another
    test once showed up in tests/optim/test_amp.py's bf16 run)."""
    _, _, old_sched, old_scaler, _ = _objects()
    cstorch.backend("CSX")
    _reset_backend()
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    backend = cstorch.backend("CSX")
    compiled = cstorch.compile(model, backend)
    opt = cstorch.optim.AdamW(model.parameters(), lr=0.05)

    @cstorch.trace
    def step(x, y):
        loss = F.mse_loss(compiled(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    for x, y in cstorch.utils.data.DataExecutor(cstorch.utils.data.DataLoader(_batches), num_steps=1):
        step(x, y)
    names = step.program.state.names
    assert not [n for n in names if n.startswith(("scheduler", "grad_scaler"))], names
    assert {spec.dtype for spec in step.executable.captured.state_specs} == {torch.float32}
    assert old_sched.last_epoch is not None and old_scaler is not None  # alive until here
