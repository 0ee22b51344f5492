"""A Model Zoo 2.x style data processor: scikit-learn's bundled 8x8 digits (nothing is
downloaded) in batches `(images [B, 1, 8, 8] float32, labels [B] int64)`, configured by
its `DataConfig` subclass and built as
`DigitsDataProcessor(DigitsDataProcessorConfig(**dataloader_section))`.

The 80/20 train/val split is fixed and stratified; `seed` orders the shuffled batches
(a seeded `torch.Generator`, so a resumed run sees the batches of the uninterrupted
one). The config's `post_init` checks the model's config (`context["model"]`) against
the data: 64 input features, at least 10 classes.
"""
from __future__ import annotations

import functools
from typing import Literal

import numpy as np
import torch
from annotated_types import Gt
from pydantic import Field
from typing_extensions import Annotated

from cerebras.modelzoo.common.input_utils import get_streaming_batch_size
from cerebras.modelzoo.config import DataConfig

NUM_FEATURES, NUM_CLASSES = 64, 10


class DigitsDataProcessorConfig(DataConfig):
    data_processor: Literal["DigitsDataProcessor"]
    """Name of the data processor."""

    batch_size: Annotated[int, Gt(0)]
    """Samples per batch (the effective batch size)."""

    split: Literal["train", "val"] = "train"
    """Which split: train (1437 samples) or val (360 samples)."""

    shuffle: bool = True
    """Reshuffle the split every pass."""

    seed: int = 0
    """Seed of the shuffling."""

    drop_last: Literal[True] = Field(True, validation_alias="drop_last_batch")
    """Drop the partial last batch (must stay true: a compiled step has one batch shape)."""

    def post_init(self, context):
        model = (context.get("model") or {}).get("config")
        if model is not None:
            if getattr(model, "input_size", NUM_FEATURES) != NUM_FEATURES:
                raise ValueError(f"the digits have {NUM_FEATURES} features; set the model's input_size to "
                                 f"{NUM_FEATURES}, not {model.input_size}")
            if getattr(model, "num_classes", NUM_CLASSES) < NUM_CLASSES:
                raise ValueError(f"the digits have {NUM_CLASSES} classes; the model's num_classes "
                                 f"({model.num_classes}) is too small")


@functools.lru_cache(maxsize=1)
def digit_splits() -> dict:
    """{"train" | "val": (images float32 [N, 1, 8, 8] in [0, 1], labels int64 [N])}."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    images = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
    labels = torch.tensor(digits.target, dtype=torch.int64)
    train, val = train_test_split(np.arange(len(labels)), test_size=0.2, random_state=0, stratify=digits.target)
    return {"train": (images[train], labels[train]), "val": (images[val], labels[val])}


class DigitsDataProcessor:
    def __init__(self, config: DigitsDataProcessorConfig):
        self.config = config
        self.batch_size = get_streaming_batch_size(config.batch_size)

    def create_dataloader(self) -> torch.utils.data.DataLoader:
        images, labels = digit_splits()[self.config.split]
        generator = torch.Generator().manual_seed(self.config.seed) if self.config.shuffle else None
        return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(images, labels),
                                           batch_size=self.batch_size, shuffle=self.config.shuffle,
                                           drop_last=self.config.drop_last, generator=generator)
