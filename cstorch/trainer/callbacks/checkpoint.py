"""`Checkpoint` (when and where the trainer saves, and what it autoloads) and
`KeepNCheckpoints`.

`Checkpoint(steps=K)` saves after every global step divisible by K and after the last
step of every fit; `steps=None` saves only after the last step; `steps=0` never saves.
Files are `<checkpoint_root or model_dir>/<checkpoint_name>` with `{step}` replaced by
the global step; a name that exists already gets `_YYYYmmdd_HHMMSS` before its
extension (the H5 writer never overwrites). The latest checkpoint is the one with the
highest step, ties broken by modification time: `fit`/`validate` load it when
`autoload_last_checkpoint` is set and no `ckpt_path` is given. The checkpoint holds
`model`, `optimizer`, `schedulers` (a list), `grad_scaler`, `dataloader` (the train
stream's position), `rng`, `global_step` and `__metadata__` (the cstorch version; with
`strict_version` a checkpoint of another major.minor version is refused on load).
"""
from __future__ import annotations

import glob
import logging
import os
import re
import time
from typing import Optional

import cstorch

from ..checks import show
from .base import Callback, CoreCallback

log = logging.getLogger("cstorch.trainer")


class Checkpoint(CoreCallback):
    """When `fit` saves checkpoints and which one it loads at the start.

    Args:
        steps: K: save after every global step divisible by K and after the last step of every fit; None:
            after the last step only; 0: never.
        autoload_last_checkpoint: `fit` and `validate` load the latest checkpoint of the checkpoint folder
            when no `ckpt_path` is given.
        disable_strict_checkpoint_loading: load a checkpoint's state with `strict=False` (missing or extra
            keys are allowed).
        save_initial_checkpoint: also save the initial state (global step 0) before the first step of a fit
            that starts at step 0.
        checkpoint_root: the folder of the checkpoints; None: the trainer's model_dir.
        checkpoint_name: the file name, with `{step}` exactly once.
        strict_version: refuse a checkpoint of another cstorch major.minor version.

    Differences from the real system:
        `steps=None` saves after the last step only. A restarted run re-enters the
        train stream by replaying the loader, so the loader's order must come from its
        own seeded generator.
    """

    def __init__(self, steps: Optional[int] = None, autoload_last_checkpoint: bool = True,
                 disable_strict_checkpoint_loading: bool = False, save_initial_checkpoint: bool = False,
                 checkpoint_root: Optional[str] = None, checkpoint_name: str = "checkpoint_{step}.mdl",
                 strict_version: bool = True):
        if steps is not None and (not isinstance(steps, int) or isinstance(steps, bool) or steps < 0):
            raise ValueError(f"Checkpoint steps must be an integer >= 0 (0: never save) or None (save after the "
                             f"last step only), got {show(steps)}")
        if not isinstance(checkpoint_name, str) or checkpoint_name.count("{step}") != 1 or re.search(
                r"\{(?!step\})", checkpoint_name):
            raise ValueError(f"checkpoint_name must contain '{{step}}' exactly once and no other '{{...}}' field, "
                             f"got {show(checkpoint_name)} (e.g. 'checkpoint_{{step}}.mdl')")
        self.steps = steps
        self.autoload_last_checkpoint = bool(autoload_last_checkpoint)
        self.disable_strict_checkpoint_loading = bool(disable_strict_checkpoint_loading)
        self.save_initial_checkpoint = bool(save_initial_checkpoint)
        self.checkpoint_root = checkpoint_root
        self.checkpoint_name = checkpoint_name
        self.strict_version = bool(strict_version)
        self._root: Optional[str] = None

    def setup(self, trainer):
        self._root = os.path.abspath(self.checkpoint_root or trainer.model_dir)
        os.makedirs(self._root, exist_ok=True)

    @property
    def root(self) -> str:
        if self._root is None:
            raise RuntimeError("Checkpoint.root is known once the Trainer has set the callback up")
        return self._root

    def describe(self) -> str:
        """Where and when checkpoints are written, in words (the line a run starts with)."""
        where = os.path.join(self.root, self.checkpoint_name)
        if self.steps == 0:
            return f"checkpoints: none (Checkpoint(steps=0)); loaded from {self.root}"
        when = "the last step" if self.steps is None else f"every {self.steps} steps and the last"
        return f"checkpoints: {where} ({when})"

    def is_checkpoint_step(self, global_step: int, is_last: bool) -> bool:
        if self.steps == 0:
            return False
        return is_last or (self.steps is not None and global_step % self.steps == 0)

    def on_train_batch_end(self, trainer, model, outputs, batch, batch_idx):
        trainer.save_checkpoint()  # a checkpoint closure: runs on the executor's checkpoint steps only

    def path_for(self, step: int) -> str:
        path = os.path.join(self.root, self.checkpoint_name.format(step=step))
        if os.path.exists(path):
            stem, ext = os.path.splitext(path)
            path = f"{stem}_{time.strftime('%Y%m%d_%H%M%S')}{ext}"
            n = 1
            while os.path.exists(path):
                path = f"{stem}_{time.strftime('%Y%m%d_%H%M%S')}_{n}{ext}"
                n += 1
        return path

    def _pattern(self) -> re.Pattern:
        head, tail = self.checkpoint_name.split("{step}")
        stem, ext = os.path.splitext(tail)
        return re.compile(re.escape(head) + r"(\d+)" + re.escape(stem) + r"(_\d{8}_\d{6}(_\d+)?)?" + re.escape(ext)
                          + "$")

    def checkpoints(self) -> list[tuple[int, str]]:
        """(step, path) of every checkpoint in the root, oldest first (step, then mtime)."""
        pattern = self._pattern()
        found = []
        for path in glob.glob(os.path.join(glob.escape(self.root), "*")):
            m = pattern.match(os.path.basename(path))
            if m and os.path.isfile(path):
                found.append((int(m.group(1)), os.path.getmtime(path), path))
        return [(step, path) for step, _, path in sorted(found)]

    def check_version(self, state_dict: dict, path: str) -> None:
        """With `strict_version`, a checkpoint written by another major.minor version of
        cstorch (its `__metadata__`) is refused."""

        metadata = state_dict.get("__metadata__")
        versions = [m.get("version") for m in metadata if isinstance(m, dict)] if isinstance(metadata, list) else []
        ours = cstorch.__version__.split(".")[:2]
        for version in versions:
            if self.strict_version and isinstance(version, str) and version.split(".")[:2] != ours:
                raise ValueError(
                    f"Checkpoint {path} was written by version {version}, this is cstorch {cstorch.__version__}: "
                    f"the major.minor versions differ. Set Checkpoint(strict_version=False) (YAML: checkpoint: "
                    f"{{strict_version: false}}) to load it anyway.")

    def latest(self) -> Optional[str]:
        found = self.checkpoints()
        return found[-1][1] if found else None


class KeepNCheckpoints(Callback):
    """After each save, delete all but the newest `n` checkpoints of the trainer's
    Checkpoint root (newest = highest step).

    Args:
        n: the number of checkpoints to keep (>= 1).
    """

    def __init__(self, n: int):
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"KeepNCheckpoints needs n >= 1, got {show(n)}")
        self.n = n

    def on_after_save_checkpoint(self, trainer, ckpt_path):
        for _, path in trainer.checkpoint.checkpoints()[:-self.n]:
            log.info("KeepNCheckpoints(%d): deleting %s", self.n, path)
            os.remove(path)
