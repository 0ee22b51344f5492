"""The default choice of the parameters to sparsify (the real
`cerebras.pytorch.sparse.configure`; its `configure` function is not provided, see
cstorch.unsupported).

`default_sparse_param_filter(name, param)`: True for the parameters a sparsity
algorithm makes sparse by default: those with more than one dimension whose name
(case-insensitive) contains none of "embedding", "norm", "lm_head" and "pe_helper"; a
`param` of None is False. Model code uses it as a parameter filter of its own (the
Model Zoo's selective-gradient callback), so it works here as on the real system.
"""
from typing import Callable, Optional

import torch

SparseParamFilterType = Callable[[str, torch.nn.Parameter], bool]

_DENSE_NAME_PARTS = ("embedding", "norm", "lm_head", "pe_helper")


def default_sparse_param_filter(name: str, param: Optional[torch.nn.Parameter]) -> bool:
    """Whether the parameter `name` is sparse by default (see the module's doc)."""
    if param is None or len(param.shape) <= 1:
        return False
    lowered = name.lower()
    return not any(part in lowered for part in _DENSE_NAME_PARTS)


__all__ = ["SparseParamFilterType", "default_sparse_param_filter"]
