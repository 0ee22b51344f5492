"""`BaseConfig`: the pydantic base of Model Zoo config classes (`ModelConfig`, `DataConfig`).

A config class declares a model's or data processor's arguments as typed fields (with
defaults, constraints, attribute docstrings as descriptions); validating a YAML section
into it is the check of that section. Contract, as in the Model Zoo:

* unknown keys are refused (`extra="forbid"`); a field may also be given by its alias
  (`Field(validation_alias=...)`) or its name (`populate_by_name`); defaults are
  validated too; an instance passed where a config is expected is revalidated;
* `post_init(self, context)` runs once validation succeeded, and may derive fields
  (`self.depth = len(self.hidden_sizes)`): assignments there are validated. `context` is
  the dict given to `model_validate(data, context=...)` (`{}` when none): the trainer
  passes the model's arguments as `context["model"]` to the data processors' configs. A
  `ValueError` raised there is a validation error of the config;
* afterwards the instance is immutable: assigning a field raises pydantic's
  `ValidationError` of type `frozen_instance` (pydantic's own `frozen=True` cannot be
  used: it would refuse `post_init`'s assignments, and toggling it per instance is
  undone by pydantic's per-field setattr cache);
* a field declared `Field(..., deprecated=True)` is accepted with a `FutureWarning`;
* `__orig_class__` (a ClassVar) is the class a config builds: `config()` calls
  `__orig_class__(**fields)`; `copy(update=...)` revalidates.
"""
from __future__ import annotations

from typing import Any, ClassVar, final
from warnings import warn

from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError
from typing_extensions import Self


class BaseConfig(BaseModel):
    """Base of the Model Zoo config classes (module doc)."""

    __orig_class__: ClassVar[Any] = None

    model_config = ConfigDict(
        extra="forbid",
        arbitrary_types_allowed=True,
        revalidate_instances="always",
        validate_default=True,
        validate_return=True,
        validate_assignment=True,
        use_attribute_docstrings=True,
        populate_by_name=True,
        protected_namespaces=(),
    )

    #: True while post_init may assign fields
    _mutable: bool = PrivateAttr(default=False)

    def post_init(self, context: dict) -> None:
        """Derive fields after validation (override; `context`: the validation context)."""

    @final
    def model_post_init(self, context: Any) -> None:
        deprecated = sorted(name for name in self.model_fields_set if type(self).model_fields[name].deprecated)
        if deprecated:
            warn(f"{type(self).__name__}: the field(s) {deprecated} are deprecated: support for them will be "
                 f"removed.", FutureWarning, stacklevel=2)
        self._mutable = True
        try:
            self.post_init({} if context is None else context)
        finally:
            self._mutable = False

    def __setattr__(self, name: str, value: Any) -> None:
        if name in type(self).model_fields and not self._mutable:
            raise ValidationError.from_exception_data(type(self).__name__, [
                {"type": "frozen_instance", "loc": (name,), "input": value}])
        super().__setattr__(name, value)

    def __call__(self, **kwargs):
        """`__orig_class__(**fields)` (a field given in `kwargs` replaces the config's)."""
        if self.__orig_class__ is None:
            raise TypeError(f"{type(self).__name__} has no original class associated with it.")
        return self.__orig_class__(**self.get_orig_class_args(**kwargs))

    @classmethod
    def get_orig_class(cls):
        """The class this config builds (None when none)."""
        return cls.__orig_class__

    def get_orig_class_args(self, **kwargs) -> dict:
        """{field: value} the original class is called with (`kwargs` override)."""
        args = {name: kwargs.get(name, getattr(self, name)) for name in type(self).model_fields}
        if self.model_extra:
            args.update(self.model_extra)
        return args

    def copy(self, *, validate: bool = True, **kwargs) -> Self:
        """A copy (`update={...}` changes fields; revalidated unless `validate=False`)."""
        copied = super().model_copy(**kwargs)
        return type(self).model_validate(copied) if kwargs.get("update") and validate else copied


__all__ = ["BaseConfig"]
