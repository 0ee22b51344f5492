"""`cerebras.modelzoo.config`: the Model Zoo 2.x config classes (pydantic), and a trainer
YAML building models and data processors from them: `cls(ConfigClass(**section))` when
the constructor takes a config, `cls(**section)` otherwise; every error names its key path."""
from __future__ import annotations

import warnings
from typing import Any, List, Literal, Optional

import pytest
import torch
from pydantic import Field, ValidationError

from cerebras.modelzoo.config import BaseConfig, DataConfig, ModelConfig, NamedConfig, create_config_class, \
    describe_fields
from cstorch.trainer import config as trainer_config
from cstorch.trainer.checks import ConfigError
from cstorch.trainer.config_classes import config_class, config_section


class MLPConfig(ModelConfig):
    name: Literal["mlp", "mlp_alias"]
    """Name of the model."""
    hidden_sizes: Optional[List[int]] = None
    depth: Optional[int] = None
    hidden_size: Optional[int] = None
    dropout: float = Field(0.0, ge=0, lt=1)

    def post_init(self, context):
        if self.hidden_sizes is None:
            if self.depth is None or self.hidden_size is None:
                raise ValueError("give hidden_sizes, or depth and hidden_size")
            self.hidden_sizes = [self.hidden_size] * self.depth
        self.depth = len(self.hidden_sizes)


class MLP(torch.nn.Module):
    def __init__(self, config: MLPConfig):
        super().__init__()
        self.config = config
        self.layer = torch.nn.Linear(4, config.hidden_sizes[0])


class PlainModel(torch.nn.Module):
    def __init__(self, width: int = 3):
        super().__init__()
        self.layer = torch.nn.Linear(width, 1)


class ToyDataConfig(DataConfig):
    data_processor: Literal["ToyProcessor"]
    batch_size: int
    drop_last: bool = Field(True, validation_alias="drop_last_batch")
    legacy: Optional[Any] = Field(default=None, deprecated=True)
    seen_model: Optional[Any] = None

    def post_init(self, context):
        self.seen_model = (context.get("model") or {}).get("config")


class ToyProcessor:
    def __init__(self, config: ToyDataConfig):
        self.config = config

    def create_dataloader(self):
        return [(torch.ones(self.config.batch_size, 4),)]


# ---------------------------------------------------------------------------- the classes
def test_post_init_derives_fields_then_the_config_is_frozen():
    cfg = MLPConfig(depth=2, hidden_size=5)
    assert cfg.name == "mlp" and cfg.hidden_sizes == [5, 5] and cfg.depth == 2  # name: the first Literal value
    with pytest.raises(ValidationError, match="frozen"):
        cfg.depth = 3
    assert cfg.depth == 2
    with pytest.raises(ValidationError, match="frozen"):  # also a field post_init assigned (pydantic caches setattr)
        cfg.hidden_sizes = [1]


def test_unknown_keys_types_and_validators_are_refused():
    with pytest.raises(ValidationError, match="extra_forbidden|Extra inputs"):
        MLPConfig(depth=1, hidden_size=2, hiden_size=3)
    with pytest.raises(ValidationError, match="less than 1"):
        MLPConfig(hidden_sizes=[2], dropout=1.0)
    with pytest.raises(ValidationError, match="give hidden_sizes"):
        MLPConfig(depth=1)
    with pytest.raises(ValidationError, match="literal_error|Input should be 'mlp'"):
        MLPConfig(name="other", hidden_sizes=[1])


def test_post_init_gets_the_validation_context():
    cfg = ToyDataConfig.model_validate({"batch_size": 2}, context={"model": {"config": "M"}})
    assert cfg.seen_model == "M" and cfg.data_processor == "ToyProcessor"
    assert ToyDataConfig(batch_size=2).seen_model is None  # no context: {}


def test_aliases_deprecated_fields_and_copy():
    assert ToyDataConfig(batch_size=1, drop_last_batch=False).drop_last is False
    assert ToyDataConfig(batch_size=1, drop_last=False).drop_last is False  # the field's own name too
    with pytest.warns(FutureWarning, match="legacy"):
        ToyDataConfig(batch_size=1, legacy=1)
    cfg = MLPConfig(hidden_sizes=[3])
    assert cfg.copy(update={"hidden_sizes": [4, 4]}).depth == 2  # revalidated: post_init ran again
    with pytest.raises(ValidationError):
        cfg.copy(update={"dropout": 2.0})


def test_named_config_needs_a_literal_and_data_config_is_not_called():
    class NoLiteral(NamedConfig):
        name: str

    with pytest.raises(TypeError, match="must be a Literal"):
        NoLiteral(name="x")
    with pytest.raises(RuntimeError, match="not called"):
        ToyDataConfig(batch_size=1)()
    assert issubclass(ModelConfig, BaseConfig) and DataConfig.discriminator == "data_processor"


def test_create_config_class_and_describe_fields():
    wrapped = create_config_class(MLP)
    assert wrapped.model_fields["config"].annotation is MLPConfig and wrapped.get_orig_class() is MLP
    model = wrapped.model_validate({"name": "mlp", "hidden_sizes": [2]})()  # a flat section is the config
    assert isinstance(model, MLP) and model.config.hidden_sizes == [2]
    plain = create_config_class(PlainModel)
    assert list(plain.model_fields) == ["width"] and plain(width=4)().layer.in_features == 4
    with pytest.raises(ValidationError):
        plain(depth=1)
    rows = {row["Name"]: row for row in describe_fields(MLPConfig)}
    assert rows["dropout"]["Default"] == 0.0 and rows["name"]["Description"] == "Name of the model."


def test_config_class_detection():
    assert config_class(MLP) is MLPConfig and config_class(ToyProcessor) is ToyDataConfig
    assert config_class(PlainModel) is None and config_class(len) is None

    class TwoArgs(torch.nn.Module):
        def __init__(self, config: MLPConfig, extra: int = 0):
            super().__init__()

    assert config_class(TwoArgs) is None  # the Model Zoo reads one config argument only
    assert config_section(MLPConfig, "name", "mlp_alias", {"depth": 1}) == {"name": "mlp_alias", "depth": 1}
    # a class named by path: its config keeps its own name
    assert config_section(MLPConfig, "name", "file.py:MLP", {"depth": 1}) == {"depth": 1}


# ------------------------------------------------------------------ the YAML builds them
def _params(model: dict, train: dict) -> dict:
    return {"trainer": {"init": {"device": "CPU", "seed": 1, "model": model, "optimizer": {"SGD": {"lr": 0.1}},
                                 "loop": {"max_steps": 1}},
                        "fit": {"train_dataloader": train}}}


def _spec(model: dict, train: dict):
    (spec,) = trainer_config.validate_params(_params(model, train), "train")
    return spec


MODEL = {"name": f"{__name__}.MLP", "depth": 2, "hidden_size": 3}
DATA = {"data_processor": f"{__name__}.ToyProcessor", "batch_size": 2}


def test_yaml_builds_config_classes_and_plain_classes():
    spec = _spec(MODEL, DATA)
    config = spec.init.model.config
    assert isinstance(config, MLPConfig) and config.hidden_sizes == [3, 3] and config.name == "mlp"
    model = spec.init.model.factory()()
    assert isinstance(model, MLP) and model.config == config and model.config is not config  # a fresh copy
    processor_config = spec.fit.train_dataloader.config
    assert processor_config.seen_model == config  # post_init saw the model's config
    batches = list(spec.fit.train_dataloader.build())
    assert batches[0][0].shape == (2, 4)
    plain = _spec({"name": f"{__name__}.PlainModel", "width": 5}, DATA).init.model
    assert plain.config is None and plain.factory()().layer.in_features == 5  # cls(**section): unchanged


@pytest.mark.parametrize("model,train,message", [
    ({**MODEL, "hiden_size": 3}, DATA,
     r"Unknown key trainer\.init\.model\.hiden_size: MLPConfig has no field 'hiden_size'\. Did you mean 'hidden_size'"),
    ({**MODEL, "depth": "two"}, DATA, r"trainer\.init\.model\.depth: Input should be a valid integer"),
    ({**MODEL, "dropout": 1.5}, DATA, r"trainer\.init\.model\.dropout: Input should be less than 1 \(got 1\.5\)"),
    ({"name": f"{__name__}.MLP", "depth": 2}, DATA,
     r"trainer\.init\.model: MLPConfig: give hidden_sizes, or depth and hidden_size"),
    ({"name": f"{__name__}.MLP", "hidden_sizes": [1, "x"]}, DATA, r"trainer\.init\.model\.hidden_sizes\[1\]: "),
    (MODEL, {"data_processor": f"{__name__}.ToyProcessor"},
     r"trainer\.fit\.train_dataloader\.batch_size is missing: ToyDataConfig requires it"),
    (MODEL, {**DATA, "drop_last_batch": "maybe"}, r"trainer\.fit\.train_dataloader\.drop_last_batch: Input should "
                                                   r"be a valid boolean"),
    (MODEL, {**DATA, "shuffle": True}, r"Unknown key trainer\.fit\.train_dataloader\.shuffle"),
])
def test_config_errors_name_the_key_path(model, train, message):
    with pytest.raises(ConfigError, match=message):
        _spec(model, train)


def test_several_errors_are_listed_together():
    expected = r"2 errors in trainer\.init\.model \(MLPConfig\):\n  - .*depth.*\n  - .*dropout"
    with pytest.raises(ConfigError, match=expected):
        _spec({**MODEL, "depth": "x", "dropout": 5}, DATA)


def test_deprecated_key_in_a_yaml_warns():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _spec(MODEL, {**DATA, "legacy": 1})
    assert any(issubclass(w.category, FutureWarning) and "legacy" in str(w.message) for w in caught)
