"""The Model Zoo ≤ 1.8 runner API (`PyTorchBaseRunner`, `run`) as a thin layer over the
`Trainer` (research/cerebras_api.md §3.7): the Trainer runs the loop; the runner's hooks
and overridable steps are plugged into it. There is no second training loop.

    class MyRunner(PyTorchBaseRunner):
        def on_train_batch_end(self, loss, epoch=None, step=None):
            print(step, float(loss))

    runner = MyRunner.create(model_fn, params)      # params: the legacy flat dict
    runner.train_and_eval(train_dataloader, eval_dataloader)

How it is built. `PyTorchBaseRunner(model, params)` builds one `Trainer` (a private
subclass) from `params` and adds a private callback that maps the Trainer's hooks to the
runner's:

    runner hook                         called from the Trainer hook
    ---------------------------------   ------------------------------------------------
    on_train_start()                    on_fit_start
    on_train_end(early_exit)            on_fit_end (False) / on_fit_exception (True)
    on_train_epoch_start()              on_train_start (every stretch between validations,
                                        the Trainer's loop_idx is the epoch)
    on_train_epoch_end(early_exit)      on_train_end (False) / on_train_exception (True)
    on_eval_start(), on_eval_epoch_start()
                                        on_validate_start
    on_eval_epoch_end(early_exit),      on_validate_end (False) / on_validate_exception
      compute_eval_metrics() (on        (True), in this order
      success only), on_eval_end(early_exit)
    on_train_batch_start(data) -> data  on_before_forward of a train step: its return
                                        value replaces the batch the model sees
    on_eval_batch_start(data) -> data   on_before_forward of a validation step
    on_train_batch_end(loss, epoch, step)
                                        on_train_batch_end: outputs["loss"], the loop_idx,
                                        trainer.global_step (already counts this step)
    on_eval_batch_end(loss, epoch, step)
                                        on_validate_batch_end: outputs.get("loss"), the
                                        fit's loop_idx (None outside fit), the batch index
    on_checkpoint_saved(path, step)     on_after_save_checkpoint (step: the checkpoint's
                                        global_step)

The overridable steps are the actions of the Trainer's step methods: the Trainer's step
method runs with its hooks, and its action (a method `_RunnerTrainer` overrides) is the
runner's step. The defaults do what the Trainer's own actions do.

    runner step             Trainer action (step method)           default action (trainer.)
    ---------------------   ------------------------------------   --------------------------
    train_forward(data)     model_forward (forward) while          compiled_model(data)
                            trainer.step_kind == "train"
    eval_forward(data)      model_forward (forward) while          compiled_model(data)
                            trainer.step_kind == "validate"
    backward(loss)          loss_backward (backward)               precision.backward(loss)
    optimizer_step()        apply_optimizer_step (optimizer_step)  precision.clip_and_step(
                                                                     optimizer)
    optimizer_zero_grad()   zero_gradients (optimizer_zero_grad,   optimizer.zero_grad()
                            moved to the step start, see below)
    lr_scheduler_step()     schedulers_step, replaced: every       scheduler.step() for every
                            scheduler's before-hook, the step,     scheduler
                            every after-hook

A train_forward / eval_forward that is not overridden leaves the Trainer's model_forward
in place (it also passes on arguments a callback added in on_before_forward).

`train_forward`/`eval_forward` return what the model's forward returns (a loss, a
`(loss, output)` pair or a dict with "loss"). `backward` gets the loss already divided
by `grad_accum_steps`.

Batch order of a train step (§3.7): on_train_batch_start -> optimizer_zero_grad ->
train_forward -> backward -> optimizer_step -> lr_scheduler_step -> (global step + 1)
-> on_train_batch_end. So gradients are zeroed at the start of the step, not after the
optimizer step as in the plain Trainer (the same update: gradients start from zero): the
Trainer's optimizer_zero_grad (its hooks around the runner's optimizer_zero_grad) runs
from the runner's on_before_forward of the step's first micro-batch, and is a no-op,
hooks included, at its own place after the optimizer step.
With `grad_accum_steps = N` the batch is split inside the step: on_train_batch_start,
train_forward and backward run per micro-batch, optimizer_zero_grad once before the
first one.

On CSX the train and validation steps are traced: on_train_batch_start,
on_eval_batch_start and every overridable step run ONCE per mode, while the step is
captured, and what they do to the data and the state is compiled into the step (a
Python side effect, a print or a counter, happens once). On CPU/GPU they run every step.
The other hooks run on the host every step/epoch on every device.

The Model Zoo 1.8 device runners built on this one (`PyTorchRunner`,
`PyTorchCSCompiler`, `PyTorchCSRunner`) live in `cstorch.trainer.legacy.device_runners`, the
`PyTorchBaseModel` a runner may be given in `cstorch.trainer.legacy.base_model`.
`PyTorchBaseRunner.create` is the factory: a device runner class registers itself
(`device_runner=True` in its class statement) and says which params it serves
(`serves(params)`); `create` builds the one that serves the params.

Params. `params` is the legacy flat dict (`train_input`, `eval_input`, `model`,
`optimizer`, `runconfig`, `sparsity`) or a `trainer:` dict; the legacy format is
converted by `cstorch.trainer.legacy.flat_format.convert_legacy` (runconfig.max_steps ->
loop.max_steps, checkpoint_steps -> checkpoint.steps, optimizer.optimizer_type /
learning_rate -> optimizer and schedulers, ...), parsed by `cstorch.trainer.config`,
and the Trainer's arguments are built by `build.trainer_arguments` from the spec of
`init` (`init.loggers` aside: the runner's `loggers` argument decides). The model comes
from the runner's `model` argument, the data from the drivers' arguments, so `model:` (except
mixed_precision / fp16_type) and the dataloader sections are not used here. A
`runconfig.checkpoint_path` is loaded by the first run; without one the latest checkpoint
of model_dir is (as the Trainer does). Without a training length (max_steps, num_steps
or num_epochs) the runner can only evaluate (and builds no optimizer).
"""
from __future__ import annotations

import argparse
import copy
import functools
import inspect
import os
from typing import Callable, Optional, Sequence, Union

import torch

import cstorch

from .. import build
from .. import config as _config
from ..callbacks.base import Callback
from ..callbacks.logs import ModelEvalMetrics
from ..callbacks.loop import TrainingLoop, ValidationLoop
from ..cli import check_csx_target, csx_flags, ensure_host_device_count, positive_int, set_compile_mode, set_max_steps
from ..config import MODES, RUN_MODES, ConfigError
from ..specs import InitSpec
from ..trainer import Trainer
from .base_model import PyTorchBaseModel
from .flat_format import convert_legacy, is_legacy
from .runconfig import Runconfig

#: the device runner classes (`device_runner=True`), in the order they were defined
_DEVICE_RUNNERS: list[type] = []


class _StandInModel(torch.nn.Module):
    """Names the model in the spec that is validated: the real one comes from model_fn."""


def _overrides(runner, name: str) -> bool:
    return getattr(type(runner), name) is not getattr(PyTorchBaseRunner, name)


class _RunnerTrainer(Trainer):
    """The Trainer whose step actions are the runner's steps (table in the module doc):
    the Trainer's step methods and their hooks run unchanged around them."""

    def __init__(self, runner: "PyTorchBaseRunner", **kwargs):
        self.runner = runner
        self._zero_grad_pending = False
        super().__init__(**kwargs)

    def training_step(self, batch):
        self._zero_grad_pending = True
        return super().training_step(batch)

    def model_forward(self, *args, **kwargs):
        name = "train_forward" if self.step_kind == "train" else "eval_forward"
        if not _overrides(self.runner, name):
            return super().model_forward(*args, **kwargs)
        return getattr(self.runner, name)(*args, **kwargs)

    def loss_backward(self, loss: torch.Tensor) -> None:
        self.runner.backward(loss)

    def apply_optimizer_step(self) -> None:
        self.runner.optimizer_step()

    def zero_gradients(self) -> None:
        self.runner.optimizer_zero_grad()

    def optimizer_zero_grad(self) -> None:
        """A no-op at the Trainer's place (after the optimizer step), hooks included: the
        runner zeroes the gradients at the start of the step (`zero_grad_at_step_start`)."""

    def zero_grad_at_step_start(self) -> None:
        """Zero the gradients once per train step, before the first forward: the Trainer's
        optimizer_zero_grad (its hooks around `zero_gradients`) at the runner's place."""
        if not self._zero_grad_pending or self.optimizer is None:
            return
        self._zero_grad_pending = False
        super().optimizer_zero_grad()

    def schedulers_step(self) -> None:
        """The runner's lr_scheduler_step steps every scheduler at once: the Trainer's
        per-scheduler hooks all fire before it and all after it."""
        if not _overrides(self.runner, "lr_scheduler_step"):
            return super().schedulers_step()
        for s in self.schedulers:
            self.call("on_before_scheduler_step", self.model, self.optimizer, s)
        self.runner.lr_scheduler_step()
        for s in self.schedulers:
            self.call("on_after_scheduler_step", self.model, self.optimizer, s)


class _RunnerHooks(Callback):
    """Trainer hooks -> runner hooks (table in the module doc)."""

    def __init__(self, runner: "PyTorchBaseRunner"):
        self.runner = runner
        self.epoch: Optional[int] = None  # the fit's loop_idx; None outside fit
        self.saved_step: Optional[int] = None

    # fit and its stretches
    def on_fit_start(self, trainer, train_dataloader, val_dataloader, loop):
        self.runner.on_train_start()

    def on_fit_end(self, trainer, loop):
        self.epoch = None
        self.runner.on_train_end(early_exit=False)

    def on_fit_exception(self, trainer, exception):
        self.epoch = None
        self.runner.on_train_end(early_exit=True)

    def on_train_start(self, trainer, model, train_dataloader, loop, loop_idx):
        self.epoch = loop_idx
        self.runner.on_train_epoch_start()

    def on_train_end(self, trainer, model, loop, loop_idx):
        self.runner.on_train_epoch_end(early_exit=False)

    def on_train_exception(self, trainer, exception):
        self.runner.on_train_epoch_end(early_exit=True)

    # validation
    def on_validate_start(self, trainer, model, val_dataloader, loop):
        self.runner.on_eval_start()
        self.runner.on_eval_epoch_start()

    def on_validate_end(self, trainer, model, loop):
        self.runner.on_eval_epoch_end(early_exit=False)
        self.runner.compute_eval_metrics()
        self.runner.on_eval_end(early_exit=False)

    def on_validate_exception(self, trainer, exception):
        self.runner.on_eval_epoch_end(early_exit=True)
        self.runner.on_eval_end(early_exit=True)

    # batches
    def on_before_forward(self, trainer, model, batch, args, kwargs):
        if trainer.step_kind == "train":
            args[0] = self.runner.on_train_batch_start(args[0])
            trainer.zero_grad_at_step_start()
        else:
            args[0] = self.runner.on_eval_batch_start(args[0])

    def on_train_batch_end(self, trainer, model, outputs, batch, batch_idx):
        self.runner.on_train_batch_end(outputs["loss"], epoch=self.epoch, step=trainer.global_step)

    def on_validate_batch_end(self, trainer, model, outputs, batch, batch_idx):
        self.runner.on_eval_batch_end(outputs.get("loss"), epoch=self.epoch, step=batch_idx)

    # checkpoints
    def on_save_checkpoint(self, trainer, state_dict):
        self.saved_step = state_dict.get("global_step")

    def on_after_save_checkpoint(self, trainer, ckpt_path):
        self.runner.on_checkpoint_saved(ckpt_path, self.saved_step)


def _as_loader(value, what: str) -> cstorch.utils.data.DataLoader:
    """A cstorch DataLoader as is; a torch DataLoader or another re-iterable of batches wrapped."""
    if isinstance(value, cstorch.utils.data.DataLoader):
        return value
    if value is None or not hasattr(value, "__iter__"):
        raise TypeError(f"{what} must be a cstorch.utils.data.DataLoader, a torch DataLoader or an iterable of "
                        f"batches, got {type(value).__name__}")
    return cstorch.utils.data.DataLoader(functools.partial(_same, value))


def _same(value):
    return value


def _trainer_spec(params, base_dir: Optional[str] = None) -> tuple[dict, InitSpec]:
    """The `trainer:` dict of `params` (legacy converted) and the spec of its `init`
    (parsed with a stand-in model); `base_dir` anchors the relative `file.py:Class` names."""
    if not isinstance(params, dict):
        raise ConfigError(f"params must be a dict (the legacy flat format or a `trainer:` dict), got "
                          f"{type(params).__name__}")
    params = copy.deepcopy(params)
    if is_legacy(params):
        if isinstance(params.get("runconfig"), dict):
            params["runconfig"].pop("mode", None)  # the driver decides what runs
        spec = convert_legacy(params)["trainer"]
    elif isinstance(params.get("trainer"), dict):
        spec = params["trainer"]
    else:
        raise ConfigError("params need the legacy sections (runconfig, optimizer, train_input, ...) or one "
                          "`trainer:` mapping (a list of trainers is for `cstorch fit`, not the runner).")
    init = spec.get("init") or {}
    # model and data come from the runner's arguments: validate everything else
    checked = _config.validate_trainer({"init": {**init, "model": {"name": f"{__name__}:_StandInModel"}}},
                                       base_dir=base_dir)
    return spec, checked.init


class PyTorchBaseRunner:
    """The legacy runner: hooks and overridable steps (module doc) over one Trainer.

    Args:
        model: a `torch.nn.Module` whose forward takes the batch and returns the loss (or a
            `(loss, output)` pair / a dict with "loss"), a zero-argument callable returning one
            (called once the backend exists), or a PyTorchBaseModel.
        params: the legacy flat params dict.
        callbacks: extra Trainer callbacks.
        loggers: the Trainer's loggers; None: its own.
        base_dir: the folder relative `path/to/file.py:Class` names in `params` are taken from
            (the params file's folder); None: the working directory.

    Differences from the real system:
        On CSX the in-step hooks (`on_train_batch_start`, the overridable steps) run
        once, while the step is captured.
    """

    def __init_subclass__(cls, device_runner: bool = False, **kwargs):
        super().__init_subclass__(**kwargs)
        if device_runner:
            _DEVICE_RUNNERS.append(cls)

    def __init__(self, model: Union[torch.nn.Module, Callable[[], torch.nn.Module], PyTorchBaseModel], params: dict,
                 *, callbacks: Optional[list] = None, loggers: Optional[list] = None, base_dir: Optional[str] = None):
        if callable(model) and not isinstance(model, torch.nn.Module) and not isinstance(model, PyTorchBaseModel):
            factory = model
            model = lambda: self._adopt(factory())  # noqa: E731  (built by the Trainer)
        else:
            model = self._adopt(model)
        self.params = params
        self._spec, init = _trainer_spec(params, base_dir)
        lengths = init.loop.kwargs if init.loop is not None else {}
        trains = any(lengths.get(k) is not None for k in ("max_steps", "num_steps", "num_epochs"))
        # init.loggers is not used: the Trainer gets the `loggers` argument (None: its own)
        kwargs = build.trainer_arguments(init.model_copy(update={"loggers": ()}), training=trains)
        loop = kwargs["loop"]
        self._eval_loop = loop if isinstance(loop, ValidationLoop) else ValidationLoop(eval_steps=loop.eval_steps)
        self._hooks = _RunnerHooks(self)
        kwargs["callbacks"] = [self._hooks, *kwargs.get("callbacks", []), *(callbacks or [])]
        self._ran = False
        self.trainer = _RunnerTrainer(self, model=model, loggers=loggers, **kwargs)

    def _adopt(self, model):
        """The torch module to run: a 1.8 PyTorchBaseModel's module (the model gets this
        runner, whose optimizer and schedulers it reports), or `model` itself."""
        if isinstance(model, PyTorchBaseModel):
            model.runner = self
            return model.model
        return model

    @classmethod
    def create(cls, model_fn: Callable[[dict], torch.nn.Module], params: dict, **kwargs) -> "PyTorchBaseRunner":
        """On PyTorchBaseRunner itself, the 1.8 factory: the device runner that serves
        `params` (PyTorchRunner for CPU/GPU, PyTorchCSCompiler for CSX compile/validate
        only, PyTorchCSRunner for CSX: `cstorch.trainer.legacy.device_runners`), on the
        PyTorchBaseModel of `model_fn(params)`. On a subclass: that runner, for the model
        `model_fn(params)`."""
        if cls is PyTorchBaseRunner:
            cls = next(c for c in _DEVICE_RUNNERS if c.serves(params))
        return cls._create(model_fn, params, **kwargs)

    @classmethod
    def serves(cls, params: dict) -> bool:
        """Whether this device runner runs what `params` ask for (device runners only)."""
        raise NotImplementedError(f"{cls.__name__} is not a device runner")

    @classmethod
    def _create(cls, model_fn: Callable[[dict], torch.nn.Module], params: dict, **kwargs) -> "PyTorchBaseRunner":
        """`cls` for the model `model_fn(params)` (built once the backend exists)."""
        return cls(functools.partial(model_fn, params), params, **kwargs)

    # -- what the runner runs on ---------------------------------------------------------
    @property
    def model(self) -> torch.nn.Module:
        return self.trainer.model

    @property
    def optimizer(self):
        return self.trainer.optimizer

    @property
    def lr_schedulers(self) -> list:
        return self.trainer.schedulers

    @property
    def backend(self):
        return self.trainer.backend

    @property
    def global_step(self) -> int:
        return self.trainer.global_step

    # -- hooks (no-ops; override) --------------------------------------------------------
    def on_train_start(self): ...
    def on_train_end(self, early_exit: bool): ...
    def on_eval_start(self): ...
    def on_eval_end(self, early_exit: bool): ...
    def on_train_epoch_start(self): ...
    def on_train_epoch_end(self, early_exit: bool): ...
    def on_eval_epoch_start(self): ...
    def on_eval_epoch_end(self, early_exit: bool): ...

    def on_train_batch_start(self, data):
        """In the traced step (on CSX once): returns the batch the model sees."""
        return data

    def on_train_batch_end(self, loss, epoch=None, step=None): ...

    def on_eval_batch_start(self, data):
        """In the traced step (on CSX once): returns the batch the model sees."""
        return data

    def on_eval_batch_end(self, loss, epoch=None, step=None): ...
    def on_checkpoint_saved(self, path: str, step: int): ...

    # -- overridable steps (defaults: the Trainer's action) ------------------------------
    def train_forward(self, data):
        return self.trainer.compiled_model(data)

    def eval_forward(self, data):
        return self.trainer.compiled_model(data)

    def backward(self, loss: torch.Tensor) -> None:
        self.trainer.precision.backward(loss)

    def optimizer_zero_grad(self) -> None:
        self.trainer.optimizer.zero_grad()

    def optimizer_step(self) -> None:
        self.trainer.precision.clip_and_step(self.trainer.optimizer)

    def lr_scheduler_step(self) -> None:
        for s in self.trainer.schedulers:
            s.step()

    def compute_eval_metrics(self) -> None:
        """After each evaluation: log float(metric) of every updated cstorch.metrics.Metric
        of the model, then reset it (as the ModelEvalMetrics callback does)."""
        ModelEvalMetrics().on_validate_end(self.trainer, self.model, None)

    # -- drivers -------------------------------------------------------------------------
    def _ckpt(self, section: str, key: str = "ckpt_path"):
        """The checkpoint the first run loads (runconfig.checkpoint_path, else autoload);
        later runs continue from the weights in memory."""
        if self._ran:
            return None
        self._ran = True
        return (self._spec.get(section) or {}).get(key, ...)

    def _check_trains(self, what: str) -> None:
        if not isinstance(self.trainer.loop, TrainingLoop):
            raise ConfigError(f"{what} needs the training length: set runconfig.max_steps, num_steps or num_epochs "
                              f"(or pass --max_steps).")
        if self.trainer.optimizer is None:
            raise ConfigError(f"{what} needs an optimizer: set optimizer.optimizer_type and "
                              f"optimizer.learning_rate.")

    def train(self, train_dataloader) -> None:
        """Train per runconfig (no evaluation)."""
        self._check_trains("train")
        self.trainer.fit(_as_loader(train_dataloader, "train_dataloader"), ckpt_path=self._ckpt("fit"))

    def evaluate(self, eval_dataloader) -> None:
        """Evaluate runconfig.eval_steps batches (default: one pass)."""
        self.trainer.validate(_as_loader(eval_dataloader, "eval_dataloader"), ckpt_path=self._ckpt("validate"),
                              loop=self._eval_loop)

    def train_and_eval(self, train_dataloader, eval_dataloader) -> None:
        """Train, evaluating at runconfig.eval_frequency (default: after the last step)."""
        self._check_trains("train_and_eval")
        self.trainer.fit(_as_loader(train_dataloader, "train_dataloader"),
                         _as_loader(eval_dataloader, "eval_dataloader"), ckpt_path=self._ckpt("fit"))

    def evaluate_all(self, eval_dataloader, ckpt_paths=...) -> None:
        """Evaluate every checkpoint (`ckpt_paths`: a path, glob or list; default
        runconfig.checkpoint_path, else every checkpoint in model_dir)."""
        if ckpt_paths is ...:
            ckpt_paths = (self._spec.get("validate_all") or {}).get("ckpt_paths", ...)
        self._ran = True
        self.trainer.validate_all([_as_loader(eval_dataloader, "eval_dataloader")], ckpt_paths=ckpt_paths,
                                  loop=self._eval_loop)


# ======================================================================================
# the legacy entry point
# ======================================================================================
def build_parser() -> argparse.ArgumentParser:
    """The legacy `run.py` flags."""
    p = argparse.ArgumentParser(description="Run a model with the legacy runner (flat params YAML).")
    p.add_argument("target_device", type=str.upper, choices=("CPU", "GPU", "CSX"), help="where the run executes")
    p.add_argument("-p", "--params", required=True, help="the legacy params YAML (runconfig, optimizer, ...)")
    p.add_argument("-m", "--mode", choices=MODES, help="what to run (default: runconfig.mode, else train)")
    p.add_argument("-o", "--model_dir", help="checkpoints and logs (overrides runconfig.model_dir)")
    p.add_argument("--checkpoint_path", help="checkpoint to start from (default: the latest in model_dir)")
    p.add_argument("--max_steps", type=positive_int, help="train up to this global step (replaces num_steps "
                                                           "and num_epochs)")
    p.add_argument("--eval_steps", type=positive_int, help="batches per evaluation")
    only = p.add_mutually_exclusive_group()
    only.add_argument("--compile_only", action="store_true", default=None, help="CSX: compile, do not run")
    only.add_argument("--validate_only", action="store_true", default=None, help="CSX: check the step compiles")
    p.add_argument("--num_csx", type=positive_int, help="CSX: number of systems (data-parallel devices)")
    return p


def _apply_flags(params: dict, args: argparse.Namespace) -> None:
    """Write the command-line values into params["runconfig"] (they override the YAML)."""
    if params.get("runconfig") is None:
        params["runconfig"] = {}
    run = params["runconfig"]
    if not isinstance(run, dict):
        raise ConfigError(f"runconfig must be a mapping, got {type(run).__name__}")
    run["target_device"] = args.target_device
    flags = csx_flags(args)
    check_csx_target(flags, args.target_device)
    for key in ("model_dir", "checkpoint_path", "eval_steps", "num_csx"):
        if getattr(args, key) is not None:
            run[key] = getattr(args, key)
    if args.max_steps is not None:
        set_max_steps(run, args.max_steps)  # the legacy runconfig has the loop's key names
    set_compile_mode(run, flags)


def run(model_fn: Callable[[dict], torch.nn.Module], train_data_fn: Optional[Callable[[dict], object]],
        eval_data_fn: Optional[Callable[[dict], object]], default_params_fn: Optional[Callable[[dict], dict]] = None,
        argv: Optional[Sequence[str]] = None, runner_cls: type = PyTorchBaseRunner) -> PyTorchBaseRunner:
    """The legacy `run.py` entry point:
    `{CPU,GPU,CSX} --params p.yaml --mode {train,eval,train_and_eval,eval_all} [--model_dir D]
    [--checkpoint_path P] [--max_steps N] [--eval_steps N] [--compile_only] [--num_csx N]`.

    Loads the YAML (legacy flat format), lets `default_params_fn(params)` fill defaults
    (in place, or by returning the new dict), writes the flags into `runconfig`, builds
    `runner_cls.create(model_fn, params, base_dir=<the params file's folder>)` (so relative
    `file.py:Class` names resolve from there; a `runner_cls` that overrides `__init__`
    passes `base_dir` on; a `create` without a `base_dir` argument, such as a 1.8-style
    `create(model_fn, params)` assigned to PyTorchBaseRunner.create, gets none) and runs
    the mode (`config.RUN_MODES[mode].runner`) with `train_data_fn(params)` /
    `eval_data_fn(params)` (cstorch or torch DataLoaders, or iterables of batches).
    Returns the runner. A configuration mistake (a ConfigError, also one the mode raises
    when it starts) exits with status 2 and its message.

    Args:
        model_fn: `params -> torch.nn.Module`.
        train_data_fn: `params -> loader` for training; None: no training mode.
        eval_data_fn: `params -> loader` for evaluation; None: no evaluation mode.
        default_params_fn: fills the params' defaults, in place or by returning the new dict.
        argv: the command line (without the program name); None: `sys.argv[1:]`.
        runner_cls: the runner class whose `create` builds the runner.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        params = _config.load_params(args.params)
        if default_params_fn is not None:
            params = default_params_fn(params) or params
        if not is_legacy(params):
            raise ConfigError(f"{args.params} is not in the legacy flat format (runconfig, optimizer, train_input, "
                              f"...); run a `trainer:` YAML with `cstorch fit {args.params}`.")
        _apply_flags(params, args)
        settings = Runconfig.of(params)
        mode = args.mode or settings.mode
        run_mode = RUN_MODES[mode]
        # the driver's arguments, in order: the train data when the mode trains, the eval data when it validates
        fns = (([("train_data_fn", train_data_fn)] if run_mode.trains else [])
               + ([("eval_data_fn", eval_data_fn)] if run_mode.validates else []))
        missing = [name for name, fn in fns if fn is None]
        if missing:
            raise ConfigError(f"mode {mode} needs {' and '.join(missing)}; pass it to run().")
        ensure_host_device_count(settings.num_csx)
        create = runner_cls.create
        base_dir = {"base_dir": os.path.dirname(os.path.abspath(args.params))} if _takes(create, "base_dir") else {}
        runner = create(model_fn, params, **base_dir)
        getattr(runner, run_mode.runner)(*(fn(params) for _, fn in fns))
    except ConfigError as e:
        parser.error(str(e))
    return runner


def _takes(fn: Callable, name: str) -> bool:
    """Whether `fn` accepts the keyword argument `name`."""
    params = inspect.signature(fn).parameters.values()
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


__all__ = ["PyTorchBaseRunner", "run", "build_parser", "MODES"]
