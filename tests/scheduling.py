"""How the suite is laid out on the xdist workers: groups, longest first.

`python -m pytest -n 2` distributes groups, not single tests (xdist's `loadgroup`):

- the OpInfo tests of an op in one sweep (forward and gradient; in the 16-bit sweep at
  both dtypes) are one group: they share one capture and one XLA compile
  (lowering/opinfo_outcomes.py);
- the tests of a module with a module-, package- or class-scoped fixture are one group,
  so the fixture is set up once;
- every other test is a group of its own.

Groups start longest first, by the durations a CI run recorded (timings.json, written by
`python .ci/timings.py update .ci-stacks`), so the long tests do not start last and run alone at
the end on CI's two cores. A test not in the record counts as `DEFAULT_SECONDS`.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

TIMINGS = Path(__file__).with_name("timings.json")
DEFAULT_SECONDS = 0.2  # a test the record does not know (the record keeps tests of 0.5 s or more)
_SHARED_SCOPES = ("class", "module", "package")


def without_group(nodeid: str) -> str:
    """A test id without the `@group` suffix xdist's loadgroup appends (after the last "]")."""
    at = nodeid.rfind("@")
    return nodeid[:at] if at > nodeid.rfind("]") else nodeid


def recorded_seconds() -> dict[str, float]:
    """{test id: seconds} of the recorded run (empty without a record)."""
    if not TIMINGS.is_file():
        return {}
    return json.loads(TIMINGS.read_text())["tests"]


def configure(config: pytest.Config) -> None:
    """In the controller of `-n N`: xdist's `load` (the default) becomes `loadgroup`, whose
    groups are sent in collection order (`configure_node` tells the workers). In a worker
    told so: the tests get their group in their ids, as xdist's `loadgroup` does."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        if workerinput.get("loadgroup"):
            config.option.loadgroup = True
    elif getattr(config.option, "dist", "no") == "load":
        config.option.dist = "loadgroup"
        config.option.loadscopereorder = False


def configure_node(node) -> None:
    """The controller tells a worker it distributes groups (workers parse the command line
    themselves, which does not say so)."""
    node.workerinput["loadgroup"] = node.config.getoption("dist") == "loadgroup"


def group_of(item: pytest.Item) -> str | None:
    """The group an item must share a worker with (module docstring), or None. (xdist
    reads a group from the text after the last "@" of a test id that follows its last "]":
    a group name holds no "]".)"""
    name = item.originalname if isinstance(item, pytest.Function) else item.name
    if name in ("test_opinfo_forward", "test_opinfo_grad"):
        return f"opinfo:{item.callspec.params['name']}"
    if name == "test_opinfo_in_16_bit":
        return f"opinfo16:{item.callspec.params['name']}"
    info = getattr(item, "_fixtureinfo", None)
    for defs in (info.name2fixturedefs.values() if info is not None else ()):
        if defs and defs[-1].scope in _SHARED_SCOPES:
            return item.nodeid.split("::")[0]
    return None


def arrange(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each item's group (`xdist_group`) and, in a distributed run, order the groups
    longest first (a stable sort: each group keeps its tests' order)."""
    groups: dict[str, list[pytest.Item]] = {}
    for item in items:
        group = group_of(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
        groups.setdefault(group or item.nodeid, []).append(item)
    if not hasattr(config, "workerinput"):
        return
    seconds = recorded_seconds()
    total = {g: sum(seconds.get(i.nodeid, DEFAULT_SECONDS) for i in members) for g, members in groups.items()}
    items[:] = [i for g in sorted(groups, key=lambda g: -total[g]) for i in groups[g]]
