"""`cerebras.modelzoo`: the real Cerebras Model Zoo where it is installed, else the Model Zoo
names scripts import, served by cstorch.

**The real Model Zoo beside cstorch.** `cerebras` is a namespace package: a Model Zoo
installed (or its `src/` on `sys.path`) puts a second `cerebras/modelzoo` folder on
`cerebras.__path__`. When one exists, importing `cerebras.modelzoo` loads *that* package,
whole (its models, layers, data processors, config classes, registry, trainer and
`cszoo`), whichever folder comes first on the path; cstorch then only supplies
`cerebras.pytorch`. `CSTORCH_MODELZOO=builtin` keeps cstorch's own layer even then.

**cstorch's own layer** (no real Model Zoo found): `from cerebras.modelzoo import Trainer`
and `cerebras.modelzoo.trainer[.callbacks ...]` resolve to `cstorch.trainer` (the same
module objects). The Model Zoo 2.x layer that model and data code imports is here:
`config` (ModelConfig, DataConfig), `registry`, `common` (input_utils, pytorch_utils,
run_utils, registry) and `cli` (`cszoo`). The models and data processors of the real Model
Zoo are not included."""
import importlib.util
import os
import sys
from pathlib import Path

import cerebras

from cstorch.trainer.torchvision_ops import declare_torchvision_ops

_OURS = Path(__file__).resolve().parent


def real_modelzoo_dir() -> Path | None:
    """The folder of a real Cerebras Model Zoo package on `cerebras.__path__` (one with a
    `models` subpackage, which cstorch's layer has not), or None."""
    if os.environ.get("CSTORCH_MODELZOO", "").lower() == "builtin":
        return None
    for entry in list(cerebras.__path__):
        folder = Path(entry) / "modelzoo"
        try:
            if folder.resolve() != _OURS and (folder / "__init__.py").is_file() and (folder / "models").is_dir():
                return folder
        except OSError:
            continue
    return None


def _load_real(folder: Path):
    """Execute the real package's `__init__` as `cerebras.modelzoo`, its submodules found in
    its own folder; the module object replaces this one in `sys.modules`. torchvision's
    operators are declared first where its extension cannot load
    (`cstorch.trainer.torchvision_ops`)."""
    declare_torchvision_ops()
    spec = importlib.util.spec_from_file_location(__name__, folder / "__init__.py",
                                                  submodule_search_locations=[str(folder)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[__name__] = module
    spec.loader.exec_module(module)
    return module


_REAL = real_modelzoo_dir()
if _REAL is not None:
    _load_real(_REAL)
else:
    from ._builtin import Trainer, install_aliases

    install_aliases()
    __all__ = ["Trainer"]
