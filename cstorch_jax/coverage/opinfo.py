"""Run PyTorch's OpInfo database (`op_db`) through the engine and compare with eager.

For one OpInfo and one dtype:

- forward: every chosen sample `op(sample.input, *sample.args, **sample.kwargs)` runs
  eagerly and through `cstorch_jax.jit`; outputs must match (same dtypes and structure,
  integers and bools exactly, NaN == NaN);
- gradient (ops that support autograd): the compiled function runs `backward()` of
  `sum(out * cotangent)` over the differentiable outputs, with a random cotangent per
  output, and returns the `.grad` of every input that requires grad; those must match
  the eager grads.

Float results match when they are as accurate as eager's against the same op computed in
float64 (`accuracy.judge`: at most `accuracy.FACTOR` times eager's error, or half an ulp
per element); a float32 result within rtol = atol = 1e-5 of eager's needs no float64 run.

Scope is dense tensors. A sample is *out of scope*, with a reason, when its inputs are
not dense strided tensors or hold 64-bit floats (the engine has no float64), when the
op draws random numbers (values cannot be compared), when its output shape depends on
tensor values, or when the op reads tensor values on the host while it runs; static
shapes are the engine's contract, and those two raise a clear error instead of
compiling. An op is out of scope when none of its samples is in scope.
"""
from __future__ import annotations

import logging
import random
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import torch
import torch.utils._pytree as pytree

from .. import jit
from ..errors import CaptureError, MaterializationError, UnsupportedOpError
from ..lowering.interpreter import uses_rng
from .accuracy import judge, to_reference

PASS, FAIL, OUT_OF_SCOPE, NOT_APPLICABLE = "pass", "fail", "out of scope", "n/a"

DEFAULT_LIMIT = 4  # samples per op and mode in the default (not --full) sweep

FLOAT32_TOLERANCE = (1e-5, 1e-5)  # rtol, atol against eager torch
HALF_DTYPES = (torch.bfloat16, torch.float16)  # judged against float64 (accuracy.judge)


class OutOfScope(Exception):
    """The sample is outside what the engine promises to run (see module docstring)."""


def op_id(op) -> str:
    """`name` or `name.variant`, unique within op_db."""
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def load_op_db() -> list:
    """PyTorch's OpInfo list (its module needs `expecttest`, installed by the dev extra)."""
    # fake tensors log every meta kernel that needs tensor values; the runner reports those itself
    logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
    try:
        from torch.testing._internal.common_methods_invocations import op_db
    except ImportError as e:
        raise SystemExit(
            f"the OpInfo database needs the test dependencies ({e}); install them with "
            f'pip install -c constraints.txt -e ".[dev]"'
        ) from None
    return list(op_db)


# ---- samples --------------------------------------------------------------------------


def _seed_of(name: str, salt: str) -> int:
    return zlib.crc32(f"{name}:{salt}".encode())


def choose_samples(op, dtype: torch.dtype, requires_grad: bool, limit: int | None) -> list:
    """The op's samples for `dtype`, generated from a fixed seed; at most `limit` of them,
    picked by a seeded RNG (all of them when `limit` is None)."""
    torch.manual_seed(_seed_of(op_id(op), f"{dtype}:{requires_grad}") % 2**31)
    samples = list(op.sample_inputs("cpu", dtype, requires_grad=requires_grad))
    if limit is not None and len(samples) > limit:
        rng = random.Random(_seed_of(op_id(op), "pick"))
        picked = sorted(rng.sample(range(len(samples)), limit))
        samples = [samples[i] for i in picked]
    return samples


def _tensors(tree) -> list[torch.Tensor]:
    return [x for x in pytree.tree_leaves(tree) if isinstance(x, torch.Tensor)]


def _check_inputs_in_scope(sample) -> None:
    for t in _tensors((sample.input, sample.args, sample.kwargs)):
        if t.layout != torch.strided or t.is_quantized or t.is_nested:
            raise OutOfScope(f"{t.layout} input (only dense tensors are in scope)")
        if t.dtype in (torch.float64, torch.complex128):
            raise OutOfScope(f"{t.dtype} input (the engine has no 64-bit floats)")


def _fresh(tree, requires_grad: bool):
    """Detached leaf copies; floating tensors that required grad keep requiring it."""

    def copy(x):
        if not isinstance(x, torch.Tensor):
            return x
        return x.detach().clone().requires_grad_(requires_grad and x.requires_grad)

    return pytree.tree_map(copy, tree)


# ---- comparison -----------------------------------------------------------------------


def assert_match(got, want, rtol: float, atol: float) -> None:
    """Same structure and dtypes; floats within tolerance (NaN == NaN); the rest exact."""
    got_leaves, got_spec = pytree.tree_flatten(got)
    want_leaves, want_spec = pytree.tree_flatten(want)
    if got_spec != want_spec:
        raise AssertionError(f"output structure {got_spec} != eager {want_spec}")
    for i, (g, w) in enumerate(zip(got_leaves, want_leaves)):
        if isinstance(w, torch.Tensor):
            if not isinstance(g, torch.Tensor):
                raise AssertionError(f"output {i}: got {type(g).__name__}, eager gives a tensor")
            exact = not (w.dtype.is_floating_point or w.dtype.is_complex)
            torch.testing.assert_close(
                g.detach(), w.detach(), rtol=0 if exact else rtol, atol=0 if exact else atol,
                equal_nan=True, msg=lambda m, i=i: f"output {i}: {m}",
            )
        elif g != w and not (isinstance(w, float) and w != w and g != g):
            raise AssertionError(f"output {i}: {g!r} != eager {w!r}")


def sample_parts(sample):
    return (sample.input, sample.args, sample.kwargs)


def _run(op, parts):
    inp, args, kwargs = parts
    return op(inp, *args, **kwargs)


def _check_outputs_in_scope(out) -> None:
    for t in _tensors(out):
        if t.dtype.is_complex or t.dtype == torch.float64:
            raise OutOfScope(f"{t.dtype} output (complex and 64-bit floats are out of scope)")
        if t.layout != torch.strided:
            raise OutOfScope(f"{t.layout} output (only dense tensors are in scope)")


def _eager(op, parts):
    try:
        return _run(op, parts)
    except Exception as e:  # noqa: BLE001 - a sample eager torch rejects is not a test of the engine
        raise OutOfScope(f"eager torch raises {type(e).__name__} on this sample") from e


def _compiled(fn, *args):
    """Run `cstorch_jax.jit(fn)(*args)`; (result, uses_rng, names of the graph's ATen ops).
    Engine refusals that mean "out of scope" become OutOfScope; other errors propagate."""
    jitted = jit(fn)
    try:
        got = jitted(*args)
    except CaptureError as e:
        if "depends on tensor values" in str(e):
            raise OutOfScope("output shape depends on tensor values") from e
        raise
    except MaterializationError as e:
        raise OutOfScope("the op reads tensor values on the host") from e
    captured = jitted.executable(*args).captured
    return got, uses_rng(captured.module), set(captured.ops())


# ops whose results are uninitialized memory in torch: only shapes and dtypes are defined
_UNINITIALIZED = {"empty", "empty_like", "empty_permuted", "empty_strided", "new_empty", "new_empty_strided"}


def _compare(got, want, random: bool, dtype: torch.dtype, reference, name: str = "") -> None:
    """16-bit results judged against `reference()`, the same computation in float64 (see
    accuracy.py); float32 results within FLOAT32_TOLERANCE of eager's, or else judged so."""
    why = ("random op: shapes and dtypes match; values cannot be compared with eager" if random else
           "uninitialized memory: shapes and dtypes match; torch defines no values" if name in _UNINITIALIZED else
           None)
    if why:
        spec = lambda tree: pytree.tree_map(  # noqa: E731
            lambda x: (tuple(x.shape), x.dtype) if isinstance(x, torch.Tensor) else x, tree)
        assert_match(spec(got), spec(want), 0, 0)
        raise OutOfScope(why)
    if dtype in HALF_DTYPES:
        judge(got, want, reference())
        return
    try:
        assert_match(got, want, *FLOAT32_TOLERANCE)
    except AssertionError as mismatch:
        try:
            truth = reference()
        except Exception:  # noqa: BLE001 - no float64 run of this sample: the mismatch stands
            raise mismatch from None
        judge(got, want, truth)  # farther from eager than 1e-5: as accurate as eager against float64


@dataclass
class _Prepared:
    """One in-scope sample, ready to run: `fn(*args())` is compiled, `eager()` is eager
    torch's result (OutOfScope when eager rejects the sample), `reference()` the same
    computation in float64."""

    fn: Callable
    args: Callable[[], tuple]
    eager: Callable[[], Any]
    reference: Callable[[], Any]


def prepare_forward(op, sample, dtype: torch.dtype) -> _Prepared:
    """The forward check of one sample (raises OutOfScope for inputs out of scope).

    The compiled run works on copies, so eager in-place variants cannot change its
    inputs; eager runs on the sample's own tensors (views keep their storage, which
    as_strided samples rely on)."""
    _check_inputs_in_scope(sample)
    parts = sample_parts(sample)
    reference = to_reference(parts, dtype)  # copied now: eager in-place variants change the inputs
    return _Prepared(lambda p: _run(op, p), lambda: (_fresh(parts, False),), lambda: _eager(op, parts),
                     lambda: _run(op, reference))


def prepare_grad(op, sample, dtype: torch.dtype) -> _Prepared:
    """The gradient check of one sample: `backward()` of sum(out * cotangent) with a
    seeded random cotangent per differentiable output."""
    _check_inputs_in_scope(sample)
    parts = sample_parts(sample)
    if not any(t.requires_grad for t in _tensors(parts)):
        raise OutOfScope("no input requires grad")
    probe = sample.output_process_fn_grad(_eager(op, _fresh(parts, True)))
    _check_outputs_in_scope(probe)
    diff = [o for o in _tensors(probe) if o.requires_grad]
    if not diff:
        raise OutOfScope("no output is differentiable")
    gen = torch.Generator().manual_seed(_seed_of(op_id(op), "cotangent"))
    cotangents = [torch.randn(o.shape, generator=gen, dtype=o.dtype) for o in diff]
    f = _grad_fn(op, sample)
    return _Prepared(f, lambda: (_fresh(parts, True), cotangents), lambda: f(_fresh(parts, True), cotangents),
                     lambda: f(*to_reference((parts, cotangents), dtype)))


def _grad_fn(op, sample):
    """f(parts, cotangents) -> (outputs, grads of every input that requires grad)."""

    def f(parts, cotangents):
        out = sample.output_process_fn_grad(_run(op, parts))
        diff = [o for o in _tensors(out) if o.requires_grad]
        total = sum((o * c).sum() for o, c in zip(diff, cotangents))
        total.backward()
        return out, [t.grad for t in _tensors(parts) if t.requires_grad]

    return f


def _judge(op, prepared: _Prepared, got, random: bool, dtype: torch.dtype) -> None:
    want = prepared.eager()
    _check_outputs_in_scope(want)
    _compare(got, want, random, dtype, prepared.reference, op.name)


def check_sample(op, prepared: _Prepared, dtype: torch.dtype) -> set[str]:
    """Compile and judge one prepared sample: raise OutOfScope, AssertionError (mismatch)
    or the engine's error; on a match, return the names of the graph's ATen ops."""
    try:
        got, random, ops = _compiled(prepared.fn, *prepared.args())
    except OutOfScope:
        raise
    except Exception:
        _check_outputs_in_scope(prepared.eager())  # a sample eager rejects is out of scope
        raise
    _judge(op, prepared, got, random, dtype)
    return ops


def check_batch(op, batch: list[_Prepared], dtype: torch.dtype) -> list[tuple[set[str] | None, BaseException | None]]:
    """Every sample of `batch` compiled into ONE executable (one capture and one XLA
    compile instead of one per sample), then judged one by one: (ops, None) or (None,
    error) per sample. Raises if the batch does not compile or draws random numbers;
    the caller then checks the samples one by one."""
    got, random, ops = _compiled(lambda args: [p.fn(*a) for p, a in zip(batch, args)], [p.args() for p in batch])
    if random:
        raise OutOfScope("random op")
    results = []
    for p, g in zip(batch, got):
        try:
            _judge(op, p, g, False, dtype)
            results.append((ops, None))
        except Exception as e:  # noqa: BLE001 - every engine failure is a result here
            results.append((None, e))
    return results


# ---- one op ---------------------------------------------------------------------------


@dataclass
class Outcome:
    """How one op fared in one mode (forward or grad)."""

    status: str = NOT_APPLICABLE  # pass | fail | out of scope | n/a
    passed: int = 0
    failed: int = 0
    out_of_scope: int = 0
    reasons: list[str] = field(default_factory=list)  # first failure / out-of-scope reasons
    ops: set[str] = field(default_factory=set)  # ATen ops of the graphs of the passing samples

    def note(self, reason: str) -> None:
        if reason not in self.reasons and len(self.reasons) < 3:
            self.reasons.append(reason)


def _describe(e: BaseException) -> str:
    msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
    if isinstance(e, UnsupportedOpError) and e.missing_ops:
        return f"no lowering: {', '.join(e.missing_ops)}"
    if isinstance(e, AssertionError):
        return f"mismatch: {msg[:200]}"
    return f"{type(e).__name__}: {msg[:200]}"


def run_samples(op, samples: Iterable, prepare, dtype: torch.dtype, max_failures: int = 3) -> Outcome:
    """The samples' outcome: in-scope samples run as one batch; when the batch does not
    compile (or draws random numbers), one by one, so each sample gets its own verdict."""
    out = Outcome()

    def record(ops: set[str] | None, error: BaseException | None) -> None:
        if error is None:
            out.ops |= ops
            out.passed += 1
        elif isinstance(error, OutOfScope):
            out.out_of_scope += 1
            out.note(f"out of scope: {error}")
        else:
            out.failed += 1
            out.note(_describe(error))

    batch = []
    for sample in samples:
        try:
            batch.append(prepare(op, sample, dtype))
        except Exception as e:  # noqa: BLE001 - OutOfScope, or eager torch's own failure on the sample
            record(None, e)
    try:
        results = check_batch(op, batch, dtype) if len(batch) > 1 else None
    except Exception:  # noqa: BLE001 - the one-by-one run below attributes the failure
        results = None
    if results is None:
        for prepared in batch:
            if out.failed >= max_failures:
                break
            try:
                record(check_sample(op, prepared, dtype), None)
            except Exception as e:  # noqa: BLE001 - every engine failure is a result here
                record(None, e)
    else:
        for ops, error in results:
            record(ops, error)
    if out.failed:
        out.status = FAIL
    elif out.passed:
        out.status = PASS
    elif out.out_of_scope:
        out.status = OUT_OF_SCOPE
    return out


def has_kernel(op, dtype: torch.dtype) -> bool:
    """Whether torch runs the OpInfo's op on CPU in `dtype`; without such a kernel the op is
    out of scope in that dtype and neither of its checks runs."""
    return dtype in op.supported_dtypes("cpu")


def has_gradient(op, dtype: torch.dtype) -> bool:
    """Whether torch differentiates the OpInfo's op on CPU in `dtype`, so that its gradient
    check runs (given `has_kernel`); otherwise the check is "n/a"."""
    return op.supports_autograd and dtype in op.supported_backward_dtypes("cpu")


def check_mode(op, mode: str, dtype: torch.dtype = torch.float32, limit: int | None = DEFAULT_LIMIT) -> Outcome:
    """The outcome of one OpInfo at `dtype` in `mode` ("forward" or "grad")."""
    if not has_kernel(op, dtype):
        return Outcome(OUT_OF_SCOPE, reasons=[f"out of scope: torch has no {dtype} kernel for it on CPU"])
    if mode == "forward":
        return run_samples(op, choose_samples(op, dtype, False, limit), prepare_forward, dtype)
    if not has_gradient(op, dtype):
        return Outcome(NOT_APPLICABLE, reasons=["not differentiable"])
    return run_samples(op, choose_samples(op, dtype, True, limit), prepare_grad, dtype)


def check_op(op, dtype: torch.dtype = torch.float32, limit: int | None = DEFAULT_LIMIT) -> tuple[Outcome, Outcome]:
    """(forward outcome, gradient outcome) of one OpInfo at `dtype`."""
    return check_mode(op, "forward", dtype, limit), check_mode(op, "grad", dtype, limit)
