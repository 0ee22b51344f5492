"""A small classifier and seeded loaders for the Trainer tests."""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

import cstorch

FEATURES, CLASSES = 6, 3


class Net(nn.Module):
    """forward(batch=(x, y)) -> cross-entropy loss; an accuracy metric updated in eval mode."""

    def __init__(self, dropout: float = 0.0):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(FEATURES, 16), nn.ReLU(), nn.Dropout(dropout), nn.Linear(16, CLASSES))
        self.accuracy = cstorch.metrics.AccuracyMetric("eval/accuracy")

    def forward(self, batch):
        x, y = batch
        logits = self.body(x)
        if not self.training:
            self.accuracy(labels=y, predictions=logits.argmax(-1))
        return F.cross_entropy(logits, y)


def data(n: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, FEATURES, generator=g), torch.randint(0, CLASSES, (n,), generator=g)


def loader(n: int = 64, seed: int = 0, batch_size: int = 8) -> cstorch.utils.data.DataLoader:
    """A shuffled, seeded loader over `n` generated samples (deterministic order)."""
    x, y = data(n, seed)

    def input_fn():
        return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=batch_size,
                                           shuffle=True, drop_last=True,
                                           generator=torch.Generator().manual_seed(seed))

    return cstorch.utils.data.DataLoader(input_fn)


def sgd(lr: float = 0.1):
    return lambda model: cstorch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)


def cosine(total: int):
    return lambda opt: cstorch.optim.lr_scheduler.CosineDecayLR(opt, initial_learning_rate=0.1,
                                                                end_learning_rate=0.01, total_iters=total)
