"""The legacy runner (cstorch.trainer.legacy.runner) over the Trainer: hook order and counts on
CPU (every step) and CSX (in-step hooks once), the data a hook returns is what the model
trains on, losses and parameters against eager torch, overridden steps, and `run()`."""
from __future__ import annotations

import copy
import os
import textwrap

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import cstorch
from cstorch.trainer.config import ConfigError
from cstorch.trainer.legacy.runner import PyTorchBaseRunner, run

LR = 0.1


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 1)

    def forward(self, batch):
        x, y = batch
        return F.mse_loss(self.fc2(torch.relu(self.fc1(x))).squeeze(-1), y)


_g = torch.Generator().manual_seed(0)
X, Y = torch.randn(24, 4, generator=_g), torch.randn(24, generator=_g)
BATCHES = [(X[i:i + 4], Y[i:i + 4]) for i in range(0, 24, 4)]


def torch_loader():
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y), batch_size=4)


def legacy_params(tmp_path, device, **runconfig):
    run_cfg = {"target_device": device, "model_dir": str(tmp_path / "model"), "seed": 1, "max_steps": 4,
               "log_steps": 1, **runconfig}
    return {"runconfig": run_cfg, "optimizer": {"optimizer_type": "SGD", "learning_rate": LR}}


def make_model_fn(initial: dict):
    """model_fn(params) that keeps a copy of the fresh model's weights in `initial`."""
    def model_fn(params):
        model = MLP()
        initial.update(copy.deepcopy(model.state_dict()))
        return model
    return model_fn


def zero_inputs(batch):
    x, y = batch
    return x * 0, y


def eager(initial: dict, steps: int, transform=lambda b: b, step_optimizer: bool = True):
    """(model, losses) of `steps` eager SGD steps on BATCHES (each through `transform`)."""
    model = MLP()
    model.load_state_dict(initial)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    for batch in BATCHES[:steps]:
        opt.zero_grad()
        loss = model(transform(batch))
        loss.backward()
        if step_optimizer:
            opt.step()
        losses.append(loss.item())
    return model, losses


class Recorder(PyTorchBaseRunner):
    """Records every runner hook and step; `transform` is applied by on_train_batch_start."""

    def __init__(self, *args, transform=lambda b: b, **kwargs):
        self.calls, self.train_ends, self.eval_ends, self.saved = [], [], [], []
        self.transform = transform
        super().__init__(*args, **kwargs)

    def on_train_start(self): self.calls.append("on_train_start")
    def on_train_end(self, early_exit): self.calls.append(f"on_train_end({early_exit})")
    def on_eval_start(self): self.calls.append("on_eval_start")
    def on_eval_end(self, early_exit): self.calls.append(f"on_eval_end({early_exit})")
    def on_train_epoch_start(self): self.calls.append("on_train_epoch_start")
    def on_train_epoch_end(self, early_exit): self.calls.append(f"on_train_epoch_end({early_exit})")
    def on_eval_epoch_start(self): self.calls.append("on_eval_epoch_start")
    def on_eval_epoch_end(self, early_exit): self.calls.append(f"on_eval_epoch_end({early_exit})")

    def on_train_batch_start(self, data):
        self.calls.append("on_train_batch_start")
        return self.transform(data)

    def on_train_batch_end(self, loss, epoch=None, step=None):
        self.calls.append("on_train_batch_end")
        self.train_ends.append((float(loss), epoch, step))

    def on_eval_batch_start(self, data):
        self.calls.append("on_eval_batch_start")
        return data

    def on_eval_batch_end(self, loss, epoch=None, step=None):
        self.calls.append("on_eval_batch_end")
        self.eval_ends.append((float(loss), epoch, step))

    def on_checkpoint_saved(self, path, step):
        self.calls.append("on_checkpoint_saved")
        self.saved.append((path, step))

    def train_forward(self, data):
        self.calls.append("train_forward")
        return super().train_forward(data)

    def eval_forward(self, data):
        self.calls.append("eval_forward")
        return super().eval_forward(data)

    def backward(self, loss):
        self.calls.append("backward")
        super().backward(loss)

    def optimizer_zero_grad(self):
        self.calls.append("optimizer_zero_grad")
        super().optimizer_zero_grad()

    def optimizer_step(self):
        self.calls.append("optimizer_step")
        super().optimizer_step()

    def lr_scheduler_step(self):
        self.calls.append("lr_scheduler_step")
        super().lr_scheduler_step()

    def compute_eval_metrics(self):
        self.calls.append("compute_eval_metrics")
        super().compute_eval_metrics()


# §3.7: batch_start -> zero_grad -> forward -> backward -> optimizer_step -> lr_scheduler_step -> batch_end
IN_TRAIN_STEP = ["on_train_batch_start", "optimizer_zero_grad", "train_forward", "backward", "optimizer_step",
                 "lr_scheduler_step"]
IN_EVAL_STEP = ["on_eval_batch_start", "eval_forward"]


def expected_calls(steps, eval_frequency, eval_steps, checkpoint_steps, traced_once):
    seq, first_train, first_eval = ["on_train_start"], True, True
    for start in range(0, steps, eval_frequency):
        seq.append("on_train_epoch_start")
        for g in range(start + 1, start + eval_frequency + 1):
            if first_train or not traced_once:
                seq += IN_TRAIN_STEP
            first_train = False
            seq.append("on_train_batch_end")
            if g % checkpoint_steps == 0:
                seq.append("on_checkpoint_saved")
        seq += ["on_train_epoch_end(False)", "on_eval_start", "on_eval_epoch_start"]
        for _ in range(eval_steps):
            if first_eval or not traced_once:
                seq += IN_EVAL_STEP
            first_eval = False
            seq.append("on_eval_batch_end")
        seq += ["on_eval_epoch_end(False)", "compute_eval_metrics", "on_eval_end(False)"]
    return seq + ["on_train_end(False)"]


@pytest.mark.parametrize("device", ["CPU", "CSX"])
def test_hooks_order_counts_and_numerics(tmp_path, device):
    """train_and_eval: 4 steps, validation every 2 steps (2 batches), a checkpoint every 2.
    The inputs are zeroed by on_train_batch_start, so fc1.weight gets no gradient."""
    initial = {}
    params = legacy_params(tmp_path, device, eval_frequency=2, eval_steps=2, checkpoint_steps=2)
    runner = Recorder.create(make_model_fn(initial), params, transform=zero_inputs, loggers=[])
    runner.train_and_eval(torch_loader(), torch_loader())

    assert runner.calls == expected_calls(4, 2, 2, 2, traced_once=device == "CSX")
    assert [(e, s) for _, e, s in runner.train_ends] == [(0, 1), (0, 2), (1, 3), (1, 4)]
    assert [(e, s) for _, e, s in runner.eval_ends] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert [s for _, s in runner.saved] == [2, 4]
    assert all(os.path.isfile(p) for p, _ in runner.saved)
    assert runner.global_step == 4

    reference, losses = eager(initial, 4, transform=zero_inputs)
    torch.testing.assert_close([loss for loss, _, _ in runner.train_ends], losses, rtol=1e-5, atol=1e-6)
    state = {k: v.cpu() for k, v in runner.model.state_dict().items()}
    torch.testing.assert_close(state["fc1.weight"], initial["fc1.weight"], rtol=0, atol=0)  # zero inputs
    assert not torch.equal(state["fc2.weight"], initial["fc2.weight"])
    for name, value in reference.state_dict().items():
        torch.testing.assert_close(state[name], value, rtol=1e-5, atol=1e-6)


class NoOptimizerStep(PyTorchBaseRunner):
    def __init__(self, *args, **kwargs):
        self.losses = []
        super().__init__(*args, **kwargs)

    def optimizer_step(self):
        pass

    def on_train_batch_end(self, loss, epoch=None, step=None):
        self.losses.append(float(loss))


@pytest.mark.parametrize("device", ["CPU", "CSX"])
def test_optimizer_step_override_leaves_parameters(tmp_path, device):
    initial = {}
    runner = NoOptimizerStep.create(make_model_fn(initial), legacy_params(tmp_path, device, max_steps=3),
                                    loggers=[])
    runner.train(torch_loader())
    assert runner.global_step == 3
    for name, value in runner.model.state_dict().items():
        torch.testing.assert_close(value.cpu(), initial[name], rtol=0, atol=0)
    _, losses = eager(initial, 3, step_optimizer=False)
    torch.testing.assert_close(runner.losses, losses, rtol=1e-5, atol=1e-6)


def test_defaults_train_like_the_trainer_and_evaluate_alone(tmp_path):
    """A runner overriding nothing trains like eager SGD; evaluate() then runs on the weights
    in memory; a runner without a training length can only evaluate."""
    initial = {}
    runner = PyTorchBaseRunner.create(make_model_fn(initial), legacy_params(tmp_path, "CPU", max_steps=2),
                                      loggers=[])
    runner.train(torch_loader())
    reference, _ = eager(initial, 2)
    for name, value in reference.state_dict().items():
        torch.testing.assert_close(runner.model.state_dict()[name], value, rtol=1e-5, atol=1e-6)
    runner.evaluate(torch_loader())
    assert runner.trainer.last_metrics["eval/loss"] == pytest.approx(
        sum(reference(b).item() for b in BATCHES) / len(BATCHES), rel=1e-5)

    from cstorch._backend import _reset_backend

    _reset_backend()
    params = legacy_params(tmp_path, "CPU")
    del params["runconfig"]["max_steps"]
    eval_only = PyTorchBaseRunner.create(make_model_fn({}), params, loggers=[])
    with pytest.raises(ConfigError, match="max_steps"):
        eval_only.train(torch_loader())


def test_early_exit_reaches_the_hooks(tmp_path):
    class Failing(Recorder):
        def on_train_batch_end(self, loss, epoch=None, step=None):
            super().on_train_batch_end(loss, epoch, step)
            if step == 2:
                raise ValueError("stop here")

    runner = Failing.create(make_model_fn({}), legacy_params(tmp_path, "CPU"), loggers=[])
    with pytest.raises(ValueError, match="stop here"):
        runner.train(torch_loader())
    assert runner.calls[-2:] == ["on_train_epoch_end(True)", "on_train_end(True)"]


LEGACY_YAML = textwrap.dedent("""
    train_input: {batch_size: 4}
    eval_input: {batch_size: 4}
    optimizer:
      optimizer_type: SGD
      learning_rate: 0.1
    runconfig:
      max_steps: 10
      num_steps: 10
      checkpoint_steps: 1
      eval_steps: 2
      seed: 1
""")


def test_run_legacy_entry_point(tmp_path, capsys):
    path = tmp_path / "params.yaml"
    path.write_text(LEGACY_YAML)
    seen = {}

    def model_fn(params):
        seen["model"] = params
        return MLP()

    def train_data_fn(params):
        seen["train_batch_size"] = params["train_input"]["batch_size"]
        return torch_loader()  # a torch DataLoader: run() wraps it

    def eval_data_fn(params):
        return cstorch.utils.data.DataLoader(torch_loader)

    def defaults(params):
        params["runconfig"].setdefault("log_steps", 1)

    model_dir = tmp_path / "out"
    runner = run(model_fn, train_data_fn, eval_data_fn, default_params_fn=defaults,
                 argv=["CPU", "--params", str(path), "--mode", "train_and_eval", "--model_dir", str(model_dir),
                       "--max_steps", "2"])
    run_cfg = seen["model"]["runconfig"]
    assert run_cfg["target_device"] == "CPU" and run_cfg["max_steps"] == 2 and "num_steps" not in run_cfg
    assert run_cfg["log_steps"] == 1 and seen["train_batch_size"] == 4
    assert runner.global_step == 2 and runner.backend.backend_type.name == "CPU"
    assert sorted(os.listdir(model_dir)).count("checkpoint_2.mdl") == 1
    assert "eval/loss" in runner.trainer.last_metrics

    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        run(model_fn, train_data_fn, eval_data_fn, argv=["CPU", "--params", str(path), "--compile_only"])
    assert info.value.code == 2
    assert "error: --compile_only: CSX settings, but the target device is CPU" in capsys.readouterr().err

    # eval_all in a new process (backend): every checkpoint of model_dir, one evaluation each
    from cstorch._backend import _reset_backend

    _reset_backend()
    runner = run(model_fn, None, eval_data_fn, argv=["CPU", "--params", str(path), "--mode", "eval_all",
                                                     "--model_dir", str(model_dir)], runner_cls=Recorder)
    assert runner.calls.count("on_eval_start") == 2 and runner.calls.count("on_eval_batch_end") == 4
    assert "train_forward" not in runner.calls


def test_run_exits_2_when_the_mode_cannot_run(tmp_path, capsys):
    """A ConfigError raised when the mode starts (train without a training length) is a
    configuration mistake like the others: status 2 and its message, no traceback."""
    path = tmp_path / "params.yaml"
    path.write_text(LEGACY_YAML.replace("  max_steps: 10\n", "").replace("  num_steps: 10\n", ""))
    with pytest.raises(SystemExit) as info:
        run(lambda params: MLP(), lambda params: torch_loader(), None,
            argv=["CPU", "--params", str(path), "--mode", "train", "--model_dir", str(tmp_path / "out")])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "error: train needs the training length: set runconfig.max_steps" in err and "Traceback" not in err
    with pytest.raises(SystemExit) as info:
        run(lambda params: MLP(), None, None, argv=["CPU", "--params", str(path), "--mode", "eval"])
    assert info.value.code == 2
    assert "error: mode eval needs eval_data_fn; pass it to run()" in capsys.readouterr().err


MARKER = "from cstorch.trainer.callbacks import Callback\n\nclass Marker(Callback):\n    pass\n"


def test_file_names_resolve_from_base_dir(tmp_path, monkeypatch):
    """`file.py:Class` names in the params resolve from the runner's base_dir (run() passes
    the params file's folder), not from the working directory."""
    yaml_dir = tmp_path / "yaml"
    yaml_dir.mkdir()
    (yaml_dir / "marker.py").write_text(MARKER)
    monkeypatch.chdir(tmp_path)
    params = {"trainer": {"init": {"device": "CPU", "model_dir": str(tmp_path / "model"), "seed": 1,
                                   "callbacks": [{"marker.py:Marker": {}}]}}}
    with pytest.raises(ConfigError, match="marker.py.*does not exist"):
        PyTorchBaseRunner(MLP(), params, loggers=[])
    runner = PyTorchBaseRunner(MLP(), params, loggers=[], base_dir=str(yaml_dir))
    assert [type(c).__name__ for c in runner.trainer.callbacks].count("Marker") == 1

    class Remember(PyTorchBaseRunner):
        def __init__(self, *args, base_dir=None, **kwargs):
            self.base_dir = base_dir
            super().__init__(*args, base_dir=base_dir, **kwargs)

    from cstorch._backend import _reset_backend

    _reset_backend()
    path = yaml_dir / "params.yaml"
    path.write_text(LEGACY_YAML)
    runner = run(lambda params: MLP(), None, lambda params: torch_loader(), runner_cls=Remember,
                 argv=["CPU", "--params", "yaml/params.yaml", "--mode", "eval", "--model_dir", "out"])
    assert runner.base_dir == str(yaml_dir)
