"""Tensors from outside a CSX step (a loss's class weights, a tensor in a closure, a
`torch.tensor([...])` written in the step) are compiled in as constants with the values
they had when the step was captured, as on the real system; modifying one in place
afterwards is a StaticGraphError before the step that would read a stale copy, and a
tensor that requires grad is refused (it would silently never be trained)."""
import pytest
import torch
import torch.nn.functional as F

import cstorch
import cstorch_jax
from cstorch_jax import CaptureError, StaticGraphError


def _run(backend_type, class_weight, batches, edit_after=None):
    torch.manual_seed(0)
    model = torch.nn.Linear(6, 3)
    backend = cstorch.backend(backend_type)
    compiled = cstorch.compile(model, backend)
    opt = cstorch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = torch.nn.CrossEntropyLoss(weight=class_weight)  # a plain tensor attribute, outside the model
    losses = []

    @cstorch.trace
    def step(x, y):
        loss = loss_fn(compiled(x), y) + 0.01 * torch.tensor([1.0, -2.0, 3.0]).pow(2).sum()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    loader = cstorch.utils.data.DataLoader(lambda: batches)
    for i, (x, y) in enumerate(cstorch.utils.data.DataExecutor(loader, num_steps=len(batches))):
        if edit_after is not None and i == edit_after:
            class_weight.mul_(2.0)
        losses.append(float(step(x, y)))
    return losses, {k: v.clone() for k, v in model.state_dict().items()}


def _batches():
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(8, 6, generator=g), torch.randint(0, 3, (8,), generator=g)) for _ in range(4)]


def test_outside_tensors_are_constants_equal_to_eager():
    from cstorch._backend import _reset_backend

    cpu = _run("CPU", torch.tensor([1.0, 2.0, 0.5]), _batches())
    _reset_backend()
    csx = _run("CSX", torch.tensor([1.0, 2.0, 0.5]), _batches())
    torch.testing.assert_close(torch.tensor(csx[0]), torch.tensor(cpu[0]), rtol=1e-6, atol=1e-6)
    for k in cpu[1]:
        torch.testing.assert_close(csx[1][k], cpu[1][k], rtol=1e-5, atol=1e-6)


def test_modifying_a_constant_after_the_capture_is_a_static_graph_error():
    with pytest.raises(StaticGraphError, match=r"float32\[3\].*modified in place"):
        _run("CSX", torch.tensor([1.0, 2.0, 0.5]), _batches(), edit_after=2)


def test_an_outside_tensor_that_requires_grad_is_refused():
    w = torch.nn.Parameter(torch.ones(3))
    with pytest.raises(CaptureError, match="requires grad.*never trained"):
        cstorch_jax.jit(lambda x: x * w)(torch.randn(3))


def test_signature_sees_a_constant_s_value():
    def fn(value):
        c = torch.tensor(value)
        return lambda state, batch: [batch[0] * c]

    x = [torch.randn(3)]
    assert (cstorch_jax.trace_signature(fn([1.0, 2.0, 3.0]), [], x)[0]
            != cstorch_jax.trace_signature(fn([1.0, 2.0, 4.0]), [], x)[0])
