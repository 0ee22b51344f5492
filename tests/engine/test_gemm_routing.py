"""Large float32 matrix products routed to the BLAS custom call (`cstorch_jax/passes/
gemm_routing.py`, `cstorch_jax/native/gemm.cc`): the pass reads transposed operands in
place, and every routed product equals eager torch — alone, through the OpInfo matmul
family, and in whole training runs compared parameter by parameter with the CPU backend.
The size thresholds are lowered to route every float32 product of the small test shapes."""
from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest
import torch

import cstorch_jax
from cstorch_jax import native
from cstorch_jax.lowering import gemm as gemm_lowering
from cstorch_jax.passes import gemm_routing

aten = torch.ops.aten

pytestmark = pytest.mark.skipif(native.gemm_targets() is None,
                                reason=f"the BLAS custom call is not available: {native.gemm_status()}")


@pytest.fixture
def route_everything(monkeypatch):
    monkeypatch.setattr(gemm_routing, "MIN_MACS", 1)
    monkeypatch.setattr(gemm_routing, "MIN_MACS_PLAIN", 1)
    monkeypatch.setattr(gemm_routing, "MIN_DEPTH", 1)


def _routed_ops(fn, *args) -> dict[str, int]:
    ex = cstorch_jax.jit(fn).executable(*args)
    counts: dict[str, int] = {}
    for n in ex.graph_module.graph.nodes:
        if n.op == "call_function":
            counts[str(n.target)] = counts.get(str(n.target), 0) + 1
    return counts


# ---- the handler itself -----------------------------------------------------------------
@pytest.mark.parametrize("shape", [(1, 5, 7, 3), (1, 64, 33, 48), (3, 40, 16, 24), (32, 17, 9, 20)])
@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_handler_matches_float64(shape, trans_a, trans_b, bias):
    """Every transpose combination, batched and not, with and without bias, uneven row
    blocks: within float32 rounding of a float64 product."""
    import jax

    batch, m, k, n = shape
    rng = np.random.default_rng(0)
    a = rng.standard_normal((batch, k, m) if trans_a else (batch, m, k), dtype=np.float32)
    b = rng.standard_normal((batch, n, k) if trans_b else (batch, k, n), dtype=np.float32)
    c = rng.standard_normal((n,), dtype=np.float32) if bias else None
    if batch == 1:
        a, b = a[0], b[0]
    got = jax.jit(lambda x, y, z: gemm_lowering.gemm(x, y, z, trans_a, trans_b))(a, b, c)
    ref = np.matmul(np.swapaxes(a, -1, -2) if trans_a else a, np.swapaxes(b, -1, -2) if trans_b else b,
                    dtype=np.float64)
    if bias:
        ref = ref + c
    assert got.shape == ref.shape and got.dtype == np.float32
    np.testing.assert_allclose(np.asarray(got), ref, rtol=0, atol=k * 2e-6)
    hlo = jax.jit(lambda x, y, z: gemm_lowering.gemm(x, y, z, trans_a, trans_b)).lower(a, b, c).as_text()
    assert "cstorch_sgemm" in hlo


# ---- which operands are read in place ---------------------------------------------------
def _graph(fn, *shapes):
    gm = torch.fx.experimental.proxy_tensor.make_fx(fn, tracing_mode="fake")(*[torch.randn(s) for s in shapes])
    return gm, [n for n in gm.graph.nodes if n.op == "call_function" and n.target in (aten.mm.default,
                                                                                      aten.bmm.default)][0]


def test_matrix_source_sees_through_layout_chains():
    # x.t() feeding mm: x itself, transposed
    gm, mm = _graph(lambda x, y: torch.ops.aten.mm(torch.ops.aten.permute(x, [1, 0]).clone(), y), (4, 3), (4, 5))
    root, shape, transposed = gemm_routing.matrix_source(mm.args[0])
    assert root.op == "placeholder" and shape == (4, 3) and transposed
    # attention's kᵀ: [B, H, T, D] -> permute -> merge B*H -> [B*H, D, T]: k reshaped, transposed
    gm, bmm = _graph(lambda q, k: torch.matmul(q, k.transpose(-2, -1)), (2, 3, 5, 4), (2, 3, 5, 4))
    src = gemm_routing.matrix_source(bmm.args[1])
    assert src is not None and src[1] == (6, 5, 4) and src[2]
    # a real broadcast is not a view of the same elements
    gm, bmm = _graph(lambda q, k: torch.matmul(q, k.expand(3, 4, 5)), (3, 2, 4), (1, 4, 5))
    assert gemm_routing.matrix_source(bmm.args[1]) is None or gemm_routing.matrix_source(bmm.args[1])[1][0] == 1


@pytest.mark.parametrize("rows, routed", [(128, 0), (1024, 1)])
def test_default_policy_routes_deep_weight_gradients_only(rows, routed):
    """With the default thresholds a weight gradient Xᵀ·dY of 512 x 512 goes to the BLAS
    when X has 1024 rows (a GPT's batch x tokens) and stays an XLA dot at 128 (an MLP
    batch), where XLA's asynchronous dot was measured faster inside the step."""
    x, dy = torch.randn(rows, 512), torch.randn(rows, 512)
    counts = _routed_ops(lambda x, dy: x.t() @ dy, x, dy)
    assert counts.get("cstorch.gemm.default", 0) == routed, counts


# ---- routed graphs equal eager torch ------------------------------------------------------
def test_linear_layers_are_routed_and_match_eager(route_everything):
    from lowering.harness import check_grad

    def f(x, w1, b1, w2):
        return torch.nn.functional.linear(torch.relu(torch.nn.functional.linear(x, w1, b1)), w2)

    args = (torch.randn(16, 12, requires_grad=True), torch.randn(20, 12, requires_grad=True),
            torch.randn(20, requires_grad=True), torch.randn(6, 20, requires_grad=True))
    check_grad(f, *args)
    counts = _routed_ops(lambda *a: torch.autograd.grad(f(*a).sum(), a), *args)
    assert counts.get("cstorch.gemm.default", 0) >= 5, counts
    assert not any(k in counts for k in ("aten.mm.default", "aten.addmm.default")), counts


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16_bit_products_stay_xla_dots(dtype, route_everything):
    """The BLAS call is an sgemm: bfloat16 and float16 products (the mixed-precision
    compute) are left to XLA's dot, which keeps 16-bit operands and sums in float32
    (cstorch_jax/lowering/dtype_policy.py), however large."""
    def f(x, w1, b1, w2, a, b):
        h = torch.nn.functional.linear(torch.relu(torch.nn.functional.linear(x, w1, b1)), w2)
        return h, torch.bmm(a, b)

    args = tuple(t.to(dtype).requires_grad_() for t in (torch.randn(16, 12), torch.randn(20, 12), torch.randn(20),
                                                         torch.randn(6, 20), torch.randn(3, 8, 5),
                                                         torch.randn(3, 5, 7)))
    counts = _routed_ops(lambda *a: torch.autograd.grad(sum(o.float().sum() for o in f(*a)), a), *args)
    assert "cstorch.gemm.default" not in counts, counts
    assert sum(counts.get(k, 0) for k in ("aten.mm.default", "aten.addmm.default", "aten.bmm.default")) >= 5, counts


@pytest.mark.parametrize("name", ["mm", "bmm", "addmm", "matmul", "nn.functional.linear", "baddbmm", "addbmm",
                                  "__rmatmul__", "einsum", "tensordot", "inner", "nn.functional.bilinear"])
@pytest.mark.parametrize("mode", ["forward", "grad"])
def test_opinfo_matmul_family_on_the_blas_path(name, mode, route_everything):
    pytest.importorskip("expecttest", reason="torch's OpInfo database needs expecttest (dev extra)")
    from cstorch_jax.coverage.opinfo import FAIL, PASS, check_mode, load_op_db, op_id
    from lowering.opinfo_expected_failures import EXPECTED_FAILURES

    ops = [op for op in load_op_db() if op_id(op) == name]
    assert ops, f"no OpInfo named {name}"
    outcome = check_mode(ops[0], mode, limit=None)
    if outcome.status == FAIL and (name, mode) in EXPECTED_FAILURES:
        pytest.xfail(f"as on the XLA dot path (tests/lowering/opinfo_expected_failures.py): "
                     f"{EXPECTED_FAILURES[name, mode]}")
    assert outcome.status != FAIL, f"{name} {mode}: {outcome.reasons}"
    assert outcome.status == PASS or not outcome.failed


@pytest.mark.parametrize("opt_name", ["sgd", "adamw"])
def test_models_train_equal_with_every_product_routed(opt_name, route_everything):
    """The MLP and the GPT of tests/models/test_model_parity.py, every float32 product through
    the BLAS: per-step losses and every parameter equal the CPU backend's (with AdamW's
    float32 noise floor of test_model_parity, as on the XLA dot path)."""
    sys.path.insert(0, "tests/models")  # test_model_parity
    from test_model_parity import MODELS, STEPS, _adam_noise_bound
    from train_script import assert_close_rel, train

    for model_name in ("mlp", "gpt"):
        model, batches, loss_fn = MODELS[model_name]()
        batches = batches[: STEPS // 2]
        cpu_losses, cpu_model, _, _ = train("CPU", model, batches, opt_name, loss_fn)
        csx_losses, csx_model, _, step = train("CSX", model, batches, opt_name, loss_fn)
        counts = {}
        for n in step.executable.graph_module.graph.nodes:
            counts[str(n.target)] = counts.get(str(n.target), 0) + 1
        assert counts.get("cstorch.gemm.default", 0) > 0, counts
        assert_close_rel(torch.tensor(csx_losses), torch.tensor(cpu_losses), what=f"{model_name} losses")
        for k in cpu_model:
            assert_close_rel(csx_model[k], cpu_model[k], what=f"{model_name} {k}", atol=_adam_noise_bound(opt_name))


def test_without_the_library_xla_dot_is_used_with_one_warning(monkeypatch, route_everything):
    monkeypatch.setattr(native, "_load", lambda: (None, "test: library removed"))
    native._warn_once.cache_clear()
    x, w = torch.randn(8, 6), torch.randn(6, 5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            got = cstorch_jax.jit(lambda a, b: a.t().t() @ b)(x, w)
    torch.testing.assert_close(got, x @ w, rtol=1e-5, atol=1e-5)
    mine = [w for w in caught if "BLAS custom call" in str(w.message)]
    assert len(mine) == 1 and "test: library removed" in str(mine[0].message)
    native._warn_once.cache_clear()
