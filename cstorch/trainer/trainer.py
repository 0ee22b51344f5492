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
backpropagated (scaled when loss scaling is on), gradients are unscaled and clipped,
the optimizer steps, gradients are zeroed and every scheduler steps. The loss, the
learning rate of param group 0 (before this step's scheduler update) and the loss scale
are logged on log steps through a step closure; `throughput` is samples/s between
log steps. `global_step` counts optimizer steps.
"""
from __future__ import annotations

import contextlib
import copy
import functools
import glob
import logging
import os
import time
import warnings
from pathlib import Path
from typing import Callable, Optional, Union

import torch

import cstorch

from . import checkpoint_state
from .arguments import check_trainer_arguments, loader_list, make_run_dirs
from .callbacks.base import Callback, ValidationCallback, global_callbacks
from .callbacks.checkpoint import Checkpoint
from .callbacks.logs import Logging
from .callbacks.loop import FitPlan, TrainingLoop, ValidationLoop
from .callbacks.precision import MixedPrecision
from .loggers import CSVLogger, ProgressLogger, TensorBoardLogger, as_scalar
from .model_dir_lock import ModelDirLock
from .step_data import as_outputs, batch_size_of, loss_of, micro_batch_count, micro_batches
from .stream import TrainStream

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
        self.global_step = 0
        self._step_pending = False  # between on_train_batch_start and the step's count
        self.fit_plan: Optional[FitPlan] = None
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

        self._data_position = 0
        self._fit_start = self._fit_position = 0
        self._run_base = 0
        self._batch_size: Optional[int] = None
        self._micro_batches = 1  # per train step (`micro_batch_count`), set from each batch
        self._rate_mark: Optional[tuple[int, float]] = None
        self._eval_losses: list[float] = []
        self._scopes: list[str] = []
        self.step_kind: Optional[str] = None  # "train" / "validate" while a step body runs
        self._train_step_metrics: dict = {}  # what the running train step logged so far
        self._validation_hook = "validate"  # the active ValidationLoop's hook name
        self._traced_train = cstorch.trace(self.training_step)
        self._traced_validate = cstorch.trace(self.validation_step)
        self._record_metrics_closure = cstorch.step_closure(self._record_metrics)
        self._record_eval_loss_closure = cstorch.step_closure(self._record_eval_loss)
        self._save_checkpoint_closure = cstorch.checkpoint_closure(self._save_checkpoint_now)

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
        for cb in self.callbacks:
            fn = getattr(cb, hook, None)
            if fn is None:
                continue
            try:
                fn(self, *args, **kwargs)
            except Exception as e:
                e.add_note(f"Encountered error when calling {type(cb).__name__}.{hook}")
                raise

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
    def _current_step(self) -> int:
        """The global step being run: inside a train step and in `on_train_batch_start`
        the one after `global_step`, which counts the steps done."""
        return self.global_step + 1 if self._step_pending else self.global_step

    def count_step(self) -> None:
        """The train step ended with an optimizer step: `global_step` += 1 (called by the
        TrainingLoop's `on_train_batch_end`)."""
        self.global_step += 1
        self._step_pending = False

    @property
    def is_final_iteration(self) -> bool:
        """Whether the current train step is the fit's last (host hooks; inside a CSX
        trace the value is the first step's, frozen into the program)."""
        return self.fit_plan is not None and self._current_step == self.fit_plan.end

    @property
    def is_log_step(self) -> bool:
        """Whether the current train step logs (host hooks; frozen inside a CSX trace)."""
        plan = self.fit_plan
        return plan is not None and self.logging.is_log_step(self._current_step, plan.start, plan.end)

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
        """Unscale, clip, step the optimizer and update the loss scale."""
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
        self._train_step_metrics = {}
        try:
            self.call("on_train_step_start", self.model, batch)
            step_metrics = {}
            if self.optimizer is not None and isinstance(self.optimizer.param_groups[0]["lr"], torch.Tensor):
                step_metrics["lr"] = self.optimizer.param_groups[0]["lr"].detach().clone()  # before the update
            scale = self.precision.loss_scale()
            if scale is not None:
                step_metrics["loss_scale"] = scale.detach().clone() if isinstance(scale, torch.Tensor) else scale
            n = self._micro_batches if isinstance(self.loop, TrainingLoop) else 1
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
            self.log_metrics(loss=outputs["loss"], **step_metrics)
            # one record per step: the values logged inside it beside its loss and lr
            self._record_metrics_closure("train", dict(self._train_step_metrics))
            return outputs
        finally:
            self.step_kind = None
            self._train_step_metrics = {}

    @torch.no_grad()
    def validation_step(self, batch) -> dict:
        """The model's outputs on `batch` in eval mode (traced)."""
        self.step_kind = "validate"
        hook = self._validation_hook
        try:
            self.call(f"on_{hook}_step_start", self.model, batch)
            outputs = self.forward(batch)
            self.call(f"on_{hook}_step_end", self.model, outputs, batch)
            loss = outputs.get("loss")
            if isinstance(loss, torch.Tensor) and loss.dim() == 0:
                self._record_eval_loss_closure(loss)
            return outputs
        finally:
            self.step_kind = None

    # -- metrics -------------------------------------------------------------------------
    @contextlib.contextmanager
    def name_scope(self, name: str):
        """Prefix `name/` to the metric names logged inside the block."""
        self._scopes.append(name.rstrip("/"))
        try:
            yield
        finally:
            self._scopes.pop()

    def log_metrics(self, **metrics) -> None:
        """Log scalars. Inside a train step they are step values, logged on log steps once
        the step has run, together (one step closure per step, with the step's loss and
        learning rate); inside a validation step they are logged at the current global
        step; elsewhere at once, at the current global step.

        Differences from the real system:
            Values logged inside a train step are logged once per log step, with that
            step's loss and learning rate.
        """
        prefix = "".join(s + "/" for s in self._scopes)
        metrics = {prefix + k: v for k, v in metrics.items()}
        if self.step_kind == "train":
            self._train_step_metrics.update(metrics)
        elif self.step_kind is not None:
            self._record_metrics_closure(self.step_kind, metrics)
        else:
            self.log_metrics_dict(metrics, step=self.global_step)

    def log_metrics_dict(self, metrics: dict, step: Optional[int] = None, dest: Optional[list] = None) -> None:
        """Send `metrics` at `step` to the Logging callback and the loggers (only the loggers
        in `dest`, when given). Scalars (numbers, 0-d tensors and arrays) become floats;
        other values (a `str`, a `pandas.DataFrame`, a tensor with dimensions) go to the
        loggers as they are, each logger writing the kinds it can."""
        step = self.global_step if step is None else step
        values = {k: as_scalar(v) for k, v in metrics.items()}
        self.last_metrics.update({k: v for k, v in values.items() if isinstance(v, float)})
        for target in [self.logging, *self.loggers]:
            if dest is None or target in dest or target is self.logging:
                target.log_metrics(values, step)

    def _closure_global_step(self) -> int:
        """The global step of the train step whose values the running closure holds."""
        it = self.backend.run.closure_iteration
        return self.global_step if it is None else self._run_base + it + 1

    def _record_metrics(self, kind: str, metrics: dict) -> None:
        if kind != "train":
            self.log_metrics_dict(metrics, step=self.global_step)
            return
        step = self._closure_global_step()
        plan = self.fit_plan
        if plan is not None and not self.logging.is_log_step(step, plan.start, plan.end):
            return
        values = {k: float(v) for k, v in metrics.items()}
        if "lr" not in values and self.optimizer is not None:
            values["lr"] = float(self.optimizer.param_groups[0]["lr"])
        now = time.perf_counter()
        if self._rate_mark is not None and self._batch_size and now > self._rate_mark[1]:
            values["throughput"] = (step - self._rate_mark[0]) * self._batch_size / (now - self._rate_mark[1])
        self._rate_mark = (step, now)
        self.log_metrics_dict(values, step=step)

    def _record_eval_loss(self, loss) -> None:
        self._eval_losses.append(float(loss))

    # -- checkpoints ---------------------------------------------------------------------
    def save_checkpoint(self) -> None:
        """Save a checkpoint of this step (a checkpoint closure: it runs on the executor's
        checkpoint steps, once the step's values exist)."""
        self._save_checkpoint_closure()

    def _save_checkpoint_now(self) -> None:
        step = self._closure_global_step()
        path = self.checkpoint.path_for(step)
        state = checkpoint_state.capture(self.model, self.optimizer, self.schedulers, self.grad_scaler, step,
                                         batches_consumed=self._fit_position + step - self._fit_start)
        callbacks = checkpoint_state.callback_states(self.callbacks)
        if callbacks:
            state["callbacks"] = callbacks
        self.call("on_save_checkpoint", state)
        self.call("postprocess_checkpoint", state)
        cstorch.save(state, path)
        log.info("Saved checkpoint %s (global step %d)", path, step)
        self.call("on_after_save_checkpoint", path)

    def load_checkpoint(self, ckpt_path: Optional[str] = None) -> None:
        """Restore the trainer from `ckpt_path` (default: the latest checkpoint)."""
        path = ckpt_path or self.checkpoint.latest()
        if path is None:
            raise FileNotFoundError(f"No checkpoint to load: none matches {self.checkpoint.checkpoint_name!r} in "
                                    f"{self.checkpoint.root}")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"Checkpoint {path!r} does not exist")
        self.call("on_before_load_checkpoint", path)
        state = cstorch.load(path)
        self.checkpoint.check_version(state, path)
        self.call("preprocess_checkpoint", state)
        self.global_step, self._data_position = checkpoint_state.restore(
            state, self.model, self.optimizer, self.schedulers, self.grad_scaler,
            strict=not self.checkpoint.disable_strict_checkpoint_loading, path=path)
        checkpoint_state.restore_callback_states(state, self.callbacks, path)
        log.info("Loaded checkpoint %s (global step %d)", path, self.global_step)
        self.call("on_load_checkpoint", state)

    def _load_for_run(self, ckpt_path) -> None:
        if ckpt_path is ...:
            path = self.checkpoint.latest() if self.checkpoint.autoload_last_checkpoint else None
            if path is not None:
                log.info("Autoloading the latest checkpoint %s", path)
        else:
            path = ckpt_path
        if path is not None:
            self.load_checkpoint(path)

    # -- runs ----------------------------------------------------------------------------
    @contextlib.contextmanager
    def _pipeline_progress_off(self):
        """The executor's own bar is off while a ProgressLogger shows the trainer's."""
        perf = cstorch.backends.csx.performance
        if not self.get_callbacks(ProgressLogger):
            yield
            return
        saved = perf.progress
        perf.progress = False
        try:
            yield
        finally:
            perf.progress = saved

    @_holding_model_dir
    def fit(self, train_dataloader, val_dataloader=None, ckpt_path=...) -> None:
        """Train per the TrainingLoop, validating on `val_dataloader` (one loader or a
        list) at the loop's validation points. `ckpt_path`: a checkpoint to start from;
        `...` autoloads the latest one (when the Checkpoint callback says so); None loads
        nothing."""
        loop = self.loop
        if not isinstance(loop, TrainingLoop):
            raise RuntimeError(f"fit needs the Trainer to be built with loop=TrainingLoop(...), got "
                               f"{type(loop).__name__}")
        if self.optimizer is None:
            raise RuntimeError("fit needs an optimizer: the Trainer was built with optimizer=None "
                               "(validation only)")
        train_dls = loader_list(train_dataloader, "train_dataloader")
        if len(train_dls) != 1:
            raise ValueError(f"fit takes one train_dataloader, got {len(train_dls)}")
        (train_dl,) = train_dls
        val_dls = loader_list(val_dataloader, "val_dataloader")
        self._load_for_run(ckpt_path)
        length = None
        if loop.needs_loader_length:  # len() builds the loader: only when it matters
            try:
                length = len(train_dl)
            except TypeError:
                pass
        validate = bool(val_dls) or bool(self.get_callbacks(ValidationCallback))
        plan = loop.plan(self.global_step, length, validate)
        if not self.backend.is_e2e_execution:  # compile/validate only: one step of each kind
            log.info("compile_only/validate_only: the train step%s compiled, nothing runs",
                     " and the validation step are" if val_dls else " is")
            plan = FitPlan(plan.start, plan.start + 1, (plan.start + 1,),
                           frozenset({plan.start + 1}) if validate else frozenset())
        self.fit_plan = plan
        self._fit_start, self._fit_position = plan.start, self._data_position
        if plan.end <= plan.start:
            log.warning("Nothing to train: the global step (%d) has reached the loop's end", plan.start)
        stream = TrainStream(train_dl, position=self._data_position)
        with contextlib.ExitStack() as stack:
            self.call("on_enter_fit", stack, train_dl, val_dls, loop)
            self.call("on_fit_start", train_dl, val_dls, loop)
            try:
                for loop_idx, first, steps, validate_now in plan.chunks():
                    self._train(stream, loop_idx, first, steps)
                    if validate_now:
                        eval_loop = ValidationLoop(loop.eval_steps)
                        for dl in val_dls:
                            self._validate(dl, eval_loop)
                        self.call("run_validation", loop_idx, first + steps == plan.end)
            except Exception as e:
                self.call("on_fit_exception", e)
                raise
            self.call("on_fit_end", loop)
        self._data_position = self._fit_position + self.global_step - plan.start

    def _check_batch(self, batch) -> None:
        size = batch_size_of(batch)
        self._micro_batches = micro_batch_count(size, self.loop.grad_accum_steps, self.backend)
        self._batch_size = size

    def _train(self, stream: TrainStream, loop_idx: int, first: int, steps: int) -> None:
        schedule, activation = self.fit_plan.executor_schedules(first, steps, self.checkpoint.steps,
                                                                  self.logging.log_steps)
        executor = cstorch.utils.data.DataExecutor(stream, num_steps=steps, checkpoint_steps=schedule,
                                                   activation_steps=activation)
        self._run_base = first
        self._rate_mark = None
        with contextlib.ExitStack() as stack:
            self.call("on_enter_train", stack, stream, self.loop, loop_idx)
            self.call("on_train_start", self.model, stream, self.loop, loop_idx)
            self.model.train()
            try:
                with self._pipeline_progress_off(), contextlib.closing(iter(executor)) as batches:
                    if first == 0 and self.checkpoint.save_initial_checkpoint:
                        self.save_checkpoint()
                    for batch_idx, batch in enumerate(batches):
                        self._step_pending = True
                        self.call("on_train_batch_start", self.model, batch, batch_idx)
                        self._check_batch(batch)
                        outputs = self._traced_train(batch)
                        self.call("on_train_batch_end", self.model, outputs, batch, batch_idx)
            except Exception as e:
                self.call("on_train_exception", e)
                raise
            self.call("on_train_end", self.model, self.loop, loop_idx)

    def _validate(self, val_dl, loop: ValidationLoop) -> None:
        hook = self._validation_hook = loop.hook
        dl = copy.copy(val_dl)
        executor = cstorch.utils.data.DataExecutor(dl, num_steps=loop.eval_steps if self.backend.is_e2e_execution
                                                   else 1)
        with contextlib.ExitStack() as stack:
            self.call(f"on_enter_{hook}", stack, dl, loop)
            self.call(f"on_{hook}_start", self.model, dl, loop)
            was_training = self.model.training
            self.model.eval()
            self._eval_losses = []
            try:
                with self._pipeline_progress_off(), contextlib.closing(iter(executor)) as batches:
                    for batch_idx, batch in enumerate(batches):
                        self.call(f"on_{hook}_batch_start", self.model, batch, batch_idx)
                        outputs = self._traced_validate(batch)
                        self.call(f"on_{hook}_batch_end", self.model, outputs, batch, batch_idx)
            except Exception as e:
                self.call(f"on_{hook}_exception", e)
                raise
            finally:
                self.model.train(was_training)
            if self._eval_losses:
                self.log_metrics_dict({"eval/loss": sum(self._eval_losses) / len(self._eval_losses)},
                                      step=self.global_step)
            self.call(f"on_{hook}_end", self.model, loop)

    def _validation_loop(self, loop) -> ValidationLoop:
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
        val_dls = loader_list(val_dataloader, "val_dataloader")
        if not val_dls:
            raise ValueError("validate needs a val_dataloader")
        loop = self._validation_loop(loop)
        self._load_for_run(ckpt_path)
        for dl in val_dls:
            self._validate(dl, loop)

    @_holding_model_dir
    def validate_all(self, val_dataloaders=None, ckpt_paths=..., loop: Optional[ValidationLoop] = None) -> None:
        """Validate every checkpoint of `ckpt_paths` (a path, a glob or a list of them;
        `...`: every checkpoint in the checkpoint root, oldest first) on every dataloader,
        then call `run_validation` on the ValidationCallbacks for each checkpoint."""
        val_dls = loader_list(val_dataloaders, "val_dataloaders")
        loop = self._validation_loop(loop)
        if ckpt_paths is ...:
            paths = [p for _, p in self.checkpoint.checkpoints()]
        else:
            paths = []
            for pattern in ([ckpt_paths] if isinstance(ckpt_paths, str) else list(ckpt_paths or [])):
                matched = sorted(glob.glob(pattern))
                if not matched:
                    raise FileNotFoundError(f"No checkpoint matches {pattern!r}")
                paths.extend(matched)
        if not paths:
            log.warning("validate_all found no checkpoint in %s: validating the current weights",
                        self.checkpoint.root)
        if not val_dls and not self.get_callbacks(ValidationCallback):
            raise ValueError("validate_all needs val_dataloaders (or a ValidationCallback)")
        with contextlib.ExitStack() as stack:
            self.call("on_enter_validate_all", stack, val_dls, loop, paths)
            for i, path in enumerate(paths or [None]):
                if path is not None:
                    self.load_checkpoint(path)
                for dl in val_dls:
                    self._validate(dl, loop)
                self.call("run_validation", i, i == max(len(paths), 1) - 1)

    def finalize(self) -> None:
        """Close the loggers' files and release the model_dir lock (also done when the
        trainer is garbage collected)."""
        try:
            for cb in self.callbacks:
                cb.finalize()
        finally:
            lock = getattr(self, "_model_dir_lock", None)  # None: the arguments were refused
            if lock is not None:
                lock.release()

    def __del__(self):
        with contextlib.suppress(Exception):
            self.finalize()
