"""Tensor helpers shared by the metrics; all of them are static-shape tensor math, so
they work inside a compiled step."""
from __future__ import annotations

from typing import Optional, Sequence

import torch
from torch import Tensor


def divide_no_nan(num: Tensor, denom: Tensor) -> Tensor:
    """num / denom, with 0 wherever denom == 0 (like tf.math.divide_no_nan).

    Args:
        num: the numerator.
        denom: the denominator.
    """
    zero = denom == 0
    safe = torch.where(zero, torch.ones_like(denom), denom)
    return torch.where(zero, torch.zeros_like(num), num) / safe


def _check_num_classes(num_classes, who: str) -> int:
    if isinstance(num_classes, bool) or not isinstance(num_classes, int):
        raise TypeError(f"{who}: num_classes must be an int, got {num_classes!r}")
    if num_classes < 2:
        raise ValueError(f"{who}: num_classes must be at least 2, got {num_classes}")
    return num_classes


def check_class_values(labels: Tensor, predictions: Tensor, num_classes: int) -> None:
    """Eager check that class ids lie in [0, num_classes) (reads tensor values, so it is
    skipped inside a compiled step, where out-of-range ids are dropped).

    Args:
        labels: the true class ids.
        predictions: the predicted class ids.
        num_classes: the number of classes.
    """
    for what, t in (("labels", labels), ("predictions", predictions)):
        if t.numel() == 0:
            continue
        if t.is_floating_point() and not torch.equal(t, t.round()):
            raise ValueError(f"`{what}` must hold integer class ids, got non-integral values")
        lo, hi = int(t.min()), int(t.max())
        if lo < 0:
            raise ValueError(f"Negative values in `{what}` are not allowed (found {lo})")
        if hi >= num_classes:
            raise ValueError(f"`{what}` holds class {hi}, but num_classes is {num_classes} "
                             f"(class ids must be in [0, {num_classes}))")


def broadcast_weights(weights: Tensor, shape: torch.Size, what: str = "labels") -> Tensor:
    """`weights` broadcast to `shape`, or a ValueError naming both shapes.

    Args:
        weights: the weights.
        shape: the shape to broadcast them to.
        what: the name of the tensor of that shape, for the error message.
    """
    weights = torch.as_tensor(weights)
    try:
        return torch.broadcast_to(weights, shape)
    except RuntimeError:
        raise ValueError(f"`weights` of shape {list(weights.shape)} cannot be broadcast to the shape of `{what}` "
                         f"{list(shape)}") from None


def compute_confusion_matrix(labels: Tensor, predictions: Tensor, num_classes: Optional[int],
                             weights: Optional[Tensor] = None, on_device: bool = False) -> Tensor:
    """The float32 [num_classes, num_classes] confusion matrix: rows are the true
    classes, columns the predicted ones; each pair adds its weight (1 by default).

    labels and predictions (same number of elements) are flattened. `weights` must be
    broadcastable to `predictions`. With `on_device=False` the class ids are checked on
    the host (no negatives; `num_classes=None` means one more than the largest id);
    with `on_device=True` nothing reads tensor values, so the function can run inside a
    compiled step (then `num_classes` is required).

    Args:
        labels: the true class ids.
        predictions: the predicted class ids (as many elements as `labels`).
        num_classes: the number of classes; None (only with `on_device=False`): one more than the largest
            id.
        weights: each pair's weight, broadcastable to `predictions`; None: 1.
        on_device: read no tensor values (inside a compiled step), instead of checking the ids on the host.
    """
    if labels.numel() != predictions.numel():
        raise ValueError(f"`labels` {list(labels.shape)} and `predictions` {list(predictions.shape)} must have "
                         f"the same number of elements")
    if weights is not None:
        weights = broadcast_weights(weights, predictions.shape, "predictions").reshape(-1)
    labels = labels.reshape(-1)
    predictions = predictions.reshape(-1)
    if num_classes is None:
        if on_device:
            raise ValueError("compute_confusion_matrix(on_device=True) needs num_classes (shapes must be static)")
        num_classes = 1 + max((int(t.max()) for t in (labels, predictions) if t.numel()), default=0)
    if not on_device:
        check_class_values(labels, predictions, num_classes)
    index = labels.long() * num_classes + predictions.long()
    src = torch.ones(index.shape, dtype=torch.float32, device=index.device) if weights is None \
        else weights.to(torch.float32)
    flat = torch.zeros(num_classes * num_classes, dtype=torch.float32, device=index.device)
    return flat.scatter_add(0, index, src).reshape(num_classes, num_classes)


def compute_mask(num_classes: int, ignore_classes: Optional[Sequence[int]]) -> Tensor:
    """float32 [num_classes]: 1 for the classes that count, 0 for `ignore_classes`.

    Args:
        num_classes: the number of classes.
        ignore_classes: the class ids that get 0; None: none.
    """
    ignore = [] if ignore_classes is None else ignore_classes
    if isinstance(ignore, int):
        ignore = [ignore]
    ignore = list(ignore)
    for c in ignore:
        if isinstance(c, bool) or not isinstance(c, int) or not 0 <= c < num_classes:
            raise ValueError(f"ignored class {c!r} is not a class id in [0, {num_classes})")
    mask = torch.ones(num_classes, dtype=torch.float32)
    if ignore:
        mask[torch.tensor(sorted(set(ignore)), dtype=torch.long)] = 0.0
    return mask


def diagonal(matrix: Tensor) -> Tensor:
    """The main diagonal of a square matrix, as a masked row sum (a plain reduction).

    Args:
        matrix: a square matrix.
    """
    eye = torch.eye(matrix.shape[0], dtype=matrix.dtype, device=matrix.device)
    return (eye * matrix).sum(dim=-1)
