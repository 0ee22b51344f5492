"""Names of models and data processors: `cerebras.modelzoo.registry.registry` (the Model
Zoo's API over the trainer's one table) and the names a YAML gives that the Python files
next to it declare (`cstorch.trainer.registry.resolve`, rule 5). Files are read before
any is imported; only a declaring file is imported; what a name stands for must still be
a class of its kind, checked before anything is called."""
from __future__ import annotations

import os
import textwrap

import pytest
import torch

from cerebras.modelzoo.common.registry import registry as common_registry
from cerebras.modelzoo.registry import registry
from cstorch.trainer import config as trainer_config
from cstorch.trainer import registry as table
from cstorch.trainer.checks import ConfigError

MODEL_PY = '''
from typing import Literal, Optional
import torch
from cerebras.modelzoo.config import ModelConfig

class InnerConfig(ModelConfig):
    name: Literal["tiny"]
    width: int = 2

class WrapperConfig(InnerConfig):
    name: Literal["tiny"]
    scale: float = 1.0

class Inner(torch.nn.Module):
    def __init__(self, config: InnerConfig):
        super().__init__()
        self.layer = torch.nn.Linear(4, config.width)

class Wrapper(torch.nn.Module):          # the model: its config derives from Inner's
    def __init__(self, config: WrapperConfig):
        super().__init__()
        self.inner = Inner(config)
'''
DATA_PY = '''
from typing import Literal
import torch
from cerebras.modelzoo.config import DataConfig

class TinyDataConfig(DataConfig):
    data_processor: Literal["TinyProcessor"]
    batch_size: int

class TinyProcessor:
    def __init__(self, config: TinyDataConfig):
        self.config = config
    def create_dataloader(self):
        return [(torch.ones(self.config.batch_size, 4),)]
'''
PROBE = '''
import pathlib
pathlib.Path(__file__).with_suffix(".ran").write_text("imported")
'''


def _layout(tmp_path, files: dict) -> str:
    """A Model Zoo layout: `files` in tmp_path/tiny/, the YAML's folder tiny/configs/."""
    folder = tmp_path / "tiny"
    (folder / "configs").mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(textwrap.dedent(text))
    return str(folder / "configs")


def _params(model_name="tiny", processor="TinyProcessor") -> dict:
    return {"trainer": {"init": {"device": "CPU", "model": {"name": model_name, "width": 3},
                                 "optimizer": {"SGD": {"lr": 0.1}}, "loop": {"max_steps": 1}},
                        "fit": {"train_dataloader": {"data_processor": processor, "batch_size": 2}}}}


def test_names_declared_next_to_the_yaml(tmp_path):
    configs = _layout(tmp_path, {"model.py": MODEL_PY, "data.py": DATA_PY, "run_me.py": PROBE})
    (spec,) = trainer_config.validate_params(_params(), "train", configs)
    model = spec.init.model
    assert model.cls.__name__ == "Wrapper" and type(model.config).__name__ == "WrapperConfig"
    assert model.config.width == 3 and model.config.name == "tiny"
    assert spec.fit.train_dataloader.cls.__name__ == "TinyProcessor"
    assert not (tmp_path / "tiny" / "run_me.ran").exists()  # a file that declares nothing is not run
    assert table.declared_in_folder("model", "tiny", table.scan_folders(configs)) == [
        os.path.join(str(tmp_path / "tiny"), "model.py")]


def test_register_model_in_a_file_next_to_the_yaml(tmp_path):
    configs = _layout(tmp_path, {"models.py": '''
        import torch
        from cerebras.modelzoo.registry import registry

        @registry.register_model("reg_tiny", datasetprocessor=[])
        class RegTiny(torch.nn.Module):
            def __init__(self, width: int = 1):
                super().__init__()
                self.layer = torch.nn.Linear(4, width)
        ''', "data.py": DATA_PY})
    (spec,) = trainer_config.validate_params(_params("reg_tiny"), "train", configs)
    assert spec.init.model.cls.__name__ == "RegTiny" and spec.init.model.config is None
    assert "reg_tiny" in registry.get_model_names()


def test_a_declared_name_must_still_be_a_class_of_its_kind(tmp_path):
    configs = _layout(tmp_path, {"model.py": '''
        from typing import Literal
        from cerebras.modelzoo.config import ModelConfig

        class NotAModelConfig(ModelConfig):
            name: Literal["tiny"]
            width: int = 2

        class NotAModel:                     # takes the config, but is no torch.nn.Module
            def __init__(self, config: NotAModelConfig):
                raise SystemExit("called")
        ''', "data.py": DATA_PY})
    with pytest.raises(ConfigError, match=r"trainer\.init\.model\.name: model 'tiny' is not a model class.*"
                                          r"Nothing was called"):
        trainer_config.validate_params(_params(), "train", configs)


def test_ambiguous_and_unknown_names(tmp_path):
    configs = _layout(tmp_path, {"a.py": MODEL_PY.replace("Wrapper", "WrapA"),
                                 "b.py": MODEL_PY.replace("Wrapper", "WrapB"), "data.py": DATA_PY})
    with pytest.raises(ConfigError, match=r"trainer\.init\.model\.name: model 'tiny' is ambiguous.*WrapA.*"
                                          r"path/to/file\.py:Class"):
        trainer_config.validate_params(_params(), "train", configs)
    with pytest.raises(ConfigError, match=r"trainer\.init\.model\.name: Unknown model 'nothing'.*classes declared in "
                                          r"the Python files of"):
        trainer_config.validate_params(_params("nothing"), "train", configs)
    # outside a `configs` folder only the YAML's own folder is read
    assert table.scan_folders(str(tmp_path)) == [str(tmp_path)]


def test_model_zoo_registry_api():
    @registry.register_datasetprocessor("ApiProcessor")
    class ApiProcessor:
        def create_dataloader(self):
            return []

    @registry.register_model(["api_model", "api_model_alias"], datasetprocessor=["ApiProcessor"])
    class ApiModel(torch.nn.Module):
        pass

    assert common_registry is registry
    assert registry.get_model_class("api_model") is ApiModel and registry.get_model_class("api_model_alias") is ApiModel
    assert {"api_model", "api_model_alias"} <= set(registry.get_model_names())
    assert registry.get_data_processors_map("api_model") == {"ApiProcessor": ApiProcessor}
    assert registry.list_datasetprocessor("api_model") == ["ApiProcessor"]
    entry = registry.get_model("api_model")
    assert entry.path.endswith("ApiModel") and entry.data_processor_paths[0].endswith("ApiProcessor")
    assert registry.get_model_path("api_model") == __import__("pathlib").Path(__file__).resolve().parent
    # a YAML may name what was registered
    assert table.resolve("model", "api_model") is ApiModel
    table.check_kind("data_processor", "ApiProcessor", ApiProcessor)
    with pytest.raises(ValueError, match="nope model is not registered"):
        registry.get_model_class("nope")
    with pytest.raises(KeyError, match="already registered"):
        registry.register_model("api_model")(type("Other", (torch.nn.Module,), {}))
    registry.register_model("api_model")(ApiModel)  # the same class again: fine
    assert registry.unregister("model", "api_model_alias") is ApiModel
    assert "api_model_alias" not in registry.get_model_names()
