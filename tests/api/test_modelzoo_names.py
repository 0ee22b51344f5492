"""Every `cerebras.pytorch` name the real Cerebras Model Zoo 2.10 uses exists in cstorch.

The Model Zoo's source (the snapshot beside the repository, `modelzoo_uses.SNAPSHOT`) is
scanned with `ast` for each import of `cerebras.pytorch` and each attribute chain read
from one (`modelzoo_uses.scan`); each use is replayed against `cerebras.pytorch` (that
is, cstorch) the way Python runs it: the import, then `from`'s attribute-or-submodule
lookup, then the attributes. Each must give an object, and where the real wheel defines
the name (`modelzoo_names_2_10.json`, written by `make_modelzoo_names.py`) the object
must be compatible with it (`compat.name_problems`: kind, parameters, defaults, methods,
properties), apart from the differences `KNOWN_DIFFERENCES` lists with their reasons.

The one allowed failure is a deliberate exception of `cstorch.unsupported` (a wafer-only
feature: it raises `UnsupportedAPIError` saying what the real system does), and only
where the Model Zoo uses it inside a function: whatever runs when a Model Zoo module is
imported (module level, class bodies, decorators, defaults, annotations) must exist, so
that every module of the Model Zoo imports.
"""
import importlib
import json
from collections import defaultdict
from pathlib import Path

import pytest

from cstorch.unsupported import UnsupportedAPIError, reason

from .compat import name_problems
from .modelzoo_uses import SNAPSHOT, SOURCE, scan

REAL = json.loads(Path(__file__).with_name("modelzoo_names_2_10.json").read_text())

_MISSING = f"the Model Zoo snapshot is not at {SNAPSHOT}"
USES = scan() if SOURCE.is_dir() else []
BY_NAME = defaultdict(list)
for _use in USES:
    BY_NAME[_use.name].append(_use)

#: differences from the real wheel that code written for it does not meet, with why
KNOWN_DIFFERENCES = {
    "cerebras.pytorch.backend.Backend": {
        "reason": "made by cstorch.backend(...) (the Model Zoo only names the class); its constructor takes the "
                  "backend's arguments by name, which are instance attributes here; `cluster` (the appliance's "
                  "cluster manager) has no counterpart",
        "problems": {
            "cerebras.pytorch.backend.Backend(): the real API takes *args",
            "cerebras.pytorch.backend.Backend(): the real API takes **kwargs",
            "cerebras.pytorch.backend.Backend.artifact_dir: missing property",
            "cerebras.pytorch.backend.Backend.cluster: missing property",
            "cerebras.pytorch.backend.Backend.cluster_config: missing property",
        },
    },
}


def _replay(use):
    """Run the use against cerebras.pytorch: [(dotted name, object)] for the module and
    each attribute, up to where it raises (the exception is raised)."""
    obj = importlib.import_module(use.module)
    steps = [(use.module, obj)]
    for i, attr in enumerate(use.attrs):
        dotted = f"{steps[-1][0]}.{attr}"
        if i == 0 and use.kind == "from":
            try:
                obj = getattr(obj, attr)
            except AttributeError:  # `from package import submodule`
                obj = importlib.import_module(dotted)
        else:
            obj = getattr(obj, attr)
        steps.append((dotted, obj))
    return steps


def _failing_name(use) -> str:
    """The dotted name at which replaying `use` raises."""
    done = [use.module]
    try:
        importlib.import_module(use.module)
        for attr in use.attrs:
            done.append(attr)
            _replay(type(use)(use.kind, use.module, tuple(done[1:]), use.import_time, use.file, use.line))
    except UnsupportedAPIError:
        return ".".join(done)
    raise AssertionError(f"{use.name} does not raise")


def _problems(steps) -> list:
    """What differs from the real wheel along the attributes read (the imported module
    itself is not compared: the fixture describes `x.y` as the attribute `y` of `x`,
    which can differ from the module `x.y`, e.g. the function `cerebras.pytorch.backend`)."""
    out = []
    for dotted, obj in steps[1:]:
        entry = REAL["names"].get(dotted)
        if entry is None or entry["kind"] not in ("function", "class", "module"):
            continue
        known = KNOWN_DIFFERENCES.get(dotted, {}).get("problems", set())
        out += [p for p in name_problems(obj, entry, dotted) if p not in known]
    return out


def test_the_snapshot_is_scanned():
    if not SOURCE.is_dir():
        pytest.skip(_MISSING)
    assert len(USES) > 400 and len(BY_NAME) > 100
    # every form of use is seen: plain imports, `from` imports, attribute chains, uses at import time and later
    assert {u.kind for u in USES} == {"import", "from", "attr"}
    assert {u.import_time for u in USES} == {True, False}
    # the names the issue started from are among them
    for name in ("cerebras.pytorch.utils.kernel.kernel_annotater", "cerebras.pytorch.backend.use_cs",
                 "cerebras.pytorch.core.annotation.create_annotation", "cerebras.pytorch.distributed.get_rank",
                 "cerebras.pytorch.lib.cerebras_pytorch_lib.set_attribute", "cerebras.pytorch.nn.functional.one_hot"):
        assert name in BY_NAME, name


def test_the_fixture_describes_every_name_used():
    if not SOURCE.is_dir():
        pytest.skip(_MISSING)
    undescribed = sorted({f"{u.module}.{u.attrs[0]}" for u in USES if u.attrs} - set(REAL["names"]))
    assert undescribed == [], "rerun tests/api/make_modelzoo_names.py (see its doc) for these new names"
    assert REAL["source"]["version"] == "2.10.0"


@pytest.mark.skipif(not USES, reason=_MISSING)
@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_name_exists_with_a_compatible_signature(name):
    problems = []
    for use in BY_NAME[name]:
        try:
            steps = _replay(use)
        except UnsupportedAPIError:
            failing = _failing_name(use)
            assert reason(failing) is not None, f"{use.where}: {failing} raises but is not listed in cstorch.unsupported"
            assert not use.import_time, (f"{use.where}: {failing} is used when the module is imported; a deliberate "
                                         f"exception there would keep the module from importing")
            continue
        problems += _problems(steps)
    assert sorted(set(problems)) == []


def test_known_differences_are_still_differences():
    for dotted, known in KNOWN_DIFFERENCES.items():
        assert len(known["reason"]) > 40
        module, _, name = dotted.rpartition(".")
        obj = getattr(importlib.import_module(module), name)
        assert set(name_problems(obj, REAL["names"][dotted], dotted)) == known["problems"], dotted
