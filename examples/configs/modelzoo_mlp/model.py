"""A Model Zoo 2.x style model: an MLP digit classifier whose constructor takes its
`ModelConfig` subclass, `MLPClassifierConfig`, built by the trainer as
`MLPClassifier(MLPClassifierConfig(**model_section))`.

The YAML names it `name: mlp_digits`, the config's `Literal`: no registration and no
file path is needed, because the trainer reads the Python files next to the YAML's
`configs/` folder for the config class that declares that name (the class whose
constructor takes it is the model).

`forward((images, labels))` returns the mean cross-entropy; in eval mode it also
updates the `eval/accuracy` metric that the `ModelEvalMetrics` callback logs.
"""
from __future__ import annotations

from typing import List, Literal, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from annotated_types import Ge, Gt, Lt
from typing_extensions import Annotated

import cerebras.pytorch as cstorch
from cerebras.modelzoo.config import ModelConfig


class MLPClassifierConfig(ModelConfig):
    name: Literal["mlp_digits"]
    """Name of the model."""

    input_size: Annotated[int, Gt(0)] = 64
    """Features per sample (an 8x8 image, flattened)."""

    num_classes: Annotated[int, Gt(1)] = 10
    """Number of classes."""

    hidden_sizes: Optional[List[Annotated[int, Gt(0)]]] = None
    """Width of each hidden layer; takes precedence over `depth` and `hidden_size`."""

    depth: Optional[Annotated[int, Ge(0)]] = None
    """Number of hidden layers, used with `hidden_size` when `hidden_sizes` is not set."""

    hidden_size: Optional[Annotated[int, Gt(0)]] = None
    """Width of every hidden layer, used with `depth` when `hidden_sizes` is not set."""

    dropout: Annotated[float, Ge(0), Lt(1)] = 0.0
    """Dropout probability after each hidden layer."""

    def post_init(self, context):
        if self.hidden_sizes is None:
            if self.depth is None or self.hidden_size is None:
                raise ValueError("give hidden_sizes, or depth and hidden_size")
            self.hidden_sizes = [self.hidden_size] * self.depth
        self.depth = len(self.hidden_sizes)


class MLPClassifier(nn.Module):
    """Linear -> ReLU -> Dropout per hidden layer, then Linear(num_classes)."""

    def __init__(self, config: MLPClassifierConfig):
        super().__init__()
        layers: list[nn.Module] = []
        width = config.input_size
        for size in config.hidden_sizes:
            layers += [nn.Linear(width, size), nn.ReLU(), nn.Dropout(config.dropout)]
            width = size
        layers.append(nn.Linear(width, config.num_classes))
        self.net = nn.Sequential(*layers)
        self.accuracy = cstorch.metrics.AccuracyMetric("eval/accuracy")

    def forward(self, batch) -> torch.Tensor:
        images, labels = batch
        logits = self.net(torch.flatten(images, 1))
        if not self.training:
            self.accuracy(labels=labels, predictions=logits.argmax(-1))
        return F.cross_entropy(logits, labels)
