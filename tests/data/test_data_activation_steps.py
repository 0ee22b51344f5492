"""`activation_steps`: on CSX step closures run on steps whose 1-based iteration is a
multiple of it, and on the final step; CPU runs them every step."""
import logging

import pytest
import torch
import torch.nn as nn

import cstorch
from cstorch._backend import _reset_backend
from cstorch.utils.data import DataExecutor, DataLoader, Schedule


def _run(kind, steps=10, activation_steps=3, checkpoint_steps=None):
    _reset_backend()
    torch.manual_seed(0)
    b = cstorch.backend(kind)
    model = nn.Linear(4, 2)
    compiled = cstorch.compile(model, b)
    opt = cstorch.optim.SGD(model.parameters(), lr=0.1)
    inside, outside, ckpt = [], [], []

    @cstorch.step_closure
    def record_inside(loss):
        inside.append(loss.item())

    @cstorch.step_closure
    def record_outside(i, loss):
        outside.append((i, loss.item()))

    @cstorch.checkpoint_closure
    def save(i):
        ckpt.append((i, model.weight.detach().clone()))

    @cstorch.trace
    def step(x):
        loss = (compiled(x) ** 2).mean()
        loss.backward()
        record_inside(loss)  # inside the trace: repeats every step on CSX
        opt.step()
        opt.zero_grad()
        return loss

    g = torch.Generator().manual_seed(1)
    batches = [torch.randn(3, 4, generator=g) for _ in range(steps)]
    ex = DataExecutor(DataLoader(lambda: batches), num_steps=steps, activation_steps=activation_steps,
                      checkpoint_steps=checkpoint_steps)
    for i, x in enumerate(ex):
        loss = step(x)
        record_outside(i, loss)
        save(i)
    _reset_backend()
    return ex, inside, outside, ckpt


def test_closures_run_on_activation_steps_on_csx_and_every_step_on_cpu():
    ex_cpu, cpu_in, cpu_out, _ = _run("CPU")
    ex_csx, csx_in, csx_out, _ = _run("CSX")
    expected = [2, 5, 8, 9]  # user iterations 3, 6, 9 and the final step 10
    assert ex_csx.activation_steps == 3 and [s for s in range(10) if ex_csx.activation_step(s)] == expected
    assert [i for i, _ in csx_out] == expected
    assert [i for i, _ in cpu_out] == list(range(10))
    assert len(cpu_in) == 10 and len(csx_in) == 4
    # the values are those of the activation steps themselves
    torch.testing.assert_close(torch.tensor(csx_in), torch.tensor([cpu_in[s] for s in expected]), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(torch.tensor([v for _, v in csx_out]), torch.tensor([cpu_in[s] for s in expected]),
                               rtol=1e-4, atol=1e-5)


def test_checkpoint_closures_follow_the_checkpoint_schedule(caplog):
    # activation 6 vs checkpoints on user iterations 4 and 8: reduced to gcd(6, 4, 8) = 2
    with caplog.at_level(logging.WARNING, logger="cstorch"):
        ex, inside, outside, ckpt = _run("CSX", activation_steps=6, checkpoint_steps=4)
    assert "Activation frequency was reduced from 6 to 2" in caplog.text
    assert ex.activation_steps == 2
    assert [i for i, _ in outside] == [1, 3, 5, 7, 9] and len(inside) == 5
    assert [i for i, _ in ckpt] == [3, 7, 9]
    _, _, _, cpu_ckpt = _run("CPU", activation_steps=6, checkpoint_steps=4)
    assert [i for i, _ in cpu_ckpt] == [3, 7, 9]
    for (_, a), (_, b) in zip(ckpt, cpu_ckpt):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_activation_steps_rules():
    cstorch.backend("CPU")
    loader = DataLoader(lambda: [torch.ones(2)] * 4)
    assert DataExecutor(loader, num_steps=4).activation_steps == 1
    assert DataExecutor(loader, num_steps=4, activation_steps=10).activation_steps == 4  # capped at num_steps
    assert DataExecutor(loader, num_steps=12, activation_steps=4, checkpoint_steps=8).activation_steps == 4
    assert DataExecutor(loader, num_steps=12, activation_steps=4, checkpoint_steps=6).activation_steps == 2
    # a schedule's points (+1) count too, the run's final step does not
    sched = Schedule([Schedule.Range(5, 12, 6, include_last=True)])  # steps 5 and 11 (final)
    assert DataExecutor(loader, num_steps=12, activation_steps=3, checkpoint_steps=sched).activation_steps == 3
    sched = Schedule([Schedule.Range(1, 6, 2, include_last=True)])  # steps 1, 3 and 5
    assert DataExecutor(loader, num_steps=12, activation_steps=4, checkpoint_steps=sched).activation_steps == 2
    with pytest.raises(RuntimeError, match='Expected activation_steps to be an integer >= 1 or "None". Got: 0'):
        DataExecutor(loader, num_steps=4, activation_steps=0)
    with pytest.raises(TypeError, match='Expected activation_steps to be have "int" or "None" type'):
        DataExecutor(loader, num_steps=4, activation_steps=2.0)


def test_closures_queued_outside_a_trace_also_wait_for_activation_steps():
    cstorch.backend("CSX")
    got = []
    ex = DataExecutor(DataLoader(lambda: [torch.ones(2)] * 5), num_steps=5, activation_steps=2)
    for i, _ in enumerate(ex):
        cstorch.step_closure(got.append)(i)
    assert got == [1, 3, 4]
