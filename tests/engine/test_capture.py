"""capture(): one pure core-ATen graph with state lifted as inputs and only the
changed state returned."""
import jax
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.stateless import _reparametrize_module

import cstorch_jax
from cstorch_jax.dtypes import to_jax, to_torch
from cstorch_jax.lowering import to_jax_function


def _bn_step(model, names):
    def step(state, batch):
        with _reparametrize_module(model, dict(zip(names, state))):
            out = model(batch[0]).sum()
            out.backward()
        return [out]

    return step


def test_only_changed_state_is_returned_and_graph_is_pure():
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    names = [n for n, _ in model.named_parameters()] + [n for n, _ in model.named_buffers()]
    state = [t for _, t in model.named_parameters()] + [t for _, t in model.named_buffers()]
    cap = cstorch_jax.capture(_bn_step(model, names), state, [torch.randn(5, 3)])
    changed = {names[i] for i in cap.mutated}
    assert changed == {"1.running_mean", "1.running_var", "1.num_batches_tracked"}
    for node in cap.module.graph.nodes:
        schema = getattr(node.target, "_schema", None)
        assert schema is None or not schema.is_mutable, node.target


def test_captured_graph_runs_like_eager():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    names = [n for n, _ in model.named_parameters()] + [n for n, _ in model.named_buffers()]
    state = [t for _, t in model.named_parameters()] + [t for _, t in model.named_buffers()]
    x = torch.randn(5, 3)
    cap = cstorch_jax.capture(_bn_step(model, names), state, [x])
    fn = to_jax_function(cap.module)
    key = jax.random.key_data(jax.random.key(0))
    outs = fn(key, *[to_jax(t) for t in state], to_jax(x))
    ref = model(x).sum()
    new_running_mean = outs[[names[i] for i in cap.mutated].index("1.running_mean")]
    torch.testing.assert_close(to_torch(outs[-1], torch.float32), ref.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(to_torch(new_running_mean, torch.float32), model[1].running_mean, rtol=1e-5, atol=1e-6)


def test_profiler_ranges_of_torch_optim_are_dropped():
    p = torch.randn(3, requires_grad=True)
    opt = torch.optim.SGD([p], lr=0.1)

    def step(state, batch):
        (q,) = state
        opt.param_groups[0]["params"] = [q]
        (q * batch[0]).sum().backward()
        opt.step()
        return []

    cap = cstorch_jax.capture(step, [p], [torch.randn(3)])
    assert not any("profiler" in op for op in cap.ops())
    assert cap.mutated == (0,)


def test_sdpa_gradients_are_right():
    """SDPA is captured in its MATH form: the CPU flash kernel's core-ATen decomposition
    feeds attention probabilities where its backward expects logsumexp."""

    def f(q, k, v):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out.square().sum().backward()
        return q.grad, k.grad, v.grad

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 2, 8, 4, generator=g, requires_grad=True) for _ in range(3))
    got = cstorch_jax.jit(f)(q, k, v)
    q2, k2, v2 = (t.detach().clone().requires_grad_() for t in (q, k, v))
    F.scaled_dot_product_attention(q2, k2, v2, is_causal=True).square().sum().backward()
    for a, b in zip(got, (q2.grad, k2.grad, v2.grad)):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_determinant_gradients_of_non_contiguous_inputs():
    """Regression: eager det/slogdet/logdet factor A or A^T depending on strides and the
    recorded backward depends on that choice; the capture must not switch it."""

    def f(x):
        y = torch.linalg.det(x.mT) + torch.logdet(x.mT @ x + 3 * torch.eye(3)) + torch.linalg.slogdet(x.mT)[1]
        y.sum().backward()
        return y, x.grad

    x = torch.randn(2, 3, 3, requires_grad=True)
    got = cstorch_jax.jit(f)(x)
    want = f(x.detach().clone().requires_grad_())
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
