"""Dropout on CSX draws from the RNG key input: same key -> same mask, every step a new
mask, keep rate and scaling statistically right."""
import math

import torch
import torch.nn as nn

import cstorch
import cstorch_jax
from cstorch._backend import _reset_backend

P = 0.3
N = 20000


def _dropout_outputs(seed, steps=3):
    _reset_backend()
    torch.manual_seed(seed)
    b = cstorch.backend("CSX")
    compiled = cstorch.compile(nn.Dropout(P), b)
    step = cstorch.trace(lambda x: compiled(x))
    loader = cstorch.utils.data.DataLoader(lambda: [torch.ones(N)] * steps)
    outs = [step(x) for x in cstorch.utils.data.DataExecutor(loader, num_steps=steps)]
    return [o.materialize() for o in outs]


def test_keep_rate_and_scale():
    outs = _dropout_outputs(seed=0)
    for out in outs:
        kept = out != 0
        assert torch.allclose(out[kept], torch.full_like(out[kept], 1 / (1 - P)))
        rate = kept.float().mean().item()
        sigma = math.sqrt(P * (1 - P) / N)
        assert abs(rate - (1 - P)) < 5 * sigma, rate


def test_every_step_draws_a_new_mask():
    a, b, c = _dropout_outputs(seed=0)
    assert not torch.equal(a, b) and not torch.equal(b, c) and not torch.equal(a, c)
    # independent masks agree on about P^2 + (1-P)^2 of the positions, not all of them
    agree = ((a != 0) == (b != 0)).float().mean().item()
    assert abs(agree - (P * P + (1 - P) ** 2)) < 0.02


def test_same_seed_same_masks_other_seed_other_masks():
    first = _dropout_outputs(seed=7)
    again = _dropout_outputs(seed=7)
    other = _dropout_outputs(seed=8)
    for x, y in zip(first, again):
        assert torch.equal(x, y)
    assert not torch.equal(first[0], other[0])


def test_two_dropout_sites_in_one_graph_are_independent():
    def f(x):
        return torch.nn.functional.dropout(x, 0.5), torch.nn.functional.dropout(x, 0.5)

    a, b = cstorch_jax.jit(f)(torch.ones(N))
    assert not torch.equal(a, b)


def test_jit_random_function_same_seed_reproduces():
    f = cstorch_jax.jit(lambda x: torch.nn.functional.dropout(x, 0.5), seed=3)
    g = cstorch_jax.jit(lambda x: torch.nn.functional.dropout(x, 0.5), seed=3)
    x = torch.ones(1000)
    first_f, first_g = f(x), g(x)
    assert torch.equal(first_f, first_g)
    assert not torch.equal(first_f, f(x))  # the key advances on every call
