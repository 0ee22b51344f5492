"""cstorch_jax.compat: overloads that only some supported torch releases have."""
import pytest
import torch

from cstorch_jax import compat
from cstorch_jax.lowering.registry import LOWERINGS


def test_present_overloads_are_returned_and_lowered():
    (op,) = compat.aten_overloads("linalg_cholesky_ex.default")
    assert op is torch.ops.aten.linalg_cholesky_ex.default and op in LOWERINGS


def test_a_versioned_overload_is_lowered_exactly_when_this_torch_has_it():
    has = hasattr(torch.ops.aten, "cholesky")
    assert compat.aten_overloads("cholesky.default") == ((torch.ops.aten.cholesky.default,) if has else ())
    assert (any(str(op) == "aten.cholesky.default" for op in LOWERINGS)) == has


def test_a_versioned_overload_missing_from_this_torch_is_skipped(monkeypatch):
    monkeypatch.setitem(compat.VERSIONED_OVERLOADS, "no_such_op.default", "9.9")
    assert compat.aten_overloads("no_such_op.default", "mm.default") == (torch.ops.aten.mm.default,)


def test_an_unknown_overload_is_an_error_naming_the_table():
    with pytest.raises(AttributeError, match="VERSIONED_OVERLOADS"):
        compat.aten_overloads("no_such_op.default")
