"""Every metric, run eagerly over several updates, equals its numpy / scikit-learn
reference on random data, with and without weights and ignored classes."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn import metrics as skm

import metric_refs as ref
from cstorch.metrics import (AccuracyMetric, AUCMetric, DiceCoefficientMetric, FBetaScoreMetric, MeanIOUMetric,
                             MeanMetric, MeanPerClassAccuracyMetric, PerplexityMetric, PrecisionAtKMetric,
                             RecallAtKMetric)
from cstorch.metrics.utils import compute_confusion_matrix, compute_mask, divide_no_nan

T = torch.as_tensor


def _feed(metric, batches, with_weights=True):
    for labels, preds, w in batches:
        kw = {"weights": T(w)} if (w is not None and with_weights) else {}
        metric.update(T(labels), T(preds), **kw)
    assert metric.num_updates == len(batches)


@pytest.mark.parametrize("weighted", [False, True])
def test_accuracy(weighted):
    batches = ref.class_batches(0, 4, 32, 5, weighted, shape=(4, 8))
    m = AccuracyMetric("acc")
    _feed(m, batches)
    assert float(m) == pytest.approx(ref.accuracy(*ref.cat(batches)), rel=1e-6)


def test_accuracy_reshapes_predictions_with_a_warning():
    m = AccuracyMetric("acc")
    with pytest.warns(UserWarning, match="Shapes mismatch"):
        m(T([[1, 2], [3, 4]]), T([1, 0, 3, 0]))
    assert float(m) == 0.5


@pytest.mark.parametrize("weighted", [False, True])
def test_mean(weighted):
    rng = np.random.default_rng(1)
    values = [rng.normal(size=(3, 5)).astype(np.float32) for _ in range(4)]
    weights = [rng.random((3, 1)).astype(np.float32) if weighted else 1.0 for _ in values]
    m = MeanMetric("mean")
    for v, w in zip(values, weights):
        m.update(T(v), T(w) if weighted else w)
    m.update(2.5, 3.0 if weighted else 1.0)  # Python numbers are accepted too
    flat_w = np.concatenate([np.broadcast_to(w, v.shape).reshape(-1) for v, w in zip(values, weights)] +
                            [[3.0 if weighted else 1.0]])
    flat_v = np.concatenate([v.reshape(-1) for v in values] + [[2.5]])
    assert float(m) == pytest.approx(np.average(flat_v, weights=flat_w), rel=1e-5)


@pytest.mark.parametrize("weighted", [False, True])
def test_perplexity(weighted):
    batches = ref.class_batches(2, 3, 24, 7, weighted, shape=(3, 8))
    rng = np.random.default_rng(2)
    losses = [float(rng.random() * 30) for _ in batches]
    m = PerplexityMetric("ppl")
    for (labels, _, w), loss in zip(batches, losses):
        m.update(T(labels), T(loss), weights=None if w is None else T(w))
    tokens = sum((w > 0).sum() if w is not None else labels.size for labels, _, w in batches)
    assert float(m) == pytest.approx(np.exp(sum(losses) / tokens), rel=1e-5)


@pytest.mark.parametrize("curve", ["ROC", "PR"])
@pytest.mark.parametrize("summation", ["interpolation", "minoring", "majoring"])
@pytest.mark.parametrize("weighted", [False, True])
def test_auc_matches_the_thresholded_reference(curve, summation, weighted):
    batches = ref.binary_batches(3, 3, 64, weighted)
    m = AUCMetric(num_thresholds=37, curve=curve, summation_method=summation)
    _feed(m, batches)
    labels, scores, w = ref.cat(batches)
    expected = ref.thresholded_auc(labels, scores, w, ref.auc_thresholds(37), curve, summation)
    value = m.compute()
    assert isinstance(value, float)
    assert value == pytest.approx(expected, rel=1e-5, abs=1e-6)


def test_auc_custom_thresholds_and_bounds():
    batches = ref.binary_batches(4, 2, 50, weighted=True)
    custom = [0.9, 0.1, 0.5, 0.3]
    m = AUCMetric(thresholds=custom, name="auc_custom")
    assert m.num_thresholds == 6 and m.thresholds.shape == (6, 1)
    _feed(m, batches)
    labels, scores, w = ref.cat(batches)
    grid = np.array([-1e-7, 0.1, 0.3, 0.5, 0.9, 1 + 1e-7])
    assert m.compute() == pytest.approx(ref.thresholded_auc(labels, scores, w, grid), rel=1e-5)
    lo = AUCMetric(num_thresholds=11, summation_method="minoring")
    hi = AUCMetric(num_thresholds=11, summation_method="majoring")
    mid = AUCMetric(num_thresholds=11)
    for metric in (lo, hi, mid):
        _feed(metric, batches)
    assert lo.compute() <= mid.compute() <= hi.compute()


@pytest.mark.parametrize("weighted", [False, True])
def test_auc_with_many_thresholds_approaches_sklearn(weighted):
    batches = ref.binary_batches(5, 4, 250, weighted)
    labels, scores, w = ref.cat(batches)
    roc, pr = AUCMetric(num_thresholds=2000), AUCMetric(num_thresholds=2000, curve="PR")
    for m in (roc, pr):
        _feed(m, batches)
    # the grid is finer than the score spacing: only float32 sums and ties at the grid differ
    assert roc.compute() == pytest.approx(skm.roc_auc_score(labels, scores, sample_weight=w), abs=1e-3)
    assert pr.compute() == pytest.approx(skm.average_precision_score(labels, scores, sample_weight=w), abs=2e-3)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore", [None, [0, 3]])
@pytest.mark.parametrize("cls,reference", [(DiceCoefficientMetric, ref.dice), (MeanIOUMetric, ref.mean_iou)])
def test_dice_and_mean_iou(cls, reference, weighted, ignore):
    batches = ref.class_batches(6, 3, 40, 6, weighted, shape=(2, 4, 5))
    m = cls(6, ignore_classes=ignore)
    _feed(m, batches)
    assert float(m) == pytest.approx(reference(*ref.cat(batches), 6, ignore), rel=1e-5)


@pytest.mark.parametrize("cls", [DiceCoefficientMetric, MeanIOUMetric])
def test_dice_and_mean_iou_skip_absent_classes(cls):
    # class 3 never appears and class 1 is ignored: the mean is over classes 0 and 2
    labels, preds = np.array([0, 0, 2, 2, 1]), np.array([0, 2, 2, 2, 0])
    m = cls(4, ignore_classes=[1])
    m.update(T(labels), T(preds))
    reference = ref.dice if cls is DiceCoefficientMetric else ref.mean_iou
    assert float(m) == pytest.approx(reference(labels, preds, None, 4, [1]), rel=1e-6)
    assert float(cls(4, name="never_updated")) == 0.0  # no class at all: 0, not nan


@pytest.mark.parametrize("average", ["micro", "macro"])
@pytest.mark.parametrize("beta", [1.0, 0.5, 2.0])
@pytest.mark.parametrize("ignore", [None, [1]])
def test_fbeta(average, beta, ignore):
    batches = ref.class_batches(7, 3, 30, 5, weighted=False)
    m = FBetaScoreMetric(5, beta=beta, average_type=average, ignore_labels=ignore)
    for labels, preds, _ in batches:
        m.update(T(labels), T(preds))
    labels, preds, _ = ref.cat(batches)
    assert float(m) == pytest.approx(ref.fbeta(labels, preds, 5, beta, average, ignore), rel=1e-5)


def test_fbeta_macro_counts_a_class_without_support_as_zero():
    labels, preds = np.array([0, 1, 1, 0]), np.array([0, 1, 0, 0])
    m = FBetaScoreMetric(3, average_type="macro")
    m.update(T(labels), T(preds))
    assert float(m) == pytest.approx(ref.fbeta(labels, preds, 3, 1.0, "macro"), rel=1e-6)


@pytest.mark.parametrize("weighted", [False, True])
def test_mean_per_class_accuracy(weighted):
    batches = ref.class_batches(8, 3, 40, 4, weighted, shape=(5, 8))
    m = MeanPerClassAccuracyMetric(4)
    _feed(m, batches)
    labels, preds, w = ref.cat(batches)
    assert float(m) == pytest.approx(ref.mean_per_class_accuracy(labels, preds, w, 4), rel=1e-5)
    # every class is present: it is sklearn's balanced accuracy
    assert float(m) == pytest.approx(skm.balanced_accuracy_score(labels, preds, sample_weight=w), rel=1e-5)


def test_mean_per_class_accuracy_averages_over_all_classes():
    m = MeanPerClassAccuracyMetric(4)
    m.update(T([0, 0, 1]), T([0, 1, 1]))
    assert float(m) == pytest.approx((0.5 + 1.0 + 0 + 0) / 4)


@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("weights", ["none", "scalar", "rows"])
def test_precision_and_recall_at_k(k, weights):
    rng = np.random.default_rng(9)
    p_m, r_m = PrecisionAtKMetric(k), RecallAtKMetric(k)
    all_labels, all_scores, all_w = [], [], []
    for _ in range(3):
        scores = rng.random((12, 10)).astype(np.float32)
        labels = np.stack([rng.choice(10, 3, replace=False) for _ in range(12)])
        w = {"none": None, "scalar": np.float32(0.5), "rows": rng.random(12).astype(np.float32)}[weights]
        for m in (p_m, r_m):
            m.update(T(labels), T(scores), weights=None if w is None else T(w))
        all_labels.append(labels)
        all_scores.append(scores)
        all_w.append(np.broadcast_to(np.ones(12) if w is None else w, (12,)))
    precision, recall = ref.at_k(np.concatenate(all_labels), np.concatenate(all_scores), np.concatenate(all_w), k)
    assert p_m.compute() == pytest.approx(precision, rel=1e-5)
    assert r_m.compute() == pytest.approx(recall, rel=1e-5)


def test_at_k_with_one_label_per_row():
    scores = T([[0.1, 0.9, 0.0], [0.8, 0.1, 0.3]])
    labels = T([1, 2])
    p, r = PrecisionAtKMetric(2), RecallAtKMetric(2)
    p.update(labels, scores)
    r.update(labels, scores)
    assert p.compute() == pytest.approx(0.5) and r.compute() == pytest.approx(1.0)


def test_dtype_argument_casts_the_result():
    m = AccuracyMetric("acc")
    assert m(T([1, 2]), T([1, 2]), dtype=torch.float16).dtype is torch.float16
    iou = MeanIOUMetric(3)
    assert iou(T([1, 2]), T([1, 2]), dtype=torch.bfloat16).dtype is torch.bfloat16


# -- helpers ----------------------------------------------------------------------------
def test_confusion_matrix_helper():
    labels, preds, w = ref.cat(ref.class_batches(10, 2, 30, 5, weighted=True))
    cm = compute_confusion_matrix(T(labels), T(preds), 5, weights=T(w))
    expected = skm.confusion_matrix(labels, preds, labels=range(5), sample_weight=w)
    np.testing.assert_allclose(cm.numpy(), expected, rtol=1e-6)
    assert cm.dtype is torch.float32
    # num_classes=None: one more than the largest class id
    assert compute_confusion_matrix(T([1, 2, 4]), T([2, 2, 4]), None).shape == (5, 5)
    assert compute_confusion_matrix(T([1, 2]), T([2, 2]), 3, on_device=True)[1, 2] == 1.0
    with pytest.raises(ValueError, match="Negative values in `labels`"):
        compute_confusion_matrix(T([-1, 0]), T([0, 0]), 3)
    with pytest.raises(ValueError, match="num_classes is 3"):
        compute_confusion_matrix(T([0, 1]), T([0, 3]), 3)
    with pytest.raises(ValueError, match="cannot be broadcast"):
        compute_confusion_matrix(T([0, 1]), T([0, 1]), 3, weights=T([1.0, 1.0, 1.0]))


def test_divide_no_nan_and_mask():
    out = divide_no_nan(T([1.0, 2.0, 0.0]), T([2.0, 0.0, 0.0]))
    assert out.tolist() == [0.5, 0.0, 0.0]
    assert compute_mask(4, [1, 3]).tolist() == [1.0, 0.0, 1.0, 0.0]
    assert compute_mask(3, None).tolist() == [1.0, 1.0, 1.0]
