"""Repeated layers' state held stacked (`cstorch_jax.stacked_state`, `cstorch_jax.stacks`):
the rows a traced program finds again, every optimizer's update over stacked rows equal
to each parameter's own update bit for bit, the plan of a captured step, the state's
entries packed and unpacked between launches, a host edit of one stacked tensor between
steps, and a stacked program stored in and loaded from the compile cache. (Training
parity with the layers' calls and with eager torch: test_repeated_blocks.py.)"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import cstorch
from benchmarks.models import GPT
from cstorch._backend import _reset_backend
from cstorch_jax import compile_cache
from cstorch_jax.optim.update_op import apply_rule, apply_rule_stacked
from cstorch_jax.repeated_blocks import MIN_REPEATS
from cstorch_jax.stacked_state import Row, StackPlan, plan
from cstorch_jax.stacks import Stacks
from train_script import assert_close_rel


# -- Stacks: the rows of a stacked array, found again ---------------------------------------------------------
def test_rows_are_found_again_whole_and_in_order_only():
    stacked = jnp.arange(12.0).reshape(3, 4)
    other = jnp.ones(4)

    def traced(s, o):
        held = Stacks()
        rows = held.rows(s)
        assert held.stacked(rows) is s and held.stack(rows) is s
        assert held.stacked(rows[::-1]) is None and held.stacked(rows[:2]) is None
        assert held.stacked([rows[0], o, rows[2]]) is None
        assert held.groups([rows[1], o, rows[0], rows[2]]) == [[2, 0, 3]]
        assert held.groups(rows[:2]) == []  # not every row
        return rows, held.stack([o, o, o])

    rows, fresh = jax.jit(traced)(stacked, other)
    for i, row in enumerate(rows):
        np.testing.assert_array_equal(row, stacked[i])
    np.testing.assert_array_equal(fresh, jnp.stack([other] * 3))


# -- every optimizer: the vmapped update of stacked rows is each parameter's own ------------------------------
OPTIMIZERS = [
    (cstorch.optim.SGD, dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01)),
    (cstorch.optim.Adam, dict(lr=0.01, weight_decay=0.05, amsgrad=True)),
    (cstorch.optim.AdamW, dict(lr=0.01, weight_decay=0.1)),
    (cstorch.optim.Adadelta, dict(lr=0.5, weight_decay=0.05)),
    (cstorch.optim.Adagrad, dict(lr=0.1, lr_decay=0.02, weight_decay=0.05)),
    (cstorch.optim.Adamax, dict(lr=0.005, weight_decay=0.05)),
    (cstorch.optim.ASGD, dict(lr=0.05, t0=2, weight_decay=0.05)),
    (cstorch.optim.NAdam, dict(lr=0.01, weight_decay=0.05)),
    (cstorch.optim.RAdam, dict(lr=0.01, weight_decay=0.05)),
    (cstorch.optim.RMSprop, dict(lr=0.005, momentum=0.5, centered=True, weight_decay=0.05)),
    (cstorch.optim.Rprop, dict(lr=0.01)),
    (cstorch.optim.Lamb, dict(lr=0.01, weight_decay=0.01)),       # a trust ratio: norms of each parameter
    (cstorch.optim.Lion, dict(lr=0.001, weight_decay=0.1)),
    (cstorch.optim.Adafactor, dict(lr=0.01, relative_step=False)),  # moments factored into rows and columns
    (cstorch.optim.Muon, dict(lr=0.02)),                          # an orthogonalized matrix per parameter
]


#: rules that reduce over each parameter (a norm, a mean of rows, matrix products): vmapped,
#: XLA may sum in another order (Lamb: 1 element of 24 one ulp apart)
REDUCING = {cstorch.optim.Lamb, cstorch.optim.Adafactor, cstorch.optim.Muon}


@pytest.mark.parametrize("cls,kw", OPTIMIZERS, ids=[c.__name__ for c, _ in OPTIMIZERS])
def test_the_update_of_stacked_rows_is_each_parameters_own(cls, kw):
    """Three parameters of one shape held as the rows of stacked arrays (with their state),
    and one other: `apply_rule_stacked` gives every parameter and state tensor what
    `apply_rule` gives it: bit for bit for elementwise rules, within rounding for those
    that reduce over a parameter."""
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(4, 6)) for _ in range(3)] + [torch.nn.Parameter(torch.randn(2, 5))]
    opt = cls(params, **kw)
    public = opt.public
    hyper = public.hyper(opt.param_groups[0])
    fields = [public.algorithm.layout(hyper, tuple(p.shape))[1] for p in params]
    state = [(torch.full_like(opt.state[p][f], 3.0) if f == "step" else opt.state[p][f].clone().normal_().abs())
             for p, fs in zip(params, fields) for f in fs]
    grads = [torch.randn_like(p) for p in params]
    lr, wd = opt.hyperparameter(0, "lr"), opt.hyperparameter(0, "weight_decay")
    j = lambda ts: [jnp.asarray(t.detach().numpy()) for t in ts]  # noqa: E731
    P, G, S = j(params), j(grads), j(state)
    lr = jnp.asarray(lr.numpy()) if lr is not None else None
    wd = jnp.asarray(wd.numpy()) if wd is not None else None
    algorithm = public.algorithm
    plain = jax.jit(lambda p, g, s, lr, wd: apply_rule(algorithm, p, g, s, lr, wd, hyper))(P, G, S, lr, wd)
    n = len(fields[0])

    def stacked(stacked_p, last_p, g, stacked_s, last_s, lr, wd):
        held = Stacks()
        p_rows = held.rows(stacked_p)
        s_rows = [held.rows(s) for s in stacked_s]
        state_in = [s_rows[f][i] for i in range(3) for f in range(n)] + list(last_s)
        return apply_rule_stacked(algorithm, [*p_rows, last_p], g, state_in, lr, wd, hyper, held)

    got = jax.jit(stacked)(jnp.stack(P[:3]), P[3], G, [jnp.stack([S[i * n + f] for i in range(3)]) for f in range(n)],
                           S[3 * n:], lr, wd)
    assert len(got) == len(plain)
    for k, (a, b) in enumerate(zip(got, plain)):
        if cls in REDUCING:
            assert_close_rel(torch.tensor(np.asarray(a)), torch.tensor(np.asarray(b)), rel=1e-6,
                             what=f"{cls.__name__} result {k}")
        else:
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=f"{cls.__name__} result {k}")


# -- the plan of a captured step -------------------------------------------------------------------------------
def _gpt(layers=MIN_REPEATS, dropout=0.0):
    torch.manual_seed(0)
    return GPT(vocab=64, seq=16, d_model=32, n_heads=4, n_layers=layers, dropout=dropout)


def _batches(n=4):
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 64, (n, 2, 17), generator=g)
    return [(t[:, :-1].contiguous(), t[:, 1:].contiguous()) for t in tokens]


def _run(model, stack_from: int, edit=None, opt_name="adamw"):
    """Train a copy of `model` on `_batches()` with `stack_from`; `edit(i, model, opt)` runs
    after each step's call. (losses, parameters, optimizer state, the step)."""
    import copy

    _reset_backend()
    model = copy.deepcopy(model)
    backend = cstorch.backend("CSX")
    with cstorch.backends.csx.performance:
        cstorch.backends.csx.performance.stack_repeated_layers_from = stack_from
        cstorch.backends.csx.performance.progress = False
        compiled = cstorch.compile(model, backend)
        opt = (cstorch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01) if opt_name == "adamw"
               else cstorch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9))

        @cstorch.trace
        def step(x, y):
            loss = compiled(x, y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss

        losses = []
        loader = cstorch.utils.data.DataLoader(_batches)
        for i, (x, y) in enumerate(cstorch.utils.data.DataExecutor(loader, num_steps=4)):
            losses.append(step(x, y))
            if edit is not None:
                edit(i, model, opt)
        losses = [float(v) for v in losses]
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    opt_state = {f"{i}.{f}": torch.as_tensor(v).clone() for i, st in opt.state_dict()["state"].items()
                 for f, v in st.items()}
    return losses, state, opt_state, step


def test_the_plan_stacks_each_block_parameter_with_its_state_from_the_run_length_on():
    model = _gpt()
    per_block = len(list(model.blocks[0].parameters()))
    _, _, _, step = _run(model, stack_from=MIN_REPEATS)
    stacking = step.program.executable.stacking
    # each block parameter, its exp_avg, exp_avg_sq and step: one stack each, of one row per layer
    assert len(stacking.stacks) == 4 * per_block
    assert all(len(s) == MIN_REPEATS for s in stacking.stacks)
    assert len({p for s in stacking.stacks for p in s}) == 4 * per_block * MIN_REPEATS
    gm, captured = step.program.executable.graph_module, step.program.executable.captured
    n_state = len(captured.state_specs)
    assert plan(gm, n_state, captured.mutated, MIN_REPEATS + 1) is None  # a shorter run: not stacked
    assert plan(gm, n_state, captured.mutated, 0) is None and plan(gm, n_state, captured.mutated, 1) is None
    assert plan(gm, n_state, captured.mutated, 2) == stacking
    # the report says so
    summary = step.report.summary().as_dict()
    assert summary["stacked state (stacks x layers)"].startswith(f"{4 * per_block} x {MIN_REPEATS}: ")


def test_the_runs_of_a_captured_step_are_found_with_their_carry_and_per_layer_operands():
    """`layer_runs.chains` on a captured GPT step: the forward run (the residual stream
    carried, one column per block parameter) and the backward run (the input's gradient
    carried); `source` sees through a forward output that is a weight it was given."""
    from cstorch_jax.layer_runs import chains, operands, passthrough, source

    model = _gpt()
    _, _, _, step = _run(model, stack_from=0)
    gm = step.program.executable.graph_module
    forward, backward = sorted(chains(gm), key=lambda c: min(n.name for n in c.calls))
    assert len(forward.calls) == len(backward.calls) == MIN_REPEATS
    assert len(forward.carry) == len(backward.carry) == 1
    placeholders = {n for n in gm.graph.nodes if n.op == "placeholder"}
    weights = [j for j in forward.per_layer if all(n in placeholders for n in forward.column(j))]
    assert len(weights) == len(list(model.blocks[0].parameters()))
    through = passthrough(forward.subgraph)  # weights and the layer's input, saved for the backward
    assert through and all(j in weights or j in forward.carry for j in through.values())
    k, j = next((k, j) for k, j in through.items() if j in weights)
    out = next(u for u in forward.calls[1].users if u.args[1] == k)
    assert source(out, gm) is operands(forward.calls[1])[j]


def test_entries_pack_as_the_stacked_array_when_whole_and_stack_again_otherwise():
    stacked_plan = StackPlan(stacks=((0, 2, 4),), n_mutated=6)
    assert stacked_plan.rest == (1, 3, 5)
    arrays = [jnp.full((2,), float(i)) for i in range(6)]
    packed = stacked_plan.pack(arrays)  # uploaded arrays: stacked
    np.testing.assert_array_equal(packed[0], jnp.stack([arrays[0], arrays[2], arrays[4]]))
    assert packed[1:] == (arrays[1], arrays[3], arrays[5])
    entries = stacked_plan.unpack(packed)
    assert [isinstance(e, Row) for e in entries] == [True, False] * 3
    assert stacked_plan.pack(entries)[0] is packed[0]  # whole: passed as it is
    entries[2] = jnp.full((2,), 9.0)  # one tensor written on the host since
    again = stacked_plan.pack(entries)[0]
    assert again is not packed[0]
    np.testing.assert_array_equal(again, jnp.stack([arrays[0], jnp.full((2,), 9.0), arrays[4]]))
    np.testing.assert_array_equal(Row(packed[0], 1).value(), arrays[2])


# -- end to end: a host edit between steps, the compile cache --------------------------------------------------
def test_a_host_edit_of_one_stacked_parameter_between_steps_takes_effect():
    """A write to one layer's weight (one row of its stack) and to its optimizer state
    between steps: the next step stacks the new values; the run ends as the same run with
    the layers' calls (within rounding: test_repeated_blocks.py) and differs from a run
    without the edit."""
    model = _gpt()

    def edit(i, m, opt):
        if i == 1:
            with torch.no_grad():
                m.blocks[2].fc1.weight.mul_(0.5)
                opt.state[m.blocks[2].fc1.weight]["exp_avg"].zero_()

    losses, state, opt_state, step = _run(model, MIN_REPEATS, edit)
    assert step.program.executable.stacking is not None
    want_losses, want, want_opt, calls = _run(model, 0, edit)
    assert calls.program.executable.stacking is None
    assert_close_rel(losses, want_losses, rel=1e-4, what="losses")
    for name, w in want.items():
        assert_close_rel(state[name], w, rel=1e-4, what=name)
    for name, w in want_opt.items():
        assert_close_rel(opt_state[name], w, rel=1e-4, what=name)
    _, unedited, _, _ = _run(model, MIN_REPEATS)
    assert not torch.equal(unedited["blocks.2.fc1.weight"], state["blocks.2.fc1.weight"])


def test_a_stacked_program_is_stored_in_and_loaded_from_the_compile_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(compile_cache.ENV_ENABLED, "1")
    monkeypatch.setenv(compile_cache.ENV_DIR, str(tmp_path))
    model = _gpt()
    cold = _run(model, MIN_REPEATS, opt_name="sgd")
    warm = _run(model, MIN_REPEATS, opt_name="sgd")
    assert not cold[3].program.executable.from_cache and warm[3].program.executable.from_cache
    assert warm[3].program.executable.stacking == cold[3].program.executable.stacking
    assert warm[0] == cold[0]
    for name, want in cold[1].items():
        assert torch.equal(warm[1][name], want), name
    # unstacked, the same step is another entry (the key holds the run length stacked from)
    calls = _run(model, 0, opt_name="sgd")
    assert not calls[3].program.executable.from_cache and calls[3].program.executable.stacking is None


def test_a_stored_stacking_that_is_not_positions_of_the_mutated_state_is_refused():
    with pytest.raises(compile_cache.EntryError, match="stacking"):
        compile_cache._stacking([[0, 0]], 3)
    with pytest.raises(compile_cache.EntryError, match="stacking"):
        compile_cache._stacking([[0, 5]], 3)
    with pytest.raises(compile_cache.EntryError, match="stacking"):
        compile_cache._stacking([[0, 1], [1, 2]], 3)
    with pytest.raises(compile_cache.EntryError, match="stacking"):
        compile_cache._stacking([[0]], 3)
    assert compile_cache._stacking([[0, 2], [1, 3]], 4) == ((0, 2), (1, 3))


@pytest.mark.parametrize("bad", [-1, 2.5, True, "16"])
def test_the_run_length_setting_takes_an_integer_of_zero_or_more(bad):
    with cstorch.backends.csx.performance:
        with pytest.raises((ValueError, TypeError), match="integer >= 0"):
            cstorch.backends.csx.performance.stack_repeated_layers_from = bad
        assert cstorch.backends.csx.performance.stack_repeated_layers_from == 0  # off by default
