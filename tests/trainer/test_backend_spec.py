"""`init.backend` keys that name a flag of cstorch.backends (`csx.debug.*`, as the Model Zoo's
ViT YAML gives): ignored with a warning, as the Model Zoo ignores them; a dotted key that
names no flag is still an unknown key."""
import pytest

from cstorch.trainer.checks import ConfigError
from cstorch.trainer.specs.backend import BackendSpec


def test_a_flag_key_is_ignored_with_a_warning():
    with pytest.warns(UserWarning, match=r"trainer.init.backend: csx.debug.implicit_cast_cb16_to_fp32 ignored"):
        spec = BackendSpec.parse({"backend_type": "CSX", "csx.debug.implicit_cast_cb16_to_fp32": True,
                                  "cluster_config": {"num_workers_per_csx": 2}}, "trainer.init.backend")
    assert spec.backend_type == "CSX" and spec.cluster_config == {"num_workers_per_csx": 2}


def test_a_dotted_key_naming_no_flag_is_unknown():
    with pytest.raises(ConfigError, match=r"Unknown key trainer.init.backend.csx.debug.no_such_flag"):
        BackendSpec.parse({"backend_type": "CSX", "csx.debug.no_such_flag": True}, "trainer.init.backend")
