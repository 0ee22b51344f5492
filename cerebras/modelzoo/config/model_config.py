"""`ModelConfig`: the config class of a model (`model:` of a trainer YAML)."""
from __future__ import annotations

from typing import ClassVar

from .named_config import NamedConfig


class ModelConfig(NamedConfig):
    """Base of a model's config: a subclass declares `name: Literal["my_model"]` and the
    model's fields; the model's constructor takes it (`def __init__(self, config:
    MyModelConfig)`), and the trainer builds it as `Model(MyModelConfig(**model_section))`.
    `__model_cls__` may name the model class the config belongs to."""

    discriminator: ClassVar[str] = "name"


__all__ = ["ModelConfig"]
