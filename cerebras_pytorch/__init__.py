"""`cerebras_pytorch`: the package name of release 1.8. `cerebras_pytorch.experimental`
(the 1.8 porting API) and its submodules (`.metrics`, `.optim`, `.utils.data`, ...)
are the modules of `cstorch.legacy18`, the same objects."""
import importlib
import importlib.abc
import importlib.util
import sys

_PREFIX = __name__ + ".experimental"
_TARGET = "cstorch.legacy18"


class _AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname == _PREFIX or fullname.startswith(_PREFIX + "."):
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        return importlib.import_module(_TARGET + spec.name[len(_PREFIX):])

    def exec_module(self, module):
        pass


if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _AliasFinder())
