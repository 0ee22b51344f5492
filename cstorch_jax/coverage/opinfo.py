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

import contextlib
import logging
import random
import sys
import unittest
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import numpy
import torch
import torch.utils._pytree as pytree

from .. import jit
from ..errors import CaptureError, MaterializationError, UnsupportedOpError
from ..lowering.interpreter import uses_rng
from ..lowering.registry import RANDOM_OPS
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


def _test_method_on_stack() -> Callable | None:
    """The test method of the innermost `unittest.TestCase` running on the call stack (its
    `self` in a frame's locals, its id naming the method), or None: what OpInfo's
    `common_utils.extract_test_fn` finds, found by following `f_back` instead of
    `inspect.stack()`, which reads the source lines of every frame on the stack. As there,
    a failure to look finds nothing."""
    try:
        frame = sys._getframe(1)
        while frame is not None:
            case = frame.f_locals.get("self")
            if isinstance(case, unittest.TestCase):
                *_, class_name, method = case.id().rsplit(".", 2)
                if class_name == type(case).__name__ and method.startswith("test"):
                    return getattr(case, method).__func__
            frame = frame.f_back
    except Exception:  # noqa: BLE001 (torch's lookup returns None on any failure too)
        pass
    return None


@contextlib.contextmanager
def _cheap_sample_generation():
    """While OpInfo generates CPU samples, two of its helpers take cheaper paths to the same
    result (same samples, bit for bit):

    - the reseeding it does before every sample (`common_utils.set_rng_seed`) seeds the CPU
      generator, `random` and numpy, as `torch.manual_seed` does for the CPU, and skips the
      lazy CUDA/XPU seeding that `torch.manual_seed` queues with a formatted stack each time
      (most of the cost of making a sample on a machine without those devices);
    - the test method it looks for on the stack, whose name seeds the samples
      (`extract_test_fn`), is found by `_test_method_on_stack`: `inspect.stack()` read the
      source of every frame of pytest's deep stack, ~45 ms per sample generator (in CI, a
      fifth of the OpInfo sweeps' time)."""
    from torch.testing._internal import common_utils
    from torch.testing._internal.opinfo import core

    def cpu_seed(seed=None):
        seed = common_utils.SEED if seed is None else seed
        torch.default_generator.manual_seed(seed)
        random.seed(seed)
        numpy.random.seed(seed)

    # (module, name, replacement) where this torch has the name
    swaps = [(m, name, new) for m, name, new in ((common_utils, "set_rng_seed", cpu_seed),
                                                 (common_utils, "extract_test_fn", _test_method_on_stack),
                                                 (core, "extract_test_fn", _test_method_on_stack))
             if hasattr(m, name)]
    kept = [getattr(m, name) for m, name, _ in swaps]
    for m, name, new in swaps:
        setattr(m, name, new)
    try:
        yield
    finally:
        for (m, name, _), old in zip(swaps, kept):
            setattr(m, name, old)


def choose_samples(op, dtype: torch.dtype, requires_grad: bool, limit: int | None) -> list:
    """The op's samples for `dtype`, generated from a fixed seed; at most `limit` of them,
    picked by a seeded RNG (all of them when `limit` is None)."""
    torch.default_generator.manual_seed(_seed_of(op_id(op), f"{dtype}:{requires_grad}") % 2**31)
    with _cheap_sample_generation():
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
    """Run `cstorch_jax.jit(fn)(*args)`; (result, the captured graph's module). Engine
    refusals that mean "out of scope" become OutOfScope; other errors propagate."""
    jitted = jit(fn)
    try:
        got = jitted(*args)
    except CaptureError as e:
        if "depends on tensor values" in str(e):
            raise OutOfScope("output shape depends on tensor values") from e
        raise
    except MaterializationError as e:
        raise OutOfScope("the op reads tensor values on the host") from e
    return got, jitted.executable(*args).captured.module


def ops_by_output_group(gm: torch.fx.GraphModule, groups: list[int]) -> list[set]:
    """The ATen ops (node targets) that compute each group of the graph's outputs:
    `groups[j]` is the group of output j; entry g of the result holds the targets of every
    call node that output of group g depends on, and of every node kept for its side effect
    alone (no users) that reads what the group reads. Samples compiled together share no
    inputs, so each sample's slice is the graph it would have alone."""
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    need: dict[torch.fx.Node, set[int]] = {}
    for arg, g in zip(out_node.args[0], groups):
        if isinstance(arg, torch.fx.Node):
            need.setdefault(arg, set()).add(g)
    ops: list[set] = [set() for _ in range(max(groups, default=-1) + 1)]
    for node in reversed(gm.graph.nodes):
        gs = need.get(node)
        if not gs:
            continue
        if node.op == "call_function":
            for g in gs:
                ops[g].add(node.target)
        for inp in node.all_input_nodes:
            need.setdefault(inp, set()).update(gs)
    for node in gm.graph.nodes:  # a node kept for its side effect alone (an error check)
        if node.op == "call_function" and not node.users and node not in need:
            todo, seen, gs = list(node.all_input_nodes), set(), set()
            while todo:  # the groups of the nearest ancestors that outputs depend on
                n = todo.pop()
                if n not in seen:
                    seen.add(n)
                    if n in need:
                        gs |= need[n]
                    else:
                        todo.extend(n.all_input_nodes)
            for g in gs:
                ops[g].add(node.target)
    return ops


def _names(targets: set) -> set[str]:
    return {str(t) for t in targets}


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
        got, module = _compiled(prepared.fn, *prepared.args())
    except OutOfScope:
        raise
    except Exception:
        _check_outputs_in_scope(prepared.eager())  # a sample eager rejects is out of scope
        raise
    _judge(op, prepared, got, uses_rng(module), dtype)
    return _names({n.target for n in module.graph.nodes if n.op == "call_function"})


def check_batch(op, batch: list[tuple[torch.dtype, _Prepared]]) -> list[tuple[set[str] | None, BaseException | None]]:
    """Every (dtype, sample) of `batch` compiled into ONE executable (one capture and one
    XLA compile instead of one per sample), then judged one by one at its dtype, each on its
    own slice of the graph (`ops_by_output_group`: the ATen ops it ran, and whether it drew
    random numbers, as if compiled alone): (ops, None) or (None, error) per sample. Raises
    if the batch does not compile; the caller then checks the samples one by one."""
    got, module = _compiled(lambda args: [p.fn(*a) for (_, p), a in zip(batch, args)], [p.args() for _, p in batch])
    groups = [i for i, result in enumerate(got) for _ in _tensors(result)]
    per_sample = ops_by_output_group(module, groups)
    per_sample += [set()] * (len(batch) - len(per_sample))
    results = []
    for (dtype, p), g, targets in zip(batch, got, per_sample):
        try:
            _judge(op, p, g, bool(targets & RANDOM_OPS), dtype)
            results.append((_names(targets), None))
        except Exception as e:  # noqa: BLE001 - every engine failure (and OutOfScope) is a result here
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

    def record(self, ops: set[str] | None, error: BaseException | None) -> None:
        """Count one sample: passed with the graph's `ops`, out of scope, or failed."""
        if error is None:
            self.ops |= ops
            self.passed += 1
        elif isinstance(error, OutOfScope):
            self.out_of_scope += 1
            self.note(f"out of scope: {error}")
        else:
            self.failed += 1
            self.note(_describe(error))

    def settle(self) -> "Outcome":
        """Set the status from the counts (any failure fails; else any pass passes)."""
        if self.failed:
            self.status = FAIL
        elif self.passed:
            self.status = PASS
        elif self.out_of_scope:
            self.status = OUT_OF_SCOPE
        return self


def _describe(e: BaseException) -> str:
    msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
    if isinstance(e, UnsupportedOpError) and e.missing_ops:
        return f"no lowering: {', '.join(e.missing_ops)}"
    if isinstance(e, AssertionError):
        return f"mismatch: {msg[:200]}"
    return f"{type(e).__name__}: {msg[:200]}"


def _prepare_all(op, samples: Iterable, prepare, dtype: torch.dtype, out: Outcome) -> list[_Prepared]:
    """The in-scope samples, prepared; the others recorded in `out`."""
    batch = []
    for sample in samples:
        try:
            batch.append(prepare(op, sample, dtype))
        except Exception as e:  # noqa: BLE001 - OutOfScope, or eager torch's own failure on the sample
            out.record(None, e)
    return batch


def _try_batch(op, batch: list[tuple[torch.dtype, _Prepared]]):
    """`check_batch`'s results, or None when there is no batch to make or it does not compile."""
    if len(batch) < 2:
        return None
    try:
        return check_batch(op, batch)
    except Exception:  # noqa: BLE001 - the caller's smaller runs attribute the failure
        return None


def _run_prepared(op, batch: list[_Prepared], dtype: torch.dtype, out: Outcome, max_failures: int = 3) -> Outcome:
    """The prepared samples of one mode run as one batch; when the batch does not compile,
    one by one (stopping after `max_failures` failures), so each gets its own verdict."""
    results = _try_batch(op, [(dtype, p) for p in batch])
    if results is None:
        for prepared in batch:
            if out.failed >= max_failures:
                break
            try:
                out.record(check_sample(op, prepared, dtype), None)
            except Exception as e:  # noqa: BLE001 - every engine failure is a result here
                out.record(None, e)
    else:
        for ops, error in results:
            out.record(ops, error)
    return out.settle()


def run_samples(op, samples: Iterable, prepare, dtype: torch.dtype, max_failures: int = 3) -> Outcome:
    """The samples' outcome: in-scope samples run as one batch; when the batch does not
    compile, one by one, so each sample gets its own verdict."""
    out = Outcome()
    return _run_prepared(op, _prepare_all(op, samples, prepare, dtype, out), dtype, out, max_failures)


def has_kernel(op, dtype: torch.dtype) -> bool:
    """Whether torch runs the OpInfo's op on CPU in `dtype`; without such a kernel the op is
    out of scope in that dtype and neither of its checks runs."""
    return dtype in op.supported_dtypes("cpu")


def has_gradient(op, dtype: torch.dtype) -> bool:
    """Whether torch differentiates the OpInfo's op on CPU in `dtype`, so that its gradient
    check runs (given `has_kernel`); otherwise the check is "n/a"."""
    return op.supports_autograd and dtype in op.supported_backward_dtypes("cpu")


MODES = ("forward", "grad")
_PREPARE = {"forward": (False, prepare_forward), "grad": (True, prepare_grad)}


def check_cases(op, cases: Sequence[tuple[torch.dtype, str]],
                limit: int | None = DEFAULT_LIMIT) -> dict[tuple[torch.dtype, str], Outcome]:
    """The outcome of one OpInfo in each case (dtype, mode), mode "forward" or "grad".

    The in-scope samples of all the cases compile as ONE batch (one capture and one XLA
    compile), each judged on its own slice of the graph at its own dtype. Float32 cases
    and 16-bit cases are compiled apart (XLA compiles a program that holds 16-bit values
    with other options: `xla_options`). When a batch does not compile, each case runs as
    `run_samples` runs it (its own batch, then sample by sample), so every outcome is the
    one a separate check of the case gives."""
    outcomes: dict[tuple[torch.dtype, str], Outcome] = {}
    prepared: dict[tuple[torch.dtype, str], list[_Prepared]] = {}
    for dtype, mode in cases:
        requires_grad, prepare = _PREPARE[mode]
        if not has_kernel(op, dtype):
            outcomes[dtype, mode] = Outcome(OUT_OF_SCOPE,
                                            reasons=[f"out of scope: torch has no {dtype} kernel for it on CPU"])
        elif requires_grad and not has_gradient(op, dtype):
            outcomes[dtype, mode] = Outcome(NOT_APPLICABLE, reasons=["not differentiable"])
        else:
            outcomes[dtype, mode] = Outcome()
            prepared[dtype, mode] = _prepare_all(op, choose_samples(op, dtype, requires_grad, limit), prepare,
                                                 dtype, outcomes[dtype, mode])
    for half in (False, True):
        part = {case: batch for case, batch in prepared.items() if (case[0] in HALF_DTYPES) == half}
        together = [(case[0], p) for case, batch in part.items() for p in batch]
        results = _try_batch(op, together) if len(part) > 1 else None
        if results is None:
            for (dtype, mode), batch in part.items():
                _run_prepared(op, batch, dtype, outcomes[dtype, mode])
            continue
        it = iter(results)
        for case, batch in part.items():
            for _ in batch:
                outcomes[case].record(*next(it))
            outcomes[case].settle()
    return outcomes


def check_mode(op, mode: str, dtype: torch.dtype = torch.float32, limit: int | None = DEFAULT_LIMIT) -> Outcome:
    """The outcome of one OpInfo at `dtype` in `mode` ("forward" or "grad")."""
    return check_cases(op, [(dtype, mode)], limit)[dtype, mode]


def check_op(op, dtype: torch.dtype = torch.float32, limit: int | None = DEFAULT_LIMIT) -> tuple[Outcome, Outcome]:
    """(forward outcome, gradient outcome) of one OpInfo at `dtype`, compiled together
    (`check_cases`)."""
    outcomes = check_cases(op, [(dtype, mode) for mode in MODES], limit)
    return outcomes[dtype, "forward"], outcomes[dtype, "grad"]
