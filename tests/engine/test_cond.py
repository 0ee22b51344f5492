"""`torch.cond` in a captured step: one conditional node whose branches are subgraphs,
lowered to `jax.lax.cond`; values and gradients against eager torch, a training run against
the CPU backend, and what the capture must not break or miss."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import cstorch_jax
from cstorch_jax.capture import trace_step
from cstorch_jax.errors import CaptureError, MaterializationError
from train_script import assert_close_rel, train


def _gate(x):
    return torch.cond(x.sum() > 0, lambda x: x.sin() * 2, lambda x: x.cos() - 1, (x,))


def _eager_gate(x):
    return x.sin() * 2 if x.sum() > 0 else x.cos() - 1


def test_each_branch_runs_where_its_predicate_holds():
    x = torch.randn(3, 4)
    gate = cstorch_jax.jit(_gate)
    for v in (x.abs(), -x.abs()):  # one executable, either branch
        assert_close_rel(gate(v), _eager_gate(v), rel=1e-6)
    assert gate.num_executables == 1
    node = [n for n in gate.executable(x).captured.module.graph.nodes if n.op == "call_function"
            and n.target is torch.ops.higher_order.cond]
    assert len(node) == 1


@pytest.mark.parametrize("returns_tuple", [False, True])
def test_gradients_through_the_branch_taken(returns_tuple):
    """A branch that returns one tensor used to fail in torch's joint graph ("object of type
    'bool' has no len()"); nested operands (a dict) reach the branches as given."""
    torch.manual_seed(0)
    w0, b0, x = torch.randn(4, 4), torch.randn(4), torch.randn(2, 4)

    def wrap(t):
        return (t,) if returns_tuple else t

    def step(w, b, x):
        y = F.linear(x, w, b)
        z = torch.cond(y.sum() > 0, lambda ops: wrap(ops["y"].sin() * ops["s"]), lambda ops: wrap(ops["y"].cos()),
                       ({"y": y, "s": x[:, :1]},))
        z = z[0] if returns_tuple else z
        loss = z.square().sum()
        loss.backward()
        return loss, w.grad, b.grad

    compiled = cstorch_jax.jit(step)
    for sign in (1.0, -1.0):
        got = compiled(w0.clone().requires_grad_(), b0.clone().requires_grad_(), sign * x)
        w, b = w0.clone().requires_grad_(), b0.clone().requires_grad_()
        y = F.linear(sign * x, w, b)
        z = y.sin() * (sign * x)[:, :1] if y.sum() > 0 else y.cos()
        loss = z.square().sum()
        loss.backward()
        for g, want, what in zip(got, (loss, w.grad, b.grad), ("loss", "w.grad", "b.grad")):
            assert_close_rel(g, want, rel=1e-5, what=f"{what} (sign {sign})")


class _Gated(torch.nn.Module):
    """A layer that takes one of two paths by the sign of its input's mean."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.head = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8), torch.nn.Linear(8, 3)

    def forward(self, x):
        h = torch.cond(x.mean() > 0, lambda x: torch.relu(self.a(x)), lambda x: torch.tanh(self.b(x)), (x,))
        return self.head(h)


def test_a_model_with_a_conditional_trains_on_csx_as_on_cpu():
    torch.manual_seed(0)
    model = _Gated()
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(4, 8, generator=g) + (0.5 if i % 2 else -0.5), torch.randint(0, 3, (4,), generator=g))
               for i in range(4)]  # both branches taken
    csx_losses, csx_model, csx_opt, _ = train("CSX", model, batches, "adamw")
    cpu_losses, cpu_model, cpu_opt, _ = train("CPU", model, batches, "adamw")
    assert_close_rel(csx_losses, cpu_losses, rel=1e-5, what="losses")
    for name, want in cpu_model.items():
        assert_close_rel(csx_model[name], want, rel=1e-5, what=name)


def test_eager_torch_cond_still_works_after_a_capture():
    """torch.cond's own path compiles through Dynamo; a capture that went that way left
    Dynamo a cached decision that made later eager calls fail."""
    x = torch.randn(5)
    cstorch_jax.jit(_gate)(x)
    assert_close_rel(_gate(x), _eager_gate(x), rel=1e-6)


def test_a_change_inside_a_branch_changes_the_op_signature():
    """The compile cache checks a step by its op signature: a branch's ops must be in it."""
    def step_with(body):
        return lambda state, batch: [torch.cond(batch[0].sum() > 0, body, lambda x: x.cos(), (batch[0],))]

    x = torch.randn(3)
    sin = trace_step(step_with(lambda x: x.sin()), [], [x]).signature
    assert trace_step(step_with(lambda x: x.sin()), [], [x]).signature == sin
    assert trace_step(step_with(lambda x: x.tan()), [], [x]).signature != sin


def test_a_host_read_inside_a_branch_is_refused():
    def step(x):
        return torch.cond(x.sum() > 0, lambda x: x * float(x.max()), lambda x: x, (x,))

    with pytest.raises(MaterializationError, match="step_closure"):
        cstorch_jax.jit(step)(torch.randn(3))


def test_branches_of_different_structure_are_a_clear_error():
    def step(x):
        return torch.cond(x.sum() > 0, lambda x: (x + 1, x * 2), lambda x: x + 1, (x,))

    with pytest.raises(CaptureError, match="torch.cond"):
        cstorch_jax.jit(step)(torch.randn(3))


def test_dropout_inside_a_branch_draws_a_mask():
    """A random op in a branch gets its key from the cond node: kept elements are doubled
    (p = 0.5), the others zero, and about half are kept."""
    def step(x):
        return torch.cond(x.sum() > 0, lambda x: F.dropout(x, 0.5, True), lambda x: -x, (x,))

    x = torch.rand(4000) + 0.5
    out = cstorch_jax.jit(step)(x)
    kept = out != 0
    assert torch.equal(out[kept], 2 * x[kept])
    assert 0.4 < kept.float().mean() < 0.6
