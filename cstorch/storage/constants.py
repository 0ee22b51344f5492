"""The names of the H5 checkpoint format's attributes (the real
`cerebras.pytorch.storage.constants`), as `h5.py` writes them.

* File attributes: `__SPEC__` ("__spec__", the state dict's structure), `__VERSION__`
  ("__version__", the format version, `CURRENT_CKPT_FORMAT_VERSION` = 0.5) and
  `__CSTORCH_VERSION__` ("__cstorch_version__", the version of the package that wrote
  the file).
* Per entry: `<key>.__METADATA__` ("__metadata__"), a JSON object whose `__TYPE__`
  ("__TYPE__") says how the value is stored; `__OBJECTS__` ("__objects__") is the
  real format's name for its group of stored objects.
"""
from .layout import FORMAT_VERSION

__SPEC__ = "__spec__"
__METADATA__ = "__metadata__"
__OBJECTS__ = "__objects__"
__TYPE__ = "__TYPE__"
__VERSION__ = "__version__"
__CSTORCH_VERSION__ = "__cstorch_version__"

CURRENT_CKPT_FORMAT_VERSION = FORMAT_VERSION

__all__ = ["__SPEC__", "__METADATA__", "__OBJECTS__", "__TYPE__", "__VERSION__", "__CSTORCH_VERSION__",
           "CURRENT_CKPT_FORMAT_VERSION"]
