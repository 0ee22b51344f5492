"""Convolution chains held channels-last (`cstorch_jax/passes/channels_last.py`, the NHWC
ops of `cstorch_jax/lowering/channels_last.py`): the rewritten graph computes what the
captured one does (run eagerly through the ops' definitions), CNNs of every kind train
on CSX exactly as on the CPU backend, the OpInfo convolution / pooling / batch-norm
family equals eager torch with every op it can hold NHWC forced into a region, and the
optimised CNN program transposes fewer activations."""
from __future__ import annotations

import re

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import cstorch_jax
from cstorch_jax.passes import channels_last
from train_script import assert_close_rel, train

STEPS = 3


def _op_counts(gm) -> dict[str, int]:
    counts: dict[str, int] = {}
    for n in gm.graph.nodes:
        if n.op == "call_function":
            counts[str(n.target)] = counts.get(str(n.target), 0) + 1
    return counts


# ---- models -------------------------------------------------------------------------------
class PlainCNN(nn.Module):
    """conv + bias + ReLU + max-pool, a strided dilated conv, avg-pool, linear."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 6, 3, padding=1)
        self.c2 = nn.Conv2d(6, 8, 3, stride=2, padding=2, dilation=2)
        self.fc = nn.Linear(8 * 2 * 2, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.avg_pool2d(torch.tanh(self.c2(x)), 2)
        return self.fc(x.flatten(1))


class BatchNormCNN(nn.Module):
    """conv -> BatchNorm -> ReLU -> overlapping padded max-pool (the scatter backward),
    grouped conv -> BatchNorm -> ReLU, global average pool, linear."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1, groups=4)
        self.bn2 = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.c1(x))), 3, stride=2, padding=1, ceil_mode=True)
        x = F.relu(self.bn2(self.c2(x)))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class ResidualCNN(nn.Module):
    """A ResNet basic block with a strided 1x1 projection shortcut and a residual add,
    then a transposed convolution and a channel concatenation."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.a = nn.Conv2d(8, 8, 3, stride=2, padding=1, bias=False)
        self.bn_a = nn.BatchNorm2d(8)
        self.b = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn_b = nn.BatchNorm2d(8)
        self.proj = nn.Conv2d(8, 8, 1, stride=2, bias=False)
        self.up = nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1)
        self.fc = nn.Linear(12 * 8 * 8, 10)

    def forward(self, x):
        x = F.relu(self.stem(x))
        y = F.relu(self.bn_a(self.a(x)))
        y = self.bn_b(self.b(y))
        y = F.relu(y + self.proj(x))
        y = torch.cat([F.gelu(self.up(y)), x[:, :8]], dim=1)
        return self.fc(y.flatten(1))


def _batches(shape, n=STEPS):
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(*shape, generator=g), torch.randint(0, 10, (shape[0],), generator=g)) for _ in range(n)]


MODELS = {
    "plain": (PlainCNN, (4, 3, 16, 16), 2),
    "batchnorm": (BatchNormCNN, (4, 3, 9, 9), 2),
    "residual": (ResidualCNN, (2, 3, 8, 8), 5),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_cnn_trains_as_on_the_cpu_backend(name):
    """Losses, parameters and BatchNorm buffers after a few SGD steps equal eager
    torch's, and every convolution ran NHWC."""
    cls, shape, n_convs = MODELS[name]
    torch.manual_seed(0)
    model = cls()
    batches = _batches(shape)
    cpu_losses, cpu_model, _, _ = train("CPU", model, batches, "sgd")
    csx_losses, csx_model, _, step = train("CSX", model, batches, "sgd")
    counts = _op_counts(step.executable.graph_module)
    assert counts.get("cstorch.convolution_nhwc.default") == n_convs, counts
    assert counts.get("cstorch.convolution_backward_nhwc.default") == n_convs, counts
    assert "aten.convolution.default" not in counts and "aten.convolution_backward.default" not in counts
    assert_close_rel(torch.tensor(csx_losses), torch.tensor(cpu_losses), what="losses")
    for k in cpu_model:
        assert_close_rel(csx_model[k], cpu_model[k], what=f"model {k}")


def test_rewritten_graph_computes_the_captured_one():
    """The pass's graph, run eagerly (the NHWC ops as aten ops between permutes), gives
    the captured graph's outputs: the rewrite itself is exact, whatever the lowerings."""
    model = ResidualCNN().eval()  # batch norm with its running stats (training mode: the models above)
    names = [n for n, _ in model.named_parameters()] + [n for n, _ in model.named_buffers()]
    params = [p.detach().clone().requires_grad_() for p in model.parameters()]
    buffers = [b.clone() + 0.5 if b.is_floating_point() else b.clone() for b in model.buffers()]
    x = torch.randn(2, 3, 8, 8)

    def f(x, *ps):
        out = torch.func.functional_call(model, dict(zip(names, ps)), (x,))
        return torch.autograd.grad(out.square().sum(), ps[:len(params)])

    ex = cstorch_jax.jit(f).executable(x, *params, *buffers)
    inputs = [x] + [p.detach() for p in params] + buffers
    want = ex.captured.module(*inputs)
    got = ex.graph_module(*inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
    # activations are permuted only where the region meets the rest: the input, the
    # flatten and its gradient (the others permute [1, C, 1, 1] operands of batch norm)
    moved = [n for n in ex.graph_module.graph.nodes if n.target is torch.ops.aten.permute.default
             and n.meta["val"].ndim == 4 and n.meta["val"].numel() > n.meta["val"].shape[-1]]
    assert len(moved) == 3, [(n.name, n.args[0].name) for n in moved]


def test_switched_off_by_the_environment(monkeypatch):
    conv = lambda x, w: F.conv2d(x, w).relu()  # noqa: E731
    x, w = torch.randn(1, 2, 5, 5), torch.randn(3, 2, 3, 3)
    assert "cstorch.convolution_nhwc.default" in _op_counts(cstorch_jax.jit(conv).executable(x, w).graph_module)
    monkeypatch.setenv(channels_last.ENV, "0")
    counts = _op_counts(cstorch_jax.jit(conv).executable(x, w).graph_module)
    assert "aten.convolution.default" in counts and "cstorch.convolution_nhwc.default" not in counts


# ---- the optimised program ------------------------------------------------------------
def _activation_transposes(hlo: str, min_elements: int) -> int:
    """Elements moved by the transposes of arrays of at least `min_elements` (weights
    are smaller) in an optimised HLO module, fused or not."""
    total = 0
    for dims in re.findall(r"= \w+\[([\d,]+)\]\{[\d,]*\} transpose\(", hlo):
        n = 1
        for d in dims.split(","):
            n *= int(d)
        total += n if n >= min_elements else 0
    return total


def test_fewer_activation_transposes_in_the_cnn_program(monkeypatch):
    """The benchmark CNN's shape at batch 8: XLA:CPU transposes around every NCHW
    convolution; channels-last leaves the weight-gradient convolutions' operands and
    the flatten at the chain's end."""
    from benchmarks.workloads import SmallCNN

    torch.manual_seed(0)
    model = SmallCNN()
    names = [n for n, _ in model.named_parameters()]
    params = [p.detach().clone().requires_grad_() for p in model.parameters()]
    x, y = torch.randn(8, 1, 28, 28), torch.randint(0, 10, (8,))

    def f(x, y, *ps):
        loss = F.cross_entropy(torch.func.functional_call(model, dict(zip(names, ps)), (x,)), y)
        return torch.autograd.grad(loss, ps)

    smallest_activation = 8 * 64 * 12 * 12
    moved = {}
    for env in ("0", "1"):
        monkeypatch.setenv(channels_last.ENV, env)
        hlo = cstorch_jax.jit(f).executable(x, y, *params).compiled.as_text()
        moved[env] = _activation_transposes(hlo, smallest_activation)
    assert moved["1"] < 0.6 * moved["0"], moved


# ---- OpInfo family through cstorch_jax.jit, every rewritable op forced NHWC ---------------
FAMILY = ["nn.functional.conv2d", "nn.functional.conv_transpose2d", "nn.functional.max_pool2d",
          "max_pool2d_with_indices_backward", "nn.functional.avg_pool2d", "nn.functional.batch_norm",
          "native_batch_norm", "_native_batch_norm_legit", "_batch_norm_with_update", "nn.functional.instance_norm",
          "nn.functional.relu", "nn.functional.adaptive_avg_pool2d", "cat"]


OPINFO_SAMPLES = 8  # per op and mode, picked as the coverage sweep picks (its default is 4); CI budget


def _sample_error(prepare, op, sample) -> str | None:
    from cstorch_jax.coverage.opinfo import check_sample

    try:
        check_sample(op, prepare(op, sample, torch.float32), torch.float32)
    except Exception as e:  # noqa: BLE001 - compared with the NCHW path's outcome below
        return f"{type(e).__name__}: {e}"
    return None


@pytest.mark.parametrize("mode", ["forward", "grad"])
@pytest.mark.parametrize("name", FAMILY)
def test_opinfo_family_held_channels_last(name, mode, monkeypatch):
    """Each of OPINFO_SAMPLES samples, with every op the pass can rewrite forced NHWC,
    passes or fails exactly as it does with the pass off (a few samples miss float32's
    1e-5 without the pass already, e.g. conv2d's depthwise unbatched sample 23)."""
    pytest.importorskip("expecttest", reason="torch's OpInfo database needs expecttest (dev extra)")
    from cstorch_jax.coverage.opinfo import choose_samples, load_op_db, op_id, prepare_forward, prepare_grad

    ops = [op for op in load_op_db() if op_id(op) == name]
    assert ops, f"no OpInfo named {name}"
    op, grad = ops[0], mode == "grad"
    if grad and not op.supports_autograd:
        pytest.skip(f"{name} is not differentiable")
    prepare = prepare_grad if grad else prepare_forward
    checked = 0
    for i, sample in enumerate(choose_samples(op, torch.float32, grad, OPINFO_SAMPLES)):
        monkeypatch.setattr(channels_last, "SEEDS", None)
        monkeypatch.delenv(channels_last.ENV, raising=False)
        error = _sample_error(prepare, op, sample)
        if error is not None:
            monkeypatch.setenv(channels_last.ENV, "0")
            assert error == _sample_error(prepare, op, sample), f"{name} {mode} sample {i}: {error}"
        checked += 1
    assert checked, f"{name} has no {mode} samples"
