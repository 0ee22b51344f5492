"""What the 1.8 runners read of the legacy params, parsed in one place
(`cstorch.trainer.legacy.runconfig.Runconfig`): defaults, each field, and the error that
names a bad value."""
from __future__ import annotations

import pytest

from cstorch.trainer.config import ConfigError
from cstorch.trainer.legacy.runconfig import Runconfig


def test_an_absent_runconfig_gives_the_defaults():
    assert Runconfig.of({"train_input": {}}) == Runconfig(None, "train", None, False, False, 1, False)


def test_each_field_is_read():
    rc = Runconfig.of({"runconfig": {"target_device": "csx", "mode": "eval", "seed": 7, "validate_only": True,
                                     "num_csx": 2}, "model": {"mixed_precision": True}})
    assert rc == Runconfig("CSX", "eval", 7, False, True, 2, True) and rc.compiles_only


@pytest.mark.parametrize("params, message", [
    ({"runconfig": {"target_device": "TPU"}}, "runconfig.target_device must be CPU, GPU or CSX, got 'TPU'"),
    ({"runconfig": {"mode": "fit"}}, "runconfig.mode must be one of train, train_and_eval, eval"),
    ({"runconfig": {"seed": 1.5}}, "runconfig.seed must be an integer, got 1.5"),
    ({"runconfig": {"seed": True}}, "runconfig.seed must be an integer"),
    ({"runconfig": {"num_csx": 0}}, "runconfig.num_csx must be an integer >= 1, got 0"),
    ({"runconfig": {"compile_only": "yes"}}, "runconfig.compile_only must be true or false"),
    ({"runconfig": {"compile_only": True, "validate_only": True}}, "one of compile_only and validate_only"),
    ({"model": {"mixed_precision": 1}}, "model.mixed_precision must be true or false"),
    ({"runconfig": ["max_steps"]}, "runconfig must be a mapping"),
    ([], "params must be a dict"),
])
def test_a_bad_value_is_named(params, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        Runconfig.of(params)
