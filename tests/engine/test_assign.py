"""write_back.assign: a write-back into a state tensor. In a captured step it gives the state its
new value without an op (no copy node; the graph returns the new value); anywhere else, and
for a value of another dtype or shape, it is `copy_`."""
import jax
import torch
import torch.nn as nn

import cstorch.optim.spec_optimizer as spec_optimizer
import cstorch_jax
from cstorch_jax.write_back import assign
from cstorch_jax.dtypes import to_jax, to_torch
from cstorch_jax.lowering import to_jax_function
from train_script import assert_close_rel, train

aten = torch.ops.aten


def _run(cap, state, batch):
    """The captured graph run by jax: (new values of the mutated state by index, outputs)."""
    key = jax.random.key_data(jax.random.key(0))
    outs = [to_torch(o, torch.float32) for o in to_jax_function(cap.module)(key, *map(to_jax, (*state, *batch)))]
    return dict(zip(cap.mutated, outs)), outs[len(cap.mutated):]


def _copies(cap) -> int:
    return sum(1 for n in cap.module.graph.nodes if n.op == "call_function" and n.target is aten.copy.default)


def _update_step(write):
    """A step that writes p - 0.5 x into p and 2 m into m through `write`, and returns p's sum."""

    def step(state, batch):
        p, m = state
        with torch.no_grad():
            write(p, p - 0.5 * batch[0])
            write(m, m * 2.0)
        return [p.sum()]

    return step


def test_in_a_capture_the_state_takes_the_new_value_without_a_copy_node():
    p, m, x = torch.randn(3), torch.randn(2, 3), torch.randn(3)
    cap = cstorch_jax.capture(_update_step(assign), [p, m], [x])
    assert cap.mutated == (0, 1)
    assert _copies(cap) == 0
    new, (total,) = _run(cap, [p, m], [x])
    torch.testing.assert_close(new[0], p - 0.5 * x, rtol=0, atol=0)
    torch.testing.assert_close(new[1], m * 2.0, rtol=0, atol=0)
    torch.testing.assert_close(total, (p - 0.5 * x).sum())  # a read after the write sees the new value
    # the same step written with copy_ computes the same values
    by_copy = cstorch_jax.capture(_update_step(lambda dst, src: dst.copy_(src)), [p, m], [x])
    new_by_copy, outs_by_copy = _run(by_copy, [p, m], [x])
    assert by_copy.mutated == cap.mutated
    for i in cap.mutated:
        torch.testing.assert_close(new[i], new_by_copy[i], rtol=0, atol=0)
    torch.testing.assert_close(total, outs_by_copy[0], rtol=0, atol=0)


def test_a_value_of_another_dtype_or_shape_is_copied_with_copy_semantics():
    p, x = torch.zeros(2, 3), torch.randn(3).to(torch.bfloat16)

    def step(state, batch):
        with torch.no_grad():
            assign(state[0], batch[0] * 3.0)  # bfloat16 (3,) into float32 (2, 3): cast and broadcast
        return [state[0].sum()]

    cap = cstorch_jax.capture(step, [p], [x])
    new, _ = _run(cap, [p], [x])
    torch.testing.assert_close(new[0], (x * 3.0).float().expand(2, 3))


def test_outside_a_capture_it_is_copy_():
    dst, src = torch.zeros(2, 3), torch.arange(3, dtype=torch.float64)
    assign(dst, src)
    torch.testing.assert_close(dst, src.float().expand(2, 3))
    same = torch.randn(4)
    target = torch.zeros(4)
    assign(target, same)
    assert torch.equal(target, same) and target.data_ptr() != same.data_ptr()


def test_the_op_signature_says_which_state_took_which_value():
    """Two steps that compute the same values and write them into different state tensors
    are different steps for the compile cache."""
    a, b, x = torch.randn(3), torch.randn(3), torch.randn(3)

    def step(swap: bool):
        def run(state, batch):
            with torch.no_grad():
                one, two = batch[0] + 1.0, batch[0] * 2.0
                first, second = (state[1], state[0]) if swap else (state[0], state[1])
                assign(first, one)
                assign(second, two)
            return [batch[0].sum()]

        return run

    plain, swapped = (cstorch_jax.capture(step(swap), [a, b], [x]) for swap in (False, True))
    assert plain.signature != swapped.signature
    assert cstorch_jax.capture(step(False), [a, b], [x]).signature == plain.signature
    new, _ = _run(swapped, [a, b], [x])
    torch.testing.assert_close(new[0], x * 2.0, rtol=0, atol=0)
    torch.testing.assert_close(new[1], x + 1.0, rtol=0, atol=0)


def test_an_optimizer_step_writes_back_without_copy_nodes_and_trains_as_eager(monkeypatch):
    """A cstorch AdamW step: each parameter and state tensor it writes costs a copy node when
    written with copy_ and none with assign (the copies left are autograd's, laying out the
    gradients); the same parameters bit for bit, and eager torch's within 1e-5."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(5, 4, generator=g), torch.randint(0, 3, (5,), generator=g)) for _ in range(3)]
    losses, state, _, step = train("CSX", model, batches, "adamw")
    captured = step.program.executable.captured
    with monkeypatch.context() as patch:
        patch.setattr(spec_optimizer, "assign", lambda dst, src: dst.copy_(src))
        copy_losses, copy_state, _, copy_step = train("CSX", model, batches, "adamw")
    by_copy = copy_step.program.executable.captured
    written = len(by_copy.mutated)
    assert written == len(captured.mutated) >= 3 * len(list(model.parameters()))  # each parameter, exp_avg, exp_avg_sq
    assert _copies(by_copy) - _copies(captured) == written
    assert losses == copy_losses
    for name, want in copy_state.items():
        assert torch.equal(state[name], want), name
    cpu_losses, cpu, _, _ = train("CPU", model, batches, "adamw")
    assert_close_rel(losses, cpu_losses, rel=1e-5, what="losses")
    for name, want in cpu.items():
        assert_close_rel(state[name], want, rel=1e-5, what=name)
