"""The registered optimizer algorithms and public optimizer classes (see `spec.py`)."""
from __future__ import annotations

from .spec import Algorithm, PublicOptimizer
from .update_op import define_update

_ALGORITHMS: dict[str, Algorithm] = {}
_PUBLIC: dict[str, PublicOptimizer] = {}


def register(algorithm: Algorithm, *public: PublicOptimizer):
    """Define `algorithm`'s update op (`torch.ops.cstorch.<name>`) and list its public
    classes. Names must be new. Returns the op."""
    if algorithm.name in _ALGORITHMS:
        raise ValueError(f"an optimizer algorithm named {algorithm.name!r} is already registered")
    taken = [p.name for p in public if p.name in _PUBLIC]
    if taken:
        raise ValueError(f"optimizer classes {taken} are already registered")
    op = define_update(algorithm)
    _ALGORITHMS[algorithm.name] = algorithm
    for p in public:
        if p.algorithm is not algorithm:
            raise ValueError(f"{p.name} describes a class of {p.algorithm.name}, not of {algorithm.name}")
        _PUBLIC[p.name] = p
    return op


def registered_algorithms() -> list[Algorithm]:
    return list(_ALGORITHMS.values())


def public_optimizers() -> list[PublicOptimizer]:
    """Every registered public optimizer class, in registration order."""
    return list(_PUBLIC.values())
