"""What a Trainer checkpoint holds, and putting it back.

    model, optimizer, schedulers (a list), grad_scaler   their state dicts (when present)
    dataloader      {"batches_consumed": n}: the train stream's position (`stream.py`), and
    global_step     optimizer steps done: the Trainer's `progress` (`progress.py`)
    rng             `cstorch.get_rng_state()` (the XLA key on CSX, torch's state off it)
    callbacks       {callback.state_key: callback.state_dict()} of the callbacks with a
                    `state_dict` of their own (only when one has)
    __metadata__    [{"version": cstorch version, "model_name": ...}]
"""
from __future__ import annotations

import logging

import cstorch

from .callbacks.base import Callback

log = logging.getLogger("cstorch.trainer")


def capture(model, optimizer, schedulers: list, grad_scaler, progress: dict) -> dict:
    """The checkpoint of the step whose `Progress.state_dict` is `progress` (the tensors
    as they are now)."""
    state = {"model": model.state_dict()}
    if optimizer is not None:
        state["optimizer"] = optimizer.state_dict()
    if schedulers:
        state["schedulers"] = [s.state_dict() for s in schedulers]
    if grad_scaler is not None:
        state["grad_scaler"] = grad_scaler.state_dict()
    state.update(progress)
    state["rng"] = cstorch.get_rng_state()
    state["__metadata__"] = [{"version": cstorch.__version__, "model_name": type(model).__name__}]
    return state


def restore(state: dict, model, optimizer, schedulers: list, grad_scaler, strict: bool, path: str) -> None:
    """Load `state` into the objects (the Trainer's progress: `Progress.load_state_dict`). A part
    the checkpoint lacks starts fresh (a warning); `strict` applies to the model's keys.
    An RNG state of another backend kind is not restored (a warning)."""
    model.load_state_dict(state["model"], strict=strict)
    if schedulers and "schedulers" in state and len(state["schedulers"]) != len(schedulers):
        raise ValueError(f"Checkpoint {path} holds {len(state['schedulers'])} scheduler states but the trainer has "
                         f"{len(schedulers)} schedulers")
    parts = [("optimizer", [optimizer] if optimizer is not None else [], lambda sd: [sd]),
             ("schedulers", schedulers, lambda sd: sd),
             ("grad_scaler", [grad_scaler] if grad_scaler is not None else [], lambda sd: [sd])]
    for key, objects, per_object in parts:
        if not objects:
            continue
        if key not in state:
            log.warning("Checkpoint %s has no %r state: the %s starts fresh", path, key, key)
            continue
        for obj, sd in zip(objects, per_object(state[key])):
            obj.load_state_dict(sd)
    if "rng" in state:
        try:
            cstorch.set_rng_state(state["rng"])
        except ValueError as e:
            log.warning("RNG state not restored from %s: %s", path, e)


def _has_state(cb) -> bool:
    return isinstance(cb, Callback) and type(cb).state_dict is not Callback.state_dict


def check_callback_state_keys(callbacks: list) -> None:
    """Two callbacks with state (a `state_dict` of their own) under one `state_key` could
    not both be saved: a ValueError naming them, before any training (give one a
    `state_key` of its own)."""
    owners = {}
    for cb in filter(_has_state, callbacks):
        if cb.state_key in owners:
            raise ValueError(f"Callbacks {owners[cb.state_key]} and {type(cb).__name__} both have checkpoint state "
                             f"under the key {cb.state_key!r}: give one of them another `state_key`")
        owners[cb.state_key] = type(cb).__name__


def callback_states(callbacks: list) -> dict:
    """{state_key: state_dict()} of the `Callback`s with state (`check_callback_state_keys`
    made the keys unique)."""
    return {cb.state_key: cb.state_dict() for cb in filter(_has_state, callbacks)}


def restore_callback_states(state: dict, callbacks: list, path: str) -> None:
    """Give each callback its saved state (by `state_key`); a callback with state the
    checkpoint lacks keeps its own (a warning). (The real Model Zoo's callbacks, which are
    not `Callback`s, keep theirs in the checkpoint through their hooks.)"""
    saved = state.get("callbacks", {})
    for cb in filter(_has_state, callbacks):
        if cb.state_key in saved:
            cb.load_state_dict(saved[cb.state_key])
        else:
            log.warning("Checkpoint %s has no state for callback %r: it keeps its own", path, cb.state_key)
