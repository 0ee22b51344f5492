"""The Trainer's loops, in the order `fit` nests them.

- `FitLoop`: the TrainingLoop's plan (`FitPlan`) from the global step on, split into
  stretches that end at validation points; each stretch is a `TrainStretch`, each
  validation point runs an `EvaluationLoop` per validation dataloader, then
  `run_validation` on every ValidationCallback.
- `TrainStretch`: one `DataExecutor` run of train steps (the checkpoint and activation
  schedules of that stretch), a traced train step per batch.
- `EvaluationLoop`: one `DataExecutor` run of validation steps on one dataloader (a copy,
  so a run starts it afresh), the mean eval loss logged at its end.
- `validate_all`: every checkpoint on every dataloader.

Each loop calls the hooks of its level (the Trainer module's docstring gives the order)
and, when something raises, its `on_*_exception` hook before the exception propagates.
The loops keep no state of their own between runs: they advance the Trainer's
`progress` (`progress.py`: global step, the stream's position, the fit plan, the stretch).
"""
from __future__ import annotations

import contextlib
import copy
import glob
import logging

import cstorch

from .callbacks.base import ValidationCallback
from .arguments import loader_list
from .callbacks.loop import FitPlan, TrainingLoop, ValidationLoop
from .loggers import ProgressLogger
from .report import FitReport, ValidationReport, announce
from .step_data import batch_size_of, micro_batch_count
from .stream import TrainStream

log = logging.getLogger("cstorch.trainer")


@contextlib.contextmanager
def _pipeline_progress_off(trainer):
    """The executor's own bar is off while a ProgressLogger shows the trainer's."""
    perf = cstorch.backends.csx.performance
    if not trainer.get_callbacks(ProgressLogger):
        yield
        return
    saved = perf.progress
    perf.progress = False
    try:
        yield
    finally:
        perf.progress = saved


class FitLoop:
    """`Trainer.fit` (module docstring)."""

    def __init__(self, trainer):
        self.trainer = trainer

    def run(self, train_dataloader, val_dataloader, ckpt_path) -> None:
        t = self.trainer
        loop = t.loop
        if not isinstance(loop, TrainingLoop):
            raise RuntimeError(f"fit needs the Trainer to be built with loop=TrainingLoop(...), got "
                               f"{type(loop).__name__}")
        if t.optimizer is None:
            raise RuntimeError("fit needs an optimizer: the Trainer was built with optimizer=None "
                               "(validation only)")
        train_dls = loader_list(train_dataloader, "train_dataloader")
        if len(train_dls) != 1:
            raise ValueError(f"fit takes one train_dataloader, got {len(train_dls)}")
        (train_dl,) = train_dls
        val_dls = loader_list(val_dataloader, "val_dataloader")
        t._checkpoints.load_for_run(ckpt_path)
        length = None
        if loop.needs_loader_length:  # len() builds the loader: only when it matters
            try:
                length = len(train_dl)
            except TypeError:
                pass
        validate = bool(val_dls) or bool(t.get_callbacks(ValidationCallback))
        plan = loop.plan(t.global_step, length, validate)
        if not t.backend.is_e2e_execution:  # compile/validate only: one step of each kind
            log.info("compile_only/validate_only: the train step%s compiled, nothing runs",
                     " and the validation step are" if val_dls else " is")
            plan = FitPlan(plan.start, plan.start + 1, (plan.start + 1,),
                           frozenset({plan.start + 1}) if validate else frozenset())
        t.progress.start_fit(plan)
        if plan.end <= plan.start:
            log.warning("Nothing to train: the global step (%d) has reached the loop's end", plan.start)
        stream = TrainStream(train_dl, position=t.progress.batches_consumed)
        announce(t, f"fit: global steps {plan.start} -> {plan.end}")
        report = FitReport(t, plan)
        with contextlib.ExitStack() as stack:
            t.call("on_enter_fit", stack, train_dl, val_dls, loop)
            t.call("on_fit_start", train_dl, val_dls, loop)
            try:
                for loop_idx, first, steps, validate_now in plan.chunks():
                    TrainStretch(t).run(stream, loop_idx, first, steps)
                    if validate_now:
                        eval_loop = ValidationLoop(loop.eval_steps)
                        for dl in val_dls:
                            EvaluationLoop(t).run(dl, eval_loop)
                        t.call("run_validation", loop_idx, first + steps == plan.end)
            except Exception as e:
                t.call("on_fit_exception", e)
                raise
            t.call("on_fit_end", loop)
        t.progress.end_fit()
        report.summary()


class TrainStretch:
    """`steps` train steps from global step `first` (module docstring)."""

    def __init__(self, trainer):
        self.trainer = trainer

    def run(self, stream: TrainStream, loop_idx: int, first: int, steps: int) -> None:
        t = self.trainer
        schedule, activation = t.fit_plan.executor_schedules(first, steps, t.checkpoint.steps, t.logging.log_steps)
        executor = cstorch.utils.data.DataExecutor(stream, num_steps=steps, checkpoint_steps=schedule,
                                                   activation_steps=activation)
        t.progress.start_stretch(first)
        t._metrics.restart_rate()
        with contextlib.ExitStack() as stack:
            t.call("on_enter_train", stack, stream, t.loop, loop_idx)
            t.call("on_train_start", t.model, stream, t.loop, loop_idx)
            t.model.train()
            try:
                with _pipeline_progress_off(t), contextlib.closing(iter(executor)) as batches:
                    if first == 0 and t.checkpoint.save_initial_checkpoint:
                        t.save_checkpoint()
                    for batch_idx, batch in enumerate(batches):
                        t.progress.start_step()
                        t.call("on_train_batch_start", t.model, batch, batch_idx)
                        size = batch_size_of(batch)
                        t.progress.take_batch(size, micro_batch_count(size, t.loop.grad_accum_steps, t.backend))
                        outputs = t._traced_train(batch)
                        t.call("on_train_batch_end", t.model, outputs, batch, batch_idx)
            except Exception as e:
                t.call("on_train_exception", e)
                raise
            t.call("on_train_end", t.model, t.loop, loop_idx)


class EvaluationLoop:
    """One dataloader's validation run (module docstring)."""

    def __init__(self, trainer):
        self.trainer = trainer

    def run(self, val_dl, loop: ValidationLoop) -> int:
        """Run the validation; returns the number of batches it ran."""
        t = self.trainer
        ran = 0
        hook = t.progress.validation_hook = loop.hook
        dl = copy.copy(val_dl)
        executor = cstorch.utils.data.DataExecutor(dl, num_steps=loop.eval_steps if t.backend.is_e2e_execution
                                                   else 1)
        with contextlib.ExitStack() as stack:
            t.call(f"on_enter_{hook}", stack, dl, loop)
            t.call(f"on_{hook}_start", t.model, dl, loop)
            was_training = t.model.training
            t.model.eval()
            t._metrics.start_eval()
            try:
                with _pipeline_progress_off(t), contextlib.closing(iter(executor)) as batches:
                    for batch_idx, batch in enumerate(batches):
                        t.call(f"on_{hook}_batch_start", t.model, batch, batch_idx)
                        outputs = t._traced_validate(batch)
                        t.call(f"on_{hook}_batch_end", t.model, outputs, batch, batch_idx)
                        ran = batch_idx + 1
            except Exception as e:
                t.call(f"on_{hook}_exception", e)
                raise
            finally:
                t.model.train(was_training)
            t._metrics.end_eval()
            t.call(f"on_{hook}_end", t.model, loop)
        return ran


def validate(trainer, val_dataloader, ckpt_path, loop) -> None:
    """`Trainer.validate`: `loop.eval_steps` batches of each dataloader."""
    val_dls = loader_list(val_dataloader, "val_dataloader")
    if not val_dls:
        raise ValueError("validate needs a val_dataloader")
    loop = trainer.validation_loop(loop)
    trainer._checkpoints.load_for_run(ckpt_path)
    announce(trainer, f"validate: global step {trainer.global_step}")
    report = ValidationReport(trainer, "validate")
    batches = sum(EvaluationLoop(trainer).run(dl, loop) for dl in val_dls)
    report.summary(batches)


def validate_all(trainer, val_dataloaders, ckpt_paths, loop) -> None:
    """`Trainer.validate_all`: every checkpoint of `ckpt_paths` on every dataloader."""
    t = trainer
    val_dls = loader_list(val_dataloaders, "val_dataloaders")
    loop = t.validation_loop(loop)
    if ckpt_paths is ...:
        paths = [p for _, p in t.checkpoint.checkpoints()]
    else:
        paths = []
        for pattern in ([ckpt_paths] if isinstance(ckpt_paths, str) else list(ckpt_paths or [])):
            matched = sorted(glob.glob(pattern))
            if not matched:
                raise FileNotFoundError(f"No checkpoint matches {pattern!r}")
            paths.extend(matched)
    if not paths:
        log.warning("validate_all found no checkpoint in %s: validating the current weights", t.checkpoint.root)
    if not val_dls and not t.get_callbacks(ValidationCallback):
        raise ValueError("validate_all needs val_dataloaders (or a ValidationCallback)")
    announce(t, f"validate_all: {len(paths)} checkpoint{'s' if len(paths) != 1 else ''}")
    report = ValidationReport(t, "validate_all")
    batches = 0
    with contextlib.ExitStack() as stack:
        t.call("on_enter_validate_all", stack, val_dls, loop, paths)
        for i, path in enumerate(paths or [None]):
            if path is not None:
                t.load_checkpoint(path)
            for dl in val_dls:
                batches += EvaluationLoop(t).run(dl, loop)
            t.call("run_validation", i, i == max(len(paths), 1) - 1)
    report.summary(batches)
