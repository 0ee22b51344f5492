"""The layer rules of the house, checked on the import graph of the source (`layers.py`):

- `cstorch_jax` (the engine) never imports `cstorch` (the facade);
- the facade reaches jax, jaxlib, optax and orbax only through `cstorch_jax`;
- no import cycle among the modules of `cstorch`, nor of `cstorch_jax`, counting every
  import (module level, function-local and type-checking-only alike);
- no import cycle among the subpackages of `cstorch` (`cstorch.storage`,
  `cstorch.optim`, ...) nor of `cstorch_jax`;
- `cstorch.trainer` sits above the rest of the facade: nothing outside it imports it;
- every function-local import of a project module is listed below with its reason
  (third-party imports made lazily, such as h5py or tqdm, are not listed).
"""
import pytest

import layers

IMPORTS = layers.imports()

#: (importing module, imported module) -> why the import is inside a function
LOCAL_IMPORTS = {
    ("cstorch_jax.jit", "cstorch_jax.explore"):
        "the report layer is loaded only when a report is asked for (jit(fn).lower)",
    ("cstorch.trainer.loggers", "cstorch.utils.tensorboard"):
        "tensorboard is heavy: it is loaded only when a TensorBoardLogger is set up",
    ("cstorch_jax.executable", "cstorch_jax.lowering"):
        "the lowering tables (every family's module) load when a step is first compiled, not at import",
    ("cstorch_jax.executable", "cstorch_jax.passes"):
        "the passes load the channels-last ops' lowerings: when a step is first compiled, not at import",
    ("cstorch_jax.compile_cache", "cstorch_jax.lowering.registry"):
        "the cache key digests the full lowering table, loaded when a step is first compiled or looked up",
    ("cstorch_cli", "cstorch.trainer.cli"):
        "`cstorch --help` and usage errors answer before torch, jax and cstorch are imported",
}


def _edges(package: str, collapse: bool = False) -> dict[str, set[str]]:
    """Imports between the modules of `package` (its subpackages when `collapse`); the
    package's own `__init__` is left out of the subpackage graph (it re-exports them)."""
    depth = package.count(".") + 2
    edges: dict[str, set[str]] = {}
    for imp in IMPORTS:
        if not (layers.within(imp.source, package) and layers.within(imp.target, package)):
            continue
        a, b = imp.source, imp.target
        if collapse:
            if package in (a, b):
                continue
            a, b = ".".join(a.split(".")[:depth]), ".".join(b.split(".")[:depth])
            if a == b:
                continue
        edges.setdefault(a, set()).add(b)
    return edges


def test_engine_never_imports_the_facade():
    bad = [f"{i.source}:{i.line} imports {i.target}" for i in IMPORTS
           if layers.within(i.source, "cstorch_jax") and layers.within(i.target, "cstorch")]
    assert not bad, bad


def test_facade_reaches_jax_only_through_the_engine():
    bad = [f"{i.source}:{i.line} imports {i.target}" for i in IMPORTS
           if layers.within(i.source, "cstorch") and i.target in ("jax", "jaxlib", "optax", "orbax")]
    assert not bad, bad


def _check_cycles(package: str, level: str, found: list) -> None:
    assert not found, f"import cycles among the {level} of {package}: {found}"


@pytest.mark.parametrize("package", ["cstorch", "cstorch_jax"])
def test_no_module_cycles(package):
    _check_cycles(package, "modules", layers.cycles(_edges(package)))


@pytest.mark.parametrize("package", ["cstorch", "cstorch_jax"])
def test_no_package_cycles(package):
    _check_cycles(package, "subpackages", layers.cycles(_edges(package, collapse=True)))


def test_trainer_sits_above_the_facade():
    bad = [f"{i.source}:{i.line} imports {i.target}" for i in IMPORTS
           if layers.within(i.source, "cstorch") and not layers.within(i.source, "cstorch.trainer")
           and layers.within(i.target, "cstorch.trainer")]
    assert not bad, bad


def test_function_local_imports_are_listed_with_their_reason():
    local = {(i.source, i.target) for i in IMPORTS if i.local and i.target.split(".")[0] in layers.PACKAGES}
    unlisted = sorted(local - LOCAL_IMPORTS.keys())
    stale = sorted(LOCAL_IMPORTS.keys() - local)
    assert not unlisted, (f"function-local imports of project modules without a listed reason: {unlisted}. Import "
                          f"at module level; if that makes a cycle, fix the layering instead.")
    assert not stale, f"listed function-local imports that no longer exist (remove them from LOCAL_IMPORTS): {stale}"


def test_the_graph_reader_sees_the_imports():
    """A negative control: the reader finds a known module-level and a known local import."""
    assert any(i.source == "cstorch.trace" and i.target == "cstorch.state" and not i.local for i in IMPORTS)
    assert any(i.source == "cstorch_jax.jit" and i.target == "cstorch_jax.explore" and i.local for i in IMPORTS)
    assert layers.cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]


def test_type_checking_imports_are_edges_marked_type_only():
    import ast

    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .runner import R\nimport torch\n"
    visitor = layers._Visitor("cstorch.trainer.base_model", False, {"cstorch.trainer.runner"})
    visitor.visit(ast.parse(source))
    found = {(i.target, i.type_only) for i in visitor.found}
    assert ("cstorch.trainer.runner", True) in found and ("torch", False) in found
