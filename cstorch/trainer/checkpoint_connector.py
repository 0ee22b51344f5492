"""Saving and loading the Trainer's checkpoints (`checkpoint_state` says what one holds).

Saving runs as a checkpoint closure, once the step's values exist: the hooks
`on_save_checkpoint` and `postprocess_checkpoint` may change the state before it is
written, and `on_after_save_checkpoint` gets the path. Loading calls
`on_before_load_checkpoint` with the path, `preprocess_checkpoint` with the state before
it is put back and `on_load_checkpoint` after; the Trainer's `progress` (the global step
and the train stream's position) comes back whole with it, and so does each callback's own
state.
"""
from __future__ import annotations

import logging
import os
from typing import Optional

import cstorch

from . import checkpoint_state

log = logging.getLogger("cstorch.trainer")


class CheckpointConnector:
    """The Trainer's checkpoints (module docstring)."""

    def __init__(self, trainer):
        self.trainer = trainer
        self.saved: list[str] = []  # the paths written by this trainer, in order

    def save_now(self) -> None:
        """Write the checkpoint of the step whose values the running closure holds, after
        checking that this run still holds the lock of model_dir
        (`ModelDirLock.verify`: `ModelDirLockLostError` before anything is written)."""
        t = self.trainer
        step = t._closure_global_step()
        path = t.checkpoint.path_for(step)
        t._model_dir_lock.verify(f"writing the checkpoint {path}")  # a second run may have locked model_dir anew
        state = checkpoint_state.capture(t.model, t.optimizer, t.schedulers, t.grad_scaler, t.progress.state_dict(step))
        callbacks = checkpoint_state.callback_states(t.callbacks)
        if callbacks:
            state["callbacks"] = callbacks
        t.call("on_save_checkpoint", state)
        t.call("postprocess_checkpoint", state)
        cstorch.save(state, path)
        self.saved.append(path)
        log.info("Saved checkpoint %s (global step %d)", path, step)
        t.call("on_after_save_checkpoint", path)

    def load(self, ckpt_path: Optional[str] = None) -> None:
        """Restore the trainer from `ckpt_path` (default: the latest checkpoint)."""
        t = self.trainer
        path = ckpt_path or t.checkpoint.latest()
        if path is None:
            raise FileNotFoundError(f"No checkpoint to load: none matches {t.checkpoint.checkpoint_name!r} in "
                                    f"{t.checkpoint.root}")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"Checkpoint {path!r} does not exist")
        t.call("on_before_load_checkpoint", path)
        state = cstorch.load(path)
        t.checkpoint.check_version(state, path)
        t.call("preprocess_checkpoint", state)
        checkpoint_state.restore(state, t.model, t.optimizer, t.schedulers, t.grad_scaler,
                                 strict=not t.checkpoint.disable_strict_checkpoint_loading, path=path)
        t.progress.load_state_dict(state)
        checkpoint_state.restore_callback_states(state, t.callbacks, path)
        log.info("Loaded checkpoint %s (global step %d)", path, t.global_step)
        t.call("on_load_checkpoint", state)

    def load_for_run(self, ckpt_path) -> None:
        """Before a run: load `ckpt_path`; `...` autoloads the latest checkpoint when the
        Checkpoint callback says so; None loads nothing."""
        t = self.trainer
        if ckpt_path is ...:
            path = t.checkpoint.latest() if t.checkpoint.autoload_last_checkpoint else None
            if path is not None:
                log.info("Autoloading the latest checkpoint %s", path)
        else:
            path = ckpt_path
        if path is not None:
            t.load_checkpoint(path)
