"""A CSX step call returns before its result is ready; step closures still receive
every step's values, in order, equal to the eager run's."""
import time

import torch
import torch.nn as nn

import cstorch
from cstorch._backend import _reset_backend
from train_script import assert_close_rel


class Heavy(nn.Module):
    """Enough matmul work per step (~1.5 GFLOP) that dispatch is visibly asynchronous."""

    def __init__(self, d=384, depth=10):
        super().__init__()
        self.w = nn.Parameter(torch.randn(d, d) / d**0.5)
        self.depth = depth

    def forward(self, x):
        for _ in range(self.depth):
            x = torch.tanh(x @ self.w)
        return x.mean()


def _linear_sgd(kind, momentum=0.9):
    """A fresh backend with a seeded nn.Linear(4, 2), its SGD optimizer and a traced step."""
    _reset_backend()
    torch.manual_seed(0)
    b = cstorch.backend(kind)
    model = nn.Linear(4, 2)
    compiled = cstorch.compile(model, b)
    opt = cstorch.optim.SGD(model.parameters(), lr=0.1, momentum=momentum)

    @cstorch.trace
    def step(x):
        loss = (compiled(x) ** 2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    return model, opt, step


def _run(backend_type, steps=5):
    _reset_backend()
    torch.manual_seed(0)
    b = cstorch.backend(backend_type)
    model = Heavy()
    compiled = cstorch.compile(model, b)
    opt = cstorch.optim.SGD(model.parameters(), lr=0.1)
    inside, outside, ready, timing = [], [], [], []

    @cstorch.step_closure
    def record_inside(loss, norm):
        inside.append((loss.item(), norm.item()))

    @cstorch.step_closure
    def record_outside(loss, step):
        outside.append((step, loss.item()))

    @cstorch.trace
    def step(x):
        loss = compiled(x)
        loss.backward()
        record_inside(loss, model.w.grad.norm())  # registered inside the trace: repeats every step
        opt.step()
        opt.zero_grad()
        return loss

    g = torch.Generator().manual_seed(1)
    batches = [torch.randn(384, 384, generator=g) for _ in range(steps)]
    executor = cstorch.utils.data.DataExecutor(cstorch.utils.data.DataLoader(lambda: batches), num_steps=steps)
    for i, x in enumerate(executor):
        t0 = time.perf_counter()
        loss = step(x)
        t1 = time.perf_counter()
        if backend_type == "CSX" and i > 0:
            ready.append(loss.is_ready())
            loss.materialize()
            timing.append((t1 - t0, time.perf_counter() - t0))
        record_outside(loss, i)
    return inside, outside, ready, timing


def test_dispatch_is_async_and_closures_see_every_step_in_order():
    cpu_inside, cpu_outside, _, _ = _run("CPU")
    csx_inside, csx_outside, ready, timing = _run("CSX")
    # the call returned while the device was still computing
    assert not all(ready), ready
    dispatch, until_ready = min(timing, key=lambda t: t[0])
    assert dispatch < until_ready
    # every step's values, in step order, equal to eager torch
    assert [s for s, _ in csx_outside] == list(range(5))
    assert len(csx_inside) == 5
    assert_close_rel(torch.tensor([v for _, v in csx_outside]), torch.tensor([v for _, v in cpu_outside]))
    assert_close_rel(torch.tensor(csx_inside), torch.tensor(cpu_inside))


def test_checkpoint_closure_runs_on_schedule_with_that_steps_state():
    """checkpoint_steps=3 over 8 steps: 0-based steps 2, 5 and the last (7); the model's
    parameters read inside the closure are that step's values on both backends."""
    results = {}
    for kind in ("CPU", "CSX"):
        model, opt, step = _linear_sgd(kind)
        saved = []

        @cstorch.checkpoint_closure
        def save(step):
            saved.append((step, {k: v.clone() for k, v in model.state_dict().items()},
                          opt.state_dict()["state"][0]["momentum_buffer"].clone()))

        g = torch.Generator().manual_seed(1)
        batches = [torch.randn(3, 4, generator=g) for _ in range(8)]
        executor = cstorch.utils.data.DataExecutor(cstorch.utils.data.DataLoader(lambda: batches), num_steps=8,
                                                   checkpoint_steps=3)
        for i, x in enumerate(executor):
            step(x)
            save(i)
        results[kind] = saved
    assert [s for s, _, _ in results["CSX"]] == [2, 5, 7]
    assert [s for s, _, _ in results["CPU"]] == [2, 5, 7]
    for (_, cpu_sd, cpu_m), (_, csx_sd, csx_m) in zip(results["CPU"], results["CSX"]):
        for k in cpu_sd:
            assert_close_rel(csx_sd[k], cpu_sd[k], what=k)
        assert_close_rel(csx_m, cpu_m, what="momentum")
    # the snapshots really differ from step to step
    assert not torch.equal(results["CSX"][0][1]["weight"], results["CSX"][1][1]["weight"])


def test_checkpoint_closure_at_the_pre_initial_step_sees_the_initial_state():
    """After `iter(executor)` and before the first batch (step -1) a checkpoint closure
    runs at once on the initial parameters; later it follows the schedule."""
    for kind in ("CPU", "CSX"):
        model, opt, step = _linear_sgd(kind)
        initial = {k: v.clone() for k, v in model.state_dict().items()}
        saved = []

        @cstorch.checkpoint_closure
        def save(step):
            saved.append((step, {k: v.clone() for k, v in model.state_dict().items()}))

        g = torch.Generator().manual_seed(1)
        batches = [torch.randn(3, 4, generator=g) for _ in range(4)]
        executor = cstorch.utils.data.DataExecutor(cstorch.utils.data.DataLoader(lambda: batches), num_steps=4,
                                                   checkpoint_steps=2)
        steps = iter(executor)
        assert executor.is_pre_initial_step
        save(-1)
        assert [s for s, _ in saved] == [-1], kind  # ran at once
        for i, x in enumerate(steps):
            step(x)
            save(i)
        assert [s for s, _ in saved] == [-1, 1, 3], kind
        for k in initial:
            assert torch.equal(saved[0][1][k], initial[k]), (kind, k)
        assert not torch.equal(saved[1][1]["weight"], initial["weight"]), kind


def test_device_state_is_fetched_only_on_checkpoint_steps(monkeypatch):
    """On CSX the parameters and optimizer state stay on the device between
    checkpoints: the host copies are refreshed on checkpoint steps only."""
    import cstorch_jax.runtime

    fetched = []
    real = cstorch_jax.runtime.to_torch
    monkeypatch.setattr(cstorch_jax.runtime, "to_torch", lambda a, dtype: fetched.append(step_no[0]) or real(a, dtype))
    model, opt, step = _linear_sgd("CSX")
    step_no = [None]

    @cstorch.checkpoint_closure
    def save():
        model.state_dict()

    executor = cstorch.utils.data.DataExecutor(cstorch.utils.data.DataLoader(lambda: [torch.ones(3, 4)] * 8),
                                               num_steps=8, checkpoint_steps=3)
    for i, x in enumerate(executor):
        step_no[0] = i
        step(x)
        save()
    # weight, bias and their two momentum buffers, on steps 2, 5 and 7 only
    assert sorted(set(fetched)) == [2, 5, 7] and len(fetched) == 3 * 4
    _reset_backend()


def test_save_in_the_middle_of_a_run_holds_the_latest_step(tmp_path):
    """cstorch.save outside a checkpoint closure during a CSX run fetches the device
    state first: the file holds the parameters after the last step run, like CPU."""
    saved = {}
    for kind in ("CPU", "CSX"):
        model, _, step = _linear_sgd(kind, momentum=0.0)

        executor = cstorch.utils.data.DataExecutor(cstorch.utils.data.DataLoader(lambda: [torch.ones(3, 4)] * 4))
        for i, x in enumerate(executor):
            step(x)
            if i == 1:
                cstorch.save(model.state_dict(), tmp_path / f"{kind}.mdl")
        saved[kind] = cstorch.load(tmp_path / f"{kind}.mdl")
        _reset_backend()
    torch.manual_seed(0)
    initial = nn.Linear(4, 2)  # what a stale host copy would hold
    assert not torch.equal(saved["CSX"]["weight"], initial.weight.detach())
    for k in ("weight", "bias"):
        assert_close_rel(saved["CSX"][k], saved["CPU"][k], what=k)
