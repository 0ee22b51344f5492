"""What the 1.8 runner classes read of a legacy params dict, parsed and checked in one
place (`Runconfig.of`): the runners, the base model and the `run` driver read the
fields, never the dict. (The rest of the params becomes the Trainer's spec through
`flat_format.convert_legacy`.)

    runconfig.target_device    "CPU", "GPU" or "CSX" (any case); unset: None
    runconfig.mode             one of the run modes (`config.MODES`); unset: "train"
    runconfig.seed             an int; unset: None (torch is not seeded)
    runconfig.compile_only     bool; not both with validate_only
    runconfig.validate_only    bool
    runconfig.num_csx          an int >= 1; unset: 1
    model.mixed_precision      bool; unset: False
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..checks import show
from ..config import MODES, ConfigError

_DEVICES = ("CPU", "GPU", "CSX")


def _section(params, key: str) -> dict:
    value = params.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{key} must be a mapping, got {show(value)}")
    return value


def _flag(section: dict, key: str, where: str) -> bool:
    value = section.get(key, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ConfigError(f"{where}.{key} must be true or false, got {show(value)}")
    return value


@dataclass(frozen=True)
class Runconfig:
    """The legacy params' settings the 1.8 runners act on (module docstring)."""

    target_device: Optional[str] = None
    mode: str = "train"
    seed: Optional[int] = None
    compile_only: bool = False
    validate_only: bool = False
    num_csx: int = 1
    mixed_precision: bool = False

    @classmethod
    def of(cls, params) -> "Runconfig":
        """Parse `params` (a dict; its `runconfig` and `model` sections may be absent);
        a ConfigError names the first bad value."""
        if not isinstance(params, dict):
            raise ConfigError(f"params must be a dict, got {type(params).__name__}")
        run, model = _section(params, "runconfig"), _section(params, "model")
        target = run.get("target_device")
        if target is not None and (not isinstance(target, str) or target.upper() not in _DEVICES):
            raise ConfigError(f"runconfig.target_device must be CPU, GPU or CSX, got {show(target)}")
        mode = run.get("mode") or "train"
        if mode not in MODES:
            raise ConfigError(f"runconfig.mode must be one of {', '.join(MODES)}, got {show(mode)}")
        seed = run.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ConfigError(f"runconfig.seed must be an integer, got {show(seed)}")
        num_csx = run.get("num_csx")
        num_csx = 1 if num_csx is None else num_csx
        if isinstance(num_csx, bool) or not isinstance(num_csx, int) or num_csx < 1:
            raise ConfigError(f"runconfig.num_csx must be an integer >= 1, got {show(num_csx)}")
        compile_only, validate_only = _flag(run, "compile_only", "runconfig"), _flag(run, "validate_only", "runconfig")
        if compile_only and validate_only:
            raise ConfigError("Please set one of compile_only and validate_only, not both.")
        return cls(target.upper() if target is not None else None, mode, seed, compile_only, validate_only, num_csx,
                   _flag(model, "mixed_precision", "model"))

    @property
    def compiles_only(self) -> bool:
        """compile_only or validate_only: the steps are compiled, nothing trains."""
        return self.compile_only or self.validate_only
