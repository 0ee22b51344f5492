"""`cerebras.pytorch` is `cstorch`: scripts written for the real system import it
unchanged. Submodules (`cerebras.pytorch.optim`, ...) resolve to the same module
objects as `cstorch.*`, so classes and state are shared, never duplicated."""
import importlib
import importlib.abc
import importlib.util
import sys

import cstorch

_PREFIX = __name__ + "."


class _AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname.startswith(_PREFIX):
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        return importlib.import_module("cstorch." + spec.name[len(_PREFIX):])

    def exec_module(self, module):
        pass


if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _AliasFinder())
sys.modules[__name__] = cstorch
