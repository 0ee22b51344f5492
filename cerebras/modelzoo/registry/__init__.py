"""`cerebras.modelzoo.registry.registry`: the Model Zoo's names of models and data
processors, over the one table the trainer YAML reads (`cstorch.trainer.registry`).

What user code of Model Zoo 2.x calls on it::

    @registry.register_model("my_model", datasetprocessor=["MyDataProcessor"])
    class MyModel(torch.nn.Module): ...            # also a list of names

    @registry.register_datasetprocessor("MyDataProcessor")   # (or register_data_processor)
    class MyDataProcessor: ...

    registry.get_model_names()                     # sorted registered model names
    registry.get_model_class("my_model")           # ValueError when not registered
    registry.get_data_processors_map("my_model")   # {"MyDataProcessor": MyDataProcessor}
    registry.get_model("my_model").data_processor_paths
    registry.get_model_path("my_model")            # pathlib.Path of the model's folder

A name registered here is a name a trainer YAML may give (`model: {name: my_model}`,
`data_processor: MyDataProcessor`): registering vouches for the object, which is what
`cstorch.trainer.registry.check_kind` accepts. The Model Zoo's own models are not part of
cstorch, so nothing is registered until user code registers it; names a YAML gives can
also be found in the Python files next to it (`cstorch.trainer.registry.resolve`).
Registering another object under a taken name raises KeyError, as in the Model Zoo.
"""
from __future__ import annotations

import inspect
import pathlib
from typing import NamedTuple, Union

from cstorch.trainer import registry as _table


class ModelEntry(NamedTuple):
    """A registered model: its name, `module.Class` path and its data processors' paths."""

    name: str
    path: str
    data_processor_paths: list


def _path(obj) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"


class Registry:
    """The registry object (module doc)."""

    def __init__(self):
        #: model name -> the data processor names given at registration
        self._model_processors: dict[str, list[str]] = {}

    @staticmethod
    def _register(kind: str, name: str, obj) -> None:
        old = _table.registered(kind).get(name)
        if old is not None and old is not obj and _path(old) != _path(obj):
            raise KeyError(f"Name {name!r} already registered for {_path(old)}.")
        _table.register(kind, name)(obj)

    def register_model(self, model_name: Union[str, list], datasetprocessor=(), dataset=()):
        """Decorator: register the class under `model_name` (a name or a list of them),
        with the names of its data processors (`datasetprocessor`). `dataset` is accepted
        and not used."""
        names = model_name if isinstance(model_name, (list, tuple)) else [model_name]

        def wrap(model_cls):
            for name in names:
                self._register("model", name, model_cls)
                self._model_processors[name] = list(datasetprocessor)
            return model_cls

        return wrap

    def register_datasetprocessor(self, name: str):
        """Decorator: register a data processor class under `name`."""
        def wrap(processor_cls):
            self._register("data_processor", name, processor_cls)
            return processor_cls

        return wrap

    register_data_processor = register_datasetprocessor

    def get_model_names(self) -> list[str]:
        """The registered model names, sorted."""
        return sorted(_table.registered("model"))

    list_models = get_model_names

    def get_model_class(self, name: str):
        """The class registered as model `name` (ValueError when none is)."""
        models = _table.registered("model")
        if name not in models:
            raise ValueError(f"{name} model is not registered")
        return models[name]

    def get_data_processors_map(self, model_name: str) -> dict:
        """{data processor name: class} of the processors model `model_name` was
        registered with (ValueError for an unknown model or processor)."""
        self.get_model_class(model_name)
        processors = _table.registered("data_processor")
        out = {}
        for name in self._model_processors.get(model_name, []):
            if name not in processors:
                raise ValueError(f"{name} datasetprocessor is not registered")
            out[name] = processors[name]
        return out

    def list_datasetprocessor(self, model_name=None) -> list[str]:
        """The registered data processor names (sorted), or those of `model_name`."""
        if model_name is None:
            return sorted(_table.registered("data_processor"))
        return list(self.get_data_processors_map(model_name))

    def get_model(self, name: str) -> ModelEntry:
        """The entry of model `name`: name, path (`module.Class`), data processor paths."""
        cls = self.get_model_class(name)
        return ModelEntry(name, _path(cls), [_path(c) for c in self.get_data_processors_map(name).values()])

    def get_model_path(self, name: str) -> pathlib.Path:
        """The folder of the file that defines model `name`."""
        return pathlib.Path(inspect.getfile(self.get_model_class(name))).resolve().parent

    def unregister(self, region: str, name: str):
        """Remove `name` from `region` ("model" or "datasetprocessor"/"data_processor");
        returns what was registered (None when nothing was)."""
        kind = {"datasetprocessor": "data_processor"}.get(region, region)
        if kind not in ("model", "data_processor"):
            raise KeyError(f"Undefined {region}")
        if kind == "model":
            self._model_processors.pop(name, None)
        return _table.unregister(kind, name)


registry = Registry()

__all__ = ["registry", "Registry", "ModelEntry"]
