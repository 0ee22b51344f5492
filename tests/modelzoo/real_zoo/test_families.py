"""The family trial (`families.py`, run by hand: a minute of training per family) stays
runnable: for every family it lists, the published YAML still shrinks through the keys the
trial changes (`zoo.shrink` refuses a key the YAML lacks) and the synthetic data of its
format is written. No training here."""
from __future__ import annotations

import pytest
import yaml

from . import families, zoo

pytestmark = [pytest.mark.skipif(zoo.missing() is not None, reason=str(zoo.missing())),
              pytest.mark.usefixtures("shared_compile_cache")]  # a fit and its validation compile once (conftest)


@pytest.mark.parametrize("family", [*families.FAMILIES, *families.RECIPES])
def test_each_family_yaml_shrinks_and_its_data_is_written(tmp_path, family):
    name, params = families.prepare(family, tmp_path)
    assert name.startswith(f"{family} `")
    init = yaml.safe_load(params.read_text())["trainer"]["init"]
    assert init["loop"]["max_steps"] == families.STEPS
    assert init["checkpoint"]["save_initial_checkpoint"] is True
    assert any((tmp_path / "data").rglob("*")), "no data written"
