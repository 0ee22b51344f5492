"""Metrics inside a traced eval step driven by a DataExecutor: on CSX their state is
state of the compiled step (accumulated on the device, copied back at the end of the
run); on CPU the same script runs eagerly. Both equal the numpy/sklearn references."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import cstorch
import metric_refs as ref
from cstorch._backend import _reset_backend
from cstorch.metrics import (AccuracyMetric, AUCMetric, DiceCoefficientMetric, FBetaScoreMetric, MeanIOUMetric,
                             MeanMetric, MeanPerClassAccuracyMetric, PerplexityMetric, PrecisionAtKMetric,
                             RecallAtKMetric)

C = 5  # classes
STEPS = 3


class Scale(torch.nn.Module):
    """A one-parameter "model" (elementwise, so every backend computes the same logits)."""

    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(()))

    def forward(self, x):
        return x * self.scale


def _batches(seed):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(STEPS):
        x = torch.randn(24, C, generator=g) * 2
        y = torch.where(torch.rand(24, generator=g) < 0.6, x.argmax(-1), torch.randint(0, C, (24,), generator=g))
        w = torch.rand(24, generator=g) * 2
        w[torch.rand(24, generator=g) < 0.25] = 0.0
        multi = torch.stack([torch.randperm(C, generator=g)[:2] for _ in range(24)])
        out.append((x, y, w, multi))
    return out


def _make_metrics():
    return {
        "accuracy": AccuracyMetric("accuracy"),
        "mean_loss": MeanMetric("mean_loss"),
        "perplexity": PerplexityMetric("perplexity"),
        "roc": AUCMetric(num_thresholds=50, name="roc"),
        "pr": AUCMetric(num_thresholds=50, curve="PR", name="pr"),
        "dice": DiceCoefficientMetric(C, ignore_classes=[0], name="dice"),
        "iou": MeanIOUMetric(C, name="iou"),
        "f_macro": FBetaScoreMetric(C, beta=2.0, average_type="macro", ignore_labels=[4], name="f_macro"),
        "f_micro": FBetaScoreMetric(C, name="f_micro"),
        "mpca": MeanPerClassAccuracyMetric(C, name="mpca"),
        "p_at_2": PrecisionAtKMetric(2, name="p_at_2"),
        "r_at_2": RecallAtKMetric(2, name="r_at_2"),
    }


def _update_all(ms, logits, y, w, multi):
    pred = logits.argmax(-1)
    losses = F.cross_entropy(logits, y, reduction="none")
    ms["accuracy"](y, pred, weights=w)
    ms["mean_loss"](losses, w)
    ms["perplexity"](y, (losses * (w > 0)).sum(), weights=w)
    p1 = torch.softmax(logits, -1)[:, 1]
    ms["roc"]((y == 1).long(), p1, weights=w)
    ms["pr"]((y == 1).long(), p1)
    ms["dice"](y, pred, weights=w)
    ms["iou"](y, pred)
    ms["f_macro"](y, pred)
    ms["f_micro"](y, pred)
    ms["mpca"](y, pred, weights=w)
    ms["p_at_2"](multi, logits, weights=w)
    ms["r_at_2"](multi, logits)


def _references(batches):
    x = torch.cat([b[0] for b in batches])
    y = torch.cat([b[1] for b in batches]).numpy()
    w = torch.cat([b[2] for b in batches]).numpy()
    multi = torch.cat([b[3] for b in batches]).numpy()
    pred = x.argmax(-1).numpy()
    losses = F.cross_entropy(x, torch.as_tensor(y), reduction="none").numpy()
    p1 = torch.softmax(x, -1)[:, 1].numpy()
    grid = ref.auc_thresholds(50)
    pos = (y == 1).astype(np.int64)
    precision, _ = ref.at_k(multi, x.numpy(), w, 2)
    _, recall = ref.at_k(multi, x.numpy(), None, 2)
    return {
        "accuracy": ref.accuracy(y, pred, w),
        "mean_loss": float(np.average(losses, weights=w)),
        "perplexity": float(np.exp((losses * (w > 0)).sum() / (w > 0).sum())),
        "roc": ref.thresholded_auc(pos, p1, w, grid, "ROC"),
        "pr": ref.thresholded_auc(pos, p1, None, grid, "PR"),
        "dice": ref.dice(y, pred, w, C, [0]),
        "iou": ref.mean_iou(y, pred, None, C),
        "f_macro": ref.fbeta(y, pred, C, 2.0, "macro", [4]),
        "f_micro": ref.fbeta(y, pred, C, 1.0, "micro"),
        "mpca": ref.mean_per_class_accuracy(y, pred, w, C),
        "p_at_2": precision,
        "r_at_2": recall,
    }


def _eval_runs(backend_type, runs):
    """Evaluate every metric in one traced step, over one DataExecutor run per entry of
    `runs` (metrics reset before each); return per run the metric values read with
    float() after the run, the update counts, and the traced step."""
    _reset_backend()
    backend = cstorch.backend(backend_type)
    compiled = cstorch.compile(Scale(), backend)
    ms = _make_metrics()
    unused = AccuracyMetric("never_updated")  # registered, not used by the step

    @cstorch.trace
    @torch.no_grad()
    def eval_step(x, y, w, multi):
        logits = compiled(x)
        _update_all(ms, logits, y, w, multi)
        return logits.sum()  # cstorch.trace cannot yet replay a CSX step that returns None

    results = []
    for batches in runs:
        for m in ms.values():
            m.reset()
        loader = cstorch.utils.data.DataLoader(lambda: batches)
        for x, y, w, multi in cstorch.utils.data.DataExecutor(loader, num_steps=len(batches)):
            eval_step(x, y, w, multi)
        results.append(({k: float(m) for k, m in ms.items()}, {k: m.num_updates for k, m in ms.items()}))
    assert unused.num_updates == 0
    return results, eval_step, ms


def test_every_metric_in_a_traced_eval_step_csx_equals_cpu_equals_reference():
    runs = [_batches(0), _batches(1)]
    cpu, _, _ = _eval_runs("CPU", runs)
    csx, step, ms = _eval_runs("CSX", runs)
    # the metric state is state of the one executable, changed by it; nothing else is
    names = step.program.used_names
    for key in ("accuracy", "dice", "roc", "p_at_2"):
        assert any(f".{key}." in n for n in names), names
    assert not any("never_updated" in n for n in names)
    mutated = {step.program.used_names[i] for i in range(len(step.program.mutated))}
    assert all(n.startswith("metric") for n in mutated), mutated
    for run, batches in enumerate(runs):  # the second run reuses the executable after reset()
        expected = _references(batches)
        for key, want in expected.items():
            got_cpu, got_csx = cpu[run][0][key], csx[run][0][key]
            assert got_cpu == pytest.approx(want, rel=1e-5, abs=1e-6), (run, key, "CPU")
            assert got_csx == pytest.approx(want, rel=1e-5, abs=1e-6), (run, key, "CSX")
            assert got_csx == pytest.approx(got_cpu, rel=1e-5, abs=1e-6), (run, key)
        assert cpu[run][1] == csx[run][1] == {k: STEPS for k in expected}
    # after the run the host buffers hold the device's values
    y = torch.cat([b[1] for b in runs[1]])
    assert float(ms["iou"].confusion_matrix.sum()) == y.numel()


def test_csx_reads_between_steps_and_resets_mid_run():
    _reset_backend()
    backend = cstorch.backend("CSX")
    compiled = cstorch.compile(Scale(), backend)
    mean = MeanMetric("mean")
    values = [torch.full((4,), float(k)) for k in range(1, 6)]
    seen = []

    @cstorch.trace
    def step(v):
        out = compiled(v)
        mean.update(out)
        return out

    loader = cstorch.utils.data.DataLoader(lambda: values)
    executor = cstorch.utils.data.DataExecutor(loader, num_steps=len(values))
    for i, v in enumerate(executor):
        step(v)
        seen.append(float(mean))  # the device state so far
        if i == 2:
            mean.reset()  # the next steps start from zero on the device as well
    assert seen == [1.0, 1.5, 2.0, 4.0, 4.5]
    assert float(mean) == 4.5 and mean.num_updates == 2
    assert float(mean.weight) == 8.0  # the host buffers hold the device's values


def test_compute_without_updates_raises_on_csx_only():
    m = AccuracyMetric("acc")
    cstorch.backend("CPU")
    assert torch.isnan(m.compute())  # 0 / 0 on CPU
    _reset_backend()
    cstorch.backend("CSX")
    m2 = MeanMetric("mean")
    with pytest.raises(RuntimeError, match="`mean`.*has not been updated"):
        m2.compute()
    with pytest.raises(RuntimeError, match="has not been updated"):
        float(m2)


def test_compute_without_updates_inside_a_csx_step_raises():
    _reset_backend()
    backend = cstorch.backend("CSX")
    compiled = cstorch.compile(Scale(), backend)
    m = MeanMetric("mean")

    @cstorch.trace
    def step(v):
        return m.compute() + compiled(v).sum()

    loader = cstorch.utils.data.DataLoader(lambda: [torch.ones(2)])
    with pytest.raises(RuntimeError, match="has not been updated"):
        for v in cstorch.utils.data.DataExecutor(loader, num_steps=1):
            step(v)


class _ModelWithMetric(torch.nn.Module):
    """The Model Zoo pattern: the metric is a submodule of the compiled model, so its
    state tensors are also the model's buffers."""

    def __init__(self):
        super().__init__()
        self.scale = Scale()
        self.accuracy = AccuracyMetric("acc")

    def forward(self, x, y):
        logits = self.scale(x)
        self.accuracy(labels=y, predictions=logits.argmax(-1))
        return F.cross_entropy(logits, y)


@pytest.mark.parametrize("backend_type", ["CPU", "CSX"])
def test_metric_inside_the_compiled_model(backend_type):
    _reset_backend()
    backend = cstorch.backend(backend_type)
    model = _ModelWithMetric()
    compiled = cstorch.compile(model, backend)

    @cstorch.trace
    @torch.no_grad()
    def eval_step(x, y):
        return compiled(x, y)

    batches = _batches(3)
    executor = cstorch.utils.data.DataExecutor(cstorch.utils.data.DataLoader(lambda: [b[:2] for b in batches]),
                                               num_steps=STEPS)
    for x, y in executor:
        eval_step(x, y)
    correct = sum(int((x.argmax(-1) == y).sum()) for x, y, *_ in batches)
    assert float(model.accuracy) == pytest.approx(correct / sum(len(y) for _, y, *_ in batches))
    _reset_backend()
