"""The backend a trainer asks for, and the one backend of a process.

    BackendSpec     init.backend: {backend_type: CSX, compile_dir, compile_only,
                    validate_only, artifact_dir, cluster_config: {ClusterConfig fields}}
                    (the CPU/GPU backends take only artifact_dir; a key naming a flag of
                    cstorch.backends, `csx.debug.*`, is ignored with a warning, as the
                    Model Zoo ignores it)

`check_one_backend(specs)`: the trainers of a list run one after the other in one
process, which has one backend, so every trainer must resolve to the backend the first
one makes (or the process's existing one) — reported before the first trainer runs.
"""
from __future__ import annotations

import inspect
import warnings
from typing import Any, Literal, Optional

import cstorch
from cstorch.backend import get_backend_args
from cstorch.distributed import ClusterConfig

from ..checks import DEVICES, ConfigError, check_dict, check_keys, cluster_fields, device_name, show, try_build
from .base import At, Spec

#: the keys of a `backend:` block per backend type: `backend_type` and the arguments of
#: `cstorch.backend(type, ...)` (`cstorch.backend.get_backend_args`, from the one table the
#: backend keeps); of the GPU backend's DDP arguments, which it does not support yet, none
_GPU_UNSUPPORTED = ("enable_distributed", "main_process_id", "dist_backend", "init_method", "sync_batchnorm")
BACKEND_KEYS = {
    name: tuple(k for k in list(get_backend_args(name))[1:] if not (name == "GPU" and k in _GPU_UNSUPPORTED))
    for name in ("CSX", "CPU", "GPU")
}
#: the settings a `backend:` block shares with the process's one backend: a later
#: trainer's block must repeat them (`check_one_backend`)
SHARED_BACKEND_KEYS = ("cluster_config", "compile_only", "validate_only", "compile_dir")


def _is_flag(dotted: str) -> bool:
    """Whether `dotted` (`csx.debug.implicit_cast_cb16_to_fp32`) names a flag of
    `cstorch.backends`."""
    *groups, name = dotted.split(".")
    node = cstorch.backends
    for group in groups:
        node = getattr(node, "_groups", {}).get(group)
        if node is None:
            return False
    return name in getattr(node, "_flags", {})


def _without_flags(b: dict, path: str) -> dict:
    """`b` less its keys that name a flag of `cstorch.backends` (`csx.debug.*`, as the
    Model Zoo's ViT YAML gives), with a warning: the Model Zoo's backend block passes only
    the backend's own arguments on and ignores such keys (set a flag with the
    `GlobalFlags` / `ScopedTrainFlags` callbacks). A dotted key that names no flag stays,
    an unknown key."""
    flags = sorted(k for k in b if isinstance(k, str) and "." in k and _is_flag(k))
    if flags:
        warnings.warn(f"{path}: {', '.join(flags)} ignored: a backend block takes the backend's arguments, as in "
                      f"the Model Zoo (which ignores these keys too); set a flag with the GlobalFlags callback.",
                      UserWarning, stacklevel=2)
    return {k: v for k, v in b.items() if k not in flags}


class BackendSpec(Spec):
    """`init.backend` (module doc)."""

    #: CSX, CPU or GPU (XLA is read as CSX; default CSX)
    backend_type: Literal["CSX", "CPU", "GPU"] = "CSX"
    artifact_dir: Optional[str] = None
    compile_dir: Optional[str] = None
    compile_only: Optional[bool] = None
    validate_only: Optional[bool] = None
    #: ClusterConfig's arguments (checked by building one)
    cluster_config: Optional[dict[str, Any]] = None
    #: the block as the YAML gives it (errors quote it)
    written: dict[str, Any] = {}

    @classmethod
    def from_yaml(cls, at: At) -> dict:
        b = check_dict(at.value, at.path)
        btype = device_name(b.get("backend_type", "CSX"))
        if btype not in BACKEND_KEYS:
            raise ConfigError(f"{at.path}.backend_type must be one of {', '.join(DEVICES)}, got "
                              f"{show(b['backend_type'])}.")
        b = _without_flags(b, at.path)
        check_keys(b, BACKEND_KEYS[btype], at.path, f"the {btype} backend")
        for key in ("compile_only", "validate_only"):
            if b.get(key) is not None and not isinstance(b[key], bool):
                raise ConfigError(f"{at.path}.{key} must be true or false, got {show(b[key])}.")
        for key in ("artifact_dir", "compile_dir"):
            if b.get(key) is not None and not isinstance(b[key], str):
                raise ConfigError(f"{at.path}.{key} must be a path string, got {show(b[key])}.")
        if b.get("compile_only") and b.get("validate_only"):
            raise ConfigError(f"{at.path}: compile_only and validate_only are mutually exclusive; set at most one.")
        if b.get("cluster_config") is not None:
            cc = check_dict(b["cluster_config"], f"{at.path}.cluster_config")
            check_keys(cc, cluster_fields(), f"{at.path}.cluster_config", "ClusterConfig")
            try_build(ClusterConfig, cc, f"{at.path}.cluster_config")
        fields = {k: b[k] for k in BACKEND_KEYS[btype] if b.get(k) is not None}
        return {**fields, "backend_type": btype, "written": dict(b)}

    def shared_settings(self) -> dict:
        """The `SHARED_BACKEND_KEYS` this block gives (cluster_config as a ClusterConfig)."""
        settings = {k: getattr(self, k) for k in SHARED_BACKEND_KEYS if getattr(self, k) is not None}
        if "cluster_config" in settings:
            settings["cluster_config"] = ClusterConfig(**settings["cluster_config"])
        return settings


def backend_request(init) -> tuple[Optional[str], dict]:
    """(backend type, settings shared with an existing backend) that an `InitSpec` asks
    for: `backend:` -> its type and shared settings; `device:` -> the device, {};
    neither -> (None, {})."""
    if init.backend is not None:
        return init.backend.backend_type, init.backend.shared_settings()
    if init.device is not None:
        return device_name(init.device), {}
    return None, {}


def _backend_defaults() -> dict:
    """The `SHARED_BACKEND_KEYS` of a backend made without settings (from `device:`)."""
    params = inspect.signature(cstorch.Backend).parameters
    return {k: ClusterConfig() if k == "cluster_config" else params[k].default for k in SHARED_BACKEND_KEYS}


def check_one_backend(specs: list) -> None:
    """The trainers (`TrainerSpec`s) of a list run one after the other in one process,
    which has one backend: the first trainer that runs makes it (or the process's
    existing one is used), and every later trainer must resolve to it. A `device:`
    trainer needs the same type, a `backend:` trainer also the same values of the
    settings it gives; a trainer with neither takes the backend that exists (the first
    one: device CSX). So what would fail when trainer i is built is reported now."""
    existing = cstorch.backend()
    current = None  # (type, shared settings, description) of the backend a trainer would find
    if existing is not None:
        current = (existing.backend_type.name, {k: getattr(existing, k, None) for k in SHARED_BACKEND_KEYS},
                   f"this process's existing {existing.backend_type.name} backend")
    for spec in specs:
        init = spec.init
        btype, settings = backend_request(init)
        if init.backend is not None:
            what = f"{init.path}.backend ({show(init.backend.written)})"
        elif init.device is not None:
            what = f"{init.path}.device ({show(init.device)})"
        else:
            what = f"{init.path} (neither device nor backend: the backend that exists, else device 'CSX')"
        if current is None:
            btype = btype or "CSX"
            current = (btype, {**_backend_defaults(), **settings} if btype == "CSX" else {}, what)
            continue
        if btype is None:
            continue
        ctype, csettings, cwhat = current
        differ = ["the device type"] if btype != ctype else [k for k, v in settings.items() if csettings.get(k) != v]
        if differ:
            raise ConfigError(
                f"{what} does not match {cwhat}: they differ in {', '.join(differ)}. The trainers of a list run "
                f"one after the other in one process, which has one backend, so every trainer needs the same device "
                f"type and backend settings; make them the same (--target_device sets every trainer's) or run "
                f"the trainers in separate processes.")


__all__ = ["BackendSpec", "BACKEND_KEYS", "SHARED_BACKEND_KEYS", "backend_request", "check_one_backend"]
