"""Checks that need several JAX devices, run by tests/run/test_data_parallel.py in a fresh
process started with XLA_FLAGS=--xla_force_host_platform_device_count=4.

    python tests/run/multi_device_checks.py <check> [<check> ...]

Each check raises (exit status 1) when it fails and prints "ok <check>" when it holds.
"""
from __future__ import annotations

import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import cstorch
from cstorch._backend import _reset_backend


class Net(nn.Module):
    """Linear, BatchNorm (its statistics span the whole batch), dropout, linear."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 16)
        self.bn = nn.BatchNorm1d(16)
        self.drop = nn.Dropout(0.3)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(self.drop(F.relu(self.bn(self.fc1(x)))))


def _batches(n, batch_size, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(batch_size, 6, generator=g), torch.randint(0, 3, (batch_size,), generator=g))
            for _ in range(n)]


def train(num_csx: int, batches, stage: bool = False):
    """Losses and final state (parameters, BatchNorm statistics, momentum) of a CSX run."""
    _reset_backend()
    backend = cstorch.backend("CSX", cluster_config=cstorch.distributed.ClusterConfig(num_csx=num_csx))
    torch.manual_seed(0)
    model = Net()
    compiled = cstorch.compile(model, backend)
    opt = cstorch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    @cstorch.trace
    def step(x, y):
        loss = F.cross_entropy(compiled(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    losses = []

    @cstorch.step_closure
    def record(loss):
        losses.append(loss.item())

    loader = cstorch.utils.data.DataLoader(lambda: batches)
    for x, y in cstorch.utils.data.DataExecutor(loader, num_steps=len(batches)):
        if stage:
            backend.run.stage_batch((x, y))
        record(step(x, y))
    state = {**{f"model.{k}": v.clone() for k, v in model.state_dict().items()},
             **{f"momentum.{i}": s["momentum_buffer"].clone() for i, s in enumerate(opt.state.values())}}
    return losses, state, step.executable


def _close(a, b, what, tol=1e-5):
    if isinstance(a, dict):
        assert a.keys() == b.keys(), (a.keys(), b.keys())
        for k in a:
            _close(a[k], b[k], f"{what} {k}", tol)
        return
    diff = (torch.as_tensor(a, dtype=torch.float64) - torch.as_tensor(b, dtype=torch.float64)).abs().max().item()
    assert diff <= tol, f"{what}: differs by {diff} > {tol}"


def check_same_as_one_device():
    """Dropout, BatchNorm statistics and SGD momentum on 4 devices equal the 1-device run."""
    batches = _batches(6, 8)
    one = train(1, batches)
    four = train(4, batches)
    _close(one[0], four[0], "losses")
    _close(one[1], four[1], "state")
    # the program really is partitioned: XLA inserted the cross-device reductions
    hlo = four[2].compiled.as_text()
    assert "all-reduce" in hlo, "no all-reduce in the 4-device program"
    assert four[2].placement.num_devices == 4
    assert one[1]["model.bn.num_batches_tracked"].item() == 6


def check_staged_batches():
    """Batches staged ahead of their step (split over the mesh) give the same run."""
    batches = _batches(4, 8)
    _close(train(4, batches)[1], train(4, batches, stage=True)[1], "state")


def check_indivisible_batch():
    try:
        train(4, _batches(2, 6))
    except ValueError as e:
        msg = str(e)
        assert "argument [0] has batch size 6" in msg and "cannot split equally" in msg, msg
        assert "use a batch size of 4 or 8" in msg, msg
    else:
        raise AssertionError("a batch of 6 on 4 devices was accepted")


def check_too_many_devices():
    _reset_backend()
    try:
        cstorch.backend("CSX", cluster_config=cstorch.distributed.ClusterConfig(num_csx=8))
    except ValueError as e:
        msg = str(e)
        assert "num_csx=8 asks for 8 devices, but the JAX runtime has only 4" in msg, msg
        assert "xla_force_host_platform_device_count" in msg, msg
    else:
        raise AssertionError("num_csx=8 on 4 devices was accepted")


CHECKS = {name.removeprefix("check_"): fn for name, fn in globals().items() if name.startswith("check_")}

if __name__ == "__main__":
    for name in sys.argv[1:]:
        CHECKS[name]()
        print(f"ok {name}", flush=True)
