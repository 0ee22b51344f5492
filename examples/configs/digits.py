"""A digit classifier and its data processor for the `trainer:` YAML `digits.yaml`.

`DigitsClassifier` is a fully connected network on 1x28x28 images whose forward takes
the loader's batch `(images, labels)` and returns the scalar cross-entropy loss, the
contract of `cstorch.trainer.Trainer`. In eval mode it also updates its
`AccuracyMetric("eval/accuracy")`, which the `ModelEvalMetrics` callback logs at the
end of every validation.

`DigitsDataProcessor` serves scikit-learn's bundled `load_digits` (1797 8x8 grey-scale
digits, so nothing is downloaded) upsampled to 1x28x28 and normalised with the
training split's mean and standard deviation. The 80/20 train/val split is fixed and
stratified (it does not depend on `seed`); `seed` only orders the batches.

The YAML names both classes by file: `digits.py:DigitsClassifier`,
`digits.py:DigitsDataProcessor` (paths relative to the YAML's folder).
"""
from __future__ import annotations

import functools
from typing import Sequence

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import cerebras.pytorch as cstorch

IMAGE_SHAPE = (1, 28, 28)
NUM_CLASSES = 10
#: the fixed train/val split (independent of the data processor's `seed`)
SPLIT_SEED = 0
VAL_FRACTION = 0.2


class DigitsClassifier(nn.Module):
    """Flatten -> [Linear -> ReLU -> Dropout] per entry of `hidden_sizes` -> Linear(10).

    `forward(batch)` takes `(images, labels)` (float [B, 1, 28, 28], int64 [B]) and
    returns the mean cross-entropy of the logits against the labels. When the module is
    in eval mode (`not self.training`) it also updates `self.accuracy`.
    """

    def __init__(self, hidden_sizes: Sequence[int] = (128,), dropout: float = 0.0):
        super().__init__()
        if isinstance(hidden_sizes, int):
            hidden_sizes = [hidden_sizes]
        hidden_sizes = list(hidden_sizes)
        if not all(isinstance(h, int) and h > 0 for h in hidden_sizes):
            raise ValueError(f"DigitsClassifier: hidden_sizes must be a list of positive ints, got {hidden_sizes!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"DigitsClassifier: dropout must be in [0, 1), got {dropout!r}")
        layers: list[nn.Module] = [nn.Flatten()]
        width = IMAGE_SHAPE[0] * IMAGE_SHAPE[1] * IMAGE_SHAPE[2]
        for h in hidden_sizes:
            layers += [nn.Linear(width, h), nn.ReLU()]
            if dropout > 0:
                layers.append(nn.Dropout(dropout))
            width = h
        layers.append(nn.Linear(width, NUM_CLASSES))
        self.net = nn.Sequential(*layers)
        self.accuracy = cstorch.metrics.AccuracyMetric("eval/accuracy")

    def logits(self, images: torch.Tensor) -> torch.Tensor:
        """Class scores [B, 10] for images [B, 1, 28, 28]."""
        return self.net(images)

    def forward(self, batch) -> torch.Tensor:
        images, labels = batch
        logits = self.logits(images)
        loss = F.cross_entropy(logits, labels)
        if not self.training:
            self.accuracy(labels=labels, predictions=logits.argmax(-1))
        return loss


@functools.lru_cache(maxsize=1)
def load_digit_splits() -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """{"train": (images, labels), "val": (images, labels)}: float32 [N, 1, 28, 28]
    images normalised with the training split's statistics and int64 labels, from a
    fixed stratified 80/20 split. Cached: callers must not modify the tensors."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    images = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0  # [N, 1, 8, 8] in [0, 1]
    images = F.interpolate(images, size=IMAGE_SHAPE[1:], mode="bilinear", align_corners=False)
    labels = torch.tensor(digits.target, dtype=torch.int64)
    train_idx, val_idx = train_test_split(
        np.arange(len(labels)), test_size=VAL_FRACTION, random_state=SPLIT_SEED, stratify=digits.target
    )
    train_x = images[train_idx]
    mean, std = train_x.mean(), train_x.std()
    return {
        "train": ((train_x - mean) / std, labels[train_idx]),
        "val": ((images[val_idx] - mean) / std, labels[val_idx]),
    }


class DigitsDataProcessor:
    """Batches `(images [B, 1, 28, 28] float32, labels [B] int64)` of one split.

    Args:
        batch_size: samples per batch; the partial last batch is dropped (fixed shapes).
        split: "train" (1437 samples) or "val" (360 samples).
        shuffle: reshuffle every pass, from a `torch.Generator` seeded with `seed`, so
            two loaders built with the same arguments yield the same batches in order.
        seed: the shuffling seed.
        drop_last: must stay True (every batch of a compiled step has one shape).
    """

    def __init__(self, batch_size: int, split: str = "train", shuffle: bool = True, seed: int = 0,
                 drop_last: bool = True):
        if not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"DigitsDataProcessor: batch_size must be a positive int, got {batch_size!r}")
        if split not in ("train", "val"):
            raise ValueError(f"DigitsDataProcessor: split must be 'train' or 'val', got {split!r}")
        if not drop_last:
            raise ValueError("DigitsDataProcessor: drop_last must be True (a compiled step needs every batch to "
                             "have the same shape); remove `drop_last: false` from the dataloader config")
        self.batch_size = batch_size
        self.split = split
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        self.drop_last = True
        images, _ = load_digit_splits()[split]
        if len(images) < batch_size:
            raise ValueError(f"DigitsDataProcessor: batch_size {batch_size} is larger than the {split!r} split "
                             f"({len(images)} samples); use a smaller batch_size")

    def create_dataloader(self) -> torch.utils.data.DataLoader:
        images, labels = load_digit_splits()[self.split]
        dataset = torch.utils.data.TensorDataset(images, labels)
        generator = torch.Generator().manual_seed(self.seed) if self.shuffle else None
        return torch.utils.data.DataLoader(dataset, batch_size=self.batch_size, shuffle=self.shuffle,
                                           drop_last=True, generator=generator)
