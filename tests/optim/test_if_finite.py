"""The non-finite skip as one wrapper (`cstorch.optim.if_finite`): an update kept or undone
as tensor math, an optimizer step kept only where its gradients were finite (against
torch.optim's SGD), the decision's record and its lifetime."""
import pytest
import torch
import torch.nn.functional as F

import cstorch
from cstorch.optim import if_finite


def test_keep_if_finite_keeps_or_undoes_the_update():
    a, b = torch.arange(3.0), torch.ones(2)
    out = if_finite.keep_if_finite(torch.tensor(True), [a, b], lambda: (a.mul_(2), b.add_(1)) and "done")
    assert out == "done"
    assert torch.equal(a, torch.tensor([0.0, 2.0, 4.0])) and torch.equal(b, torch.full((2,), 2.0))
    if_finite.keep_if_finite(torch.tensor(False), [a, b], lambda: (a.fill_(float("nan")), b.zero_()))
    assert torch.equal(a, torch.tensor([0.0, 2.0, 4.0])) and torch.equal(b, torch.full((2,), 2.0))


def _pair():
    torch.manual_seed(0)
    w = torch.randn(4, 3)
    ours = torch.nn.Parameter(w.clone())
    ref = torch.nn.Parameter(w.clone())
    return ours, cstorch.optim.SGD([ours], lr=0.1, momentum=0.9), ref, torch.optim.SGD([ref], lr=0.1, momentum=0.9)


@pytest.mark.parametrize("finite", [True, False])
def test_step_if_finite_matches_torch_or_changes_nothing(finite):
    ours, opt, ref, ref_opt = _pair()
    try:
        for k in range(3):
            g = torch.randn(4, 3)
            ours.grad, ref.grad = g.clone(), g.clone()
            before = ours.detach().clone()
            if_finite.step_if_finite(opt, torch.tensor(finite))
            if finite:
                ref_opt.step()
                torch.testing.assert_close(ours.detach(), ref.detach(), rtol=1e-6, atol=1e-7)
            else:
                assert torch.equal(ours.detach(), before)  # parameters and momentum untouched
            assert bool(if_finite.step_applied(opt)) is finite
    finally:
        if_finite.clear()


def test_a_plain_step_forgets_the_record_and_a_new_step_function_starts_without_one():
    ours, opt, _, _ = _pair()
    ours.grad = torch.ones(4, 3)
    if_finite.step_if_finite(opt, torch.tensor(False))
    assert not bool(if_finite.step_applied(opt))
    opt.step()  # not through the wrapper: it counts, so the record goes
    assert if_finite.step_applied(opt) is None

    if_finite.record_step_applied(opt, torch.tensor(False))
    seen = []
    if_finite.finite_step(lambda: seen.append(if_finite.step_applied(opt)))()
    assert seen == [None]


def test_marked_tensors_follow_the_decision_at_the_end_of_the_step_function():
    ours, opt, _, _ = _pair()
    counter = torch.zeros((), dtype=torch.int64)

    def step(finite):
        cstorch.amp.update_if_finite(opt, counter)
        counter.add_(1)
        ours.grad = torch.ones(4, 3)
        if_finite.step_if_finite(opt, torch.tensor(finite))

    wrapped = if_finite.finite_step(step)
    for finite in (True, False, True):
        wrapped(finite)
    assert int(counter) == 2
    if_finite.clear()
    cstorch.amp.update_if_finite(opt, counter)  # outside a step function: nothing to condition on
    counter.add_(1)
    assert int(counter) == 3


def test_records_made_while_a_step_is_captured_do_not_outlive_the_capture():
    """A captured step's records hold traced tensors: after each call of a CSX step nothing
    of them is left, and the compiled step skips the non-finite step as eager SGD would."""
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    ref_model = torch.nn.Linear(3, 2)
    ref_model.load_state_dict(model.state_dict())
    compiled = cstorch.compile(model, cstorch.backend("CSX"))
    opt = cstorch.optim.SGD(model.parameters(), lr=0.1)
    scaler = cstorch.amp.GradScaler(loss_scale="dynamic")

    @cstorch.trace
    def step(x):
        loss = F.mse_loss(compiled(x), torch.zeros(2, 2))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        return loss

    batches = [torch.ones(2, 3), torch.full((2, 3), float("inf")), torch.full((2, 3), 0.5)]
    records = []
    loader = cstorch.utils.data.DataLoader(lambda: [(b,) for b in batches])
    for (x,) in cstorch.utils.data.DataExecutor(loader, num_steps=3):
        float(step(x))
        records.append(if_finite.step_applied(opt))
    assert records == [None, None, None]
    assert int(scaler.get_num_skipped_steps()) == 1

    ref_opt = torch.optim.SGD(ref_model.parameters(), lr=0.1)
    for x in (batches[0], batches[2]):  # the infinite batch's step is skipped
        F.mse_loss(ref_model(x), torch.zeros(2, 2)).backward()
        ref_opt.step()
        ref_opt.zero_grad()
    for p, ref in zip(model.parameters(), ref_model.parameters()):
        torch.testing.assert_close(p.detach(), ref.detach(), rtol=1e-5, atol=1e-6)
