"""`ConfigError` and the small checks of YAML values shared by the trainer's
configuration modules (`config.py`, `legacy.py`): unknown keys (the error names the full
key path and the closest valid keys), mappings, numbers, and the device names."""
from __future__ import annotations

import dataclasses
import difflib
import numbers

DEVICES = ("CSX", "CPU", "GPU")


def device_name(value) -> str:
    """A device / backend type name as the trainer uses it: upper case, the alias XLA
    read as CSX (`cstorch.backend` accepts both)."""
    name = str(value).upper()
    return "CSX" if name == "XLA" else name


class ConfigError(ValueError):
    """A mistake in a trainer configuration (the message says what and how to fix it)."""


def suggest(key, candidates) -> str:
    """The hint ` Did you mean 'x'?` naming the candidates close to `key`, or ""."""
    close = difflib.get_close_matches(str(key), [str(c) for c in candidates], n=3, cutoff=0.6)
    close += [c for c in candidates if str(c).lower() == str(key).lower() and c not in close]
    return f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def check_keys(d: dict, allowed, path: str, what: str = "") -> None:
    """Every key of `d` is in `allowed` (the error names `path.key`; `what` owns the keys)."""
    for key in d:
        if key not in allowed:
            owner = f" ({what} has no such option)" if what else ""
            raise ConfigError(f"Unknown key {path}.{key}{owner}.{suggest(key, allowed)} "
                              f"Valid keys: {', '.join(sorted(map(str, allowed)))}.")


def check_dict(value, path: str, allow_none: bool = True) -> dict:
    """`value` when it is a mapping (`{}` for None when `allow_none`)."""
    if value is None and allow_none:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{path} must be a mapping of keys to values, got {type(value).__name__} {value!r}.")
    return value


def is_number(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def cluster_fields() -> tuple[str, ...]:
    """The field names of `cstorch.distributed.ClusterConfig`."""
    from cstorch.distributed import ClusterConfig

    return tuple(f.name for f in dataclasses.fields(ClusterConfig))
