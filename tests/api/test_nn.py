"""`cstorch.nn` losses and `cstorch.nn.functional` against eager torch (or, where the real
op has no torch twin, its formula written out), on CPU and inside compiled CSX steps,
gradients included."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import cstorch
import cstorch.nn.functional as CF


def _run(kind, step_fn, batches):
    cstorch.backend(kind)
    step = cstorch.trace(step_fn)
    loader = cstorch.utils.data.DataLoader(lambda: batches)
    return [[torch.as_tensor(o).clone() for o in step(b)] for b in
            cstorch.utils.data.DataExecutor(loader, num_steps=len(batches))]


def _with_grad(fn):
    """A step returning fn(x, ...) and the gradient of its sum with respect to x."""

    def step(batch):
        x, *rest = batch
        x = x.clone().requires_grad_(True)
        out = fn(x, *rest)
        (g,) = torch.autograd.grad(out.float().sum(), x)
        return out.detach(), g

    return step


def _eager(fn, batch):
    return _with_grad(fn)(batch)


def _functional_cases():
    """name -> (op(x), reference(x), x); the other operands are constants of the step
    (`cstorch.make_constant`)."""
    K = cstorch.make_constant
    torch.manual_seed(0)
    w, b, n = torch.randn(4, 3), torch.randn(5), torch.tensor([5, 3])
    m = torch.tensor([[1, 0, 1, 1, 0], [0, 0, 1, 1, 1]])
    idx, wt = torch.tensor([[0, 3], [2, 1]]), torch.randn(4, 5, 3)

    def sparse_reference(x):  # the real docstring's dense einsum, gathered at the selected rows
        dense = torch.zeros(2, 5, 3).index_put((torch.arange(2)[:, None], idx), x)
        out = torch.einsum("mbn,kbn->mbk", dense, wt)
        return torch.gather(out, 1, idx[..., None].expand(-1, -1, 4))

    scope = cstorch.nn.Scope("s")
    return {
        "bias_add": (lambda x: CF.bias_add(x, K(b), 1), lambda x: x + b[None, :, None], torch.randn(2, 5, 3)),
        "matmul": (lambda x: CF.matmul(K(w), x), lambda x: w @ x, torch.randn(3, 6)),
        "ranged_matmul": (lambda x: CF.ranged_matmul(K(w), x, K(n)), lambda x: x @ w.T, torch.randn(2, 5, 3)),
        "sparse_act_matmul": (lambda x: CF.sparse_act_matmul(x, K(m), K(w)), lambda x: (x @ w.T) * m[..., None],
                              torch.randn(2, 5, 3)),
        "sparse_matmul": (lambda x: CF.sparse_matmul(x, K(idx), K(wt)), sparse_reference, torch.randn(2, 2, 3)),
        "unbind": (lambda x: torch.stack([t * (i + 1) for i, t in enumerate(CF.unbind(x))]),
                   lambda x: torch.stack([t * (i + 1) for i, t in enumerate(torch.unbind(x))]), torch.randn(3, 2)),
        "scope": (lambda x: scope.exit(scope(x * 2)), lambda x: x * 2, torch.randn(3)),
    }


@pytest.mark.parametrize("kind", ["CPU", "CSX"])
@pytest.mark.parametrize("name", ["bias_add", "matmul", "ranged_matmul", "sparse_act_matmul", "sparse_matmul",
                                  "unbind", "scope"])
def test_functional_ops_match_their_torch_expression(kind, name):
    op, ref, x = _functional_cases()[name]
    (out, grad), = _run(kind, _with_grad(op), [(x,)])
    want_out, want_grad = _eager(ref, (x,))
    torch.testing.assert_close(out, want_out, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grad, want_grad, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["CPU", "CSX"])
def test_integer_ops_match_their_definitions(kind):
    mask = torch.tensor([[0, 1, 1, 1, 0, 0, 1], [1, 0, 0, 1, 1, 0, 0]])
    x = torch.tensor([[0.0, 2, 3, 5, 4, 1, 6], [9, 8, 7, 6, 5, 4, 3]])
    labels = torch.tensor([2, 0])

    def step(batch):
        m, v, y = batch
        return (CF.conditional_arange(m, torch.tensor(2), torch.tensor(7), dtype=torch.int32),
                CF.nth_order_statistic(v, 3, 1), CF.one_hot(y, 4))

    (arange, top, hot), = _run(kind, step, [(mask, x, labels)])
    assert arange.tolist() == [[-1, 2, 9, 16, -1, -1, 23], [2, -1, -1, 9, 16, -1, -1]]  # the real docstring's example
    assert top.dtype == torch.int16 and top.tolist() == [[0, 0, 0, 1, 1, 0, 1], [1, 1, 1, 0, 0, 0, 0]]
    assert hot.dtype == torch.int32 and torch.equal(hot, F.one_hot(labels, 4).int())
    with pytest.raises(ValueError, match="cannot be -1"):
        CF.one_hot(labels, -1)
    with pytest.raises(AssertionError, match="Expected 1D bias"):
        CF.bias_add(torch.ones(2, 2), torch.ones(2, 2), 0)
    assert CF.CSXBiasAdd.apply(torch.zeros(2, 3), torch.arange(3.0), 1).tolist() == [[0.0, 1.0, 2.0]] * 2


LOSSES = [
    ("HuberLoss", dict(delta=0.7), lambda i, t: F.huber_loss(i, t, delta=0.7), "regress"),
    ("SmoothL1Loss", dict(beta=0.5, reduction="sum"), lambda i, t: F.smooth_l1_loss(i, t, beta=0.5, reduction="sum"),
     "regress"),
    ("MultiMarginLoss", dict(p=2, margin=0.8), lambda i, t: F.multi_margin_loss(i, t, p=2, margin=0.8), "classify"),
    ("MultiMarginLoss", dict(weight=torch.tensor([1.0, 2.0, 0.5, 1.5]), reduction="sum"),
     lambda i, t: F.multi_margin_loss(i, t, weight=torch.tensor([1.0, 2.0, 0.5, 1.5]), reduction="sum"), "classify"),
    ("GaussianNLLLoss", dict(full=True), lambda i, t: F.gaussian_nll_loss(i, t, torch.full_like(i, 0.3), full=True),
     "regress"),
    ("CrossEntropyLoss", dict(label_smoothing=0.1, use_autogen=True),
     lambda i, t: F.cross_entropy(i, t, label_smoothing=0.1), "classify"),
    ("MSELoss", {}, F.mse_loss, "regress"),
]


@pytest.mark.parametrize("kind", ["CPU", "CSX"])
@pytest.mark.parametrize("name, kwargs, ref, task", LOSSES, ids=[f"{c[0]}-{i}" for i, c in enumerate(LOSSES)])
def test_losses_match_torch(kind, name, kwargs, ref, task):
    torch.manual_seed(1)
    x = torch.randn(5, 4)
    target = torch.randint(0, 4, (5,)) if task == "classify" else torch.randn(5, 4)
    loss = getattr(cstorch.nn, name)(**kwargs)

    def call(i, t):
        return loss(i, t, torch.full_like(i, 0.3)) if name == "GaussianNLLLoss" else loss(i, t)

    (out, grad), = _run(kind, _with_grad(call), [(x, target)])
    want_out, want_grad = _eager(ref, (x, target))
    torch.testing.assert_close(out, want_out, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(grad, want_grad, rtol=1e-5, atol=1e-6)


def test_loss_arguments_are_the_real_ones():
    assert cstorch.nn.HuberLoss("sum", 2.0).delta == 2.0  # the real positional order (reduction, delta)
    assert cstorch.nn.SmoothL1Loss("none", 0.1).beta == 0.1
    for bad in (lambda: cstorch.nn.HuberLoss(delta=0), lambda: cstorch.nn.SmoothL1Loss(beta=-1),
                lambda: cstorch.nn.MultiMarginLoss(p=3), lambda: cstorch.nn.MultiMarginLoss(reduction="none")):
        with pytest.raises(AssertionError):
            bad()
    assert cstorch.nn.BCELoss(use_autogen=True).autogen_enabled and isinstance(cstorch.nn.NLLLoss(),
                                                                                torch.nn.NLLLoss)
    assert cstorch.nn.Parameter is torch.nn.Parameter and isinstance(cstorch.nn.Buffer(torch.ones(1)), torch.Tensor)


def _dice_reference(pred, target, num_classes, include_background):
    """The Dice score of the real DiceLoss, written out with numpy: softmax over classes,
    one-hot targets, class 0 zeroed without the background, per (sample, class)."""
    p = np.exp(pred - pred.max(axis=1, keepdims=True))
    p = p / p.sum(axis=1, keepdims=True)
    t = np.eye(num_classes)[target].transpose(0, 4, 1, 2, 3)
    if not include_background:
        p[:, 0] = 0
        t[:, 0] = 0
    axes = (2, 3, 4)
    return 2 * (p * t).sum(axes) / (p.sum(axes) + t.sum(axes) + 1e-6)


@pytest.mark.parametrize("kind", ["CPU", "CSX"])
@pytest.mark.parametrize("background", [False, True])
def test_dice_losses_match_their_formula(kind, background):
    torch.manual_seed(2)
    pred, target = torch.randn(2, 3, 2, 3, 2), torch.randint(0, 3, (2, 2, 3, 2))
    dice = cstorch.nn.DiceLoss(3, include_background=background)
    combined = cstorch.nn.DiceCELoss(3, background, wc=0.3, wd=0.7)
    (score, total), = _run(kind, lambda b: (dice(b[0], b[1], list(b[0].shape)),
                                            combined(b[0], b[1], list(b[0].shape))), [(pred, target)])
    want = _dice_reference(pred.numpy().astype(np.float64), target.numpy(), 3, background)
    np.testing.assert_allclose(score.numpy(), want, rtol=1e-5, atol=1e-6)
    correction = 1.0 if background else 3 / 2
    want_total = 0.3 * F.cross_entropy(pred, target).item() + 0.7 * (1 - correction * want.mean())
    assert abs(float(total) - want_total) < 1e-5
