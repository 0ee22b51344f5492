"""The run modes of a trainer config, the one table of them (the CLI, `run_trainer`
and the legacy runner read it)::

    mode            Trainer method  train dataloader  val dataloader(s)
    train           fit             required          -
    train_and_eval  fit             required          optional (without: it only trains)
    eval            validate        -                 required
    eval_all        validate_all    -                 required

A mode's arguments come from the YAML section named after its method. Its val
dataloader(s) are its own section's, else those of the sections after it in
`VAL_KEYS` (eval: `validate.val_dataloader`, else `fit.val_dataloader`; eval_all:
`validate_all.val_dataloaders`, else the eval ones).
"""
from __future__ import annotations

from typing import NamedTuple

from .checks import ConfigError


class RunMode(NamedTuple):
    """What a run mode runs (table in the module doc)."""

    #: the Trainer method that runs it; also the YAML section holding its arguments
    method: str
    #: it trains: needs fit.train_dataloader, an optimizer, a TrainingLoop
    trains: bool
    #: it takes val dataloader(s) (`val_sources`: where they are looked up)
    validates: bool
    #: ... and cannot run without
    val_required: bool
    #: the legacy runner's driver for it (a `PyTorchBaseRunner` method; its arguments: the
    #: train dataloader when `trains`, then the eval dataloader when `validates`)
    runner: str


#: run mode -> what it runs: the one table of the run modes
RUN_MODES = {
    "train": RunMode("fit", trains=True, validates=False, val_required=False, runner="train"),
    "train_and_eval": RunMode("fit", trains=True, validates=True, val_required=False, runner="train_and_eval"),
    "eval": RunMode("validate", trains=False, validates=True, val_required=True, runner="evaluate"),
    "eval_all": RunMode("validate_all", trains=False, validates=True, val_required=True, runner="evaluate_all"),
}
MODES = tuple(RUN_MODES)
#: the val dataloader key of each run method's section, in fallback order
VAL_KEYS = (("validate_all", "val_dataloaders"), ("validate", "val_dataloader"), ("fit", "val_dataloader"))
#: the checkpoint key of each run method's section (also the method's argument)
CKPT_KEYS = {"fit": "ckpt_path", "validate": "ckpt_path", "validate_all": "ckpt_paths"}


def check_mode(mode) -> None:
    """ConfigError unless `mode` is one of `MODES`."""
    if mode not in MODES:
        raise ConfigError(f"Unknown mode {mode!r}; expected one of {', '.join(MODES)}.")


def val_sources(mode: str) -> tuple[tuple[str, str], ...]:
    """The (section, key) places the val dataloader(s) of `mode` are taken from, first
    found wins: its own section's, then those of the sections after it in `VAL_KEYS`."""
    if not RUN_MODES[mode].validates:
        return ()
    sections = [section for section, _ in VAL_KEYS]
    return VAL_KEYS[sections.index(RUN_MODES[mode].method):]


__all__ = ["RunMode", "RUN_MODES", "MODES", "VAL_KEYS", "CKPT_KEYS", "check_mode", "val_sources"]
