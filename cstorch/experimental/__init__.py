"""`cstorch.experimental`: the wafer's experimental features are not supported here; every name of the real module
raises `cstorch.unsupported.UnsupportedAPIError` saying so (see cstorch.unsupported)."""
from ..unsupported import module_getattr

__getattr__ = module_getattr(__name__)
