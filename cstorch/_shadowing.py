"""Package attributes that stand in front of a submodule of the same name.

The real `cerebras.pytorch` has names that are at once an attribute of a package and a
submodule of it: `cerebras.pytorch.backend` is the function `backend(...)` while
`from cerebras.pytorch.backend import use_cs` reads the module `backend/`; likewise
`cerebras.pytorch.sparse.configure`. The real package gets this by binding the
attribute after importing the submodule; the module stays reachable through
`sys.modules`, which is where `from <module> import <name>` looks.

Here the binding alone is not enough: Python sets a package's attribute to a submodule
whenever the submodule is imported under a new name, and the `cerebras.pytorch` alias
(cerebras/pytorch/__init__.py) imports each submodule a second time under its alias
name. `shadow_submodules(package, names)` makes the package ignore those assignments
for the given names, so the attribute stays what the package bound (or, where it binds
nothing, what its module-level `__getattr__` answers).
"""
import sys
import types

_KEY = "__shadowed_submodules__"


class ShadowingModule(types.ModuleType):
    """A module that keeps its own binding for the names in its `__shadowed_submodules__`
    when the import system assigns the submodule of that name to it."""

    def __setattr__(self, name, value):
        if (isinstance(value, types.ModuleType) and name in self.__dict__.get(_KEY, ())
                and value.__name__ == f"{self.__name__}.{name}"):
            return
        super().__setattr__(name, value)


def shadow_submodules(package_name: str, *names: str) -> None:
    """From now on, importing submodule `<package_name>.<name>` (under any name) leaves
    the package's attribute `<name>` as it is. Call it from the package's `__init__`
    before the submodules are first imported."""
    package = sys.modules[package_name]
    if type(package) not in (types.ModuleType, ShadowingModule):
        raise TypeError(f"{package_name} is a {type(package).__name__}; cannot make it shadow its submodules")
    package.__dict__.setdefault(_KEY, set()).update(names)
    package.__class__ = ShadowingModule
