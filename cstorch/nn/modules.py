"""The real API's loss modules (`cstorch.nn.<Name>Loss`) and `Scope`.

Every loss takes the constructor arguments of the real one plus `use_autogen=False` (a
request that the wafer compiler generate the loss as one kernel; accepted, no effect
here) and computes torch's loss:

* `BCELoss`, `BCEWithLogitsLoss`, `CosineEmbeddingLoss`, `CrossEntropyLoss`, `CTCLoss`,
  `HingeEmbeddingLoss`, `KLDivLoss`, `L1Loss`, `MarginRankingLoss`, `MSELoss`,
  `MultiLabelSoftMarginLoss`, `NLLLoss`, `PoissonNLLLoss`, `TripletMarginLoss`,
  `TripletMarginWithDistanceLoss`: torch's classes, same arguments.
* `HuberLoss(reduction="mean", delta=1.0)` (delta > 0), `SmoothL1Loss(reduction="mean",
  beta=1.0)` (beta >= 0), `MultiMarginLoss(p=1, margin=1.0, weight=None, reduction="mean")`
  (p 1 or 2, no "none" reduction), `GaussianNLLLoss(full=False, eps=1e-6,
  reduction="mean")`: the real argument order, torch's math (the real formulas equal it;
  GaussianNLLLoss skips torch's host check of negative variances, as the real one does).
* `DiceLoss(num_classes, to_onehot_y=True, to_onehot_x=False, use_softmax=True,
  use_argmax=False, include_background=False)`, called as `loss(prediction, target,
  input_shape)` on 5-D `[N, C, D, H, W]` predictions and `[N, D, H, W]` class targets:
  per sample and class, `(2 * sum(t * p)) / (sum(t) + sum(p) + 1e-6)` over D, H, W, after
  softmax (or argmax) of the prediction, one-hot targets and, without the background,
  class 0 zeroed. Returns the `[N, C]` scores.
* `DiceCELoss(num_classes, include_background, wc=0.5, wd=0.5)`:
  `wc * cross_entropy + wd * (1 - c * mean(dice))`, `c = C / (C - 1)` without the
  background (its zeroed class does not count in the mean), else 1.
* `Scope(scope_name)`: marks a named region of the wafer program; the identity here
  (`scope(x)` enters it, `scope.exit(x)` leaves it).

Differences from the real system:
    `use_autogen`, scopes and `Scope` have no effect.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import functional as CF
from ..factories import make_constant

__all__ = [
    "BCELoss", "BCEWithLogitsLoss", "CosineEmbeddingLoss", "CrossEntropyLoss", "CTCLoss", "DiceCELoss", "DiceLoss",
    "GaussianNLLLoss", "HingeEmbeddingLoss", "HuberLoss", "KLDivLoss", "L1Loss", "MarginRankingLoss", "MSELoss",
    "MultiLabelSoftMarginLoss", "MultiMarginLoss", "NLLLoss", "PoissonNLLLoss", "SmoothL1Loss", "TripletMarginLoss",
    "TripletMarginWithDistanceLoss",
]


class _Autogen:
    """Accepts the real losses' `use_autogen` keyword (a wafer kernel-generation request)."""

    def _set_autogen(self, use_autogen: bool) -> None:
        self.autogen_enabled = bool(use_autogen)


def _torch_loss(torch_cls):
    def __init__(self, *args, use_autogen: bool = False, **kwargs):
        torch_cls.__init__(self, *args, **kwargs)
        self._set_autogen(use_autogen)

    return type(torch_cls.__name__, (_Autogen, torch_cls), {
        "__init__": __init__, "__module__": __name__,
        "__doc__": f"torch.nn.{torch_cls.__name__} (plus `use_autogen`, which has no effect here).\n\n"
                   f"Args:\n"
                   f"    *args: the arguments of torch.nn.{torch_cls.__name__}, in its order.\n"
                   f"    use_autogen: the real system's request to generate the loss as one wafer kernel "
                   f"(no effect here).\n"
                   f"    **kwargs: the keyword arguments of torch.nn.{torch_cls.__name__}.\n"})


BCELoss = _torch_loss(nn.BCELoss)
BCEWithLogitsLoss = _torch_loss(nn.BCEWithLogitsLoss)
CosineEmbeddingLoss = _torch_loss(nn.CosineEmbeddingLoss)
CrossEntropyLoss = _torch_loss(nn.CrossEntropyLoss)
CTCLoss = _torch_loss(nn.CTCLoss)
HingeEmbeddingLoss = _torch_loss(nn.HingeEmbeddingLoss)
KLDivLoss = _torch_loss(nn.KLDivLoss)
L1Loss = _torch_loss(nn.L1Loss)
MarginRankingLoss = _torch_loss(nn.MarginRankingLoss)
MSELoss = _torch_loss(nn.MSELoss)
MultiLabelSoftMarginLoss = _torch_loss(nn.MultiLabelSoftMarginLoss)
NLLLoss = _torch_loss(nn.NLLLoss)
PoissonNLLLoss = _torch_loss(nn.PoissonNLLLoss)
TripletMarginLoss = _torch_loss(nn.TripletMarginLoss)
TripletMarginWithDistanceLoss = _torch_loss(nn.TripletMarginWithDistanceLoss)


class HuberLoss(_Autogen, nn.Module):
    """torch's Huber loss in the real argument order.

    Args:
        reduction: "mean", "sum" or "none".
        delta: where the loss turns from quadratic to linear (> 0).
        use_autogen: the real system's request to generate the loss as one wafer kernel
            (no effect here).
    """

    def __init__(self, reduction="mean", delta=1.0, use_autogen: bool = False):
        super().__init__()
        if not delta > 0:
            raise AssertionError("HuberLoss only supports positive values for delta.")
        self.reduction, self.delta = reduction, delta
        self._set_autogen(use_autogen)

    def forward(self, input, target):
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class SmoothL1Loss(_Autogen, nn.Module):
    """torch's smooth L1 loss in the real argument order.

    Args:
        reduction: "mean", "sum" or "none".
        beta: where the loss turns from quadratic to linear (>= 0).
        use_autogen: the real system's request to generate the loss as one wafer kernel
            (no effect here).
    """

    def __init__(self, reduction="mean", beta=1.0, use_autogen: bool = False):
        super().__init__()
        if not beta >= 0:
            raise AssertionError("SmoothL1Loss only supports non-negative values for beta.")
        self.reduction, self.beta = reduction, beta
        self._set_autogen(use_autogen)

    def forward(self, input, target):
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class MultiMarginLoss(_Autogen, nn.Module):
    """torch's multi-class margin loss in the real argument order; the targets are cast
    to int64.

    Args:
        p: the power of the margin terms, 1 or 2.
        margin: the margin.
        weight: a weight per class (a constant of the step); None: 1.
        reduction: "mean" or "sum" ("none" is refused, as by the real loss).
        use_autogen: the real system's request to generate the loss as one wafer kernel
            (no effect here).
    """

    def __init__(self, p=1, margin=1.0, weight=None, reduction="mean", use_autogen: bool = False):
        super().__init__()
        if p not in (1, 2):
            raise AssertionError("MultiMarginLoss only supports p being 1 or 2.")
        if reduction == "none":
            raise AssertionError("MultiMarginLoss does not support 'none' reduction.")
        self.p, self.margin, self.weight, self.reduction = p, margin, weight, reduction
        self._set_autogen(use_autogen)

    def forward(self, x, y):
        weight = make_constant(self.weight) if self.weight is not None else None  # not state: a constant
        return F.multi_margin_loss(x, y.long(), p=self.p, margin=self.margin, weight=weight, reduction=self.reduction)


class GaussianNLLLoss(_Autogen, nn.Module):
    """torch's Gaussian negative log-likelihood in the real argument order (`forward`
    says how it differs from torch's).

    Args:
        full: add the constant `0.5 * log(2 pi)`.
        eps: the least variance (smaller ones are clamped to it).
        reduction: "mean", "sum" or "none".
        use_autogen: the real system's request to generate the loss as one wafer kernel
            (no effect here).
    """

    def __init__(self, full=False, eps=1e-6, reduction="mean", use_autogen: bool = False):
        super().__init__()
        self.full, self.eps, self.reduction = full, eps, reduction
        self._set_autogen(use_autogen)

    def forward(self, input, target, var):
        """torch's Gaussian NLL without its check that `var` is non-negative (a read of
        tensor values, which a compiled step cannot make): `0.5 * (log v + (x - t)^2 / v)`
        (+ `0.5 * log(2 pi)` when `full`) with `v = max(var, eps)`, the clamp not
        differentiated."""
        if var.shape != input.shape:
            if input.shape[:-1] == var.shape:  # one variance per sample (homoscedastic)
                var = var.unsqueeze(-1)
            elif not (input.shape[:-1] == var.shape[:-1] and var.shape[-1] == 1):
                raise ValueError(f"`var` is of incorrect size: {var.size()}")
        var = var.clone()
        with torch.no_grad():
            var.clamp_(min=self.eps)
        loss = 0.5 * (torch.log(var) + (input - target) ** 2 / var)
        if self.full:
            loss = loss + 0.5 * math.log(2 * math.pi)
        return _reduce(loss, self.reduction)


def _reduce(loss: torch.Tensor, reduction: str) -> torch.Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _one_hot_channels(x: torch.Tensor, num_classes: int) -> torch.Tensor:
    """[N, 1, D, H, W] (or [N, D, H, W]) class ids -> [N, C, D, H, W] float one-hot."""
    if x.dim() >= 5:
        x = x.squeeze(1)
    return CF.one_hot(x.long(), num_classes).float().permute(0, 4, 1, 2, 3)


class DiceLoss:
    """The per-sample, per-class Dice scores of 5-D predictions (see the module
    docstring); called as `loss(prediction, target, input_shape)`, it returns `[N, C]`.

    Args:
        num_classes: the number of classes C.
        to_onehot_y: one-hot encode the class targets.
        to_onehot_x: one-hot encode the prediction (after argmax).
        use_softmax: apply softmax over the classes to the prediction.
        use_argmax: take the argmax over the classes instead (when not `use_softmax`).
        include_background: count class 0; False zeroes it.
    """

    def __init__(self, num_classes: int, to_onehot_y: bool = True, to_onehot_x: bool = False,
                 use_softmax: bool = True, use_argmax: bool = False, include_background: bool = False):
        self.num_classes = num_classes
        self.to_onehot_y, self.to_onehot_x = to_onehot_y, to_onehot_x
        self.use_softmax, self.use_argmax = use_softmax, use_argmax
        self.include_background = include_background
        self.smooth_nr, self.smooth_dr = 0.0, 1e-6

    def __call__(self, prediction, target, input_shape):
        target = target.unsqueeze(1)
        channels = prediction.shape[1]
        if self.use_softmax:
            prediction = torch.softmax(prediction, dim=1)
        elif self.use_argmax:
            prediction = torch.argmax(prediction, dim=1)
        if self.to_onehot_y:
            target = _one_hot_channels(target, self.num_classes)
        if self.to_onehot_x:
            prediction = _one_hot_channels(prediction, self.num_classes)
        if not self.include_background:
            if channels <= 1:
                raise AssertionError(f"To exclude background the prediction needs more than one channel. Got "
                                     f"{channels}.")
            keep = torch.ones(prediction.shape[1], dtype=prediction.dtype, device=prediction.device)
            keep = keep.index_fill(0, torch.tensor([0], device=prediction.device), 0)
            keep = keep.reshape(1, -1, *([1] * (prediction.dim() - 2)))
            target, prediction = target * keep, prediction * keep
        if target.shape != prediction.shape:
            raise AssertionError(f"Target and prediction shape do not match. Target: ({target.shape}), prediction: "
                                 f"({prediction.shape}).")
        axes = list(range(2, prediction.dim()))
        overlap = (target * prediction).sum(axes)
        total = target.sum(axes) + prediction.sum(axes)
        return (2.0 * overlap + self.smooth_nr) / (total + self.smooth_dr)


class DiceCELoss(nn.Module):
    """`wc * cross_entropy + wd * (1 - c * mean(dice))` (see the module docstring);
    called as `loss(outputs, labels, input_shape)`.

    Args:
        num_classes: the number of classes C.
        include_background: count class 0 in the Dice term.
        wc: the weight of the cross entropy.
        wd: the weight of the Dice term.
    """

    def __init__(self, num_classes, include_background, wc=0.5, wd=0.5):
        super().__init__()
        self.dice = DiceLoss(num_classes=num_classes, include_background=include_background)
        self.cross_entropy = nn.CrossEntropyLoss()
        self.wc, self.wd = wc, wd
        self.mean_correction = 1.0 if include_background else num_classes / (num_classes - 1)

    def forward(self, outputs, labels, input_shape):
        ce = self.cross_entropy(outputs, labels)
        dice = self.mean_correction * torch.mean(self.dice(outputs, labels, input_shape))
        return self.wc * ce + self.wd * (1.0 - dice)


class Scope(nn.Module):
    """A named region of the wafer program: `scope(x)` enters it, `scope.exit(x)`
    leaves it; both are the identity here.

    Args:
        scope_name: the region's name.

    Differences from the real system:
        Scopes have no effect.
    """

    def __init__(self, scope_name):
        super().__init__()
        self._scope_name = scope_name

    def forward(self, input):
        return CF.enter_scope(input, self._scope_name)

    def exit(self, input):
        return CF.exit_scope(input, self._scope_name)
