"""`Trainer`: the Model Zoo trainer on the cstorch API (`cerebras.modelzoo.Trainer`).

Construction, in order: the arguments are checked (nothing is created before every
check passed); the model_dir lock is taken (`model_dir_lock`: `ModelDirInUseError` at
once while another process runs in that model_dir; released at the end of each
fit / validate / validate_all, also when it raises, and taken again by the next one);
`seed` seeds torch; the backend is created (`device`) or taken
(`backend`); the model is built (a factory is called now) and compiled; the optimizer
and schedulers are built; then `pre_setup`, `setup` and `post_setup` run on every
callback. Callbacks run in this fixed order: the loop (`TrainingLoop`/`ValidationLoop`),
`precision`, `logging`, the user `callbacks`, globally registered callbacks, the
`loggers`, and `checkpoint` last.

Hook order of `fit(train_dl, val_dl)` (the `*_step_*` hooks and the step internals run
inside the traced step: on CSX once, while the step is captured):

    on_enter_fit, on_fit_start
      per stretch between validations (loop_idx = 0, 1, ...):
        on_enter_train, on_train_start
          per batch:  on_train_batch_start
                      [on_train_step_start
                       per micro-batch: on_before_forward, on_after_forward,
                                        on_before_backward, on_after_backward
                       on_before_optimizer_step, on_after_optimizer_step,
                       on_before_optimizer_zero_grad, on_after_optimizer_zero_grad,
                       per scheduler: on_before_scheduler_step, on_after_scheduler_step
                       on_train_step_end]
                      on_train_batch_end
                      on a checkpoint step, once the step's values exist:
                        on_save_checkpoint, postprocess_checkpoint, on_after_save_checkpoint
        on_train_end
        when this stretch ends at a validation point, per validation dataloader:
          on_enter_validate, on_validate_start,
          per batch: on_validate_batch_start, [on_validate_step_start,
                     on_before_forward, on_after_forward, on_validate_step_end],
                     on_validate_batch_end
          on_validate_end
        then run_validation(loop_idx, is_last) on every ValidationCallback
    on_fit_end

Loading a checkpoint (before the run, when `ckpt_path` names one or autoload finds
one): on_before_load_checkpoint, preprocess_checkpoint, on_load_checkpoint. An
exception in the run calls on_train_exception / on_validate_exception and
on_fit_exception, then propagates.

The step. `model(batch)` runs under the precision's autocast and returns a loss tensor,
a `(loss, output)` pair or a dict with "loss" (validation may omit it); the loss is
backpropagated (scaled when loss scaling is on), gradients are unscaled (before the
on_before_optimizer_step hooks, so callbacks such as ComputeNorm see true gradients) and
clipped, the optimizer steps, gradients are zeroed and every scheduler steps. The loss, the
learning rate of param group 0 (before this step's scheduler update) and the loss scale
are logged on log steps through a step closure; `throughput` is samples/s between
log steps. `global_step` counts optimizer steps.

The console. Each run starts by naming its model_dir and where checkpoints, metrics and
TensorBoard events go, and a fit ends with a summary (steps, time, final loss, the last
checkpoint): `report`. While the ProgressLogger's bar is shown, log records and warnings
are written above it. `finalize` removes the run folders nothing was written into.

The class holds the experiment and the step body (the methods a subclass may replace);
the rest sits beside it, as Lightning splits its Trainer: `hooks.call_hook` calls the
callbacks, `loops` runs `fit`, `validate` and `validate_all`, `checkpoint_connector`
saves and loads checkpoints, `metrics_connector` routes what is logged and `report`
writes what a run says on the console.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import os
import warnings
from pathlib import Path
from typing import Callable, Optional, Union

import torch

import cstorch

from . import checkpoint_state, loops
from .arguments import check_trainer_arguments, make_run_dirs, remove_empty_run_dirs
from .callbacks.base import Callback, global_callbacks
from .callbacks.checkpoint import Checkpoint
from .callbacks.logs import Logging
from .callbacks.loop import FitPlan, TrainingLoop, ValidationLoop
from .callbacks.precision import MixedPrecision
from .checkpoint_connector import CheckpointConnector
from .hooks import call_hook
from .loggers import CSVLogger, ProgressLogger, TensorBoardLogger
from .metrics_connector import MetricsConnector
from .model_dir_lock import ModelDirLock
from .progress import Progress
from .step_data import as_outputs, loss_of, micro_batches

log = logging.getLogger("cstorch.trainer")


def _holding_model_dir(method):
    """A run method holds the model_dir lock while it runs (taken again when released;
    released at its end, also on an exception: `model_dir_lock`)."""

    @functools.wraps(method)
    def run(self, *args, **kwargs):
        with self._model_dir_lock.holding():
            return method(self, *args, **kwargs)

    return run


class Trainer:
    """The Model Zoo Trainer: one experiment (model, optimizer, schedulers, precision, the
    training loop with validation, checkpoints, logging, callbacks) run by `fit`,
    `validate` and `validate_all` on one backend.

    Args:
        device: "CSX", "CPU" or "GPU": the backend to create (with `model_dir/cerebras_logs/<timestamp>` as
            its artifact folder) when no backend exists; not with `backend`.
        backend: a backend made with `cstorch.backend(...)`; None: the process's backend, else one for
            `device`.
        model_dir: the experiment's folder (required): checkpoints go there, the TensorBoard events and
            `metrics.csv` to `model_dir/<timestamp>`. Only one process may run in it at a time.
        model: a torch.nn.Module, or a function returning one (called once the backend exists).
        optimizer: a cstorch.optim.Optimizer (of `model`, which must then be a module), a function `model ->
            Optimizer`, or None (no training).
        schedulers: a scheduler, a function `optimizer -> scheduler`, or a list of them.
        precision: the compute dtype, loss scaling and gradient clipping; None:
            MixedPrecision(enabled=False).
        sparsity: not supported (anything but None raises).
        loop: a TrainingLoop (how long `fit` trains, when it validates) or a ValidationLoop; None:
            TrainingLoop(num_epochs=1).
        checkpoint: when checkpoints are saved and which one is loaded; None: Checkpoint().
        logging: which steps log and the log level; None: Logging(log_steps=1).
        callbacks: more callbacks, called in order after the core ones.
        loggers: where logged metrics go; None: ProgressLogger, TensorBoardLogger and CSVLogger.
        seed: seeds torch and the backend's random numbers; None: the run is not repeatable (a warning).
        autorestart: not supported (anything but None raises).

    Differences from the real system:
        `sparsity` and `autorestart` are not supported (clear errors), and there is no
        `executor` attribute. On CSX the step computes in float32 unless `MixedPrecision`
        is given (the real wafer is always mixed). The `eval/loss` and `throughput`
        (samples/s) scalar names are cstorch's. A hook's exception propagates with its own
        type and a note naming the callback and hook (the real Trainer wraps it in a
        `RuntimeError`).
    """

    def __init__(self, device: Optional[str] = None, backend=None, model_dir: Optional[str] = None,
                 model: Union[torch.nn.Module, Callable[[], torch.nn.Module], None] = None, optimizer=None,
                 schedulers=None, precision: Optional[MixedPrecision] = None, sparsity=None,
                 loop: Union[TrainingLoop, ValidationLoop, None] = None, checkpoint: Optional[Checkpoint] = None,
                 logging: Optional[Logging] = None, callbacks: Optional[list] = None,
                 loggers: Optional[list] = None, seed: Optional[int] = None, autorestart=None):
        check_trainer_arguments(device, backend, model_dir, model, optimizer, schedulers, precision, sparsity, loop,
                              checkpoint, logging, callbacks, loggers, seed, autorestart)
        self.model_dir = Path(os.path.abspath(model_dir))
        # the first use of model_dir: ModelDirInUseError while another process runs in it
        self._model_dir_lock = ModelDirLock(self.model_dir)
        self._model_dir_lock.acquire()
        try:
            self._construct(device, backend, model, optimizer, schedulers, precision, loop, checkpoint, logging,
                        callbacks, loggers, seed)
        except BaseException:
            self._model_dir_lock.release()
            raise

    def _construct(self, device, backend, model, optimizer, schedulers, precision, loop, checkpoint, logging,
                   callbacks, loggers, seed) -> None:
        """The rest of the construction (module doc), once model_dir is this run's."""
        self.loop = loop if loop is not None else TrainingLoop(num_epochs=1)
        self.precision = precision if precision is not None else MixedPrecision(enabled=False)
        self.logging = logging if logging is not None else Logging(log_steps=1)
        self.checkpoint = checkpoint if checkpoint is not None else Checkpoint()
        user = list(callbacks or [])
        self.loggers = list(loggers) if loggers is not None else [ProgressLogger(), TensorBoardLogger(),
                                                                    CSVLogger()]
        self.callbacks: list[Callback] = [self.loop, self.precision, self.logging, *user, *global_callbacks(),
                                          *self.loggers, self.checkpoint]
        checkpoint_state.check_callback_state_keys(self.callbacks)
        #: where training stands: steps, the stream's position, the fit plan (`progress.py`)
        self.progress = Progress()
        self.last_metrics: dict[str, float] = {}

        self.artifact_dir, self.summary_dir = map(Path, make_run_dirs(self.model_dir))

        if seed is None:
            warnings.warn("The Trainer got no seed: runs are not repeatable. Pass seed=<int> to make them so.")
        else:
            torch.manual_seed(seed)
        self.backend = self._make_backend(device, backend)
        if seed is not None:
            cstorch.manual_seed(seed)
        self.model = model if isinstance(model, torch.nn.Module) else model()
        if not isinstance(self.model, torch.nn.Module):
            raise TypeError(f"The model factory returned {type(self.model).__name__}, not a torch.nn.Module")
        self.compiled_model = cstorch.compile(self.model, self.backend)
        self.optimizer = optimizer if optimizer is None or isinstance(optimizer, cstorch.optim.Optimizer) \
            else optimizer(self.model)
        if self.optimizer is not None and not isinstance(self.optimizer, cstorch.optim.Optimizer):
            raise TypeError(f"The optimizer factory returned {type(self.optimizer).__name__}, not a "
                            f"cstorch.optim.Optimizer")
        self.schedulers = self._make_schedulers(schedulers)

        self.step_kind: Optional[str] = None  # "train" / "validate" while a step body runs
        #: metric logging (`metrics_connector`) and checkpoints (`checkpoint_connector`)
        self._metrics = MetricsConnector(self)
        self._checkpoints = CheckpointConnector(self)
        self._traced_train = cstorch.trace(self.training_step)
        self._traced_validate = cstorch.trace(self.validation_step)
        self._save_checkpoint_closure = cstorch.checkpoint_closure(self._checkpoints.save_now)

        for hook in ("pre_setup", "setup", "post_setup"):
            self.call(hook)

    # -- construction --------------------------------------------------------------------
    def _make_backend(self, device, backend):
        """The given backend, the process's existing one, or a new one for `device`."""
        existing = backend or cstorch.backend()
        if existing is not None:
            return existing
        return cstorch.backend(device.upper(), artifact_dir=self.artifact_dir)

    def _make_schedulers(self, schedulers) -> list:
        if schedulers is None:
            return []
        items = list(schedulers) if isinstance(schedulers, (list, tuple)) else [schedulers]
        built = []
        for s in items:
            built.append(s if isinstance(s, cstorch.optim.scheduler.Scheduler) else s(self.optimizer))
        return built

    # -- callbacks -----------------------------------------------------------------------
    def call(self, hook: str, *args, **kwargs) -> None:
        """Call `hook(self, *args, **kwargs)` on every callback that has it, in order. An
        exception propagates with its own type (a `StaticGraphError` stays one), a note
        naming the callback and hook added (the real Trainer wraps it in a `RuntimeError`)."""
        call_hook(self.callbacks, self, hook, *args, **kwargs)

    def get_callbacks(self, cls) -> list:
        return [cb for cb in self.callbacks if isinstance(cb, cls)]

    def get_callback(self, cls):
        found = self.get_callbacks(cls)
        return found[0] if found else None

    # -- state ---------------------------------------------------------------------------
    @property
    def logger(self) -> logging.Logger:
        """The trainer's Python logger ("cstorch.trainer"), as the real Trainer's `logger`."""
        return log

    @property
    def is_tracing(self) -> bool:
        return self.backend.is_tracing

    @property
    def grad_scaler(self):
        return self.precision.grad_scaler

    @property
    def global_step(self) -> int:
        """The optimizer steps done (`progress.global_step`)."""
        return self.progress.global_step

    @global_step.setter
    def global_step(self, value: int) -> None:  # the real Trainer's is a plain attribute
        self.progress.global_step = int(value)

    @property
    def fit_plan(self) -> Optional[FitPlan]:
        """The running (or last) fit's plan (`progress.plan`); None before any fit."""
        return self.progress.plan

    def count_step(self) -> None:
        """The train step ended with an optimizer step: `global_step` += 1 (called by the
        TrainingLoop's `on_train_batch_end`)."""
        self.progress.count_step()

    @property
    def is_final_iteration(self) -> bool:
        """Whether the current train step is the fit's last (host hooks; inside a CSX
        trace the value is the first step's, frozen into the program)."""
        p = self.progress
        return p.plan is not None and p.current_step == p.plan.end

    @property
    def is_log_step(self) -> bool:
        """Whether the current train step logs (host hooks; frozen inside a CSX trace)."""
        p = self.progress
        return p.plan is not None and self.logging.is_log_step(p.current_step, p.plan.start, p.plan.end)

    @property
    def should_run_optimizer_step(self) -> bool:
        """Every train step ends with an optimizer step (accumulation happens inside the step)."""
        return self.optimizer is not None

    # -- the traced steps ----------------------------------------------------------------
    def forward(self, batch) -> dict:
        args, kwargs = [batch], {}
        self.call("on_before_forward", self.model, batch, args, kwargs)
        with self.precision.autocast():
            out = self.model_forward(*args, **kwargs)
        outputs = as_outputs(out)
        self.call("on_after_forward", self.model, outputs, batch)
        return outputs

    def backward(self, outputs: dict, scale: float = 1.0) -> None:
        self.call("on_before_backward", self.model, outputs)
        loss = loss_of(outputs)
        self.loss_backward(loss if scale == 1.0 else loss * scale)
        self.call("on_after_backward", self.model, outputs)

    def optimizer_step(self) -> None:
        self.precision.unscale(self.optimizer)  # the hooks see unscaled gradients, as on the real system
        self.call("on_before_optimizer_step", self.model, self.optimizer)
        self.apply_optimizer_step()
        self.call("on_after_optimizer_step", self.model, self.optimizer)

    def optimizer_zero_grad(self) -> None:
        self.call("on_before_optimizer_zero_grad", self.model, self.optimizer)
        self.zero_gradients()
        self.call("on_after_optimizer_zero_grad", self.model, self.optimizer)

    # the actions the step methods wrap with their hooks (a subclass may replace them)
    def model_forward(self, *args, **kwargs):
        return self.compiled_model(*args, **kwargs)

    def loss_backward(self, loss: torch.Tensor) -> None:
        self.precision.backward(loss)

    def apply_optimizer_step(self) -> None:
        """Clip the unscaled gradients, step the optimizer and update the loss scale."""
        self.precision.clip_and_step(self.optimizer)

    def zero_gradients(self) -> None:
        self.optimizer.zero_grad()

    def schedulers_step(self) -> None:
        for s in self.schedulers:
            self.call("on_before_scheduler_step", self.model, self.optimizer, s)
            s.step()
            self.call("on_after_scheduler_step", self.model, self.optimizer, s)

    def training_step(self, batch) -> dict:
        """One optimizer step on `batch` (traced: on CSX this body runs once). With
        micro-batches the returned "loss" is their mean and the other outputs are the last
        micro-batch's."""
        self.step_kind = "train"
        self._metrics.clear_train_step()
        try:
            self.call("on_train_step_start", self.model, batch)
            step_metrics = {}
            if self.optimizer is not None and isinstance(self.optimizer.param_groups[0]["lr"], torch.Tensor):
                step_metrics["lr"] = self.optimizer.param_groups[0]["lr"].detach().clone()  # before the update
            scale = self.precision.loss_scale()
            if scale is not None:
                step_metrics["loss_scale"] = scale.detach().clone() if isinstance(scale, torch.Tensor) else scale
            n = self.progress.micro_batches if isinstance(self.loop, TrainingLoop) else 1
            total = None
            for micro in (micro_batches(batch, n) if n > 1 else [batch]):
                outputs = self.forward(micro)
                self.backward(outputs, scale=1.0 / n)
                loss = loss_of(outputs).detach()
                total = loss if total is None else total + loss
            outputs["loss"] = total / n if n > 1 else total
            if self.optimizer is not None:
                self.optimizer_step()
                self.optimizer_zero_grad()
                self.schedulers_step()
            self.call("on_train_step_end", self.model, outputs, batch)
            # one record per step: the values logged inside it beside its loss and lr
            self._metrics.end_train_step(loss=outputs["loss"], **step_metrics)
            return outputs
        finally:
            self.step_kind = None
            self._metrics.clear_train_step()

    @torch.no_grad()
    def validation_step(self, batch) -> dict:
        """The model's outputs on `batch` in eval mode (traced)."""
        self.step_kind = "validate"
        hook = self.progress.validation_hook
        try:
            self.call(f"on_{hook}_step_start", self.model, batch)
            outputs = self.forward(batch)
            self.call(f"on_{hook}_step_end", self.model, outputs, batch)
            loss = outputs.get("loss")
            if isinstance(loss, torch.Tensor) and loss.dim() == 0:
                self._metrics.eval_loss(loss)
            return outputs
        finally:
            self.step_kind = None

    # -- metrics (metrics_connector) ------------------------------------------------------
    def name_scope(self, name: str):
        """Prefix `name/` to the metric names logged inside the block."""
        return self._metrics.name_scope(name)

    def log_metrics(self, **metrics) -> None:
        """Log scalars. Inside a train step they are step values, logged on log steps once
        the step has run, together (one step closure per step, with the step's loss and
        learning rate); inside a validation step they are logged at the current global
        step; elsewhere at once, at the current global step.

        Differences from the real system:
            Values logged inside a train step are logged once per log step, with that
            step's loss and learning rate.
        """
        self._metrics.log(metrics)

    def log_metrics_dict(self, metrics: dict, step: Optional[int] = None, dest: Optional[list] = None) -> None:
        """Send `metrics` at `step` to the Logging callback and the loggers (only the loggers
        in `dest`, when given). Scalars (numbers, 0-d tensors and arrays) become floats;
        other values (a `str`, a `pandas.DataFrame`, a tensor with dimensions) go to the
        loggers as they are, each logger writing the kinds it can."""
        self._metrics.send(metrics, step=step, dest=dest)

    def _closure_global_step(self) -> int:
        """The global step of the train step whose values the running closure holds."""
        return self.progress.closure_step(self.backend.run.closure_iteration)

    # -- checkpoints (checkpoint_connector) -------------------------------------------------
    def save_checkpoint(self) -> None:
        """Save a checkpoint of this step (a checkpoint closure: it runs on the executor's
        checkpoint steps, once the step's values exist)."""
        self._save_checkpoint_closure()

    def load_checkpoint(self, ckpt_path: Optional[str] = None) -> None:
        """Restore the trainer from `ckpt_path` (default: the latest checkpoint)."""
        self._checkpoints.load(ckpt_path)

    # -- runs (loops) -------------------------------------------------------------------
    @_holding_model_dir
    def fit(self, train_dataloader, val_dataloader=None, ckpt_path=...) -> None:
        """Train per the TrainingLoop, validating on `val_dataloader` (one loader or a
        list) at the loop's validation points. `ckpt_path`: a checkpoint to start from;
        `...` autoloads the latest one (when the Checkpoint callback says so); None loads
        nothing."""
        loops.FitLoop(self).run(train_dataloader, val_dataloader, ckpt_path)

    def validation_loop(self, loop) -> ValidationLoop:
        """The ValidationLoop a validation run uses: `loop`, or the Trainer's own, or one
        with the TrainingLoop's `eval_steps`."""
        if loop is not None:
            if not isinstance(loop, ValidationLoop):
                raise TypeError(f"loop must be a ValidationLoop, got {type(loop).__name__}")
            return loop
        if isinstance(self.loop, ValidationLoop):
            return self.loop
        return ValidationLoop(self.loop.eval_steps)

    @_holding_model_dir
    def validate(self, val_dataloader=None, ckpt_path=..., loop: Optional[ValidationLoop] = None) -> None:
        """Run `loop.eval_steps` batches (default: one pass) of each validation dataloader
        on the model (the checkpoint `ckpt_path`, the latest one for `...`)."""
        loops.validate(self, val_dataloader, ckpt_path, loop)

    @_holding_model_dir
    def validate_all(self, val_dataloaders=None, ckpt_paths=..., loop: Optional[ValidationLoop] = None) -> None:
        """Validate every checkpoint of `ckpt_paths` (a path, a glob or a list of them;
        `...`: every checkpoint in the checkpoint root, oldest first) on every dataloader,
        then call `run_validation` on the ValidationCallbacks for each checkpoint."""
        loops.validate_all(self, val_dataloaders, ckpt_paths, loop)

    def finalize(self) -> None:
        """Close the loggers' files, remove the run folders nothing was written into
        (`arguments.remove_empty_run_dirs`) and release the model_dir lock (also done when
        the trainer is garbage collected)."""
        try:
            for cb in getattr(self, "callbacks", ()):
                cb.finalize()
            if hasattr(self, "summary_dir"):
                remove_empty_run_dirs(self.artifact_dir, self.summary_dir)
        finally:
            lock = getattr(self, "_model_dir_lock", None)  # None: the arguments were refused
            if lock is not None:
                lock.release()

    def __del__(self):
        with contextlib.suppress(Exception):
            self.finalize()
