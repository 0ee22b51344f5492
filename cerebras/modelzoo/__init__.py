"""`cerebras.modelzoo`: the Model Zoo names scripts import, served by cstorch.

`from cerebras.modelzoo import Trainer` and `cerebras.modelzoo.trainer[.callbacks ...]`
resolve to `cstorch.trainer` (the same module objects). The Model Zoo 2.x layer that
model and data code imports is here: `config` (ModelConfig, DataConfig), `registry`,
`common` (input_utils, pytorch_utils, run_utils, registry) and `cli` (`cszoo`). The
models and data processors of the real Model Zoo are not included."""
import importlib
import importlib.abc
import importlib.util
import sys

#: cerebras.modelzoo submodule prefix -> the cstorch module it is
_ALIASES = {
    __name__ + ".trainer": "cstorch.trainer",
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


if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _AliasFinder())

from cstorch.trainer import Trainer  # noqa: E402

__all__ = ["Trainer"]
