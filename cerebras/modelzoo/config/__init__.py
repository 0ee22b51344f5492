"""`cerebras.modelzoo.config`: the Model Zoo 2.x config classes.

    from cerebras.modelzoo.config import ModelConfig, DataConfig

    class MNISTModelConfig(ModelConfig):
        name: Literal["fc_mnist"]
        depth: int = 2
        def post_init(self, context): ...

    class MNISTModel(torch.nn.Module):
        def __init__(self, config: MNISTModelConfig): ...

A trainer YAML's `model:` section (and each dataloader section) is validated into the
config class its class's constructor takes, and the class is built as
`cls(ConfigClass(**section))` (`cstorch.trainer.config_classes`). `BaseConfig` is the
pydantic base (unknown keys refused, `post_init(context)`, immutable afterwards),
`NamedConfig` adds the name `Literal`, `create_config_class` / `describe_fields` describe
a class's arguments."""
from .base_config import BaseConfig
from .data_config import DataConfig
from .model_config import ModelConfig
from .named_config import NamedConfig
from .utils import create_config_class, describe_fields

__all__ = ["BaseConfig", "NamedConfig", "ModelConfig", "DataConfig", "create_config_class", "describe_fields"]
