"""`cstorch.amp` helpers of the real API: `isfinite` / `update_if_finite` (a counter that
follows the applied steps under dynamic loss scaling), the cast wrappers, `disable_casts`,
`init` and `setup_optimizer`, on CPU and CSX."""
import pytest
import torch
import torch.nn as nn

import cstorch
from cstorch._backend import _reset_backend
from cstorch.amp import casts, precision


@pytest.fixture(autouse=True)
def float32_by_default():
    precision._reset()
    casts._reset()
    yield
    precision._reset()
    casts._reset()


class Counted(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 1)
        self.register_buffer("applied", torch.zeros((), dtype=torch.int64))
        self.register_buffer("all", torch.zeros((), dtype=torch.int64))


@pytest.mark.parametrize("kind", ["CPU", "CSX"])
def test_update_if_finite_follows_the_applied_steps(kind):
    _reset_backend()
    torch.manual_seed(0)
    model = Counted()
    compiled = cstorch.compile(model, cstorch.backend(kind))
    opt = cstorch.optim.SGD(model.parameters(), lr=0.1)
    scaler = cstorch.amp.GradScaler(loss_scale="dynamic", init_scale=4.0)
    finite = []

    @cstorch.trace
    def step(x):
        cstorch.amp.update_if_finite(opt, model.applied)  # marked before the step changes it
        loss = compiled.fc(x).sum()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        model.applied.add_(1)
        model.all.add_(1)
        ok = cstorch.amp.isfinite(opt)
        return torch.as_tensor(ok)

    @cstorch.step_closure
    def record(ok):
        finite.append(bool(ok))

    batches = [torch.ones(3, 2) * (float("inf") if k in (1, 3) else 1.0) for k in range(5)]
    loader = cstorch.utils.data.DataLoader(lambda: batches)
    for x in cstorch.utils.data.DataExecutor(loader, num_steps=5):
        record(step(x))
    assert finite == [True, False, True, False, True]
    assert int(model.applied) == 3 and int(model.all) == 5


def test_isfinite_without_a_dynamic_scaler_and_update_if_finite_outside_a_step():
    opt = cstorch.optim.SGD([nn.Parameter(torch.ones(1))], lr=0.1)
    assert cstorch.amp.isfinite(opt) is True
    t = torch.zeros(1)
    cstorch.amp.update_if_finite(opt, t)  # outside a traced step: nothing to condition on
    t.add_(1)
    assert float(t) == 1.0
    assert cstorch.amp.setup_optimizer(opt) is opt


def _probe(*tensors, **kw):
    """The dtypes a wrapped function sees, and the dtype of a matmul inside it."""
    a = tensors[0]
    return [t.dtype for t in tensors] + [kw["k"].dtype if "k" in kw else None, (a @ a.T).dtype]


@pytest.mark.parametrize("kind", ["CPU", "CSX"])
def test_cast_wrappers_are_inactive_without_mixed_precision(kind):
    cstorch.backend(kind)
    x = torch.ones(2, 2)
    for wrap in (cstorch.amp.half_function, cstorch.amp.float_function, cstorch.amp.promote_function):
        assert wrap(_probe)(x, k=x) == [torch.float32, torch.float32, torch.float32]


def test_cast_wrappers_on_csx_with_mixed_precision():
    cstorch.backend("CSX")
    cstorch.amp.set_half_dtype("bfloat16")
    x, h = torch.ones(2, 2), torch.ones(2, 2, dtype=torch.bfloat16)
    half = cstorch.amp.half_function(_probe)
    assert half(x, torch.arange(2), k=x) == [torch.bfloat16, torch.int64, torch.bfloat16, torch.bfloat16]
    with torch.autocast("cpu", dtype=torch.bfloat16):  # what a CSX step is captured under
        assert cstorch.amp.float_function(_probe)(h, k=h) == [torch.float32, torch.float32, torch.float32]
        assert _probe(x)[-1] == torch.bfloat16
        with cstorch.amp.disable_casts():
            assert _probe(x)[-1] == torch.float32 and half(x) == [torch.float32, None, torch.float32]
    assert cstorch.amp.promote_function(_probe)(x, h) == [torch.float32, torch.float32, None, torch.float32]
    assert cstorch.amp.promote_function(_probe)(h, h) == [torch.bfloat16, torch.bfloat16, None, torch.bfloat16]


def test_cpu_casts_need_init_as_in_the_real_system():
    cstorch.backend("CPU")
    cstorch.amp.set_half_dtype("bfloat16")
    x = torch.ones(2, 2)
    half = cstorch.amp.half_function(_probe)
    assert half(x) == [torch.float32, None, torch.float32]
    handle = cstorch.amp.init()
    assert handle.is_active() and cstorch.amp.init(enabled=False) is handle  # once per process
    assert half(x) == [torch.bfloat16, None, torch.bfloat16]


def test_init_disabled_turns_the_casts_off():
    cstorch.backend("CSX")
    cstorch.amp.set_half_dtype("bfloat16")
    assert not cstorch.amp.init(enabled=False).is_active()
    assert cstorch.amp.half_function(_probe)(torch.ones(2, 2)) == [torch.float32, None, torch.float32]


class Holder:
    @staticmethod
    def softmax(x):
        return torch.softmax(x, dim=-1)


def test_register_float_function_keeps_a_function_in_float32_in_a_bf16_step():
    """A softmax registered as a float function runs in float32 inside a bfloat16 CSX step."""
    _reset_backend()
    cstorch.amp.set_half_dtype("bfloat16")
    original = Holder.softmax
    cstorch.amp.register_float_function(Holder, "softmax")
    try:
        with pytest.raises(ValueError, match="No function named nope"):
            cstorch.amp.register_half_function(Holder, "nope")
        cstorch.backend("CSX")
        w = torch.randn(4, 4)

        @cstorch.trace
        def step(x):
            logits = x @ cstorch.make_constant(w)  # bf16 under the capture's autocast
            return Holder.softmax(logits), logits

        x = torch.randn(3, 4)
        loader = cstorch.utils.data.DataLoader(lambda: [x])
        (probs, logits), = [step(b) for b in cstorch.utils.data.DataExecutor(loader, num_steps=1)]
        assert logits.dtype == torch.bfloat16 and probs.dtype == torch.float32
        # computed in float32: normalized to float32 precision (a bf16 softmax is off by ~1e-3), and the
        # softmax of the logits up to their bf16 rounding
        assert float((probs.sum(-1) - 1).abs().max()) < 1e-6
        torch.testing.assert_close(probs, torch.softmax(x @ w, dim=-1), atol=1e-2, rtol=0)
    finally:
        Holder.softmax = staticmethod(original)
