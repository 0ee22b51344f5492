"""Look inside a compiled step: its captured graph, IRs, costs, memory and ops.

`StepReport(executable)` describes one `Executable` (a `@cstorch.trace` step's, via
`step.lower(...)` or `step.report`, or a `cstorch_jax.jit` function's via `.lower(...)`):

* `graph`: the captured core-ATen fx graph as readable code with shapes;
  `jaxpr`, `stablehlo` (as lowered) and `hlo` (after XLA's optimisations): `IRText`,
  strings shown in a notebook as collapsible text;
* `cost`: XLA's cost analysis of the optimised program: FLOPs (a dot of [m,k]x[k,n] is
  2mkn; elementwise ops count one per element), transcendentals, bytes accessed, and
  the arithmetic intensity flops / bytes;
* `memory`: XLA's buffer assignment, per device: argument, output and temporary
  bytes, the alias bytes (the donated input buffers, mutated state and the RNG key,
  that the outputs reuse in place), the bytes of the state slices each device holds,
  and `memory.state`: each state tensor's placement (replicated, or split on which
  dimension over how many devices) and its bytes per device, as compiled;
* `ops`: one row per (ATen op, module path) with its count; `ops.total` equals
  `num_ops`, the number of op nodes in the captured graph;
* `summary()` and `draw()` (an SVG of the graph, op nodes grouped by module).

`diff(a, b)` compares two reports and says what would make them different programs:
an input whose shape or dtype changed, state that changed, or a Python value (a
literal of the graph) that changed.
"""
from __future__ import annotations

import collections
import difflib
import html
from dataclasses import dataclass, field, fields

import numpy as np
import torch
import torch.utils._pytree as pytree

from .capture import TensorSpec
from .executable import Executable

OUTSIDE_MODULES = "(outside modules)"


# -- display helpers ---------------------------------------------------------------------
class IRText(str):
    """A program text; a notebook shows it folded, with its line count."""

    title = "text"

    def __new__(cls, text: str, title: str):
        obj = super().__new__(cls, text)
        obj.title = title
        return obj

    def _repr_html_(self) -> str:
        lines = self.count("\n") + 1
        return (f"<details><summary><b>{html.escape(self.title)}</b> ({lines} lines)</summary>"
                f"<pre style='max-height:40em;overflow:auto'>{html.escape(str(self))}</pre></details>")


def _table(rows, header=None) -> str:
    head = "".join(f"<th style='text-align:left'>{html.escape(str(h))}</th>" for h in header) if header else ""
    body = "".join("<tr>" + "".join(f"<td style='text-align:left'>{html.escape(str(c))}</td>" for c in r) + "</tr>"
                   for r in rows)
    return f"<table>{'<tr>' + head + '</tr>' if head else ''}{body}</table>"


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} GiB"


class _Fields:
    """Dataclass display: a two-column HTML table and a plain-text form."""

    def _rows(self):
        return [(f.name, getattr(self, f.name)) for f in fields(self)]

    def _repr_html_(self) -> str:
        return _table([(k, _bytes(v) if k.endswith("_bytes") else (f"{v:,.3f}" if isinstance(v, float) else v))
                       for k, v in self._rows()])


# -- cost and memory ---------------------------------------------------------------------
@dataclass(frozen=True)
class Cost(_Fields):
    flops: float
    transcendentals: float
    bytes_accessed: float

    @property
    def intensity(self) -> float:
        """FLOPs per byte accessed."""
        return self.flops / self.bytes_accessed if self.bytes_accessed else float("nan")

    def _rows(self):
        return [*super()._rows(), ("intensity (flops/byte)", self.intensity)]


class StatePlacement:
    """Where each state input of a compiled program lives: one row per tensor the
    program takes (name, spec, placement, bytes per device), read from the program's
    own input shardings. `split` and `replicated` count the tensors of each kind."""

    def __init__(self, rows: list[tuple[str, str, str, int]], num_devices: int):
        self.rows = rows
        self.num_devices = num_devices

    @property
    def split(self) -> int:
        return sum(1 for r in self.rows if r[2].startswith("split"))

    @property
    def replicated(self) -> int:
        return len(self.rows) - self.split

    @property
    def bytes_per_device(self) -> int:
        return sum(r[3] for r in self.rows)

    def layout_of(self, name: str) -> str:
        """The placement of the state tensor `name` ("split dim 0 / 4", "replicated", ...)."""
        for r in self.rows:
            if r[0] == name:
                return r[2]
        raise KeyError(f"the program takes no state tensor named {name!r}")

    def __str__(self) -> str:
        return (f"{len(self.rows)} state tensors on {self.num_devices} device(s): {self.split} split, "
                f"{self.replicated} whole on each device")

    def __repr__(self) -> str:
        width = max((len(r[0]) for r in self.rows), default=4)
        lines = [f"  {n:<{width}}  {spec:<16}  {where:<18}  {_bytes(b)}" for n, spec, where, b in self.rows]
        return "\n".join([str(self), *lines])

    def _repr_html_(self) -> str:
        rows = [(n, spec, where, _bytes(b)) for n, spec, where, b in self.rows]
        return (f"<details><summary>{html.escape(str(self))}</summary>"
                f"{_table(rows, header=['state tensor', 'spec', 'placement', 'bytes per device'])}</details>")


def describe_sharding(sharding, shape: tuple) -> str:
    """A compiled input's placement in words: "one device", "replicated", or the split
    dimensions ("split dim 0 / 4")."""
    if sharding.num_devices == 1:
        return "one device"
    local = sharding.shard_shape(tuple(shape))
    split = [f"dim {d} / {g // s}" for d, (g, s) in enumerate(zip(shape, local)) if g != s]
    return "split " + ", ".join(split) if split else "replicated"


@dataclass(frozen=True)
class Memory(_Fields):
    """XLA's memory analysis of the program, per device (every device runs the same
    partitioned program)."""

    argument_bytes: int
    output_bytes: int
    temp_bytes: int
    alias_bytes: int  # argument buffers reused by outputs (donation that XLA honoured)
    donated_bytes: int  # what the program donates: the mutated state and the RNG key (per device)
    generated_code_bytes: int
    state_bytes: int = 0  # the state inputs' slices one device holds
    num_devices: int = 1
    state: StatePlacement | None = field(default=None, compare=False)  # per tensor (the table)

    def _repr_html_(self) -> str:
        rows = [r for r in self._rows() if r[0] != "state"]
        table = _table([(k, _bytes(v) if k.endswith("_bytes") else v) for k, v in rows])
        return table + (self.state._repr_html_() if self.state is not None else "")


# -- ops ----------------------------------------------------------------------------------
def _op_name(node: torch.fx.Node) -> str:
    """`aten.mm.default` for an ATen op; a Python function's own name (`getitem`
    unpacks one result of a multi-output op)."""
    target = node.target
    return str(target) if isinstance(target, torch._ops.OpOverload) else getattr(target, "__name__", str(target))


def module_path(node: torch.fx.Node) -> str:
    """The nn.Module path an op node came from (backward ops: the module they differentiate)."""
    stack = node.meta.get("nn_module_stack") or {}
    return next(iter(stack), OUTSIDE_MODULES)


def op_nodes(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [n for n in gm.graph.nodes if n.op == "call_function"]


def repeated_blocks(gm: torch.fx.GraphModule) -> list[tuple[str, int, int]]:
    """(name, calls, ops) of every graph the step calls once per repeated layer (an
    `invoke_subgraph` node per call, `cstorch_jax.repeated_blocks`): each graph once, with
    its number of calls and of ATen ops."""
    calls: collections.Counter = collections.Counter()
    for n in op_nodes(gm):
        if n.target is torch.ops.higher_order.invoke_subgraph:
            calls[n.args[0].target] += 1
    return [(name, count, len(op_nodes(getattr(gm, name)))) for name, count in calls.items()]


class OpTable:
    """Counts of (ATen op, module path) over a captured graph's op nodes."""

    def __init__(self, nodes: list[torch.fx.Node]):
        self.counts = collections.Counter((_op_name(n), module_path(n)) for n in nodes)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def by_op(self) -> collections.Counter:
        out = collections.Counter()
        for (op, _), c in self.counts.items():
            out[op] += c
        return out

    def by_module(self) -> collections.Counter:
        out = collections.Counter()
        for (_, mod), c in self.counts.items():
            out[mod] += c
        return out

    def rows(self) -> list[tuple[str, str, int]]:
        """(op, module, count), most frequent first."""
        return [(op, mod, c) for (op, mod), c in self.counts.most_common()]

    def __repr__(self) -> str:
        width = max((len(op) for op, _, _ in self.rows()), default=2)
        lines = [f"{c:6d}  {op:<{width}}  {mod}" for op, mod, c in self.rows()]
        return "\n".join([f"{self.total} ops", *lines])

    def _repr_html_(self) -> str:
        top = _table(self.by_op().most_common(), header=["ATen op", "count"])
        full = _table(self.rows(), header=["ATen op", "module", "count"])
        return (f"<b>{self.total} ops</b>, {len(self.by_op())} kinds{top}"
                f"<details><summary>by op and module</summary>{full}</details>")


# -- the report ---------------------------------------------------------------------------
class StepReport:
    """Everything about one compiled program (see the module docstring)."""

    def __init__(self, executable: Executable, name: str = "step", state_names=None, launches=None):
        """`launches`: how the run launches the step, as {calls per launch: launches so
        far} (several calls per launch: a loop whose body is this program, `StepsExecutable`)."""
        self.executable = executable
        self.name = name
        self.launches = dict(launches or {})
        self.captured = executable.captured
        self.state_names = list(state_names) if state_names is not None else [
            f"state {i}" for i in range(len(self.captured.state_specs))]

    # inputs
    @property
    def inputs(self) -> list[tuple[str, TensorSpec]]:
        """(name, spec) of every batch and scalar input of the program."""
        return list(zip(self.executable.batch_names, self.captured.batch_specs))

    @property
    def num_ops(self) -> int:
        return len(op_nodes(self.captured.module))

    # texts
    @property
    def graph(self) -> IRText:
        code = self.captured.module.print_readable(print_output=False, include_stride=False, include_device=False)
        return IRText(code, f"captured graph of {self.name} ({self.num_ops} ops)")

    @property
    def jaxpr(self) -> IRText:
        return IRText(str(self.executable.jaxpr()), f"jaxpr of {self.name}")

    @property
    def stablehlo(self) -> IRText:
        return IRText(self.executable.lowered.as_text(), f"StableHLO of {self.name} (before XLA's passes)")

    @property
    def hlo(self) -> IRText:
        return IRText(self.executable.compiled.as_text(), f"optimized HLO of {self.name}")

    # numbers
    @property
    def cost(self) -> Cost:
        ca = self.executable.compiled.cost_analysis()
        if isinstance(ca, (list, tuple)):  # older jax: one dict per device program
            ca = ca[0]
        ca = ca or {}
        return Cost(float(ca.get("flops", 0.0)) + self._custom_call_flops(), float(ca.get("transcendentals", 0.0)),
                    float(ca.get("bytes accessed", 0.0)))

    def _custom_call_flops(self) -> float:
        """FLOPs of the products the CPU graph pass routed to the BLAS custom call, which
        XLA's cost analysis cannot see into: 2 * batch * M * N * K each."""
        gm = getattr(self.executable, "graph_module", None)
        total = 0.0
        for node in gm.graph.nodes if gm is not None else ():
            if node.op == "call_function" and str(node.target) == "cstorch.gemm.default":
                a, out = node.args[0].meta["val"], node.meta["val"]
                k = a.shape[-2] if node.args[3] else a.shape[-1]
                total += 2.0 * out.numel() * k
        return total

    @property
    def state_placement(self) -> StatePlacement:
        """Each state input's placement and bytes per device, from the compiled program's
        input shardings (mutated state first, then the state it only reads)."""
        mutated, kept = self.executable.compiled.input_shardings[0][:2]
        specs, rows = self.captured.state_specs, []
        indices = (*self.captured.mutated, *self.executable.kept)
        for i, sharding in zip(indices, (*mutated, *kept)):
            spec = specs[i]
            local = TensorSpec(tuple(sharding.shard_shape(spec.shape)), spec.dtype)
            rows.append((self.state_names[i], str(spec), describe_sharding(sharding, spec.shape), _nbytes(local)))
        devices = self.executable.compiled.input_shardings[0][3].num_devices
        return StatePlacement(rows, devices)

    @property
    def memory(self) -> Memory:
        m = self.executable.compiled.memory_analysis()
        state = self.state_placement
        n_mutated = len(self.captured.mutated)
        donated = sum(r[3] for r in state.rows[:n_mutated]) + 8  # + the uint32[2] RNG key
        return Memory(int(m.argument_size_in_bytes), int(m.output_size_in_bytes), int(m.temp_size_in_bytes),
                      int(m.alias_size_in_bytes), donated, int(m.generated_code_size_in_bytes),
                      state.bytes_per_device, state.num_devices, state)

    @property
    def ops(self) -> OpTable:
        return OpTable(op_nodes(self.captured.module))

    def summary(self) -> "Summary":
        cost, mem = self.cost, self.memory
        state = self.captured.state_specs
        rows = [
            ("inputs", ", ".join(f"{n}: {s}" for n, s in self.inputs) or "none"),
            ("state tensors (mutated / read / total)",
             f"{len(self.captured.mutated)} / {len(self.captured.read_only)} / {len(state)}"),
            ("state bytes", _bytes(sum(_nbytes(s) for s in state))),
            ("outputs", ", ".join(str(s) for s in self.captured.output_specs) or "none"),
            ("ATen ops (kinds)", f"{self.num_ops} ({len(self.ops.by_op())})"),
            ("GFLOP per call", f"{cost.flops / 1e9:.4f}"),
            ("bytes accessed", _bytes(cost.bytes_accessed)),
            ("arithmetic intensity (flops/byte)", f"{cost.intensity:.2f}"),
            ("devices", f"{mem.num_devices}"),
            ("state placement", str(mem.state)),
            ("state bytes per device", _bytes(mem.state_bytes)),
            ("arguments / outputs / temporaries per device", f"{_bytes(mem.argument_bytes)} / "
                                                             f"{_bytes(mem.output_bytes)} / {_bytes(mem.temp_bytes)}"),
            ("donated / aliased", f"{_bytes(mem.donated_bytes)} / {_bytes(mem.alias_bytes)}"),
            ("graph hash", self.captured.graph_hash[:16]),
            ("lower + compile s", f"{self.executable.lower_seconds:.2f} + {self.executable.compile_seconds:.2f}"),
        ]
        blocks = repeated_blocks(self.captured.module)
        if blocks:
            rows.append(("repeated layers (graph: calls x ops)",
                         ", ".join(f"{name}: {calls} x {ops}" for name, calls, ops in blocks)))
        stacking = getattr(self.executable, "stacking", None)
        if stacking is not None:
            layers = sorted({len(s) for s in stacking.stacks})
            rows.append(("stacked state (stacks x layers)",
                         f"{len(stacking.stacks)} x {'/'.join(map(str, layers))}: each run of layers is one loop "
                         f"over stacked parameters and optimizer state"))
        if self.launches:
            windows = ", ".join(f"{n} x {k}" for k, n in sorted(self.launches.items(), reverse=True))
            rows.append(("steps per launch (launches x steps)",
                         f"{windows}: several steps launch as one loop over this program"))
        return Summary(self.name, rows)

    def draw(self, depth: int = 3) -> "GraphDrawing":
        """The captured graph as module groups (module paths cut to `depth` parts) and
        the tensors flowing between them."""
        return GraphDrawing(self.captured.module, depth)

    def _repr_html_(self) -> str:
        return self.summary()._repr_html_()

    def __repr__(self) -> str:
        return repr(self.summary())


def _nbytes(spec: TensorSpec) -> int:
    return int(np.prod(spec.shape, dtype=np.int64)) * torch.empty((), dtype=spec.dtype).element_size()


class Summary:
    def __init__(self, name: str, rows: list[tuple[str, str]]):
        self.name = name
        self.rows = rows

    def as_dict(self) -> dict[str, str]:
        return dict(self.rows)

    def __repr__(self) -> str:
        width = max(len(k) for k, _ in self.rows)
        return "\n".join([f"summary of {self.name}", *(f"  {k:<{width}}  {v}" for k, v in self.rows)])

    def _repr_html_(self) -> str:
        return f"<b>summary of {html.escape(self.name)}</b>" + _table(self.rows)


# -- drawing ------------------------------------------------------------------------------
class GraphDrawing:
    """An SVG of a captured graph: one box per module group (inputs, each module path
    cut to `depth` parts, outputs) in order of first use, its op count, and an arc for
    every pair of groups that pass tensors, labelled with how many."""

    BOX_W, BOX_H, GAP, LEFT = 360, 30, 14, 10

    def __init__(self, gm: torch.fx.GraphModule, depth: int = 3):
        self.groups: list[str] = []
        self.ops: collections.Counter = collections.Counter()
        self.edges: collections.Counter = collections.Counter()
        group_of: dict[torch.fx.Node, str] = {}
        for n in gm.graph.nodes:
            if n.op == "placeholder":
                g = "(inputs)"
            elif n.op == "output":
                g = "(outputs)"
            elif n.op == "call_function":
                g = ".".join(module_path(n).split(".")[:depth])
                self.ops[g] += 1
            else:
                continue
            group_of[n] = g
            if g not in self.groups:
                self.groups.append(g)
            for src in n.all_input_nodes:
                if src in group_of and group_of[src] != g:
                    self.edges[(group_of[src], g)] += 1
        if "(outputs)" in self.groups:  # keep the outputs last
            self.groups.remove("(outputs)")
            self.groups.append("(outputs)")

    def svg(self) -> str:
        y = {g: self.GAP + i * (self.BOX_H + self.GAP) for i, g in enumerate(self.groups)}
        height = self.GAP + len(self.groups) * (self.BOX_H + self.GAP)
        right = self.LEFT + self.BOX_W
        parts = []
        span = max(1, len(self.groups))
        for (a, b), count in sorted(self.edges.items(), key=lambda e: abs(y[e[0][0]] - y[e[0][1]])):
            ya, yb = y[a] + self.BOX_H / 2, y[b] + self.BOX_H / 2
            bulge = 20 + 180 * abs(self.groups.index(a) - self.groups.index(b)) / span
            color = "#1f77b4" if yb > ya else "#d62728"  # forward flow down, backward flow up
            parts.append(f"<path d='M{right},{ya} C{right + bulge},{ya} {right + bulge},{yb} {right},{yb}' "
                         f"fill='none' stroke='{color}' stroke-opacity='0.6'><title>{html.escape(a)} → "
                         f"{html.escape(b)}: {count} tensors</title></path>")
        for g in self.groups:
            label = g if g.startswith("(") else f"{g}  [{self.ops[g]} ops]"
            fill = "#eeeeee" if g.startswith("(") else "#dbe9f6"
            parts.append(f"<rect x='{self.LEFT}' y='{y[g]}' width='{self.BOX_W}' height='{self.BOX_H}' rx='4' "
                         f"fill='{fill}' stroke='#555'/><text x='{self.LEFT + 8}' y='{y[g] + 19}' "
                         f"font-family='monospace' font-size='11'>{html.escape(label)}</text>")
        width = right + 220
        return (f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
                f"viewBox='0 0 {width} {height}'>{''.join(parts)}</svg>")

    def _repr_svg_(self) -> str:
        return self.svg()


# -- diff ---------------------------------------------------------------------------------
def _literals(node: torch.fx.Node) -> list:
    """The non-node arguments of an op node (Python values baked into the graph)."""
    return [x for x in pytree.tree_leaves((node.args, node.kwargs)) if not isinstance(x, torch.fx.Node)]


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and np.isnan(a) and np.isnan(b):
        return True
    return type(a) is type(b) and a == b


class GraphDiff:
    """What differs between two captured programs, most telling first: inputs (shape,
    dtype, added, removed), state, then the graph: ops added or removed, or, when the
    ops are the same, every literal that changed (`limit` of them listed)."""

    def __init__(self, a: StepReport, b: StepReport, limit: int = 10):
        self.changes: list[str] = []
        self._inputs(a, b)
        self._state(a, b)
        self._graph(a, b, limit)

    @property
    def identical(self) -> bool:
        return not self.changes

    def _inputs(self, a: StepReport, b: StepReport) -> None:
        ia, ib = dict(a.inputs), dict(b.inputs)
        for name, spec in ia.items():
            if name not in ib:
                self.changes.append(f"input {name} ({spec}) is gone")
            elif ib[name].shape != spec.shape:
                self.changes.append(f"input {name}: shape {list(spec.shape)} -> {list(ib[name].shape)}")
            elif ib[name].dtype != spec.dtype:
                self.changes.append(f"input {name}: dtype {spec.dtype} -> {ib[name].dtype}")
        for name, spec in ib.items():
            if name not in ia:
                self.changes.append(f"input {name} ({spec}) is new")

    def _state(self, a: StepReport, b: StepReport) -> None:
        sa, sb = a.captured.state_specs, b.captured.state_specs
        if len(sa) != len(sb):
            self.changes.append(f"state: {len(sa)} tensors -> {len(sb)}")
            return
        for i, (x, y) in enumerate(zip(sa, sb)):
            if x != y:
                self.changes.append(f"state tensor {i}: {x} -> {y}")

    def _graph(self, a: StepReport, b: StepReport, limit: int) -> None:
        na, nb = op_nodes(a.captured.module), op_nodes(b.captured.module)
        ops_a, ops_b = [_op_name(n) for n in na], [_op_name(n) for n in nb]
        if ops_a != ops_b:
            matcher = difflib.SequenceMatcher(a=ops_a, b=ops_b, autojunk=False)
            edits = [op for op in matcher.get_opcodes() if op[0] != "equal"]
            for tag, i1, i2, j1, j2 in edits[:limit]:
                where = module_path(na[i1]) if i1 < len(na) else module_path(nb[j1]) if j1 < len(nb) else ""
                self.changes.append(f"ops {tag}: {ops_a[i1:i2]} -> {ops_b[j1:j2]} (in {where})")
            if len(edits) > limit:
                self.changes.append(f"... and {len(edits) - limit} more op edits")
            return
        changed = [(x, y) for x, y in zip(na, nb)
                   if len(_literals(x)) != len(_literals(y))
                   or not all(_same(p, q) for p, q in zip(_literals(x), _literals(y)))]
        for x, y in changed[:limit]:
            self.changes.append(f"literal of {x.name} ({_op_name(x)}, in {module_path(x)}): "
                                f"{_fmt(_literals(x))} -> {_fmt(_literals(y))}")
        if len(changed) > limit:
            self.changes.append(f"... and {len(changed) - limit} more nodes with changed literals")
        if not self.changes and a.captured.graph_hash != b.captured.graph_hash:
            self.changes.append("tensor constants of the graph changed (same ops and literals)")

    def __repr__(self) -> str:
        if self.identical:
            return "the two captures are the same program"
        return "\n".join(["the two captures differ:", *(f"  - {c}" for c in self.changes)])

    def _repr_html_(self) -> str:
        if self.identical:
            return "<b>the two captures are the same program</b>"
        items = "".join(f"<li><code>{html.escape(c)}</code></li>" for c in self.changes)
        return f"<b>the two captures differ:</b><ul>{items}</ul>"


def _fmt(values: list) -> str:
    return ", ".join(repr(v) for v in values)


def diff(a: StepReport, b: StepReport, limit: int = 10) -> GraphDiff:
    """What changed from capture `a` to capture `b` (see `GraphDiff`)."""
    return GraphDiff(a, b, limit)


__all__ = ["StepReport", "Cost", "Memory", "StatePlacement", "describe_sharding", "OpTable", "IRText", "GraphDrawing", "GraphDiff", "diff",
           "module_path"]
