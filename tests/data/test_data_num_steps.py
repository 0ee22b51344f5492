"""`compute_num_steps`: every rule and every error, as a table."""
import pytest
import torch

from cstorch.utils.data import DataLoader, compute_num_steps


class Sized:
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __iter__(self):
        return iter(range(self.n))


class Endless:
    def __iter__(self):
        while True:
            yield torch.ones(1)


SIZED = Sized(10)


@pytest.mark.parametrize("dl, kwargs, expected", [
    (SIZED, dict(num_steps=7), 7),
    (SIZED, dict(num_steps=25), 25),  # num_steps may run past one epoch
    (SIZED, dict(num_epochs=3), 30),
    (SIZED, dict(num_epochs=3, steps_per_epoch=4), 12),
    (SIZED, dict(num_epochs=2, grad_accum_steps=3), 6),  # 10 // 3 = 3 steps per epoch
    (SIZED, dict(num_epochs=2, steps_per_epoch=8, grad_accum_steps=4), 4),
    (SIZED, dict(max_steps=12), 12),
    (SIZED, dict(max_steps=12, initial_step=5), 7),
    (SIZED, dict(max_steps=100, num_epochs=2, initial_step=90), 10),
    (SIZED, dict(max_steps=100, num_epochs=2, initial_step=50), 20),
    (SIZED, dict(max_steps=20, num_steps=30), 20),
    (SIZED, dict(max_steps=20, num_steps=5, initial_step=3), 5),
    (SIZED, dict(num_steps=5, steps_per_epoch=10), 5),
    (Endless(), dict(num_steps=4), 4),
    (Endless(), dict(max_steps=9, initial_step=2), 7),
    (Endless(), dict(num_steps=4, grad_accum_steps=8), 4),  # unknown length: no per-epoch check
    (DataLoader(lambda: [torch.ones(2)] * 6), dict(num_epochs=2), 12),  # a cstorch DataLoader delegates len()
])
def test_num_steps(dl, kwargs, expected):
    assert compute_num_steps(dl, **kwargs) == expected


@pytest.mark.parametrize("dl, kwargs, exc, msg", [
    (SIZED, dict(num_epochs=1, num_steps=1), ValueError, "Only one of `num_epochs` or `num_steps` can be specified"),
    (SIZED, dict(), ValueError, "One of num_epochs, num_steps, or max_steps must be provided"),
    (SIZED, dict(steps_per_epoch=5), ValueError, "One of num_epochs, num_steps, or max_steps must be provided"),
    (Endless(), dict(num_epochs=2), ValueError, "num_epochs for datasets with unknown length is not allowed"),
    (SIZED, dict(max_steps=5, initial_step=5), RuntimeError, "Initial global step 5 already exceeds max step 5"),
    (SIZED, dict(max_steps=5, initial_step=8), RuntimeError, "Initial global step 8 already exceeds max step 5"),
    (SIZED, dict(num_epochs=1, steps_per_epoch=11), ValueError,
     "requested steps per epoch of 11 exceeds total steps in an epoch, which is 10"),
    (SIZED, dict(num_epochs=1, grad_accum_steps=11), ValueError,
     "Gradient accumulation steps of 11 is greater than batches per epoch of 10"),
    (SIZED, dict(num_epochs=1, steps_per_epoch=4, grad_accum_steps=5), ValueError,
     "Gradient accumulation steps of 5 is greater than batches per epoch of 4"),
    (Sized(0), dict(num_steps=3), AssertionError, "Dataloader does not generate any batches"),
    (SIZED, dict(num_steps=0), ValueError, "`num_steps` must be greater than zero"),
    (SIZED, dict(max_steps=0), ValueError, "`max_steps` must be greater than zero"),
    (SIZED, dict(num_epochs=0), ValueError, "`num_epochs` must be greater than zero"),
    (SIZED, dict(num_epochs=1, steps_per_epoch=0), ValueError, "`steps_per_epoch` must be greater than zero"),
    (SIZED, dict(num_steps=1, grad_accum_steps=0), ValueError, "`grad_accum_steps` must be greater than zero"),
    (SIZED, dict(num_steps=1, grad_accum_steps=None), ValueError, "`grad_accum_steps` cannot be None"),
    (SIZED, dict(num_steps=1, initial_step=None), ValueError, "`initial_step` cannot be None"),
    (SIZED, dict(num_steps=-3), ValueError, "`num_steps` cannot be negative, but got -3"),
    (SIZED, dict(max_steps=10, initial_step=-1), ValueError, "`initial_step` cannot be negative, but got -1"),
    (SIZED, dict(num_steps=2.0), ValueError, "`num_steps` must be an integer, but got <class 'float'>"),
    (SIZED, dict(num_epochs="2"), ValueError, "`num_epochs` must be an integer, but got <class 'str'>"),
])
def test_num_steps_errors(dl, kwargs, exc, msg):
    with pytest.raises(exc, match=msg.replace("(", r"\(").replace(")", r"\)")):
        compute_num_steps(dl, **kwargs)


def test_initial_step_zero_is_allowed():
    assert compute_num_steps(SIZED, initial_step=0, max_steps=3) == 3
