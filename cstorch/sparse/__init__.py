"""`cstorch.sparse`: weight sparsity is not supported here; the names of the real module
that would configure or run it raise `cstorch.unsupported.UnsupportedAPIError` saying so
(see cstorch.unsupported).

The algorithm types exist, for code that only names them: the base class
`SparsityAlgorithm` (sparse/base.py) and the real algorithms `DynamicSparsityAlgorithm`,
`Static`, `GMP`, `SET`, `RigL` and `Group` (sparse/algorithms.py), with the real
constructors, for type annotations, isinstance checks and config builders; making one
raises. So does the module `cstorch.sparse.configure` with `default_sparse_param_filter`.
As in the real package, the attribute `configure` is the (here unsupported) function,
not that module (see cstorch/_shadowing.py)."""
from .._shadowing import shadow_submodules
from ..unsupported import module_getattr

shadow_submodules(__name__, "configure")

from .algorithms import GMP, SET, DynamicSparsityAlgorithm, Group, RigL, Static  # noqa: E402
from .base import SparsityAlgorithm  # noqa: E402

__getattr__ = module_getattr(__name__)

__all__ = ["SparsityAlgorithm", "DynamicSparsityAlgorithm", "Static", "GMP", "SET", "RigL", "Group"]
