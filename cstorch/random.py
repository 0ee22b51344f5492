"""The random state of the active backend, for exact resume.

On CSX the compiled step draws its random numbers (dropout, `torch.rand`, ...) from
an XLA key carried from step to step; `get_rng_state()` returns that key (a uint32
tensor) as it stands for the next step. On CPU/GPU the eager step draws from torch's
generator and the state is `torch.get_rng_state()`. Save it in a checkpoint and give
it back to `set_rng_state` before resuming, and the resumed run draws the same
numbers as an uninterrupted one.
"""
from __future__ import annotations

import torch

from . import _backend


def _csx_state():
    b = _backend.backend()
    return b.run.device_state if b is not None and b.is_csx else None


def get_rng_state() -> torch.Tensor:
    """The RNG state of the backend: torch's generator state on CPU/GPU (or without a
    backend), the XLA key of the compiled steps on CSX. cstorch only.

    Differences from the real system:
        The real system seeds its RNG from `torch.initial_seed()` and cannot save it;
        here `get_rng_state`, `set_rng_state` and `manual_seed` save, restore and seed it.
    """
    ds = _csx_state()
    if ds is None:
        return torch.get_rng_state()
    return torch.from_numpy(ds.rng_state())


def set_rng_state(state: torch.Tensor) -> None:
    """Restore the RNG state that `get_rng_state()` returned, so that the following steps
    draw the numbers they drew after it was taken. cstorch only.

    Args:
        state: a state of the same backend type: torch's generator state (uint8) on
            CPU/GPU, the XLA key on CSX (ValueError otherwise).
    """
    ds = _csx_state()
    if ds is None:
        if state.dtype != torch.uint8:
            raise ValueError(f"A CPU/GPU backend's RNG state is torch's generator state (a uint8 tensor), got "
                             f"{state.dtype}; this state was probably saved by a CSX run.")
        torch.set_rng_state(state.clone())  # a real tensor (a checkpoint's tensors load lazily)
        return
    if state.dtype == torch.uint8:
        raise ValueError("This RNG state is torch's generator state (uint8), saved by a CPU/GPU backend run; a CSX "
                         "run needs the XLA key that cstorch.get_rng_state() returns on CSX.")
    ds.set_rng_state(torch.as_tensor(state).numpy())


def manual_seed(seed: int) -> None:
    """Seed torch's generator and, on CSX, the XLA key of the compiled steps.

    Args:
        seed: the seed (on CSX the XLA key is seeded with `seed % 2**32`).
    """
    torch.manual_seed(seed)
    ds = _csx_state()
    if ds is not None:
        ds.reseed(seed % (2**32))
