"""`cstorch.core`: the real backend's internals are not provided here; every name of the real module
raises `cstorch.unsupported.UnsupportedAPIError` saying so (see cstorch.unsupported)."""
from ..unsupported import module_getattr

__getattr__ = module_getattr(__name__)
