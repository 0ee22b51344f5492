"""`ConfigError` and the small checks of YAML values that the trainer's configuration
modules share (`specs/`, `config.py`, `legacy/flat_format.py`, `cli.py`): unknown keys (the error
names the full key path and the closest valid keys), mappings, numbers (finite ones for
hyper-parameters, learning rates >= 0, seeds in torch's range), the device names,
`model_dir`, and the keyword arguments of the classes a YAML names (checked against
their signatures; built with errors naming the key). A leaf module: it imports nothing
of the trainer.

An error message shows a value with `show(value)`, never with its whole `repr`: a value
read from YAML may be huge (a few hundred bytes of nested aliases expand to billions of
items), and `show` gives a bounded excerpt of it (at most `SHOW_LIMIT` characters)."""
from __future__ import annotations

import dataclasses
import difflib
import inspect
import math
import numbers
import os
from typing import Optional

from cstorch.distributed import ClusterConfig

DEVICES = ("CSX", "CPU", "GPU")


def device_name(value) -> str:
    """A device / backend type name as the trainer uses it: upper case, the alias XLA
    read as CSX (`cstorch.backend` accepts both). A value that is not a string is no
    device name: its `show` excerpt (never its whole str, which may be huge)."""
    if not isinstance(value, str):
        return show(value)
    name = value.upper()
    return "CSX" if name == "XLA" else name


class ConfigError(ValueError):
    """A mistake in a trainer configuration (the message says what and how to fix it)."""


#: the most characters `show` gives for a value
SHOW_LIMIT = 200
#: containers nested deeper than this show as `[...]` / `{...}`
_SHOW_DEPTH = 12

_BRACKETS = {list: ("[", "]"), tuple: ("(", ")"), set: ("{", "}"), frozenset: ("frozenset({", "})")}


class _Full(Exception):
    """The excerpt of `show` has reached its limit."""


def show(value, limit: int = SHOW_LIMIT) -> str:
    """A bounded excerpt of `repr(value)` for an error message (module doc): the repr
    itself for a small value; for a large one its first `limit` characters, ending in
    `...`. Mappings, lists, tuples and sets are written item by item until the limit is
    reached, so a value of billions of items (YAML aliases) costs nothing."""
    parts: list[str] = []
    room = [limit + 1]  # one over: a repr of exactly `limit` characters is shown whole

    def put(text: str) -> None:
        parts.append(text[:max(room[0], 0)])
        room[0] -= len(text)
        if room[0] <= 0:
            raise _Full

    def walk(v, depth: int) -> None:
        if isinstance(v, dict):
            if depth >= _SHOW_DEPTH:
                return put("{...}")
            put("{")
            for i, (k, x) in enumerate(v.items()):
                put(", " if i else "")
                walk(k, depth + 1)
                put(": ")
                walk(x, depth + 1)
            return put("}")
        kind = next((t for t in _BRACKETS if isinstance(v, t)), None)
        if kind is not None:
            opening, closing = _BRACKETS[kind]
            if kind in (set, frozenset) and not v:
                return put(f"{kind.__name__}()")
            if depth >= _SHOW_DEPTH:
                return put(f"{opening}...{closing}")
            put(opening)
            for i, x in enumerate(v):
                put(", " if i else "")
                walk(x, depth + 1)
            return put(",)" if kind is tuple and len(v) == 1 else closing)
        if isinstance(v, str):
            return put(repr(v[:room[0]]) if len(v) > room[0] else repr(v))
        try:
            text = repr(v)
        except Exception:  # a repr that fails (or an int too long to write): name the type
            text = f"<{type(v).__name__} object>"
        return put(text)

    try:
        walk(value, 0)
    except _Full:
        return "".join(parts)[:limit - 3] + "..."
    return "".join(parts)


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
        raise ConfigError(f"{path} must be a mapping of keys to values, got {type(value).__name__} {show(value)}.")
    return value


def is_number(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def nonfinite(value, path: str, strings: bool = False) -> Optional[tuple[str, object]]:
    """(key path, value) of the first NaN or infinite number in `value` (a number, or
    mappings / lists of them, walked depth-first; `path` is the key path of `value`), or
    None. With `strings`, also a string that reads as a non-finite float ("nan", "inf"),
    for a place where numeric strings are converted. Each container is visited once, so
    a value made of shared YAML aliases costs its size in the file, not expanded."""
    seen: set[int] = set()
    stack = [(path, value)]
    while stack:
        where, v = stack.pop()
        if is_number(v):
            if not math.isfinite(v):
                return where, v
        elif isinstance(v, str):
            if strings and _nonfinite_string(v):
                return where, v
        elif isinstance(v, (dict, list, tuple)):
            if id(v) in seen:
                continue
            seen.add(id(v))
            items = v.items() if isinstance(v, dict) else enumerate(v)
            children = [(f"{where}.{k}" if isinstance(v, dict) else f"{where}[{k}]", x) for k, x in items]
            stack.extend(reversed(children))
    return None


def _nonfinite_string(text: str) -> bool:
    try:
        return not math.isfinite(float(text))
    except ValueError:
        return False


def check_finite(value, path: str, strings: bool = False) -> None:
    """ConfigError naming the key path of the first NaN or infinite number in `value`
    (`nonfinite`): a hyper-parameter must be a finite number."""
    found = nonfinite(value, path, strings)
    if found is not None:
        where, bad = found
        raise ConfigError(f"{where} must be a finite number, got {show(bad)}; NaN and infinite values are not "
                          f"valid hyper-parameters.")


#: the seeds `torch.manual_seed` accepts: the 64-bit integers, signed or unsigned
SEED_MIN, SEED_MAX = -2 ** 63, 2 ** 64 - 1


def seed_problem(seed) -> Optional[str]:
    """Why `seed` (an integer) cannot seed the run, or None: it is outside what
    `torch.manual_seed` accepts (`SEED_MIN` .. `SEED_MAX`)."""
    if SEED_MIN <= seed <= SEED_MAX:
        return None
    return (f"must be an integer from -2**63 to 2**64 - 1 (what torch.manual_seed accepts), got {show(seed)}; "
            f"give a smaller seed.")


#: the arguments of optimizers and learning-rate schedulers that are learning rates
LEARNING_RATE_KEYS = frozenset({"lr", "learning_rate", "learning_rates", "initial_learning_rate",
                                "end_learning_rate", "eta_min", "base_lr", "max_lr"})


def check_learning_rate(value, path: str, strings: bool = False) -> None:
    """ConfigError naming the key path of the first negative number in `value` (a
    learning rate: a number, or a list of them; `path` is its key path), as the
    optimizers refuse a negative learning rate. With `strings`, a numeric string counts
    as its number. Run after `check_finite`."""
    items = [(path, value)] if not isinstance(value, list) else [(f"{path}[{i}]", v) for i, v in enumerate(value)]
    for where, v in items:
        number = v
        if strings and isinstance(v, str):
            try:
                number = float(v)
            except ValueError:
                continue
        if is_number(number) and number < 0:
            raise ConfigError(f"{where} must be >= 0, got {show(v)}; a learning rate cannot be negative (the "
                              f"optimizers refuse it).")


def check_learning_rates(kwargs: dict, path: str, strings: bool = False) -> None:
    """`check_learning_rate` on every argument of `kwargs` named in `LEARNING_RATE_KEYS`
    (`path` is the key path of `kwargs`)."""
    for key, value in kwargs.items():
        if key in LEARNING_RATE_KEYS:
            check_learning_rate(value, f"{path}.{key}", strings)


def model_dir_problem(model_dir) -> Optional[str]:
    """Why `model_dir` (relative: to the working directory) cannot be the run's folder,
    or None: it, or a folder above it, exists and is not a folder; or the nearest of them
    that exists is a folder this user (its effective ids) cannot write into. The reason
    names the path and says how to fix it."""
    path = os.path.abspath(os.fspath(model_dir))
    probe = path
    while not os.path.lexists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            return None
        probe = parent
    if os.path.isdir(probe):
        effective = os.access in os.supports_effective_ids
        if os.access(probe, os.W_OK | os.X_OK, effective_ids=effective):
            return None
        where = "" if probe == path else f" (it would be made in {probe!r})"
        return (f"{path!r} cannot be written by this user{where}: the run writes its lock file, checkpoints and logs "
                f"inside model_dir. Give a model_dir this user can write, or change the folder's permissions.")
    what = "is a file" if probe == path else f"is under {probe!r}, which is a file"
    return (f"{path!r} {what}, not a folder: the run writes its checkpoints and logs inside model_dir. Give "
            f"another model_dir (a folder, or a path where one can be made), or move the file away.")


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
