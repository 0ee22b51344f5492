"""cstorch_jax.jit: pure torch functions through the engine, one executable per signature."""
import re

import pytest
import torch
import torch.nn.functional as F

import cstorch_jax
from train_script import assert_close_rel


def test_pytree_inputs_and_outputs():
    def f(inputs, scale=2.0):
        a, b = inputs["a"], inputs["b"]
        return {"sum": (a + b) * scale, "parts": [a.relu(), b.exp()], "n": 3}

    args = ({"a": torch.randn(3, 2), "b": torch.randn(3, 2)},)
    got, want = cstorch_jax.jit(f)(*args), f(*args)
    assert got["n"] == 3
    assert_close_rel(got["sum"], want["sum"])
    for g, w in zip(got["parts"], want["parts"]):
        assert_close_rel(g, w)


def test_one_executable_per_signature():
    f = cstorch_jax.jit(lambda x, k: x * k)
    f(torch.ones(2), 2)
    f(torch.zeros(2), 2)
    assert f.num_executables == 1
    assert torch.equal(f(torch.ones(2), 3), torch.full((2,), 3.0))  # a new constant: a new executable
    f(torch.ones(4), 3)
    assert f.num_executables == 3


def test_backward_through_the_function():
    def f(x, w, t):
        loss = F.cross_entropy(x @ w, t)
        loss.backward()
        return loss, w.grad

    x, t = torch.randn(8, 5), torch.randint(0, 3, (8,))
    w = torch.randn(5, 3, requires_grad=True)
    loss, grad = cstorch_jax.jit(f)(x, w, t)
    w2 = w.detach().clone().requires_grad_()
    ref = F.cross_entropy(x @ w2, t)
    ref.backward()
    assert_close_rel(loss, ref.detach())
    assert_close_rel(grad, w2.grad)
    assert w.grad is None  # the caller's tensor is untouched


def test_none_outputs_keep_their_places():
    """A None among the outputs (the .grad of an unused input) is not a tensor slot."""

    def f(x, unused):
        (x * 2).sum().backward()
        return x.grad, unused.grad, x + 1

    x, unused = torch.randn(3, requires_grad=True), torch.randn(2, requires_grad=True)
    grad_x, grad_unused, y = cstorch_jax.jit(f)(x, unused)
    assert grad_unused is None
    assert torch.equal(grad_x, torch.full((3,), 2.0))
    assert_close_rel(y, x.detach() + 1)


def test_int64_in_int64_out():
    out = cstorch_jax.jit(lambda i: i * 3 + 1)(torch.arange(5))
    assert out.dtype == torch.int64 and torch.equal(out, torch.arange(5) * 3 + 1)


def test_bfloat16_round_trip():
    x = torch.randn(4, dtype=torch.bfloat16)
    out = cstorch_jax.jit(lambda a: a * 2)(x)
    assert out.dtype == torch.bfloat16 and torch.equal(out, x * 2)


def test_graph_hash_changes_with_a_baked_constant():
    a = cstorch_jax.jit(lambda x: x * 0.5).executable(torch.ones(2)).graph_hash
    b = cstorch_jax.jit(lambda x: x * 0.25).executable(torch.ones(2)).graph_hash
    c = cstorch_jax.jit(lambda x: x * 0.5).executable(torch.ones(2)).graph_hash
    assert a != b and a == c


@pytest.mark.parametrize("value,dtype", [(2.75, torch.float32), (-1.5, torch.bfloat16), (0.3, torch.float16),
                                         (7, torch.int64), (-3, torch.int32), (True, torch.bool), (200, torch.uint8)])
def test_deferred_scalar_reads_match_torch_without_a_torch_op(value, dtype):
    """float/int/bool/item of a one-element deferred value give the torch tensor's
    numbers, read from the device array (no torch op runs: a dispatch mode sees none)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from cstorch_jax import DeferredTensor, to_jax

    class Count(TorchDispatchMode):
        ops = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Count.ops += 1
            return func(*args, **(kwargs or {}))

    want = torch.tensor([value], dtype=dtype)
    d = DeferredTensor(to_jax(want), dtype)
    with Count():
        got = (d.item(), float(d), int(d), bool(d))
    assert Count.ops == 0
    assert got == (want.item(), float(want), int(want), bool(want))
    assert type(got[0]) is type(want.item())
    assert torch.equal(d.materialize(), want)  # the tensor read afterwards is unchanged
    for read in (float, int, bool, lambda t: t.item()):  # more than one element: torch's own error
        with pytest.raises(Exception) as want_error:
            read(torch.tensor([1.0, 2.0]))
        with pytest.raises(want_error.type, match=re.escape(str(want_error.value))):
            read(DeferredTensor(to_jax(torch.tensor([1.0, 2.0])), torch.float32))


def test_deferred_tensor_host_reads():
    from cstorch_jax import DeferredTensor, to_jax

    d = DeferredTensor(to_jax(torch.tensor(2.5)), torch.float32)
    assert d.shape == () and d.dtype == torch.float32
    assert d.item() == 2.5 and float(d) == 2.5 and int(d) == 2 and bool(d)
    assert torch.equal(d + 1, torch.tensor(3.5))  # any torch op materialises it
    assert "2.5" in repr(d)
    i = DeferredTensor(to_jax(torch.tensor([1, 2], dtype=torch.int64)), torch.int64)
    assert i.tolist() == [1, 2] and i.materialize().dtype == torch.int64
