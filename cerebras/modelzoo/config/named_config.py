"""`NamedConfig`: a config with a discriminator field, a `Literal` of the names the config
answers to (`name` for models, `data_processor` for data processors)."""
from __future__ import annotations

from inspect import isabstract
from typing import ClassVar, Literal, get_args, get_origin

from pydantic import model_validator

from .base_config import BaseConfig


class NamedConfig(BaseConfig):
    """A config whose `discriminator` field (a ClassVar naming it, default "name") is a
    `Literal` of one or more names. Built from Python without that field, it takes the
    first name. A concrete subclass without such a field is a TypeError (a mistake in
    the config class, not in a YAML)."""

    discriminator: ClassVar[str] = "name"

    @model_validator(mode="before")
    @classmethod
    def _default_discriminator(cls, data):
        if isabstract(cls):
            return data
        key = cls.discriminator
        field = cls.model_fields.get(key)
        if field is None:
            raise TypeError(f"{cls.__name__} needs a `{key}` field, e.g. {key}: Literal[\"my_name\"].")
        if get_origin(field.annotation) is not Literal or not get_args(field.annotation):
            raise TypeError(f"{cls.__name__}.{key} must be a Literal of at least one name, got {field.annotation}.")
        if isinstance(data, dict) and key not in data and field.is_required():
            data = {key: get_args(field.annotation)[0], **data}
        return data

    @property
    def discriminator_value(self):
        """The value of the discriminator field (the name this config was built as)."""
        return getattr(self, self.discriminator)


__all__ = ["NamedConfig"]
