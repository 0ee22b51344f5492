"""Classes that take their arguments as one typed config object (Model Zoo 2.x's
`ModelConfig` / `DataConfig` pydantic classes), and validating a YAML section into one.

A class *takes a config* when its constructor has exactly one parameter besides `self`,
annotated with a pydantic model class (`def __init__(self, config: MNISTModelConfig)`):
the trainer then builds it as `cls(ConfigClass(**section))` instead of `cls(**section)`.
This is how the Model Zoo tells the two apart (its config class of a class is the
single `config` field built from the constructor's annotations). String annotations
(`from __future__ import annotations`) are resolved in the class's module.

`config_section(config_cls, key, name, kwargs)` is the mapping a YAML section is
validated as: the keyword arguments plus the section's name under the config's
discriminator `key` (`name` for models, `data_processor` for data processors) when the
config's field accepts that name. A class named by path (`model.py:MNISTModel`) leaves
the discriminator out, so the config's own name (the first of its `Literal`) stands.

`validate_config(config_cls, data, where, context)` validates, and turns pydantic's
errors into one `ConfigError` whose lines name each wrong key by its full key path
(`trainer.init.model.depth: Input should be a valid integer (got 'x')`), an unknown key
with the closest valid ones, a missing required key, and errors of the config's own
validators and `post_init` at the section's path.

Differences from the real system:
    A config error names each key path
    (`trainer.init.model.depth: Input should be a valid integer`). A data processor's
    config gets `{"model": {"config": <model config>}}` as its `post_init` context.
"""
from __future__ import annotations

import inspect
import typing
from typing import Any, Literal, Optional

from pydantic import AliasChoices, BaseModel, ValidationError

from .checks import ConfigError, show, suggest


def config_class(target) -> Optional[type]:
    """The pydantic config class `target`'s constructor takes as its only argument, or
    None (`target` is a plain class, a factory, or its constructor takes other arguments)."""
    if not isinstance(target, type):
        return None
    init = target.__init__
    try:
        params = [p for name, p in inspect.signature(init).parameters.items() if name != "self"]
    except (TypeError, ValueError):
        return None
    if len(params) != 1 or params[0].kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
        return None
    annotation = params[0].annotation
    if isinstance(annotation, str):
        try:
            annotation = typing.get_type_hints(init).get(params[0].name, annotation)
        except Exception:  # an annotation that does not resolve: not a config
            return None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def literal_values(config_cls: type, field: str) -> Optional[tuple]:
    """The values of `config_cls.<field>` when it is a `Literal` (None otherwise)."""
    info = config_cls.model_fields.get(field)
    if info is None or typing.get_origin(info.annotation) is not Literal:
        return None
    return typing.get_args(info.annotation)


def config_section(config_cls: type, key: str, name: str, kwargs: dict) -> dict:
    """The mapping a section is validated as: `kwargs`, plus `{key: name}` when the
    config has a field `key` that accepts `name` (module doc)."""
    if key not in config_cls.model_fields:
        return dict(kwargs)
    values = literal_values(config_cls, key)
    return {key: name, **kwargs} if values is None or name in values else dict(kwargs)


def _field_keys(config_cls: type) -> list[str]:
    """The keys a section may give: field names and their validation aliases."""
    keys = []
    for name, info in config_cls.model_fields.items():
        keys.append(name)
        alias = info.validation_alias or info.alias
        if isinstance(alias, str):
            keys.append(alias)
        elif isinstance(alias, AliasChoices):
            keys += [a for a in alias.choices if isinstance(a, str)]
    return list(dict.fromkeys(keys))


def _location(where: str, loc: tuple) -> str:
    path = where
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def _message(config_cls: type, where: str, error: dict) -> str:
    loc, kind = tuple(error.get("loc", ())), error.get("type")
    name = config_cls.__name__
    if kind == "extra_forbidden" and loc:
        keys = _field_keys(config_cls) if len(loc) == 1 else []
        valid = f" Valid keys: {', '.join(sorted(keys))}." if keys else ""
        return f"Unknown key {_location(where, loc)}: {name} has no field {loc[-1]!r}.{suggest(loc[-1], keys)}{valid}"
    if kind == "missing" and loc:
        return f"{_location(where, loc)} is missing: {name} requires it."
    message = error.get("msg", "")
    if kind == "value_error" and message.startswith("Value error, "):
        message = message[len("Value error, "):]
    got = f" (got {show(error['input'])})" if loc and "input" in error else ""
    return f"{_location(where, loc)}: {message}{got}" if loc else f"{where}: {name}: {message}"


def validate_config(config_cls: type, data: dict, where: str, context: Optional[dict] = None) -> Any:
    """`config_cls.model_validate(data, context=context)`, its errors as one ConfigError
    naming key paths under `where` (module doc)."""
    try:
        return config_cls.model_validate(data, context=dict(context or {}))
    except ValidationError as e:
        lines = [_message(config_cls, where, err) for err in e.errors(include_url=False)]
        if len(lines) == 1:
            raise ConfigError(lines[0]) from None
        raise ConfigError(f"{len(lines)} errors in {where} ({config_cls.__name__}):\n  - " + "\n  - ".join(lines)) \
            from None


__all__ = ["config_class", "literal_values", "config_section", "validate_config"]
