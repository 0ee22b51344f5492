"""cstorch.amp: dynamic and static loss scaling, optimizer_step, mixed precision."""
from __future__ import annotations

import copy
import re

import jax
import pytest
import torch
import torch.nn.functional as F

import cstorch
from cstorch._backend import _reset_backend
from cstorch.amp import precision
from optim_parity import assert_params_close, loss_of, make_batches, make_model
from train_script import assert_close_rel


@pytest.fixture(autouse=True)
def float32_by_default():
    precision._reset()
    yield
    precision._reset()


def _poisoned_batches(steps, bad_steps):
    """The harness batches with an inf in the input of each step in `bad_steps`."""
    batches = make_batches(steps)
    for k in bad_steps:
        x, y = batches[k]
        x = x.clone()
        x[0, 0] = float("inf")
        batches[k] = (x, y)
    return batches


def _run_scaled(backend_type, batches, scaler_kw, opt_kw=None, with_scheduler=True):
    """Train with SGD(momentum) + StepLR + GradScaler via optimizer_step; return the
    final parameters and, per step, (scale, skipped steps, scheduler step, lr) as
    seen by a step closure."""
    _reset_backend()
    model = make_model()
    backend = cstorch.backend(backend_type)
    compiled = cstorch.compile(model, backend)
    opt = cstorch.optim.SGD(model.parameters(), **(opt_kw or dict(lr=0.05, momentum=0.9)))
    sched = cstorch.optim.lr_scheduler.StepLR(opt, initial_learning_rate=0.05, step_size=2, gamma=0.5) \
        if with_scheduler else None
    scaler = cstorch.amp.GradScaler(**scaler_kw)
    seen = []

    @cstorch.trace
    def step(x, y):
        loss = loss_of(compiled, x, y)
        cstorch.amp.optimizer_step(loss, opt, scaler)
        if sched is not None:
            sched.step()
        last_epoch = sched.last_epoch if sched is not None else torch.zeros((), dtype=torch.int64)
        return scaler.get_scale(), scaler.get_num_skipped_steps(), last_epoch, opt.param_groups[0]["lr"]

    @cstorch.step_closure
    def record(*values):
        seen.append(tuple(float(v) for v in values))

    loader = cstorch.utils.data.DataLoader(lambda: batches)
    for x, y in cstorch.utils.data.DataExecutor(loader, num_steps=len(batches)):
        record(*step(x, y))
    params = {k: v.detach().clone() for k, v in model.named_parameters()}
    opt_state = copy.deepcopy(opt.state_dict())
    _reset_backend()
    return params, seen, opt_state, scaler


def _expected_scales(n_steps, bad_steps, init, spi, max_scale=2.0 ** 15, min_scale=2.0 ** -14):
    """The documented rule, simulated on the host: scale after each step's update()."""
    scale, steps, out = init, 0, []
    for k in range(n_steps):
        steps += 1
        if k in bad_steps:
            scale, steps = scale / 2, 0
        elif steps >= spi:
            scale, steps = scale * 2, 0
        scale = min(max(scale, min_scale), max_scale)
        out.append(scale)
    return out


@pytest.mark.parametrize("backend", ["CPU", "CSX"])
def test_dynamic_loss_scaling_skips_non_finite_steps(backend):
    steps, bad = 12, {2, 3}
    params, seen, _, scaler = _run_scaled(backend, _poisoned_batches(steps, bad),
                                          dict(loss_scale="dynamic", init_scale=2.0 ** 10, steps_per_increase=3))
    scales = [s[0] for s in seen]
    assert scales == _expected_scales(steps, bad, 2.0 ** 10, 3)
    assert [s[1] for s in seen] == [sum(1 for b in bad if b <= k) for k in range(steps)]
    # the scheduler does not advance on a skipped step: last_epoch counts applied steps
    assert [s[2] for s in seen] == [k + 1 - sum(1 for b in bad if b <= k) for k in range(steps)]
    # the lr follows the applied steps too (StepLR: 0.05 * 0.5 ** (t // 2))
    assert [s[3] for s in seen] == pytest.approx([0.05 * 0.5 ** (s[2] // 2) for s in seen])
    # skipped steps changed nothing: same parameters as training without those batches
    clean = [b for k, b in enumerate(make_batches(steps)) if k not in bad]

    expected = _train_on(clean, lambda ps: _StepLRStepper(torch.optim.SGD(ps, lr=0.05, momentum=0.9)))
    assert_params_close(params, expected, what=f"dynamic scaling on {backend}")


class _StepLRStepper:
    """torch.optim.SGD followed by torch's StepLR(step_size=2, gamma=0.5), as one `step()`."""

    def __init__(self, opt):
        self.opt = opt
        self.sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)

    def zero_grad(self):
        self.opt.zero_grad()

    def step(self):
        self.opt.step()
        self.sched.step()


def _train_on(batches, make_opt):
    model = make_model()
    opt = make_opt(model.parameters())
    for x, y in batches:
        opt.zero_grad()
        loss_of(model, x, y).backward()
        opt.step()
    return {k: v.detach().clone() for k, v in model.named_parameters()}


@pytest.mark.parametrize("backend", ["CPU", "CSX"])
def test_static_loss_scaling_does_not_change_the_update(backend):
    steps = 10
    params, seen, _, _ = _run_scaled(backend, make_batches(steps), dict(loss_scale=256.0))
    assert all(s[0] == 256.0 for s in seen) and all(s[1] == 0 for s in seen)
    expected = _train_on(make_batches(steps), lambda ps: _StepLRStepper(torch.optim.SGD(ps, lr=0.05, momentum=0.9)))
    assert_params_close(params, expected, what=f"static scaling on {backend}")


def test_dynamic_scale_is_clamped_and_state_dict_round_trips():
    scaler = cstorch.amp.GradScaler(loss_scale="dynamic", init_scale=4.0, steps_per_increase=1, max_loss_scale=16.0)
    model = torch.nn.Linear(2, 1)
    opt = cstorch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(5):
        cstorch.amp.optimizer_step(model(torch.ones(1, 2)).sum(), opt, scaler)
    assert float(scaler.get_scale()) == 16.0
    state = {k: v.clone() for k, v in scaler.state_dict().items()}
    other = cstorch.amp.GradScaler(loss_scale="dynamic")
    held = other.get_scale()
    other.load_state_dict(state)
    assert other.get_scale() is held and float(held) == 16.0  # loaded in place
    assert set(state) == {"loss_scale", "steps_since_rescale", "overflows_since_rescale", "num_skipped_steps"}


def test_grad_scaler_protocol_errors():
    model = torch.nn.Linear(2, 1)
    opt = cstorch.optim.SGD(model.parameters(), lr=0.1)
    scaler = cstorch.amp.GradScaler(loss_scale="dynamic")
    scaler.scale(model(torch.ones(1, 2)).sum()).backward()
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="after step"):
        scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.step(opt)
    with pytest.raises(RuntimeError, match="already scaled"):
        scaler.scale(model(torch.ones(1, 2)).sum())
    with pytest.raises(ValueError, match="new_scale"):
        scaler.update(new_scale=2.0)
    with pytest.raises(ValueError, match="min_loss_scale too small"):
        cstorch.amp.GradScaler(loss_scale="dynamic", min_loss_scale=2.0 ** -20)


@pytest.mark.parametrize("clip", [dict(max_gradient_norm=0.05), dict(max_gradient_value=0.01)])
def test_optimizer_step_clips_like_torch(clip):
    model = make_model()
    ref = copy.deepcopy(model)
    opt = cstorch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    scaler = cstorch.amp.GradScaler(loss_scale=8.0)
    for x, y in make_batches(5):
        cstorch.amp.optimizer_step(loss_of(model, x, y), opt, scaler, **clip)
        ref_opt.zero_grad()
        loss_of(ref, x, y).backward()
        if "max_gradient_norm" in clip:
            torch.nn.utils.clip_grad_norm_(ref.parameters(), clip["max_gradient_norm"])
        else:
            torch.nn.utils.clip_grad_value_(ref.parameters(), clip["max_gradient_value"])
        ref_opt.step()
    for (k, a), b in zip(model.named_parameters(), ref.parameters()):
        assert_close_rel(a.detach(), b.detach(), what=k)
        assert all(p.grad is None for p in model.parameters())


def test_optimizer_step_argument_errors():
    model = torch.nn.Linear(2, 1)
    opt = cstorch.optim.SGD(model.parameters(), lr=0.1)
    scaler = cstorch.amp.GradScaler()
    loss = model(torch.ones(1, 2)).sum()
    with pytest.raises(ValueError, match="not both"):
        cstorch.amp.optimizer_step(loss, opt, scaler, max_gradient_norm=1.0, max_gradient_value=1.0)
    with pytest.raises(ValueError, match="non-negative"):
        cstorch.amp.optimizer_step(loss, opt, scaler, max_gradient_norm=-1.0)
    with pytest.raises(ValueError, match="single tensor"):
        cstorch.amp.optimizer_step(1.0, opt, scaler)
    with pytest.raises(TypeError, match="cstorch.optim.Optimizer"):
        cstorch.amp.optimizer_step(loss, torch.optim.SGD(model.parameters(), lr=0.1), scaler)
    with pytest.raises(TypeError, match="GradScaler"):
        cstorch.amp.optimizer_step(loss, opt, object())


def test_half_dtype_setting():
    assert not cstorch.amp.mixed_precision()
    assert cstorch.amp.get_floating_point_dtype() is torch.float32
    assert cstorch.amp.set_half_dtype("bfloat16") is torch.bfloat16
    assert cstorch.amp.mixed_precision() and cstorch.amp.get_half_dtype_str() == "bfloat16"
    assert cstorch.amp.get_floating_point_dtype() is torch.bfloat16
    assert cstorch.amp.set_half_dtype(torch.float16) is torch.float16
    with pytest.raises(ValueError, match="Invalid half dtype"):
        cstorch.amp.set_half_dtype("float8")
    cstorch.amp.enable_mixed_precision(False)
    assert cstorch.amp.get_floating_point_dtype() is torch.float32


def test_cbfloat16_computes_in_its_proxy_float16_with_one_warning():
    """The real API represents cbfloat16 by the proxy dtype float16 off the wafer; so does
    cstorch, warning once per process what differs from the wafer."""
    with pytest.warns(UserWarning, match="computes in float16") as record:
        assert cstorch.amp.set_half_dtype("cbfloat16") is torch.float16
        assert cstorch.amp.set_half_dtype("cbfloat16") is torch.float16
    assert sum("cbfloat16" in str(w.message) for w in record) == 1
    assert cstorch.amp.get_half_dtype_str() == "cbfloat16"
    assert cstorch.amp.get_floating_point_dtype() is torch.float16
    assert cstorch.amp.is_cbfloat16_tensor(torch.ones(2, dtype=torch.float16))
    assert not cstorch.amp.is_cbfloat16_tensor(torch.ones(2, dtype=torch.bfloat16))
    cstorch.amp.set_half_dtype("float16")
    assert not cstorch.amp.is_cbfloat16_tensor(torch.ones(2, dtype=torch.float16))


def _half_csx_training(half: str) -> dict:
    from cstorch._backend import _reset_backend
    from cstorch.amp import precision

    _reset_backend()
    precision._reset()
    torch.manual_seed(0)
    backend = cstorch.backend("CSX")
    cstorch.amp.set_half_dtype(half)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    compiled = cstorch.compile(model, backend)
    opt = cstorch.optim.SGD(model.parameters(), lr=0.1)

    @cstorch.trace
    def step(x, y):
        loss = torch.nn.functional.mse_loss(compiled(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(4, 8, generator=g), torch.randn(4, 2, generator=g)) for _ in range(3)]
    for x, y in cstorch.utils.data.DataExecutor(cstorch.utils.data.DataLoader(lambda: batches), num_steps=3):
        step(x, y)
    precision._reset()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_cbfloat16_training_on_csx_is_float16_training():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cb = _half_csx_training("cbfloat16")
    fp16 = _half_csx_training("float16")
    bf16 = _half_csx_training("bfloat16")
    for k in fp16:
        torch.testing.assert_close(cb[k], fp16[k], rtol=0, atol=0)
    assert any(not torch.equal(cb[k], bf16[k]) for k in cb)  # the half dtype did reach the step


def test_autocast_on_cpu_is_bfloat16_only():
    cstorch.backend("CPU")
    with cstorch.amp.autocast(torch.bfloat16):
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype is torch.bfloat16
    with pytest.raises(ValueError, match="only supported with bfloat16"):
        with cstorch.amp.autocast(torch.float16):
            pass


def _mlp_run(half_dtype, steps=60):
    """A small MLP classifier trained on CSX; returns (final loss average, model,
    executable)."""
    _reset_backend()
    precision._reset()
    if half_dtype is not None:
        cstorch.amp.set_half_dtype(half_dtype)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    backend = cstorch.backend("CSX")
    compiled = cstorch.compile(model, backend)
    opt = cstorch.optim.AdamW(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(3)
    teacher = torch.randn(32, 4, generator=g)
    batches = []
    for _ in range(steps):
        x = torch.randn(64, 32, generator=g)
        batches.append((x, (x @ teacher).argmax(1)))
    losses = []

    @cstorch.trace
    def step(x, y):
        loss = F.cross_entropy(compiled(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    @cstorch.step_closure
    def record(loss):
        losses.append(float(loss))

    for x, y in cstorch.utils.data.DataExecutor(cstorch.utils.data.DataLoader(lambda: batches), num_steps=steps):
        record(step(x, y))
    _reset_backend()
    return sum(losses[-10:]) / 10, losses, model, step


def _dot_operand_types(stablehlo: str) -> list[str]:
    """The operand element types of every dot_general in a StableHLO module."""
    return re.findall(r"stablehlo\.dot_general .*: \(tensor<[\dx]*x?(\w+)>, tensor<[\dx]*x?(\w+)>\)", stablehlo)


def test_bfloat16_run_computes_dots_in_bf16_with_f32_weights():
    """With set_half_dtype("bfloat16") every matmul of the step (forward and backward)
    takes bf16 operands while parameters and optimizer state stay float32. XLA:GPU keeps
    the dots bf16 in the optimized HLO; XLA:CPU (this machine) rewrites a bf16 dot into
    an f32 dot of bf16-rounded operands, so there the check is on the lowered module and
    on the bf16 roundings the optimized one keeps."""
    f32_loss, f32_losses, _, f32_step = _mlp_run(None)
    bf16_loss, bf16_losses, model, bf16_step = _mlp_run("bfloat16")
    dots = _dot_operand_types(bf16_step.executable.lowered.as_text())
    assert len(dots) == 5 and all(d == ("bf16", "bf16") for d in dots), dots  # 2 forward, 3 backward
    assert all(d == ("f32", "f32") for d in _dot_operand_types(f32_step.executable.lowered.as_text()))
    optimized = bf16_step.executable.compiled.as_text()
    if jax.default_backend() == "cpu":
        assert len(re.findall(r"= bf16\[[\d,]*\]\{[\d,]*\} convert\(", optimized)) >= 5
    else:
        compiled_dots = [ln for ln in optimized.splitlines() if re.search(r"\bdot\(", ln)]
        assert compiled_dots and all("bf16[" in ln for ln in compiled_dots), compiled_dots
    state_dtypes = {spec.dtype for spec in bf16_step.executable.captured.state_specs}
    assert state_dtypes == {torch.float32}, state_dtypes
    assert all(p.dtype is torch.float32 for p in model.parameters())
    assert f32_losses[-1] < 0.5 * f32_losses[0], "the f32 reference run should learn"
    assert bf16_losses != f32_losses, "the bf16 run must really compute in bf16"
    assert abs(bf16_loss - f32_loss) <= 0.02 * f32_loss, (bf16_loss, f32_loss)
