"""What a train or validation step handles: the model's return value as a dict of
outputs, its loss, and a batch's size and micro-batches (`TrainingLoop.grad_accum_steps`,
or on CSX `cstorch.backends.csx.performance.micro_batch_size`)."""
from __future__ import annotations

import warnings
from typing import Optional

import torch
import torch.utils._pytree as pytree

import cstorch


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


def micro_batch_count(size: Optional[int], grad_accum_steps: int, backend) -> int:
    """How many micro-batches a train step splits a batch of `size` samples into.

    On CSX an int `cstorch.backends.csx.performance.micro_batch_size` M is the
    micro-batch size per device (per CSX): each device's `size / num_csx` samples are
    split into micro-batches of M, so the step runs `size / (num_csx * M)` micro-batches
    (gradients summed, loss averaged: the full batch's step), and `grad_accum_steps` is
    ignored, as on the real system. Otherwise (CPU/GPU, or "auto"/"explore"/None) the
    step splits the batch into `grad_accum_steps` micro-batches."""
    mbs = cstorch.backends.csx.performance.micro_batch_size
    if backend is None or not backend.is_csx or isinstance(mbs, str) or mbs is None:
        n, why = grad_accum_steps, f"grad_accum_steps={grad_accum_steps} splits every batch into {grad_accum_steps} " \
                                   f"micro-batches"
    else:
        if grad_accum_steps > 1:
            warnings.warn(f"grad_accum_steps={grad_accum_steps} is ignored on CSX, where "
                          f"cstorch.backends.csx.performance.micro_batch_size={mbs} sets the micro-batches.")
        devices = backend.cluster_config.num_csx if backend.cluster_config is not None else 1
        per_device = size // devices if size is not None and size % devices == 0 else None
        if per_device is None or per_device % mbs:
            raise ValueError(
                f"cstorch.backends.csx.performance.micro_batch_size={mbs} must divide the batch of each of the "
                f"{devices} device(s), but the train dataloader's batch "
                + (f"has {size} samples" if size is not None else "has no common batch dimension")
                + f": use a batch size that is a multiple of {devices * mbs}, or another micro_batch_size "
                  f'("auto" keeps the whole batch).')
        return per_device // mbs
    if n > 1 and (size is None or size % n):
        raise ValueError(
            f"{why}, but the train dataloader's batch "
            + (f"has {size} samples" if size is not None else "has no common batch dimension")
            + f": make the batch size a multiple of {n}, or change grad_accum_steps.")
    return n


def micro_batches(batch, n: int) -> list:
    """`batch` split on dim 0 into `n` equal parts (non-tensor leaves are shared)."""
    leaves, spec = pytree.tree_flatten(batch)
    size = batch_size_of(batch)
    m = size // n
    return [pytree.tree_unflatten([x[i * m:(i + 1) * m] if isinstance(x, torch.Tensor) and x.dim() > 0 else x
                                   for x in leaves], spec) for i in range(n)]
