"""Capture a torch step as one pure core-ATen graph.

`capture(fn, state, batch)` traces `fn(state, batch) -> outputs` once on fake tensors
(`trace_step`, the one run of the step's Python body; `finish_capture` then only tidies the
graph, so a compile cache can look a step up between the two):

- `make_fx` with autograd running, so `loss.backward()`, `.grad`, `no_grad` and in-place
  optimizer updates are recorded; under torch's Python functionalization
  (`FunctionalTensorMode`, as AOTAutograd traces a joint graph), so every mutation becomes
  a pure op and the new values of the mutated state are the graph's outputs; with the
  core-ATen decompositions applied as ops reach the tracer. One trace gives the graph the
  lowering takes.
- The Python dispatcher is on (as in AOTAutograd) so that `native_batch_norm` becomes the
  correctly schema'd `_native_batch_norm_legit` and its running-stat updates are not lost;
  scaled-dot-product attention is forced to its MATH form, whose core-ATen decomposition
  keeps gradients right (the CPU flash kernel's does not).
- Every traced op is tagged with the nn.Module it comes from (module_paths.py), so an op
  that cannot be lowered is reported with its module path; ops a decomposition derives
  from it carry its tag.
- The optimizers' write-back (`write_back.assign`) gives a state tensor its value without an op.

The result's graph takes `(*state, *batch)` and returns
`(*new values of the mutated state, *outputs)`; state that the step does not change is
not returned, so the executable neither copies nor donates it, and state it does not
touch at all is marked unused, so the executable does not even take it.
"""
from __future__ import annotations

import contextlib
import enum
import functools
import hashlib
import operator
import sys
from dataclasses import dataclass
from typing import Callable, Sequence

import torch
from torch._decomp import core_aten_decompositions
from torch._dispatch.python import enable_python_dispatcher
from torch.fx.experimental.proxy_tensor import make_fx
from torch._subclasses.fake_tensor import (
    DataDependentOutputException, DynamicOutputShapeException, FakeTensorMode, is_fake,
)
from torch._subclasses.functional_tensor import FunctionalTensor, FunctionalTensorMode
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from .compile_regions import regions_inline
from .control_flow import cond_while_captured
from .errors import CaptureError, MaterializationError
from .module_paths import record_module_paths
from .subgraphs import all_graphs
from .write_back import assignable

aten = torch.ops.aten

_READ_HINT = (
    "The values of tensors inside a captured step exist only when the compiled step "
    "runs, so Python cannot read them while the step is traced (.item(), print, "
    "float(t), `if t:`, .tolist(), .numpy()). Use tensor ops instead (torch.where for "
    "conditionals), or hand the tensor to a @cstorch.step_closure (or return it from "
    "the step) and read it there."
)


@dataclass(frozen=True)
class TensorSpec:
    """Shape and dtype of one tensor input or output."""

    shape: tuple[int, ...]
    dtype: torch.dtype

    @classmethod
    def of(cls, t: torch.Tensor) -> "TensorSpec":
        return cls(tuple(int(s) for s in t.shape), t.dtype)

    def __str__(self) -> str:
        return f"{str(self.dtype).removeprefix('torch.')}{list(self.shape)}"


@dataclass
class CapturedGraph:
    """A pure core-ATen graph of one step and the meaning of its inputs and outputs."""

    module: torch.fx.GraphModule
    state_specs: tuple[TensorSpec, ...]
    batch_specs: tuple[TensorSpec, ...]
    output_specs: tuple[TensorSpec, ...]
    mutated: tuple[int, ...]  # indices of the state inputs whose new values are returned first
    unused: tuple[int, ...]  # indices of the state inputs the step neither reads nor writes
    graph_hash: str
    signature: str = ""  # `OpSignature` digest of the traced step (see trace_signature)
    # tensors from outside the step that the graph holds as constants, with their versions then
    constants: tuple[tuple[torch.Tensor, int], ...] = ()

    def changed_constants(self) -> list[str]:
        """Descriptions of the outside tensors baked in as constants that were modified
        in place since the capture (their values in the compiled step are stale)."""
        return [f"{str(t.dtype).removeprefix('torch.')}{list(t.shape)}" for t, v in self.constants if t._version != v]

    @property
    def read_only(self) -> tuple[int, ...]:
        """Indices of the state inputs the step reads but does not change."""
        skip = set(self.mutated) | set(self.unused)
        return tuple(i for i in range(len(self.state_specs)) if i not in skip)

    @property
    def code(self) -> str:
        return self.module.code

    def ops(self) -> dict[str, int]:
        """Histogram of the ATen ops in the graph."""
        hist: dict[str, int] = {}
        for node in self.module.graph.nodes:
            if node.op == "call_function":
                name = str(node.target)
                hist[name] = hist.get(name, 0) + 1
        return dict(sorted(hist.items(), key=lambda kv: -kv[1]))


class OpSignature:
    """A digest of the ATen ops a step dispatches, in order: each op's name, its
    non-tensor arguments, and for every tensor argument which earlier tensor it is
    (inputs numbered first, then every op output in order of creation), its shape and
    dtype, and the values of real (non-fake) tensors, the constants baked into a graph.
    Two runs of a step with the same digest dispatch the same computation on the same
    data flow, so they capture the same graph (given the same versions of the code
    that turns dispatched ops into a graph and a program)."""

    def __init__(self, inputs: Sequence[torch.Tensor]):
        self._hash = hashlib.sha256()
        self._index: dict[int, int] = {}
        self._alive: list[torch.Tensor] = []  # keeps ids unique while the step runs
        self.constants: list[tuple[torch.Tensor, int]] = []  # real tensors read, with their versions
        self.output_specs: list[TensorSpec] = []  # of the step's outputs, once it returned
        for t in inputs:
            self._number(t)

    def _number(self, t: torch.Tensor) -> int:
        i = self._index.get(id(t))
        if i is None:
            i = self._index[id(t)] = len(self._alive)
            self._alive.append(t)
        return i

    def _describe(self, x):
        if isinstance(x, torch.Tensor):
            new = id(x) not in self._index
            desc = f"T{self._number(x)}:{x.dtype}:{tuple(x.shape)}:{x.requires_grad}"
            if not is_fake(x) and x.device.type != "meta":
                if x.requires_grad:
                    raise CaptureError(_OUTSIDE_PARAMETER)
                if new:
                    self.constants.append((x, x._version))
                desc += ":" + _value_digest(x)
            return desc
        if isinstance(x, (list, tuple)):
            return "[" + ",".join(self._describe(v) for v in x) + "]"
        if isinstance(x, dict):
            return "{" + ",".join(f"{k}={self._describe(v)}" for k, v in sorted(x.items())) + "}"
        if x is None or isinstance(x, (bool, int, float, complex, str, bytes, torch.dtype, torch.device,
                                       torch.layout, torch.memory_format, enum.Enum)):
            return repr(x)
        return type(x).__qualname__  # an opaque object (a profiler handle): its type, never its address

    def record(self, func, args, kwargs, out) -> None:
        self._hash.update(f"{func}({self._describe(args)};{self._describe(kwargs)})->{self._describe(out)}\n"
                          .encode())

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


def _value_digest(t: torch.Tensor) -> str:
    """sha256 of a real tensor's values, computed with the tracing modes set aside (the
    ops that read them must not be traced)."""
    with _disable_current_modes(), torch.no_grad():
        data = t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
    return hashlib.sha256(data).hexdigest()


#: ops that only check tensor values and raise on the host (eager torch raises from
#: `_linalg_check_errors` when a LAPACK `info` is nonzero: a singular or indefinite input). A
#: compiled step cannot raise, so the capture leaves them out and the outputs keep the
#: inf/nan XLA computes for such inputs (the `*_ex` variants return `info` to read).
_HOST_CHECKS = (aten._linalg_check_errors.default,)


class _NoHostReads(TorchDispatchMode):
    """Raises on the one op that reads a tensor's value into Python and leaves out the ops
    that only check values (`_HOST_CHECKS`); records every op in `signature` when one is
    given."""

    supports_higher_order_operators = True  # torch.cond passes through (captured_cond watches its branches)

    def __init__(self, signature: OpSignature | None = None):
        super().__init__()
        self.signature = signature

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is aten._local_scalar_dense.default:
            raise MaterializationError(_READ_HINT)
        out = None if func in _HOST_CHECKS else func(*args, **(kwargs or {}))
        if self.signature is not None:
            self.signature.record(func, args, kwargs or {}, out)
        return out


def _refuse(what: str, original):
    """`original`, except when user code asks for the value of a traced tensor (torch's
    own error messages format traced tensors too, and must keep working)."""

    def refuse(self, *args, **kwargs):
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if is_fake(self) and caller != "torch" and not caller.startswith("torch."):
            raise MaterializationError(f"{what} of a traced tensor. " + _READ_HINT)
        return original(self, *args, **kwargs)

    return refuse


@contextlib.contextmanager
def no_host_reads(signature: OpSignature | None = None):
    """Within the user's step: reading tensor values on the host is a clear error (and
    every op is recorded in `signature`, when one is given)."""
    what = {
        "__repr__": "repr()/print()",
        "__str__": "str()/print()",
        "__format__": "Formatting (f-string)",
        "tolist": ".tolist()",
        "numpy": ".numpy()",
    }
    saved = {name: getattr(torch.Tensor, name) for name in what}
    patched = {name: _refuse(w, saved[name]) for name, w in what.items()}
    for name, fn in patched.items():
        setattr(torch.Tensor, name, fn)
    try:
        with _NoHostReads(signature):
            yield
    finally:
        for name, fn in saved.items():
            setattr(torch.Tensor, name, fn)


_OUTSIDE_PARAMETER = (
    "the step reads a tensor that requires grad but is neither one of its inputs nor registered state (an "
    "nn.Parameter outside the compiled model, or a module attribute that is not a registered parameter): it "
    "would be a constant of the compiled step and never trained. Register it on the compiled module with "
    "nn.Parameter / register_buffer(), or pass it to the step as an argument."
)


def _graph_hash(gm: torch.fx.GraphModule) -> str:
    """sha256 of the code of the graph and of the graphs it calls, and of every constant
    tensor they read."""
    h = hashlib.sha256()
    for graph in all_graphs(gm):
        h.update(graph.code.encode())
        _hash_constants(h, graph)
    return h.hexdigest()


def _hash_constants(h, gm: torch.fx.GraphModule) -> None:
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            t = operator.attrgetter(node.target)(gm)
            if isinstance(t, torch.Tensor):
                h.update(f"{node.target}:{t.dtype}:{tuple(t.shape)}".encode())
                h.update(t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())


_DYNAMIC_SHAPE_HINT = (
    "the step computes a tensor whose shape depends on tensor values (boolean-mask indexing "
    "such as x[mask], nonzero, unique, ...). A compiled step has static shapes: keep the "
    "full shape and select with torch.where(mask, a, b), masked_fill, or a multiplication by "
    "the mask instead."
)


def _guard_errors() -> tuple:
    """torch's `GuardOnDataDependentSymNode`, when its module is loaded: it imports sympy
    (~0.7 s), which `import cerebras.pytorch` does not need, and an exception of that class
    can only exist once torch has loaded the module that defines it."""
    module = sys.modules.get("torch.fx.experimental.symbolic_shapes")
    return (module.GuardOnDataDependentSymNode,) if module is not None else ()


@contextlib.contextmanager
def _data_dependence_is_an_error():
    """Fake tracing's ways of saying "this needs tensor values" become cstorch errors."""
    try:
        yield
    except (*_guard_errors(), DynamicOutputShapeException) as e:
        raise CaptureError(f"{_DYNAMIC_SHAPE_HINT} ({str(e).splitlines()[0]})") from e
    except DataDependentOutputException as e:
        raise MaterializationError(
            f"ATen op {e.func} returns a Python value computed from tensor values. " + _READ_HINT
        ) from e


# core-ATen decompositions that cstorch replaces by a direct lowering: torch's version
# reads tensor values in Python, which a static graph cannot do (take), or loses
# precision that eager's kernel keeps (soft_margin_loss_backward: a cancellation)
_LOWERED_INSTEAD_OF_DECOMPOSED = (aten.take.default, aten.soft_margin_loss_backward.default)


@functools.cache
def decompositions() -> dict:
    """The capture's decomposition table: torch's core-ATen table, minus the ops that
    cstorch lowers directly."""
    table = dict(core_aten_decompositions())
    for op in _LOWERED_INSTEAD_OF_DECOMPOSED:
        table.pop(op, None)
    return table


#: user decompositions (`cstorch.register_decomposition`): op -> (fn, the table's entry it replaced)
_USER_DECOMPOSITIONS: dict = {}


def register_decomposition(op: torch._ops.OpOverload, fn) -> None:
    """Decompose `op` with `fn` in every later capture (replacing torch's own
    decomposition of it, if any)."""
    if op in _USER_DECOMPOSITIONS:
        raise RuntimeError(f"A decomposition for {op} has already been registered.")
    table = decompositions()
    _USER_DECOMPOSITIONS[op] = (fn, table.get(op))
    table[op] = fn


def user_decompositions() -> dict:
    """op -> fn of the decompositions registered with `register_decomposition`: they act
    below the ops a step's op signature records, so the signature does not show them."""
    return {op: fn for op, (fn, _) in _USER_DECOMPOSITIONS.items()}


def remove_decomposition(op: torch._ops.OpOverload) -> None:
    """Undo `register_decomposition(op, ...)`."""
    if op not in _USER_DECOMPOSITIONS:
        raise RuntimeError(f"Decomposition for {op} has not been registered.")
    _, previous = _USER_DECOMPOSITIONS.pop(op)
    table = decompositions()
    if previous is None:
        table.pop(op, None)
    else:
        table[op] = previous


class _ContiguousLinalgInputs(torch.overrides.TorchFunctionMode):
    """While a step is traced: determinants factor a contiguous copy of their input.

    Eager det/slogdet/logdet factor A or A^T depending on A's strides, and the recorded
    backward hard-codes that choice; the lowering holds every tensor contiguous, so a
    non-contiguous input (x.mT) would get the other factorization and a wrong gradient.
    The contiguous copy is numerically the same input."""

    _FUNCS = {torch.det, torch.linalg.det, torch.logdet, torch.slogdet, torch.linalg.slogdet,
              torch.Tensor.det, torch.Tensor.logdet, torch.Tensor.slogdet}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in self._FUNCS and args and isinstance(args[0], torch.Tensor) and not args[0].is_contiguous():
            args = (args[0].contiguous(), *args[1:])
        return func(*args, **kwargs)


def _require_static_shapes(gm: torch.fx.GraphModule) -> None:
    for node in gm.graph.nodes:
        vals = node.meta.get("val")
        for v in vals if isinstance(vals, (tuple, list)) else [vals]:
            if isinstance(v, torch.Tensor) and not all(isinstance(d, int) for d in v.shape):
                raise CaptureError(f"{_DYNAMIC_SHAPE_HINT} (ATen op {node.target}, shape {tuple(v.shape)})")


def _view_copy(target):
    """The `*_copy` overload of an ATen view op (`aten.view.default` ->
    `aten.view_copy.default`), or None for an op that is not a view."""
    schema = getattr(target, "_schema", None)
    if schema is None or target.namespace != "aten" or schema.is_mutable:
        return None
    if not any(r.alias_info is not None for r in schema.returns):
        return None
    packet = getattr(aten, f"{target.__name__.split('.')[0]}_copy", None)
    overload = target._overloadname
    return getattr(packet, overload) if packet is not None and overload in packet.overloads() else None


def _views_as_copies(gm: torch.fx.GraphModule) -> None:
    """Every view op of the graph becomes its `*_copy` op: the graph is functional, so
    no value is shared, and a rewrite that changes a tensor's layout (the channels-last
    pass) leaves the graph valid torch as well as valid jax."""
    for node in gm.graph.nodes:
        if node.op == "call_function":
            copy = _view_copy(node.target)
            if copy is not None:
                node.target = copy


def _is_mutating(target) -> bool:
    schema = getattr(target, "_schema", None)
    return bool(schema is not None and schema.is_mutable)


def _clean(gm: torch.fx.GraphModule, n_state: int) -> tuple[int, ...]:
    """Drop profiler ranges, keep only changed state; return the mutated state indices."""
    graph = gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    # profiler ranges (torch.optim wraps step() in record_function) carry no computation
    for node in reversed(list(graph.nodes)):
        if node.op == "call_function" and getattr(node.target, "namespace", None) == "profiler":
            graph.erase_node(node)
    out_node = next(n for n in graph.nodes if n.op == "output")
    flat = list(out_node.args[0])
    state_out, outputs = flat[:n_state], flat[n_state:]
    mutated = tuple(i for i, v in enumerate(state_out) if v is not placeholders[i])
    out_node.args = ([state_out[i] for i in mutated] + outputs,)
    graph.eliminate_dead_code()
    left = sorted({str(n.target) for n in graph.nodes if n.op == "call_function" and _is_mutating(n.target)})
    if left:
        raise CaptureError(f"the captured graph still mutates tensors after functionalization: {left}")
    gm.recompile()
    return mutated


@dataclass
class StepTrace:
    """The one trace of a step: its body, run once on fake tensors under `make_fx`.

    Everything a cache lookup needs comes from this one run of the body (its op
    `signature`, the outside tensors it reads, the specs of its outputs); `finish_capture`
    makes the captured graph from `module` without tracing again."""

    module: torch.fx.GraphModule  # functionalized and decomposed; returns (*state values, *outputs)
    n_state: int
    state_specs: tuple[TensorSpec, ...]
    batch_specs: tuple[TensorSpec, ...]
    output_specs: tuple[TensorSpec, ...]
    signature: str  # `OpSignature` digest (see trace_signature)
    constants: tuple[tuple[torch.Tensor, int], ...]
    captured: CapturedGraph | None = None  # made by finish_capture, once


@contextlib.contextmanager
def _tracing_as_torch_export_does():
    """`torch.compiler.is_compiling()` (and `is_exporting()`) true while the step is traced,
    as torch.export sets them for its own make_fx trace of user code: libraries that check
    them (Hugging Face's `is_tracing`, torch.optim's step counts) keep to static,
    value-free code, where they would otherwise look for fake tensors and find functional
    ones."""
    compiler = torch.compiler
    saved = compiler._is_compiling_flag, compiler._is_exporting_flag
    compiler._is_compiling_flag = compiler._is_exporting_flag = True
    try:
        yield
    finally:
        compiler._is_compiling_flag, compiler._is_exporting_flag = saved


def _functional(t: torch.Tensor, requires_grad: bool) -> torch.Tensor:
    """`t` (a traced input) as a functional tensor, an autograd leaf when `requires_grad`."""
    f = FunctionalTensor.to_functional(t)
    return f.requires_grad_(True) if requires_grad else f


def _value(t):
    """The plain traced tensor holding a functional tensor's latest value (its pending
    mutations applied); anything else as it is."""
    if not isinstance(t, FunctionalTensor):
        return t
    torch._sync(t)
    return torch._from_functional_tensor(t.elem)


def _functional_step(fn, n_state: int, requires_grad: list[bool], signature: list):
    """f(*state, *batch) -> [*state values, *outputs]: the user's step run on functional
    tensors (inputs enter functionalization as autograd leaves of their own, so autograd
    runs above it), its results as plain tensors; appends its `OpSignature` to `signature`."""

    def traced(*flat):
        with FunctionalTensorMode():
            leaves = [_functional(t, r) for t, r in zip(flat, requires_grad)]
        with FunctionalTensorMode():
            results = _run_step(fn, n_state, signature, *leaves)
        return [_value(r) for r in results]

    return traced


@contextlib.contextmanager
def _tracing_modes():
    """What a step is traced under (module docstring); fake tracing's errors made cstorch's."""
    with _data_dependence_is_an_error(), enable_python_dispatcher(), sdpa_kernel(SDPBackend.MATH):
        with _tracing_as_torch_export_does(), regions_inline():
            yield


def trace_step(
    fn: Callable[[list[torch.Tensor], list[torch.Tensor]], Sequence[torch.Tensor]],
    state: Sequence[torch.Tensor],
    batch: Sequence[torch.Tensor],
) -> StepTrace:
    """The trace of `capture(fn, state, batch)`: runs the step's Python body, once, into a
    functional core-ATen graph (module docstring)."""
    ids = [id(t) for t in state]
    if len(set(ids)) != len(ids):
        raise CaptureError("capture() needs distinct state tensors; deduplicate tied tensors first")
    n_state = len(state)
    signature: list[OpSignature] = []
    traced = _functional_step(fn, n_state, [t.requires_grad for t in (*state, *batch)], signature)
    with _tracing_modes():
        # a tensor from outside the step (neither state nor batch) becomes a constant of the graph
        gm = make_fx(traced, decomposition_table=decompositions(), tracing_mode="fake",
                     _allow_non_fake_inputs=True)(*[t.detach() for t in (*state, *batch)])
    ops = signature[0]
    return StepTrace(
        module=gm,
        n_state=n_state,
        state_specs=tuple(TensorSpec.of(s) for s in state),
        batch_specs=tuple(TensorSpec.of(b) for b in batch),
        output_specs=tuple(ops.output_specs),
        signature=ops.hexdigest(),
        constants=tuple(ops.constants),
    )


def finish_capture(trace: StepTrace) -> CapturedGraph:
    """The captured graph of `trace` (made once): only the changed state returned, dead
    code and profiler ranges dropped, static shapes checked, unused state marked."""
    if trace.captured is not None:
        return trace.captured
    gm, n_state = trace.module, trace.n_state
    mutated = _clean(gm, n_state)
    for graph in all_graphs(gm):  # the step's graph and its torch.cond branches
        _views_as_copies(graph)
        _require_static_shapes(graph)
    state_nodes = [n for n in gm.graph.nodes if n.op == "placeholder"][:n_state]
    unused = tuple(i for i, n in enumerate(state_nodes) if not n.users and i not in mutated)
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    out_vals = [a.meta["val"] for a in out_node.args[0]][len(mutated):]
    trace.captured = CapturedGraph(
        module=gm,
        state_specs=trace.state_specs,
        batch_specs=trace.batch_specs,
        output_specs=tuple(TensorSpec.of(v) for v in out_vals),
        mutated=mutated,
        unused=unused,
        graph_hash=_graph_hash(gm),
        signature=trace.signature,
        constants=trace.constants,
    )
    return trace.captured


def capture(
    fn: Callable[[list[torch.Tensor], list[torch.Tensor]], Sequence[torch.Tensor]],
    state: Sequence[torch.Tensor],
    batch: Sequence[torch.Tensor],
) -> CapturedGraph:
    """Trace `fn(state, batch) -> outputs` into a pure core-ATen graph
    (`finish_capture(trace_step(...))`).

    `state` holds distinct tensors that persist across steps (parameters, buffers,
    optimizer state, scalars such as the learning rate); `fn` may update them in place
    and may call `backward()`. State and batch tensors that require grad are traced as
    leaves that require grad. `batch` holds the per-step inputs. `outputs` must be tensors.
    """
    return finish_capture(trace_step(fn, state, batch))


def _run_step(fn, n_state: int, signature: list, *flat):
    """Run the user's step on traced tensors `flat` = (*state, *batch) and return
    (*state, *outputs); appends the step's `OpSignature` to `signature`."""
    st = list(flat[:n_state])
    ops = OpSignature(flat)
    # torch.cond's branches are traced apart from the step's ops: they are watched the same way
    with no_host_reads(ops), cond_while_captured(lambda: _NoHostReads(ops)), record_module_paths(), \
            _ContiguousLinalgInputs(), assignable(ops, st):
        outs = list(fn(st, list(flat[n_state:])))
    for i, o in enumerate(outs):
        if not isinstance(o, torch.Tensor):
            raise CaptureError(f"step output {i} is {type(o).__name__}, expected a tensor")
    ops.record("outputs", (), {}, [*st, *outs])
    ops.output_specs = [TensorSpec.of(o) for o in outs]
    signature.append(ops)
    return [*st, *outs]


def trace_signature(fn, state: Sequence[torch.Tensor], batch: Sequence[torch.Tensor]):
    """Run `fn(state, batch)` once on fake tensors exactly as `capture` does, without
    building a graph (no tracer, no decompositions): (its `OpSignature` digest, the specs of its outputs, the outside
    tensors it reads with their versions, as `CapturedGraph.constants`). The digest equals
    `capture(...).signature` for the same step; this costs a fraction of a capture and has
    the same Python side effects (the step's body runs once)."""
    signature: list[OpSignature] = []
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    traced = _functional_step(fn, len(state), [t.requires_grad for t in (*state, *batch)], signature)
    with _tracing_modes(), mode:
        traced(*[mode.from_tensor(t.detach()) for t in (*state, *batch)])
    return signature[0].hexdigest(), list(signature[0].output_specs), tuple(signature[0].constants)
