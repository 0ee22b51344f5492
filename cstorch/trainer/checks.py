"""`ConfigError` and the small checks of YAML values shared by the trainer's
configuration modules (`config.py`, `build.py`, `legacy.py`): unknown keys (the error
names the full key path and the closest valid keys), mappings, numbers, the device
names; the arguments of the classes a YAML names (checked against their signatures,
built with errors naming the key); and the one backend of a process (what a trainer's
`backend:` / `device:` asks for, and that the trainers of a list agree on it)."""
from __future__ import annotations

import dataclasses
import difflib
import inspect
import numbers
from typing import Optional

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


def named_items(value, path: str) -> list[tuple[str, dict, str]]:
    """`[{Name: kwargs}, "Name", ...]` (or one such item) -> [(name, kwargs, item path)]."""
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    out = []
    for i, item in enumerate(items):
        where = f"{path}[{i}]" if isinstance(value, list) else path
        if isinstance(item, str):
            out.append((item, {}, where))
            continue
        if not isinstance(item, dict) or len(item) != 1:
            raise ConfigError(f"{where} must be a mapping with exactly one key, the class name, holding its "
                              f"arguments (e.g. {{ClassName: {{arg: value}}}}); got {item!r}.")
        (name, kwargs), = item.items()
        out.append((str(name), check_dict(kwargs, f"{where}.{name}"), f"{where}.{name}"))
    return out


def try_build(cls, kwargs: dict, path: str):
    """`cls(**kwargs)`, a ConfigError naming `path` when it refuses them."""
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{path}: {e}") from None


def resolve(kind: str, name, base_dir, where: str):
    """`registry.resolve(kind, name, base_dir)`, a ConfigError naming `where` when it fails."""
    from . import registry

    try:
        return registry.resolve(kind, name, base_dir)
    except ValueError as e:
        raise ConfigError(f"{where}: {e}") from None


def _scheduler_classes() -> dict[str, type]:
    from cstorch.optim import lr_scheduler as lr, weight_decay_scheduler as wd

    table = {}
    for module, base in ((lr, "LRScheduler"), (wd, "WeightDecayScheduler")):
        for name in module.__all__:
            if name != base:
                table[name] = getattr(module, name)
    return table


def scheduler_class(name: str, where: str) -> type:
    """The scheduler class `name` (exact, else the one equal ignoring case)."""
    table = _scheduler_classes()
    if name in table:
        return table[name]
    folded = [k for k in table if k.lower() == str(name).lower()]
    if len(folded) == 1:
        return table[folded[0]]
    raise ConfigError(f"{where}: unknown scheduler {name!r}.{suggest(name, table)} Schedulers are classes of "
                      f"cstorch.optim.lr_scheduler / weight_decay_scheduler: {', '.join(sorted(table))}.")


def is_kind(cls, *names) -> bool:
    """`cls` or one of its bases is named one of `names`."""
    return any(c.__name__ in names for c in cls.__mro__)


# ======================================================================================
# the process's one backend
# ======================================================================================
#: the backend settings a `backend:` block shares with the process's one backend: a later
#: trainer's block must repeat them (see `build._make_backend`, `check_one_backend`)
SHARED_BACKEND_KEYS = ("cluster_config", "compile_only", "validate_only", "compile_dir")


def backend_request(init: dict) -> tuple[Optional[str], dict]:
    """(backend type, settings shared with an existing backend) that a validated `init`
    asks for: `backend:` -> its type and the `SHARED_BACKEND_KEYS` it gives (cluster_config
    as a ClusterConfig); `device:` -> the device, {}; neither -> (None, {})."""
    if init.get("backend") is not None:
        b = init["backend"]
        settings = {k: b[k] for k in SHARED_BACKEND_KEYS if b.get(k) is not None}
        if "cluster_config" in settings:
            from cstorch.distributed import ClusterConfig

            settings["cluster_config"] = ClusterConfig(**settings["cluster_config"])
        return device_name(b.get("backend_type", "CSX")), settings
    if init.get("device") is not None:
        return device_name(init["device"]), {}
    return None, {}


def _backend_defaults() -> dict:
    """The `SHARED_BACKEND_KEYS` of a backend made without settings (from `device:`)."""
    from cstorch._backend import Backend
    from cstorch.distributed import ClusterConfig

    params = inspect.signature(Backend).parameters
    return {k: ClusterConfig() if k == "cluster_config" else params[k].default for k in SHARED_BACKEND_KEYS}


def check_one_backend(specs: list[tuple[str, dict]]) -> None:
    """The trainers of a list run one after the other in one process, which has one
    backend: the first trainer that runs makes it (or the process's existing one is used),
    and every later trainer must resolve to it. A `device:` trainer needs the same type, a
    `backend:` trainer also the same values of the settings it gives; a trainer with
    neither takes the backend that exists (the first one: device CSX, as
    `trainer_arguments`). So what fails when trainer i is built is reported now."""
    import cstorch

    existing = cstorch.backend()
    current = None  # (type, shared settings, description) of the backend a trainer would find
    if existing is not None:
        current = (existing.backend_type.name, {k: getattr(existing, k, None) for k in SHARED_BACKEND_KEYS},
                   f"this process's existing {existing.backend_type.name} backend")
    for path, spec in specs:
        init = spec["init"]
        btype, settings = backend_request(init)
        if init.get("backend") is not None:
            what = f"{path}.init.backend ({init['backend']!r})"
        elif init.get("device") is not None:
            what = f"{path}.init.device ({init['device']!r})"
        else:
            what = f"{path}.init (neither device nor backend: the backend that exists, else device 'CSX')"
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
