"""`ClusterConfig` against the real one (`inventory_2_10.json`): field order, annotations
with their element types, defaults, validation on every assignment with the real messages."""
import dataclasses
import re
import typing

import pytest

from cstorch.distributed import ClusterConfig, MountDir, NotificationTarget

from .compat import INVENTORY

REAL = INVENTORY["cluster_config"]


def _hint(t) -> str:
    """A type hint as the real source spells it (`List[str]`, `Optional[int]`)."""
    text = t.__name__ if isinstance(t, type) else str(t)
    text = re.sub(r"\b[\w.]+\.(\w+)", r"\1", text)  # typing.List -> List, module paths dropped
    return text


def test_fields_annotations_and_defaults_are_the_real_ones():
    fields = dataclasses.fields(ClusterConfig)
    assert [f.name for f in fields] == INVENTORY["cluster_config_order"]
    hints = typing.get_type_hints(ClusterConfig)
    config = ClusterConfig()
    for name, real in REAL.items():
        assert _hint(hints[name]) == real["type"], name
        default = real["default"]
        if isinstance(default, dict):  # a factory
            assert getattr(config, name) == [] and default == {"factory": "list"}
        else:
            assert getattr(config, name) == default, name
    assert typing.get_args(hints["mount_dirs"]) == (MountDir,)
    assert typing.get_args(hints["notifications"]) == (NotificationTarget,)


def test_list_fields_have_element_types_for_argument_parsers():
    """Tools that build a parser from the dataclass read the element type of list fields."""
    for f in dataclasses.fields(ClusterConfig):
        if typing.get_origin(f.type) is list:
            (element,) = typing.get_args(f.type)
            assert element in (str, MountDir, NotificationTarget)


def test_cluster_types_are_the_real_ones():
    real = INVENTORY["cluster_types"]
    assert list(MountDir._fields) == [p["name"] for p in real["MountDir"]["init"]]
    assert [f.name for f in dataclasses.fields(NotificationTarget)] == \
        [f["name"] for f in real["NotificationTarget"]["fields"]]
    assert NotificationTarget().severity_threshold == 3


def _message(field, **values):
    (template,) = [m.split(": ", 1)[1] for m in REAL[field]["errors"]][:1]
    text = re.escape(template)
    for k, v in values.items():
        text = text.replace(re.escape("{" + k + "}"), re.escape(str(v)))
    return text


@pytest.mark.parametrize("field, bad, values", [
    ("num_csx", -1, {"self.name": "num_csx", "value": -1}),
    ("num_workers_per_csx", 1.5, {"self.name": "num_workers_per_csx", "value": 1.5}),
    ("job_time_sec", 0, {"self.name": "job_time_sec", "value": 0}),
    ("mgmt_address", "nohost", {"mgmt_address": "nohost"}),
    ("job_priority", "p9", {"value": "p9", "VALID_JOB_PRIORITIES": ["p1", "p2", "p3"]}),
    ("job_labels", ["novalue"], {"kv_pair": "novalue"}),
])
def test_bad_values_raise_the_real_errors_in_the_constructor_and_on_assignment(field, bad, values):
    with pytest.raises(ValueError, match=_message(field, **values)):
        ClusterConfig(**{field: bad})
    config = ClusterConfig()
    with pytest.raises(ValueError, match=_message(field, **values)):
        setattr(config, field, bad)
    assert getattr(config, field) == ClusterConfig.get_default(field)


def test_paths_defaults_and_notifications(tmp_path):
    config = ClusterConfig(mount_dirs=[str(tmp_path)], python_paths=[str(tmp_path)],
                           notifications=[{"mailto": ["a@b.c"]}], job_labels=["team=ml"], num_csx=None)
    assert config.mount_dirs == [MountDir(str(tmp_path), str(tmp_path))]
    assert config.python_paths == [str(tmp_path.resolve())]
    assert config.notifications == [NotificationTarget(mailto=["a@b.c"])]
    assert config.num_csx == 1  # None means the default, as in the real config
    with pytest.raises(ValueError, match="does not exist"):
        ClusterConfig(mount_dirs=[str(tmp_path / "missing")])
    with pytest.raises(TypeError, match="Invalid notification target"):
        ClusterConfig(notifications=[3])
    config.num_csx = 4
    config.num_csx = ClusterConfig.DEFAULT
    assert config.num_csx == 1 and ClusterConfig.get_default("job_priority") == "p2"
    assert ClusterConfig(mgmt_address="host:1234") != ClusterConfig() and hash(ClusterConfig()) == hash(ClusterConfig())
    assert dataclasses.replace(config, num_csx=2).num_csx == 2
