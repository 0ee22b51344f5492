"""`DataConfig`: the config class of a data processor (a dataloader section of a trainer YAML)."""
from __future__ import annotations

from typing import ClassVar

from .named_config import NamedConfig


class DataConfig(NamedConfig):
    """Base of a data processor's config: a subclass declares
    `data_processor: Literal["MyDataProcessor"]` and the processor's fields; the trainer
    builds the processor as `MyDataProcessor(MyDataProcessorConfig(**section))`."""

    discriminator: ClassVar[str] = "data_processor"

    def __call__(self, *args, **kwargs):
        raise RuntimeError("A DataConfig is not called: pass it to its data processor's constructor.")


__all__ = ["DataConfig"]
