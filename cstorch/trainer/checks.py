"""`ConfigError` and the small checks of YAML values that the trainer's configuration
modules share (`specs/`, `config.py`, `legacy.py`, `cli.py`): unknown keys (the error
names the full key path and the closest valid keys), mappings, numbers, the device
names, and the keyword arguments of the classes a YAML names (checked against their
signatures; built with errors naming the key). A leaf module: it imports nothing of the
trainer."""
from __future__ import annotations

import dataclasses
import difflib
import inspect
import numbers
from typing import Optional

from cstorch.distributed import ClusterConfig

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
    return tuple(f.name for f in dataclasses.fields(ClusterConfig))


# ======================================================================================
# the classes named in the YAML: their arguments, building them
# ======================================================================================
def _signature(obj) -> Optional[inspect.Signature]:
    try:
        return inspect.signature(obj)
    except (TypeError, ValueError):
        return None


def check_kwargs(obj, kwargs: dict, path: str, *, skip=(), extra=(), require=True, renamed=None) -> None:
    """Every key of `kwargs` is a keyword argument of `obj` (a class or callable) or in
    `extra`; every required argument not in `skip` is given. `renamed` maps old argument
    names to their new ones, for the error of an unknown key."""
    name = getattr(obj, "__name__", type(obj).__name__)
    sig = _signature(obj)
    if sig is None:
        return
    params = {k: p for k, p in sig.parameters.items() if k not in skip
              and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.POSITIONAL_ONLY)}
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    accepted = [k for k, p in params.items() if p.kind is not inspect.Parameter.VAR_KEYWORD] + list(extra)
    if not takes_any:
        for key in kwargs:
            if key not in accepted:
                fix = f" (renamed to {renamed[key]!r})" if renamed and key in renamed else ""
                raise ConfigError(f"Unknown key {path}.{key}: {name} takes no argument {key!r}{fix}."
                                  f"{suggest(key, accepted)} Valid keys: {', '.join(sorted(accepted))}.")
    if require:
        missing = [k for k, p in params.items() if p.default is inspect.Parameter.empty
                   and p.kind is not inspect.Parameter.VAR_KEYWORD and k not in kwargs]
        if missing:
            raise ConfigError(f"{path}: {name} needs the argument(s) {', '.join(missing)}; add them there.")


def try_build(cls, kwargs: dict, path: str):
    """`cls(**kwargs)`, a ConfigError naming `path` when it refuses them."""
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{path}: {e}") from None
