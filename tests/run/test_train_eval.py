"""Train, evaluate, train again in one process: the eval step is its own executable,
and every phase on CSX equals eager torch (parameters, BatchNorm statistics, eval
loss and accuracy)."""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

import cstorch
from cstorch._backend import _reset_backend
from train_script import assert_close_rel


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(5, 12)
        self.bn = nn.BatchNorm1d(12)
        self.fc2 = nn.Linear(12, 3)

    def forward(self, x):
        return self.fc2(F.relu(self.bn(self.fc1(x))))  # BatchNorm: batch statistics in training only


def _data(n, seed):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(8, 5, generator=g), torch.randint(0, 3, (8,), generator=g)) for _ in range(n)]


def _train_eval_train(kind):
    _reset_backend()
    torch.manual_seed(0)
    backend = cstorch.backend(kind)
    model = Net()
    compiled = cstorch.compile(model, backend)
    opt = cstorch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    accuracy = cstorch.metrics.AccuracyMetric("eval/accuracy")

    @cstorch.trace
    def train_step(x, y):
        loss = F.cross_entropy(compiled(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    @cstorch.trace
    @torch.no_grad()
    def eval_step(x, y):
        logits = compiled(x)
        accuracy(labels=y, predictions=logits.argmax(-1))
        return F.cross_entropy(logits, y)

    def run(step_fn, batches):
        losses = []

        @cstorch.step_closure
        def record(loss):
            losses.append(loss.item())

        for x, y in cstorch.utils.data.DataExecutor(cstorch.utils.data.DataLoader(lambda: batches),
                                                    num_steps=len(batches)):
            record(step_fn(x, y))
        return losses

    snapshots = []
    model.train()
    train1 = run(train_step, _data(4, 1))
    first_program = train_step.program
    snapshots.append({k: v.clone() for k, v in model.state_dict().items()})
    model.eval()
    evals = run(eval_step, _data(3, 2))
    acc = float(accuracy)
    snapshots.append({k: v.clone() for k, v in model.state_dict().items()})
    model.train()
    train2 = run(train_step, _data(4, 3))
    snapshots.append({k: v.clone() for k, v in model.state_dict().items()})
    programs = (first_program, train_step.program, eval_step.program)
    return train1, evals, acc, train2, snapshots, programs


def test_train_then_eval_then_train_matches_eager():
    cpu = _train_eval_train("CPU")
    csx = _train_eval_train("CSX")
    for phase, (a, b) in enumerate(zip(cpu[:4], csx[:4])):
        assert_close_rel(torch.tensor(b), torch.tensor(a), what=f"phase {phase}")
    for phase, (a, b) in enumerate(zip(cpu[4], csx[4])):
        for k in a:
            assert_close_rel(b[k].double(), a[k].double(), what=f"snapshot {phase} {k}")
    # evaluation changed nothing: no parameter update, no BatchNorm statistics update
    for k, v in csx[4][0].items():
        assert torch.equal(csx[4][1][k], v), k
    assert not torch.equal(csx[4][2]["fc1.weight"], csx[4][1]["fc1.weight"])
    # one executable per mode: the second training run replays the first one's
    first_train, train_again, evaluate = csx[5]
    assert first_train is train_again
    assert evaluate is not None and evaluate.executable is not first_train.executable
