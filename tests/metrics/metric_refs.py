"""numpy / scikit-learn references for the cstorch metrics, and random test data."""
from __future__ import annotations

import numpy as np
from sklearn import metrics as skm


# -- data --------------------------------------------------------------------------------
def class_batches(seed, n_batches, batch, num_classes, weighted, shape=None):
    """[(labels, predictions, weights or None)] of int64 class ids; predictions agree with
    labels about half of the time; weights are in [0, 2) with about a quarter zeros."""
    rng = np.random.default_rng(seed)
    shape = shape or (batch,)
    out = []
    for _ in range(n_batches):
        labels = rng.integers(0, num_classes, shape)
        noise = rng.integers(0, num_classes, shape)
        preds = np.where(rng.random(shape) < 0.5, labels, noise)
        w = None
        if weighted:
            w = rng.random(shape) * 2
            w[rng.random(shape) < 0.25] = 0.0
        out.append((labels, preds, w))
    return out


def binary_batches(seed, n_batches, batch, weighted):
    """[(labels in {0, 1}, scores in [0, 1] correlated with them, weights or None)]."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_batches):
        labels = rng.integers(0, 2, batch)
        scores = np.clip(0.3 * labels + 0.7 * rng.random(batch), 0.0, 1.0).astype(np.float32)
        w = None
        if weighted:
            w = (rng.random(batch) * 2).astype(np.float32)
            w[rng.random(batch) < 0.25] = 0.0
        out.append((labels, scores, w))
    return out


def cat(batches):
    """The batches concatenated: (labels, predictions, weights or None), flattened."""
    labels = np.concatenate([b[0].reshape(-1) for b in batches])
    preds = np.concatenate([b[1].reshape(-1) for b in batches])
    w = None if batches[0][2] is None else np.concatenate([b[2].reshape(-1) for b in batches])
    return labels, preds, w


# -- references --------------------------------------------------------------------------
def accuracy(labels, preds, w):
    correct = (labels == preds).astype(np.float64)
    if w is None:
        return skm.accuracy_score(labels, preds)
    return float((correct * w).sum() / (w > 0).sum())  # weight > 0 counts as one token


def _confusion(labels, preds, w, num_classes):
    return skm.confusion_matrix(labels, preds, labels=list(range(num_classes)), sample_weight=w).astype(np.float64)


def _mean_present(per_class, labels, preds, w, num_classes, ignore):
    """The mean of per-class scores over the classes that are not ignored and appear (with
    a non-zero weight) in the labels or the predictions."""
    cm = _confusion(labels, preds, w, num_classes)
    present = (cm.sum(0) + cm.sum(1)) != 0
    keep = [c for c in range(num_classes) if present[c] and c not in (ignore or [])]
    return float(np.mean(per_class[keep])) if keep else 0.0


def dice(labels, preds, w, num_classes, ignore=None):
    per_class = skm.f1_score(labels, preds, labels=list(range(num_classes)), average=None, sample_weight=w,
                             zero_division=0)
    return _mean_present(per_class, labels, preds, w, num_classes, ignore)


def mean_iou(labels, preds, w, num_classes, ignore=None):
    per_class = skm.jaccard_score(labels, preds, labels=list(range(num_classes)), average=None, sample_weight=w,
                                  zero_division=0)
    return _mean_present(per_class, labels, preds, w, num_classes, ignore)


def fbeta(labels, preds, num_classes, beta, average, ignore=None):
    keep = [c for c in range(num_classes) if c not in (ignore or [])]
    return float(skm.fbeta_score(labels, preds, beta=beta, labels=keep, average=average, zero_division=0))


def mean_per_class_accuracy(labels, preds, w, num_classes):
    """Weighted recall of each class, averaged over all classes (an absent class counts 0)."""
    cm = _confusion(labels, preds, w, num_classes)
    support = cm.sum(1)
    recall = np.divide(np.diag(cm), support, out=np.zeros(num_classes), where=support != 0)
    return float(recall.mean())


def at_k(labels, scores, w, k):
    """(precision@k, recall@k): labels [n, L] class ids, scores [n, C], row weights [n]."""
    top = np.argsort(-scores, axis=-1)[:, :k]
    hits = np.array([sum(int(l in set(t)) for l in row) for row, t in zip(labels, top)], dtype=np.float64)
    w = np.ones(len(hits)) if w is None else np.broadcast_to(w, hits.shape)
    tp = (hits * w).sum()
    return tp / (k * w).sum(), tp / (labels.shape[1] * w).sum()


def auc_thresholds(num_thresholds):
    eps = 1e-7
    return np.array([-eps] + [(i + 1) / (num_thresholds - 1) for i in range(num_thresholds - 2)] + [1 + eps])


def auc_counts(labels, scores, w, thresholds):
    """(tp, fp, fn, tn) per threshold for the decision `score > threshold`."""
    w = np.ones(len(labels)) if w is None else w.astype(np.float64)
    pos = labels > 0
    tp, fp, fn, tn = (np.zeros(len(thresholds)) for _ in range(4))
    for i, t in enumerate(thresholds):
        yes = scores.astype(np.float32) > np.float32(t)
        tp[i] = w[yes & pos].sum()
        fp[i] = w[yes & ~pos].sum()
        fn[i] = w[~yes & pos].sum()
        tn[i] = w[~yes & ~pos].sum()
    return tp, fp, fn, tn


def _ratio(a, b):
    return np.divide(a, b, out=np.zeros_like(a), where=b != 0)


def thresholded_auc(labels, scores, w, thresholds, curve="ROC", summation="interpolation"):
    """The TF-style AUC: a Riemann sum over the threshold grid."""
    tp, fp, fn, tn = auc_counts(labels, scores, w, thresholds)
    if curve == "PR" and summation == "interpolation":
        total = 0.0
        for a in range(len(thresholds) - 1):  # interval from threshold a to a + 1
            b = a + 1
            pos_b = tp[b] + fn[b]
            if pos_b <= 0:
                continue
            d_tp, p_a, p_b = tp[a] - tp[b], tp[a] + fp[a], tp[b] + fp[b]
            slope = d_tp / (p_a - p_b) if p_a - p_b > 0 else 0.0
            intercept = tp[b] - slope * p_b
            log_ratio = np.log(p_a / p_b) if p_a > 0 and p_b > 0 else 0.0
            total += slope * (d_tp + intercept * log_ratio) / pos_b
        return total
    recall = _ratio(tp, tp + fn)
    x, y = (_ratio(fp, fp + tn), recall) if curve == "ROC" else (recall, _ratio(tp, tp + fp))
    pick = {"interpolation": lambda a, b: (a + b) / 2, "minoring": np.minimum, "majoring": np.maximum}[summation]
    return float(np.sum((x[:-1] - x[1:]) * pick(y[:-1], y[1:])))
