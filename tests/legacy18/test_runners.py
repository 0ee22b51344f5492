"""The Model Zoo 1.8 runner classes (seeds/000_PyTorch_Runners.txt) from their 1.8
module paths: a custom runner for each device class, used the way the seed says (the
runner initialisation in `PyTorchBaseRunner.create` replaced), run through
`run(model_fn, train_data_fn, eval_data_fn)` on CPU, CSX and compile only: the hooks
in order, CSX = CPU parameters and losses, nothing trained or saved when compiling."""
from __future__ import annotations

import copy
import os
import textwrap

import pytest
import torch
import torch.nn.functional as F

import cstorch
from cstorch._backend import _reset_backend
from cstorch.trainer.config import ConfigError
from modelzoo.common.pytorch.PyTorchBaseModel import PyTorchBaseModel
from modelzoo.common.pytorch.pytorch_base_runner import PyTorchBaseRunner
from modelzoo.common.pytorch.pytorch_cs_compiler import PyTorchCSCompiler
from modelzoo.common.pytorch.pytorch_cs_runner import PyTorchCSRunner
from modelzoo.common.pytorch.pytorch_runner import PyTorchRunner
from modelzoo.common.pytorch.run_utils import run


class Regressor(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 8)
        self.fc2 = torch.nn.Linear(8, 1)

    def forward(self, batch):
        x, y = batch
        return F.mse_loss(self.fc2(torch.tanh(self.fc1(x))).squeeze(-1), y)


_g = torch.Generator().manual_seed(0)
X, Y = torch.randn(24, 4, generator=_g), torch.randn(24, generator=_g)


def model_fn(params):
    return Regressor()


def train_data_fn(params):
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y),
                                       batch_size=params["train_input"]["batch_size"])


def eval_data_fn(params):
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y),
                                       batch_size=params["eval_input"]["batch_size"])


PARAMS = textwrap.dedent("""
    train_input: {batch_size: 4}
    eval_input: {batch_size: 4}
    optimizer:
      optimizer_type: SGD
      learning_rate: 0.1
      momentum: 0.9
    runconfig:
      max_steps: 3
      checkpoint_steps: 3
      eval_steps: 2
      log_steps: 1
      seed: 1
""")


class HookLog:
    """The seed's custom runner: hooks overridden, each calling the superclass's."""

    def __init__(self, *args, **kwargs):
        self.calls, self.losses = [], []
        super().__init__(*args, **kwargs)

    def _log(self, name):
        self.calls.append(name)

    def on_train_start(self):
        self._log("on_train_start")
        super().on_train_start()

    def on_train_end(self, early_exit):
        self._log(f"on_train_end({early_exit})")
        super().on_train_end(early_exit)

    def on_eval_start(self):
        self._log("on_eval_start")
        super().on_eval_start()

    def on_eval_end(self, early_exit):
        self._log(f"on_eval_end({early_exit})")
        super().on_eval_end(early_exit)

    def on_train_epoch_start(self):
        self._log("on_train_epoch_start")
        super().on_train_epoch_start()

    def on_train_epoch_end(self, early_exit):
        self._log(f"on_train_epoch_end({early_exit})")
        super().on_train_epoch_end(early_exit)

    def on_eval_epoch_start(self):
        self._log("on_eval_epoch_start")
        super().on_eval_epoch_start()

    def on_eval_epoch_end(self, early_exit):
        self._log(f"on_eval_epoch_end({early_exit})")
        super().on_eval_epoch_end(early_exit)

    def on_train_batch_start(self, data):
        self._log("on_train_batch_start")
        return super().on_train_batch_start(data)

    def on_train_batch_end(self, loss, epoch=None, step=None):
        self._log("on_train_batch_end")
        cstorch.step_closure(lambda value: self.losses.append(float(value)))(loss)  # custom logging
        super().on_train_batch_end(loss, epoch, step)

    def on_eval_batch_start(self, data):
        self._log("on_eval_batch_start")
        return super().on_eval_batch_start(data)

    def on_eval_batch_end(self, loss, epoch=None, step=None):
        self._log("on_eval_batch_end")
        super().on_eval_batch_end(loss, epoch, step)

    def on_checkpoint_saved(self, path, step):
        self._log("on_checkpoint_saved")
        super().on_checkpoint_saved(path, step)


class MyRunner(HookLog, PyTorchRunner):
    pass


class MyCSRunner(HookLog, PyTorchCSRunner):
    pass


class MyCSCompiler(HookLog, PyTorchCSCompiler):
    pass


def create(model_fn, params):
    """PyTorchBaseRunner.create with the runner initialisation changed to the custom runners."""
    runconfig = params["runconfig"]
    compile_only = runconfig.get("compile_only") or runconfig.get("validate_only")
    if runconfig["target_device"] == "CSX":
        model = PyTorchBaseModel(params, model_fn)
        return MyCSCompiler(model, params) if compile_only else MyCSRunner(model, params)
    device = torch.device("cpu")
    return MyRunner(device, PyTorchBaseModel(params, model_fn, device), params)


def expected_hooks(steps: int, eval_steps: int, in_step_once: bool, checkpoint: bool) -> list:
    train = ["on_train_batch_start", "on_train_batch_end"] + ["on_train_batch_end"] * (steps - 1) if in_step_once \
        else ["on_train_batch_start", "on_train_batch_end"] * steps
    evals = ["on_eval_batch_start", "on_eval_batch_end"] + ["on_eval_batch_end"] * (eval_steps - 1) if in_step_once \
        else ["on_eval_batch_start", "on_eval_batch_end"] * eval_steps
    return (["on_train_start", "on_train_epoch_start", *train, *(["on_checkpoint_saved"] if checkpoint else []),
             "on_train_epoch_end(False)", "on_eval_start", "on_eval_epoch_start", *evals,
             "on_eval_epoch_end(False)", "on_eval_end(False)", "on_train_end(False)"])


def _run(tmp_path, device, *flags):
    _reset_backend()
    params_file = tmp_path / "params.yaml"
    params_file.write_text(PARAMS)
    model_dir = tmp_path / f"model_{device}{'_'.join(flags)}"
    argv = [device, "--params", str(params_file), "--mode", "train_and_eval", "--model_dir", str(model_dir), *flags]
    return run(model_fn, train_data_fn, eval_data_fn, argv=argv), model_dir


def test_custom_runners_through_run_on_cpu_csx_and_compile_only(tmp_path, monkeypatch):
    monkeypatch.setattr(PyTorchBaseRunner, "create", staticmethod(create))
    torch.manual_seed(1)
    initial = Regressor().state_dict()  # runconfig.seed 1: the weights every run starts from

    cpu, cpu_dir = _run(tmp_path, "CPU")
    assert type(cpu) is MyRunner and cpu.backend.is_cpu and cpu.device == torch.device("cpu")
    assert cpu.calls == expected_hooks(3, 2, in_step_once=False, checkpoint=True)

    csx, csx_dir = _run(tmp_path, "CSX")
    assert type(csx) is MyCSRunner and csx.backend.is_csx
    assert csx.calls == expected_hooks(3, 2, in_step_once=True, checkpoint=True)

    assert len(cpu.losses) == 3 and csx.losses == pytest.approx(cpu.losses, rel=1e-5)
    for name, value in cpu.model.state_dict().items():
        assert not torch.equal(value, initial[name])
        torch.testing.assert_close(csx.model.state_dict()[name], value, rtol=1e-5, atol=1e-6)
    assert "checkpoint_3.mdl" in os.listdir(cpu_dir) and "checkpoint_3.mdl" in os.listdir(csx_dir)

    compiler, compile_dir = _run(tmp_path, "CSX", "--compile_only")
    assert type(compiler) is MyCSCompiler and not compiler.backend.is_e2e_execution
    assert compiler.calls == expected_hooks(1, 1, in_step_once=True, checkpoint=False)
    assert compiler.losses == []  # nothing ran
    for name, value in compiler.model.state_dict().items():
        torch.testing.assert_close(value, initial[name], rtol=0, atol=0)
    assert not [f for f in os.listdir(compile_dir) if f.endswith(".mdl")]


def _params(device, **runconfig):
    return {"optimizer": {"optimizer_type": "SGD", "learning_rate": 0.1},
            "runconfig": {"target_device": device, "max_steps": 2, "seed": 1, **runconfig}}


@pytest.mark.parametrize("device, flags, cls", [("CPU", {}, PyTorchRunner), ("CSX", {}, PyTorchCSRunner),
                                                ("CSX", {"compile_only": True}, PyTorchCSCompiler),
                                                ("CSX", {"validate_only": True}, PyTorchCSCompiler)])
def test_create_picks_the_runner_of_the_params(tmp_path, device, flags, cls):
    params = _params(device, model_dir=str(tmp_path), **flags)
    runner = PyTorchBaseRunner.create(model_fn, params, loggers=[])
    assert type(runner) is cls
    assert runner.backend.backend_type.name == device
    assert runner.backend.is_e2e_execution == (not flags)
    assert runner.backend.compile_only == bool(flags.get("compile_only"))


def test_base_model_reports_the_runners_optimizer_and_scheduler(tmp_path):
    params = _params("CPU", model_dir=str(tmp_path))
    params["optimizer"]["learning_rate"] = {"scheduler": "Linear", "initial_learning_rate": 0.1,
                                            "end_learning_rate": 0.0, "total_iters": 2}
    model = PyTorchBaseModel(params, model_fn)
    assert model.get_optimizer() is None and isinstance(model.model, Regressor) and model.torch_model is model.model
    runner = MyRunner("cpu", model, params, loggers=[])
    assert model.get_optimizer() is runner.optimizer and isinstance(runner.optimizer, cstorch.optim.SGD)
    assert model.get_lr_scheduler() is runner.lr_schedulers[0]
    assert isinstance(model.get_lr_scheduler(), cstorch.optim.lr_scheduler.LinearLR)
    model.eval()
    assert not model.model.training and model.mode == "eval"
    model.train()
    assert model.model.training and model.mode == "train"
    batch = (X[:4], Y[:4])
    assert torch.equal(model(batch), model.model(batch))

    class Subclassed(PyTorchBaseModel):  # pre-1.8 models subclass it; create builds them as cls(params)
        def __init__(self, params):
            super().__init__(params, Regressor())

    _reset_backend()
    runner = PyTorchBaseRunner.create(Subclassed, _params("CPU", model_dir=str(tmp_path / "b")), loggers=[])
    assert isinstance(runner.model, Regressor)


def test_device_runners_refuse_params_for_another_device(tmp_path):
    model = PyTorchBaseModel(_params("CPU"), model_fn)
    with pytest.raises(ConfigError, match="PyTorchCSRunner runs on CSX, but runconfig.target_device is 'CPU'"):
        PyTorchCSRunner(model, _params("CPU"))
    with pytest.raises(ConfigError, match="with compile_only / validate_only use PyTorchCSCompiler"):
        PyTorchCSRunner(model, _params("CSX", compile_only=True))
    with pytest.raises(ConfigError, match="PyTorchRunner runs on CPU, but runconfig.target_device is 'CSX'"):
        PyTorchRunner("cpu", model, _params("CSX"))
    with pytest.raises(ConfigError, match="target device is CPU: target CSX"):
        PyTorchBaseRunner.create(model_fn, _params("CPU", compile_only=True))
    with pytest.raises(ConfigError, match="set one of compile_only and validate_only"):
        PyTorchBaseRunner.create(model_fn, _params("CSX", compile_only=True, validate_only=True))
    with pytest.raises(ConfigError, match="legacy flat params"):
        PyTorchCSRunner(model, {"trainer": {"init": {}}})


def test_compiler_defaults_to_compile_only(tmp_path):
    params = _params("CSX", model_dir=str(tmp_path))
    before = copy.deepcopy(params)
    runner = PyTorchCSCompiler(PyTorchBaseModel(params, model_fn), params, loggers=[])
    assert runner.backend.compile_only and not runner.backend.validate_only
    assert params == before  # the caller's params are not changed
