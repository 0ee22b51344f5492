"""`cstorch.nn`: the real API's losses (`cstorch.nn.modules`), `Scope`, `Parameter` and
`Buffer` (torch's own: the real system's subclasses only defer copies to the wafer), and
`cstorch.nn.functional`. `SelectiveGrad` is not provided (see cstorch.unsupported)."""
import torch

from ..unsupported import module_getattr
from . import functional, modules
from .modules import *  # noqa: F401,F403
from .modules import Scope, __all__ as _losses

Parameter = torch.nn.Parameter
Buffer = torch.nn.Buffer

__getattr__ = module_getattr(__name__)

__all__ = ["Buffer", "Scope", "Parameter", "functional", *_losses]
