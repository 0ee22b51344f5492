"""`cstorch.core`: the real backend's internals are not provided here; every name of the real module
raises `cstorch.unsupported.UnsupportedAPIError` saying so (see cstorch.unsupported), except
`annotation` (op annotations, accepted and without effect here; see core/annotation.py)."""
from ..unsupported import module_getattr
from . import annotation

__getattr__ = module_getattr(__name__)
