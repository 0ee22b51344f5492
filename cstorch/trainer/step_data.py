"""What a train or validation step handles: the model's return value as a dict of
outputs, its loss, and a batch's size and micro-batches (`TrainingLoop.grad_accum_steps`)."""
from __future__ import annotations

from typing import Optional

import torch
import torch.utils._pytree as pytree


def as_outputs(out) -> dict:
    """The model's return value as a dict of outputs (with "loss" when there is one)."""
    if isinstance(out, torch.Tensor):
        return {"loss": out} if out.dim() == 0 else {"output": out}
    if isinstance(out, (tuple, list)) and len(out) == 2 and isinstance(out[0], torch.Tensor):
        return {"loss": out[0], "output": out[1]}
    if isinstance(out, dict):
        return dict(out)
    raise TypeError(f"The model's forward returned {type(out).__name__}; the Trainer expects a loss tensor, a "
                    f"(loss, output) pair or a dict with a 'loss' key.")


def loss_of(outputs: dict) -> torch.Tensor:
    loss = outputs.get("loss")
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
        raise ValueError(
            f"Training needs the model's forward to return the loss: a scalar tensor, a (loss, output) pair or a "
            f"dict with a scalar 'loss'; got outputs {sorted(outputs)} with loss {type(loss).__name__}"
            + (f" of shape {tuple(loss.shape)}" if isinstance(loss, torch.Tensor) else ""))
    return loss


def batch_size_of(batch) -> Optional[int]:
    sizes = {t.shape[0] for t in pytree.tree_leaves(batch) if isinstance(t, torch.Tensor) and t.dim() > 0}
    return sizes.pop() if len(sizes) == 1 else None


def micro_batches(batch, n: int) -> list:
    """`batch` split on dim 0 into `n` equal parts (non-tensor leaves are shared)."""
    leaves, spec = pytree.tree_flatten(batch)
    size = batch_size_of(batch)
    m = size // n
    return [pytree.tree_unflatten([x[i * m:(i + 1) * m] if isinstance(x, torch.Tensor) and x.dim() > 0 else x
                                   for x in leaves], spec) for i in range(n)]
