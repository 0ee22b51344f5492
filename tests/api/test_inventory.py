"""Every public name of `cerebras.pytorch` 2.10 (`inventory_2_10.json`, written by
`make_inventory.py` from the real wheel) exists in cstorch with a compatible signature,
or is one of the deliberate exceptions of `cstorch.unsupported.UNSUPPORTED`, which raise
an `UnsupportedAPIError` that says what the real system does. No member is missing: a
name whose members differ fails its test."""
import importlib
import inspect

import pytest

import cstorch
from cstorch.unsupported import UNSUPPORTED, UnsupportedAPIError, reason

from .compat import INVENTORY, REAL_PREFIX, name_problems, our_module_name

#: real names whose only entry in the inventory is a mistake of the real package
NOT_IN_REAL = {
    "cerebras.pytorch.metrics.compute_all_metrics": "listed in the real __all__ but defined nowhere",
}


def _module_entries():
    for module, names in INVENTORY["modules"].items():
        for name, entry in names.items():
            yield module, name, entry


CASES = [pytest.param(m, n, e, id=f"{m}.{n}") for m, n, e in _module_entries() if f"{m}.{n}" not in NOT_IN_REAL]


def _problems(qualified: str, entry: dict) -> list:
    """What differs for one real name."""
    module, name = qualified.rsplit(".", 1)
    ours = importlib.import_module(our_module_name(module))
    if not hasattr(ours, name):
        return [f"{our_module_name(module)} has no {name} ({entry['kind']} in the real API)"]
    return name_problems(getattr(ours, name), entry, qualified)


@pytest.mark.parametrize("module, name, entry", CASES)
def test_name_exists_with_a_compatible_signature(module, name, entry):
    qualified = f"{module}.{name}"
    if reason(qualified) is not None:
        with pytest.raises(UnsupportedAPIError, match="is not supported by cstorch"):
            getattr(importlib.import_module(our_module_name(module)), name)
        return
    assert _problems(qualified, entry) == []


def test_every_exception_names_a_real_name_and_says_what_the_real_system_does():
    real = {f"{m}.{n}" for m, n, _ in _module_entries()} | set(INVENTORY["modules"])
    for key, text in UNSUPPORTED.items():
        target = key[:-2] if key.endswith(".*") else key
        assert target in real, f"{key} is not a name of the real API"
        assert len(text) > 60 and ("real" in text or "wafer" in text), key
    # short: a handful of modules and a few wafer-only names
    assert len(UNSUPPORTED) <= 25


@pytest.mark.parametrize("statement", [
    "from cerebras.pytorch.sparse import configure",
    "from cerebras.pytorch.mesh import Mesh",
    "from cerebras.pytorch.experimental import start_implicit_loop",
    "from cerebras.pytorch.profiler import profile",
    "from cerebras.pytorch.nn import SelectiveGrad",
    "from cerebras.pytorch.utils.benchmark import benchmark_dataloader",
    "import cerebras.pytorch as cstorch; cstorch.cirh",
])
def test_using_an_exception_raises_its_clear_error(statement):
    with pytest.raises(UnsupportedAPIError) as e:
        exec(statement, {})
    assert not isinstance(e.value, AttributeError)
    assert "real" in str(e.value) or "wafer" in str(e.value)


def test_unknown_names_are_still_attribute_errors():
    assert not hasattr(cstorch, "no_such_name")
    assert not hasattr(cstorch.sparse, "no_such_name")
    with pytest.raises(AttributeError, match="summarize_scalar is now removed"):
        cstorch.summarize_scalar  # noqa: B018 (removed in the real API too, with this error)
    with pytest.raises(AttributeError, match="ClusterConfig"):
        cstorch.utils.CSConfig  # noqa: B018


def test_the_inventory_covers_the_real_package():
    assert INVENTORY["source"]["version"] == "2.10.0"
    assert len(INVENTORY["modules"]) >= 20 and sum(map(len, INVENTORY["modules"].values())) > 250
    assert len(INVENTORY["flags"]) >= 29
    assert INVENTORY["modules"][REAL_PREFIX]["trace"]["signature"][0]["name"] == "step_fn"


def test_signature_checker_catches_incompatibilities():
    from .compat import signature_problems

    real = [{"name": "a", "kind": "positional"}, {"name": "b", "kind": "positional", "default": 1},
            {"name": "c", "kind": "keyword_only", "default": None}]

    def ok(a, b=1, *, c=None, d=2): ...
    def swapped(b, a=1, *, c=None): ...
    def wrong_default(a, b=2, *, c=None): ...
    def required(a, b, *, c=None): ...
    def extra_required(a, b=1, e=0, *, c=None, f): ...

    assert signature_problems(inspect.signature(ok), real, "ok") == []
    assert signature_problems(inspect.signature(swapped), real, "f")
    assert signature_problems(inspect.signature(wrong_default), real, "f")
    assert signature_problems(inspect.signature(required), real, "f")
    assert signature_problems(inspect.signature(extra_required), real, "f")
