"""`create_config_class` (the config class of a class or function) and `describe_fields`
(a config's fields as rows: name, type, default, description)."""
from __future__ import annotations

import inspect
from typing import Any, Optional

from pydantic import create_model, model_validator

from cstorch.trainer.config_classes import config_class

from .base_config import BaseConfig


def create_config_class(cls, custom_type_mapping: Optional[dict] = None, **kwargs) -> type:
    """A `BaseConfig` subclass describing the arguments of `cls` (a class or function),
    whose `__orig_class__` is `cls`:

    * `cls` takes a config (its constructor's one argument is annotated with a pydantic
      model class): one field `config` of that class; a flat mapping validates as that
      config (`{"name": ..., "depth": ...}` is read as `{"config": {...}}`);
    * otherwise one field per keyword argument (its annotation, `Any` without one; its
      default, required without one); `**kwargs` in the signature allows extra keys.

    `custom_type_mapping` maps an annotation (or `(annotation, argument name)`) to the
    type its field gets. `kwargs` go to `pydantic.create_model` (`__base__`, ...)."""
    mapping = custom_type_mapping or {}
    taken = config_class(cls)
    base = kwargs.pop("__base__", BaseConfig)
    fields: dict[str, Any] = {}
    extra = "forbid"
    if taken is not None:
        fields["config"] = (taken, ...)
    else:
        target = cls.__init__ if isinstance(cls, type) else cls
        for name, param in inspect.signature(target).parameters.items():
            if name == "self" or param.kind is param.VAR_POSITIONAL:
                continue
            if param.kind is param.VAR_KEYWORD:
                extra = "allow"
                continue
            if name == "model_config":
                raise ValueError(f"`model_config` is reserved by pydantic; rename that argument of {cls}.")
            annotation = Any if param.annotation is inspect.Parameter.empty else param.annotation
            annotation = mapping.get((annotation, name), mapping.get(annotation, annotation)) \
                if _hashable(annotation) else annotation
            fields[name] = (annotation, ... if param.default is inspect.Parameter.empty else param.default)

    class _Config(base):
        model_config = {"extra": extra}

        @model_validator(mode="before")
        @classmethod
        def _wrap_flat_config(cls_, data):
            if taken is not None and not (isinstance(data, dict) and set(data) == {"config"}):
                return {"config": data}
            return data

    name = kwargs.pop("__name__", "{name}Config").format(name=getattr(cls, "__name__", "Callable"))
    kwargs.setdefault("__module__", getattr(cls, "__module__", __name__))
    config_cls = create_model(name, __base__=_Config, **kwargs, **fields)
    config_cls.__orig_class__ = cls
    return config_cls


def _hashable(value) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def describe_fields(config_cls: type, show_deprecated: bool = False) -> list[dict]:
    """[{"Name", "Type", "Default", "Description"}] of the fields of `config_cls`
    (deprecated ones only with `show_deprecated`)."""
    rows = []
    for name, field in config_cls.model_fields.items():
        if field.deprecated and not show_deprecated:
            continue
        annotation = field.annotation
        type_name = annotation.__name__ if isinstance(annotation, type) else str(annotation).replace("typing.", "")
        default = "" if field.is_required() else field.get_default(call_default_factory=True)
        rows.append({"Name": name, "Type": type_name, "Default": default, "Description": field.description})
    return rows


__all__ = ["create_config_class", "describe_fields"]
