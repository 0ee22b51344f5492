"""Steps in windows (`steps_per_launch`): K calls of a compiled CSX step launch as one
executable, and every step computes what it computes launched alone, bit for bit:
losses, parameters, optimizer state, closures' values and their order."""
import time

import numpy as np
import pytest
import torch
import torch.nn as nn

import cstorch
from cstorch._backend import _reset_backend
from cstorch.run.window import StepWindow


class MNISTNet(nn.Module):
    """The documentation's 784-256-10 network, narrowed."""

    def __init__(self, dropout=0.0):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(32, 24), nn.Linear(24, 10)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return self.fc2(self.drop(torch.relu(self.fc1(x))))


@pytest.fixture(autouse=True)
def _no_slow_calls(request, monkeypatch):
    """Launch sizes exact on a loaded machine: no call counts as late (SLOW_CALL_S), except
    in the slow-loader test, whose subject that is."""
    if "slower_than_the_step" not in request.node.name:
        monkeypatch.setattr(StepWindow, "SLOW_CALL_S", float("inf"))


def _batches(n, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(8, 32, generator=g), torch.randint(0, 10, (8,), generator=g)) for _ in range(n)]


def _traced_step(compiled, opt, sched=None):
    """A cross-entropy training step of `compiled` with `opt` (and `sched`), traced."""
    @cstorch.trace
    def step(x, y):
        loss = nn.functional.cross_entropy(compiled(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        if sched is not None:
            sched.step()
        return loss

    return step


def _sgd_step(make_model=MNISTNet):
    """A fresh CSX backend, a model built after seeding torch with 0, and its traced
    cross-entropy step with SGD(lr=0.05): (model, step)."""
    _reset_backend()
    torch.manual_seed(0)
    b = cstorch.backend("CSX")
    model = make_model()
    return model, _traced_step(cstorch.compile(model, b), cstorch.optim.SGD(model.parameters(), lr=0.05))


def _train(steps_per_launch, *, steps=11, dropout=0.0, read_every=0, edit_at=None, checkpoint_steps=None,
           model_dir=None, scheduler=False):
    """Train MNISTNet for `steps` on CSX; every step's loss (from a step closure, in call
    order with its user_iteration), host reads every `read_every` steps, the final state."""
    _reset_backend()
    torch.manual_seed(0)
    b = cstorch.backend("CSX", artifact_dir=str(model_dir or "cerebras_logs"))
    model = MNISTNet(dropout)
    compiled = cstorch.compile(model, b)
    opt = cstorch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sched = (cstorch.optim.lr_scheduler.StepLR(opt, initial_learning_rate=0.05, step_size=3, gamma=0.5)
             if scheduler else None)
    closure_losses, read_losses, checkpoints = [], [], []

    @cstorch.step_closure
    def record(loss, step):
        closure_losses.append((step, loss.item()))

    @cstorch.checkpoint_closure
    def save(step):
        checkpoints.append((step, {k: v.clone() for k, v in model.state_dict().items()}))

    step = _traced_step(compiled, opt, sched)

    data = _batches(steps)
    executor = cstorch.utils.data.DataExecutor(cstorch.utils.data.DataLoader(lambda: data), num_steps=steps,
                                               checkpoint_steps=checkpoint_steps, steps_per_launch=steps_per_launch)
    for i, (x, y) in enumerate(executor):
        if edit_at is not None and i == edit_at:
            with torch.no_grad():
                model.fc1.bias.add_(0.25)  # a host edit between two steps
        loss = step(x, y)
        record(loss, executor.user_iteration)
        if read_every and i % read_every == 0:
            read_losses.append(float(loss))
        if executor.is_checkpoint_step:
            save(executor.user_iteration)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    momenta = [opt.state[p]["momentum_buffer"].clone() for p in model.parameters()]
    launched = dict(step.program.launched)
    assert step.report.summary().as_dict().get("steps per launch (launches x steps)", "").startswith(
        ", ".join(f"{n} x {k}" for k, n in sorted(launched.items(), reverse=True)))
    return closure_losses, read_losses, state, momenta, checkpoints, launched


def _same(a, b):
    closure_a, read_a, state_a, mom_a, ck_a, _ = a
    closure_b, read_b, state_b, mom_b, ck_b, _ = b
    assert closure_a == closure_b
    assert read_a == read_b
    for k in state_a:
        np.testing.assert_array_equal(state_a[k].numpy(), state_b[k].numpy(), err_msg=k)
    for m, n in zip(mom_a, mom_b):
        np.testing.assert_array_equal(m.numpy(), n.numpy())
    assert [s for s, _ in ck_a] == [s for s, _ in ck_b]
    for (_, sa), (_, sb) in zip(ck_a, ck_b):
        for k in sa:
            np.testing.assert_array_equal(sa[k].numpy(), sb[k].numpy(), err_msg=k)


@pytest.mark.parametrize("k", [4, 5])
def test_windows_equal_one_step_at_a_time(k):
    one = _train(1)
    assert [s for s, _ in one[0]] == list(range(1, 12))
    windows = _train(k)
    _same(one, windows)
    assert one[5] == {1: 11}
    # 11 = 4 + 4 + 3 (5 + 5 + 1): the last window ends at the last step; a count is compiled when it
    # comes a second time, so the first window and the tail run call by call
    assert windows[5] == ({4: 1, 1: 7} if k == 4 else {5: 1, 1: 6})


def test_windows_with_dropout_scheduler_host_edit_reads_and_checkpoints(tmp_path):
    kwargs = dict(dropout=0.3, scheduler=True, read_every=3, edit_at=5, checkpoint_steps=4)
    one = _train(1, model_dir=tmp_path / "one", **kwargs)
    assert [s for s, _ in one[4]] == [4, 8, 11]
    _same(one, _train(4, model_dir=tmp_path / "four", **kwargs))


def _train_fp16(steps_per_launch, steps=12):
    """A float16 MNISTNet with a dynamic loss scaler whose first scales overflow: some steps
    skipped inside a window. Every step's (loss, scale, skipped) and the final state."""
    from cstorch.amp import precision

    _reset_backend()
    cstorch.amp.set_half_dtype("float16")
    try:
        torch.manual_seed(0)
        b = cstorch.backend("CSX")
        model = MNISTNet()
        compiled = cstorch.compile(model, b)
        opt = cstorch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        scaler = cstorch.amp.GradScaler(loss_scale="dynamic", init_scale=2.0**24, max_loss_scale=2.0**24,
                                        steps_per_increase=3)
        seen = []

        @cstorch.trace
        def step(x, y):
            loss = nn.functional.cross_entropy(compiled(x), y)
            cstorch.amp.optimizer_step(loss, opt, scaler)
            return loss, scaler.get_scale(), scaler.get_num_skipped_steps()

        @cstorch.step_closure
        def record(loss, scale, skipped):
            seen.append((float(loss), float(scale), int(skipped)))

        data = _batches(steps)
        loader = cstorch.utils.data.DataLoader(lambda: data)
        for x, y in cstorch.utils.data.DataExecutor(loader, num_steps=steps, steps_per_launch=steps_per_launch):
            record(*step(x, y))
        return seen, {k: v.clone() for k, v in model.state_dict().items()}, dict(step.program.launched)
    finally:
        _reset_backend()
        precision._reset()


def test_windows_keep_a_float16_loss_scalers_skipped_steps():
    seen_one, state_one, _ = _train_fp16(1)
    seen_four, state_four, launched = _train_fp16(4)
    assert 0 < seen_one[-1][2] < len(seen_one)  # some steps skipped, not all
    assert launched == {1: 4, 4: 2}
    assert seen_four == seen_one
    for k in state_one:
        np.testing.assert_array_equal(state_one[k].numpy(), state_four[k].numpy(), err_msg=k)


class SlowLoader:
    """Batches that take longer to load than a step to run."""

    def __init__(self, batches, seconds):
        self.batches, self.seconds = batches, seconds

    def __iter__(self):
        for batch in self.batches:
            time.sleep(self.seconds)
            yield batch

    def __len__(self):
        return len(self.batches)


def test_a_loader_slower_than_the_step_launches_each_call_at_once():
    """Holding calls for a window would leave the device idle while the loader works."""
    _, step = _sgd_step()
    data = _batches(6)
    loader = cstorch.utils.data.DataLoader(lambda: SlowLoader(data, 0.03))
    for x, y in cstorch.utils.data.DataExecutor(loader, num_steps=6, steps_per_launch=4):
        step(x, y)
    assert dict(step.program.launched) == {1: 6}


def test_steps_per_launch_must_be_a_positive_integer():
    loader = cstorch.utils.data.DataLoader(lambda: _batches(2))
    _reset_backend()
    cstorch.backend("CSX")
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="steps_per_launch"):
            cstorch.utils.data.DataExecutor(loader, num_steps=2, steps_per_launch=bad)


def _closure_trace(monkeypatch, *, steps, steps_per_launch, device_wait_s=0.0):
    """Train MNISTNet with a step closure per step while the device never reports a
    launch's values as computed (`LaunchValues.ready` False) and each read of them takes
    `device_wait_s`: (the step of each closure call, how many steps had been called when
    it ran) in order, and the launch sizes."""
    from cstorch_jax.async_tensor import LaunchValues

    monkeypatch.setattr(LaunchValues, "ready", property(lambda self: False), raising=False)
    if device_wait_s:
        row = LaunchValues.row

        def slow_row(self, index, r):
            time.sleep(device_wait_s)
            return row(self, index, r)

        monkeypatch.setattr(LaunchValues, "row", slow_row)
    _, step = _sgd_step()
    called, seen = [0], []

    @cstorch.step_closure
    def record(loss, i):
        seen.append((i, called[0]))

    data = _batches(steps)
    executor = cstorch.utils.data.DataExecutor(cstorch.utils.data.DataLoader(lambda: data), num_steps=steps,
                                               steps_per_launch=steps_per_launch)
    for x, y in executor:
        record(step(x, y), executor.iteration)
        called[0] += 1
    return seen, dict(step.program.launched)


def test_a_windows_closures_wait_until_the_next_window_is_launched(monkeypatch):
    """While a window computes, the host adds the next window's calls instead of waiting
    for its values: the closures of window w run once window w + 1 has launched (or the
    run ends), in order, each with its own step's values."""
    seen, launched = _closure_trace(monkeypatch, steps=12, steps_per_launch=4)
    assert [i for i, _ in seen] == list(range(12))
    assert [called for _, called in seen] == [8] * 4 + [12] * 8
    assert launched == {1: 4, 4: 2}  # a count is compiled when it comes a second time


def test_waiting_for_a_windows_values_does_not_cut_the_next_window_short(monkeypatch):
    """A closure that waits for the device (SLOW_CALL_S and more) does not make the next
    call late: the device was busy meanwhile, so the windows stay whole. (SLOW_CALL_S is
    raised to 50 ms so that the host's own time between two calls, on a loaded machine,
    stays below it; each wait is three times that.)"""
    monkeypatch.setattr(StepWindow, "SLOW_CALL_S", 0.05)
    seen, launched = _closure_trace(monkeypatch, steps=16, steps_per_launch=4, device_wait_s=0.15)
    assert [i for i, _ in seen] == list(range(16))
    assert launched == {1: 4, 4: 3}


def test_a_step_with_convolutions_launches_each_call_alone_on_the_cpu():
    """XLA:CPU runs a convolution inside a loop body several times slower than in a launch
    of its own (`cstorch_jax.step_loop.loop_penalty`): such a step is compiled alone, not
    as a loop's body, and computes what it computes launched alone."""
    def train(steps_per_launch):
        model, step = _sgd_step(lambda: nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(),
                                                      nn.Linear(4 * 6 * 6, 10)))
        g = torch.Generator().manual_seed(1)
        data = [(torch.randn(4, 1, 8, 8, generator=g), torch.randint(0, 10, (4,), generator=g)) for _ in range(8)]
        losses = []

        @cstorch.step_closure
        def record(loss):
            losses.append(loss.item())

        for x, y in cstorch.utils.data.DataExecutor(cstorch.utils.data.DataLoader(lambda: data), num_steps=8,
                                                    steps_per_launch=steps_per_launch):
            record(step(x, y))
        return losses, [p.detach().clone() for p in model.parameters()], step

    alone_losses, alone_params, _ = train(1)
    losses, params, step = train(2)
    assert "convolution" in step.program.executable.loop_penalty
    assert dict(step.program.launched) == {1: 8}
    assert not step.program.launches_many and not step.program.executable.loops
    assert losses == alone_losses
    for a, b in zip(params, alone_params):
        assert torch.equal(a, b)
    # an MLP step has nothing that makes a loop slower
    mlp = _train_program()
    assert mlp.loop_penalty is None and mlp.loops


def test_a_step_of_many_products_launches_each_call_alone_on_the_cpu(monkeypatch):
    """Above LOOP_MAX_FLOPS of matrix products per step a window cannot make up for the
    loop body's cost: the step is compiled alone. The count is 2 x multiply-adds of every
    product of the step: MNISTNet (32 -> 24 -> 10, batch 8, the input needs no gradient)
    computes fc1 forward and weight gradient (2 x 8*32*24 each) and fc2 forward, input and
    weight gradient (2 x 8*24*10 each)."""
    from cstorch_jax import step_loop

    flops = 2 * (8 * 32 * 24) * 2 + 2 * (8 * 24 * 10) * 3
    assert step_loop.product_flops(_train_program().captured.module) == flops
    monkeypatch.setattr(step_loop, "LOOP_MAX_FLOPS", flops - 1)
    executable = _train_program()
    assert "GFLOP of matrix products" in executable.loop_penalty and not executable.loops
    monkeypatch.setattr(step_loop, "LOOP_MAX_FLOPS", flops)
    assert _train_program().loops


def _train_program():
    _, step = _sgd_step()
    data = _batches(1)
    for x, y in cstorch.utils.data.DataExecutor(cstorch.utils.data.DataLoader(lambda: data), num_steps=1):
        step(x, y)
    return step.program.executable


def test_prepare_steps_compiles_a_count_before_it_comes():
    """A warm-up: the count's executable exists before any window of that size, and the
    first window of that size launches as one executable (not call by call)."""
    _, step = _sgd_step()
    data = _batches(9)
    executor = cstorch.utils.data.DataExecutor(cstorch.utils.data.DataLoader(lambda: data), num_steps=9,
                                               steps_per_launch=4)
    for i, (x, y) in enumerate(executor):
        step(x, y)
        if i == 0:
            assert step.program.prepare_steps(4) > 0.0
            assert step.program.prepare_steps(4) == 0.0  # compiled once
            assert step.program.prepare_steps(1) == 0.0
    assert dict(step.program.launched) == {4: 2, 1: 1}


def _decoder_run(steps_per_launch, steps=9):
    """A 1-layer GPT decoder with dropout 0.1, AdamW: every step's loss (closures) and the
    final parameters and optimizer moments."""
    from benchmarks.models import GPT

    _reset_backend()
    torch.manual_seed(0)
    b = cstorch.backend("CSX")
    model = GPT(vocab=32, seq=8, d_model=16, n_heads=2, n_layers=1, dropout=0.1)
    compiled = cstorch.compile(model, b)
    opt = cstorch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    g = torch.Generator().manual_seed(3)
    data = [(t[:, :-1].contiguous(), t[:, 1:].contiguous())
            for t in (torch.randint(0, 32, (2, 9), generator=g) for _ in range(steps))]
    losses = []

    @cstorch.trace
    def step(idx, targets):
        loss = compiled(idx, targets)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    @cstorch.step_closure
    def record(loss):
        losses.append(loss.item())

    for idx, targets in cstorch.utils.data.DataExecutor(cstorch.utils.data.DataLoader(lambda: data), num_steps=steps,
                                                        steps_per_launch=steps_per_launch):
        record(step(idx, targets))
    moments = [opt.state[p][k].clone() for p in model.parameters() for k in ("exp_avg", "exp_avg_sq")]
    return losses, [p.detach().clone() for p in model.parameters()], moments, dict(step.program.launched)


def test_windows_of_a_decoder_with_dropout_equal_one_step_at_a_time():
    """Dropout draws a fresh mask every step inside a window, the one each step draws alone."""
    losses_one, params_one, moments_one, _ = _decoder_run(1)
    losses, params, moments, launched = _decoder_run(3)
    assert launched == {1: 3, 3: 2}
    assert losses == losses_one and len(set(losses)) == len(losses)
    for a, b in zip(params + moments, params_one + moments_one):
        assert torch.equal(a, b)


def _metric_run(steps_per_launch, steps=10):
    """MNISTNet trained with an accuracy and a mean-loss metric updated inside the step: the
    metrics' values after the run and the last step's parameters."""
    from cstorch.metrics import AccuracyMetric, MeanMetric

    model, _ = _sgd_step()
    compiled = cstorch.compile(model, cstorch.backend())
    opt = cstorch.optim.SGD(model.parameters(), lr=0.05)
    accuracy, mean_loss = AccuracyMetric("window_accuracy"), MeanMetric("window_mean_loss")

    @cstorch.trace
    def step(x, y):
        logits = compiled(x)
        loss = nn.functional.cross_entropy(logits, y)
        accuracy(y, logits.argmax(-1))
        mean_loss(loss)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    g = torch.Generator().manual_seed(4)
    teacher = torch.randn(32, 10, generator=g)
    data = [(x, (x @ teacher).argmax(-1)) for x in (torch.randn(8, 32, generator=g) for _ in range(steps))]
    for x, y in cstorch.utils.data.DataExecutor(cstorch.utils.data.DataLoader(lambda: data), num_steps=steps,
                                                steps_per_launch=steps_per_launch):
        step(x, y)
    return float(accuracy), float(mean_loss), [p.detach().clone() for p in model.parameters()], dict(
        step.program.launched)


def test_metrics_updated_in_windows_equal_one_step_at_a_time():
    accuracy_one, mean_one, params_one, _ = _metric_run(1)
    accuracy, mean, params, launched = _metric_run(4)
    assert launched == {1: 6, 4: 1}
    assert 0.0 < accuracy_one < 1.0
    assert (accuracy, mean) == (accuracy_one, mean_one)
    for a, b in zip(params, params_one):
        assert torch.equal(a, b)


def _interrupted_then_resumed(steps_per_launch, *, stop_after=6, steps=11, tmp_path=None):
    """Train MNISTNet (SGD with momentum) for `steps`: the loop raises KeyboardInterrupt after
    its `stop_after`-th call (inside a window's span); the host then holds that step's
    state. With `tmp_path` the interrupted run's state is saved, and a new process-like
    start (fresh backend, fresh model and optimizer, both loaded) trains the rest;
    otherwise a new run in the same process does. Every step's loss (closures), the state
    right after the interrupt, and the final parameters and momenta."""
    _reset_backend()
    torch.manual_seed(0)
    b = cstorch.backend("CSX")
    model = MNISTNet()
    compiled = cstorch.compile(model, b)
    opt = cstorch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []

    @cstorch.step_closure
    def record(loss):
        losses.append(loss.item())

    step = _traced_step(compiled, opt)
    data = _batches(steps)
    executor = cstorch.utils.data.DataExecutor(cstorch.utils.data.DataLoader(lambda: data[:stop_after + 1]),
                                               num_steps=stop_after + 1, steps_per_launch=steps_per_launch)
    try:
        for i, (x, y) in enumerate(executor):
            record(step(x, y))
            if i + 1 == stop_after:
                raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    at_interrupt = [p.detach().clone() for p in model.parameters()]
    if tmp_path is not None:
        ckpt = tmp_path / f"k{steps_per_launch}.mdl"
        cstorch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, str(ckpt))
        _reset_backend()
        torch.manual_seed(123)  # different initial weights: the checkpoint must bring them back
        b = cstorch.backend("CSX")
        model = MNISTNet()
        compiled = cstorch.compile(model, b)
        opt = cstorch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        state = cstorch.load(str(ckpt))
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        step = _traced_step(compiled, opt)
    rest = data[stop_after:]
    for x, y in cstorch.utils.data.DataExecutor(cstorch.utils.data.DataLoader(lambda: rest), num_steps=len(rest),
                                                steps_per_launch=steps_per_launch):
        record(step(x, y))
    momenta = [opt.state[p]["momentum_buffer"].clone() for p in model.parameters()]
    return losses, at_interrupt, [p.detach().clone() for p in model.parameters()], momenta


@pytest.mark.parametrize("resumed_from_a_checkpoint", [False, True], ids=["same-process", "resumed"])
def test_an_interrupt_inside_a_window_keeps_the_last_step_and_training_goes_on_bit_for_bit(
        tmp_path, resumed_from_a_checkpoint):
    where = tmp_path if resumed_from_a_checkpoint else None
    straight = _train(1)  # 11 steps, no interrupt
    one = _interrupted_then_resumed(1, tmp_path=where)
    four = _interrupted_then_resumed(4, tmp_path=where)
    assert four[0] == one[0] == [loss for _, loss in straight[0]]
    for a, b in zip(four[1], one[1]):  # the state of step 6, not of the window's end (step 8)
        assert torch.equal(a, b)
    final = list(straight[2].values())
    for a, b, c in zip(four[2], one[2], final):
        assert torch.equal(a, b) and torch.equal(a, c)
    for a, b, c in zip(four[3], one[3], straight[3]):
        assert torch.equal(a, b) and torch.equal(a, c)

