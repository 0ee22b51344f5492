"""The cstorch training step the benchmarks time: one `@cstorch.trace` function that
computes `loss(compiled, *batch)`, runs `loss.backward()`, steps the optimizer, zeroes
the gradients and returns the loss, as the documentation's training loop writes it."""
from __future__ import annotations

from typing import Callable

import cstorch


def cstorch_train_step(compiled, optimizer, loss: Callable):
    """`@cstorch.trace` step(*batch) -> loss, for a model from `cstorch.compile` and a
    cstorch optimizer over its parameters; `loss(compiled, *batch)` is the scalar loss."""

    @cstorch.trace
    def train_step(*batch):
        value = loss(compiled, *batch)
        value.backward()
        optimizer.step()
        optimizer.zero_grad()
        return value

    return train_step
