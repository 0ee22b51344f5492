"""cstorch's own Model Zoo layer (used when no real Model Zoo is installed):
`cerebras.modelzoo.trainer[...]` is `cstorch.trainer[...]`, the same module objects."""
import importlib
import importlib.abc
import importlib.util
import sys

from cstorch.trainer import Trainer

#: cerebras.modelzoo submodule prefix -> the cstorch module it is
_ALIASES = {
    "cerebras.modelzoo.trainer": "cstorch.trainer",
}


class _AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def _target(self, fullname):
        for prefix, target in _ALIASES.items():
            if fullname == prefix or fullname.startswith(prefix + "."):
                return target + fullname[len(prefix):]
        return None

    def find_spec(self, fullname, path=None, target=None):
        if self._target(fullname) is not None:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        return importlib.import_module(self._target(spec.name))

    def exec_module(self, module):
        pass


def install_aliases() -> None:
    """Put the alias finder first on `sys.meta_path` (once)."""
    if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _AliasFinder())


__all__ = ["Trainer", "install_aliases"]
