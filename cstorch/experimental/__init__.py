"""`cstorch.experimental`: the wafer's experimental features are not supported here; every name of the real module
raises `cstorch.unsupported.UnsupportedAPIError` saying so (see cstorch.unsupported), except `listener`
(traced-tensor hooks, accepted and never called here; see experimental/listener.py)."""
from ..unsupported import module_getattr
from . import listener

__getattr__ = module_getattr(__name__)
