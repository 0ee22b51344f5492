"""The base of the trainer's typed config specs: how a YAML value becomes a spec.

A spec is a frozen pydantic model. It is made in one of two ways, both validating:

* from a YAML value: `SomeSpec.parse(value, path, base_dir)` (or, inside another spec's
  parsing, `SomeSpec.sub(At(...))`). The value travels as an `At` (the value, the key
  path it was read at, the folder relative file names are taken from); the spec's
  `from_yaml(at)` checks it with the house messages (the full key path, the closest
  valid key) and returns the spec's field values, its nested specs already made. So
  the YAML is walked once, and each nested spec knows its own key path (`path`), which
  later errors (an object refusing its arguments when it is built) name;
* from field values, as any pydantic model (`SomeSpec(path=..., ...)`), e.g. in tests
  or by a config layer that builds specs itself.

`parse` turns pydantic's `ValidationError` back into the `ConfigError` a check raised
(pydantic wraps the ValueErrors of validators); any other error a check met (a user
file that fails to import, say) propagates as it was raised.
"""
from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Optional

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from ..checks import ConfigError, show


@dataclasses.dataclass(frozen=True)
class At:
    """A YAML value with where it was read: what a spec is parsed from."""

    #: the key path of the value, e.g. `trainer.init.model` (errors name it)
    path: str
    #: the value as the YAML gives it (mappings, lists, strings, numbers, None)
    value: Any
    #: the folder relative `path/to/file.py:Class` names are taken from (None: the working directory)
    base_dir: Optional[str] = None
    #: the key path of the section that holds this value (some errors point next to it)
    parent: str = ""
    #: what config classes validated below this value see as `post_init`'s context
    #: (`{"model": <the model's arguments>}` for the dataloader sections; None: {})
    context: Optional[dict] = None

    def child(self, key: str) -> "At":
        """The value of `key` in this mapping (None when absent)."""
        return At(f"{self.path}.{key}", self.value.get(key), self.base_dir, self.path, self.context)

    def item(self, index: int, value) -> "At":
        """Item `index` (`value`) of the list at this path."""
        return At(f"{self.path}[{index}]", value, self.base_dir, self.parent, self.context)


def unwrap(error: ValidationError) -> BaseException:
    """The exception a spec's check raised that pydantic reports as `error` (the first
    one): the ConfigError itself, or any other exception of a validator as it was raised.
    A pydantic type error of a field (a spec's `from_yaml` let a value through that its
    field type refuses) becomes a ConfigError naming the field."""
    first = error.errors(include_url=False)[0]
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, BaseException):
        return cause
    where = ".".join(str(part) for part in first["loc"]) or error.title
    return ConfigError(f"{where}: {first['msg']} (got {show(first.get('input'))}).")


class Spec(BaseModel):
    """A typed, validated, immutable part of a trainer config (module doc)."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True, populate_by_name=True)

    #: the key path this spec was read from, e.g. `trainer.init.model` (errors name it)
    path: str

    #: YAML keys a spec accepts besides its fields (to refuse them with their own message)
    extra_yaml_keys: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def from_yaml(cls, at: At) -> dict:
        """The field values of the spec of the YAML value `at.value` (checked; nested
        specs made with `Sub.sub(at.child(key))`). Subclasses implement it."""
        raise NotImplementedError(f"{cls.__name__} is not read from YAML")

    @classmethod
    def yaml_keys(cls) -> tuple[str, ...]:
        """The keys of the YAML mapping this spec is read from: its fields (by alias),
        then `extra_yaml_keys`."""
        return tuple(f.alias or name for name, f in cls.model_fields.items() if name != "path") \
            + cls.extra_yaml_keys

    @model_validator(mode="before")
    @classmethod
    def _read_yaml(cls, data):
        if isinstance(data, At):
            return {"path": data.path, **cls.from_yaml(data)}
        return data

    @classmethod
    def sub(cls, at: At):
        """The spec of `at`, inside another spec's `from_yaml` (its errors propagate to
        the outer `parse`)."""
        return cls.model_validate(at)

    @classmethod
    def parse(cls, value, path: str, base_dir: Optional[str] = None):
        """The spec of the YAML `value` read at key path `path`; relative file names
        resolve from `base_dir`. A mistake raises `ConfigError` (what, where, how to fix)."""
        try:
            return cls.model_validate(At(path, value, base_dir))
        except ValidationError as e:
            raise unwrap(e) from None


__all__ = ["At", "Spec", "unwrap"]
