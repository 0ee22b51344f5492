"""What a Trainer checkpoint holds, and putting it back.

    model, optimizer, schedulers (a list), grad_scaler   their state dicts (when present)
    dataloader      {"batches_consumed": n}: the train stream's position (`stream.py`)
    global_step     optimizer steps done
    rng             `cstorch.get_rng_state()` (the XLA key on CSX, torch's state off it)
    __metadata__    [{"version": cstorch version, "model_name": ...}]
"""
from __future__ import annotations

import logging

import cstorch

log = logging.getLogger("cstorch.trainer")


def capture(model, optimizer, schedulers: list, grad_scaler, step: int, batches_consumed: int) -> dict:
    """The checkpoint of global step `step` (the tensors as they are now)."""
    state = {"model": model.state_dict()}
    if optimizer is not None:
        state["optimizer"] = optimizer.state_dict()
    if schedulers:
        state["schedulers"] = [s.state_dict() for s in schedulers]
    if grad_scaler is not None:
        state["grad_scaler"] = grad_scaler.state_dict()
    state["dataloader"] = {"batches_consumed": batches_consumed}
    state["global_step"] = step
    state["rng"] = cstorch.get_rng_state()
    state["__metadata__"] = [{"version": cstorch.__version__, "model_name": type(model).__name__}]
    return state


def restore(state: dict, model, optimizer, schedulers: list, grad_scaler, strict: bool, path: str) -> tuple[int, int]:
    """Load `state` into the objects; returns (global_step, batches_consumed). A part
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
    global_step = int(state.get("global_step", 0))
    batches_consumed = int(state.get("dataloader", {}).get("batches_consumed", global_step))
    if "rng" in state:
        try:
            cstorch.set_rng_state(state["rng"])
        except ValueError as e:
            log.warning("RNG state not restored from %s: %s", path, e)
    return global_step, batches_consumed
