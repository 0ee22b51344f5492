"""Exploring a compiled step: IR texts, costs against an analytic FLOP count, memory
with the donated state aliased, the op histogram, the drawing and the diff of two
captures."""
from __future__ import annotations

import importlib.util
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch

import cstorch
import cstorch_jax
from cstorch_jax.explore import diff

ROOT = Path(__file__).resolve().parents[2]
B, T, D, HEADS, LAYERS, VOCAB = 8, 64, 128, 4, 2, 256


def _gpt_module():
    spec = importlib.util.spec_from_file_location("examples_gpt", ROOT / "examples" / "gpt.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _gpt_step():
    backend = cstorch.backend("CSX")
    torch.manual_seed(0)
    model = _gpt_module().ByteGPT(T, D, HEADS, LAYERS)
    compiled = cstorch.compile(model, backend)
    opt = cstorch.optim.AdamW(model.parameters(), lr=1e-3)

    @cstorch.trace
    def train_step(tokens, targets, scale):
        loss = compiled(tokens, targets) * scale
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    g = torch.Generator().manual_seed(0)
    batch = (torch.randint(0, VOCAB, (B, T), generator=g), torch.randint(0, VOCAB, (B, T), generator=g))
    return model, train_step, batch


def _analytic_training_flops() -> float:
    """Matmul FLOPs of forward + backward (2x forward): 2 per multiply-add of every
    linear layer over B*T tokens, plus attention's QK^T and AV."""
    linear_weights = LAYERS * (D * 3 * D + D * D + D * 4 * D + 4 * D * D) + D * VOCAB
    forward = 2 * B * T * linear_weights + LAYERS * 2 * (2 * B * T * T * D)
    return 3 * forward


@pytest.fixture
def gpt():
    model, step, batch = _gpt_step()
    return model, step, batch, step.lower(*batch, 1.0)


@pytest.fixture(scope="module")
def gpt_reports():
    """The GPT step lowered for its batch (twice), half the batch, and another Python
    scale: plain objects that outlive the backend, shared by the tests that only read."""
    from cstorch._backend import _reset_backend

    _reset_backend()
    model, step, (tokens, targets) = _gpt_step()
    reports = {"base": step.lower(tokens, targets, 1.0), "same": step.lower(tokens, targets, 1.0),
               "half": step.lower(tokens[:4], targets[:4], 1.0), "scaled": step.lower(tokens, targets, 0.5)}
    _reset_backend()
    return model, reports


def test_gpt_costs_memory_and_ops(gpt_reports):
    model, reports = gpt_reports
    report = reports["base"]
    cost = report.cost
    analytic = _analytic_training_flops()
    assert abs(cost.flops - analytic) / analytic < 0.10, (cost.flops, analytic)
    assert cost.bytes_accessed > 0 and cost.intensity == pytest.approx(cost.flops / cost.bytes_accessed)

    # the op histogram covers every op node of the captured graph exactly once
    nodes = [n for n in report.captured.module.graph.nodes if n.op == "call_function"]
    assert report.ops.total == report.num_ops == len(nodes)
    assert sum(report.ops.by_op().values()) == sum(report.ops.by_module().values()) == len(nodes)
    assert report.ops.by_op()["aten.mm.default"] > 0
    assert any(m.startswith("ByteGPT.blocks.1") for m in report.ops.by_module())

    # the donated state (parameters, AdamW's two moments and step counters, the RNG key) is aliased
    mem = report.memory
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    assert mem.donated_bytes >= 3 * param_bytes
    assert mem.alias_bytes == mem.donated_bytes
    assert mem.argument_bytes >= mem.donated_bytes


def test_gpt_texts_summary_and_drawing(gpt_reports):
    report = gpt_reports[1]["base"]
    assert 'i64[8, 64]' in report.graph and "aten.mm" in report.graph
    assert "dot_general" in report.jaxpr
    assert "stablehlo.dot_general" in report.stablehlo
    assert report.hlo.startswith("HloModule")
    for text in (report.graph, report.hlo):
        assert text._repr_html_().startswith("<details>")
    summary = report.summary()
    assert summary.as_dict()["ATen ops (kinds)"].startswith(str(report.num_ops))
    assert "<table>" in summary._repr_html_() and "<table>" in report.ops._repr_html_()
    svg = ET.fromstring(report.draw().svg())
    labels = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}text")]
    assert labels[0] == "(inputs)" and labels[-1] == "(outputs)"
    assert any(label.startswith("ByteGPT.blocks.0") for label in labels), labels


def test_diff_names_the_changed_input_or_literal(gpt_reports):
    reports = gpt_reports[1]
    report = reports["base"]
    assert diff(report, reports["same"]).identical
    shape = diff(report, reports["half"])
    assert shape.changes[0] == "input argument [0]: shape [8, 64] -> [4, 64]"
    literal = diff(report, reports["scaled"])
    assert literal.changes and all("1.0 -> 0.5" in c for c in literal.changes), literal.changes
    assert "aten.mul.Tensor" in literal.changes[0]


def test_diff_names_a_dtype_change():
    cstorch.backend("CSX")
    model = torch.nn.Linear(4, 1)
    compiled = cstorch.compile(model, cstorch.backend())

    @cstorch.trace
    def step(x):
        return compiled(x.float()).sum()

    a = step.lower(torch.ones(2, 4))
    b = step.lower(torch.ones(2, 4, dtype=torch.float16))
    assert diff(a, b).changes[0] == "input argument [0]: dtype torch.float32 -> torch.float16"


def test_report_of_a_step_that_ran(gpt):
    _, step, batch, lowered = gpt
    with pytest.raises(RuntimeError, match="has not been compiled yet.*lower"):
        step.report
    loader = cstorch.utils.data.DataLoader(lambda: [batch])
    for tokens, targets in cstorch.utils.data.DataExecutor(loader, num_steps=1):
        step(tokens, targets, 1.0)
    assert diff(lowered, step.report).identical
    assert step.graph == step.report.graph and step.cost == lowered.cost


def test_lower_needs_the_csx_backend():
    cstorch.backend("CPU")

    @cstorch.trace
    def step(x):
        return x.sum()

    with pytest.raises(RuntimeError, match="CSX"):
        step.lower(torch.ones(2))


def test_jit_function_report():
    f = cstorch_jax.jit(lambda a, b: a @ b)
    report = f.lower(torch.ones(16, 32), torch.ones(32, 8))
    assert report.cost.flops == pytest.approx(2 * 16 * 32 * 8, rel=0.05)
    assert report.ops.by_op()["aten.mm.default"] == 1
    assert f.num_executables == 1


@pytest.mark.parametrize("mode", ["compile_only", "validate_only"])
def test_compile_only_compiles_without_running(mode):
    backend = cstorch.backend("CSX", **{mode: True})
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    compiled = cstorch.compile(model, backend)
    opt = cstorch.optim.SGD(model.parameters(), lr=0.5)
    seen = []

    @cstorch.step_closure
    def record(loss):
        seen.append(loss.item())

    @cstorch.trace
    def step(x):
        loss = compiled(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    loader = cstorch.utils.data.DataLoader(lambda: [torch.ones(3, 4)] * 5)
    outputs = []
    for x in cstorch.utils.data.DataExecutor(loader, num_steps=5):  # forced to 1 step
        outputs.append(step(x))
        record(outputs[-1])
    assert len(outputs) == 1 and seen == []
    assert outputs[0].shape == () and outputs[0].dtype == torch.float32
    with pytest.raises(cstorch_jax.MaterializationError, match=f"{mode} mode.*step.report"):
        outputs[0].item()
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k
    assert step.report.num_ops > 0 and step.report.memory.alias_bytes > 0


def test_a_backend_reset_forgets_earlier_optimizers():
    """A captured step lifts the hyper-parameters of the optimizers made since the last
    reset only, however long earlier ones stay referenced (it made two lowerings of one
    step differ depending on when the garbage collector ran)."""
    from cstorch._backend import _reset_backend

    earlier = cstorch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1)  # still referenced
    _reset_backend()
    backend = cstorch.backend("CSX")
    model = torch.nn.Linear(4, 1)
    compiled = cstorch.compile(model, backend)
    opt = cstorch.optim.SGD(model.parameters(), lr=0.1)

    @cstorch.trace
    def step(x):
        loss = compiled(x).sum()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    report = step.lower(torch.ones(2, 4))
    names = [name for name, _ in report.inputs]
    assert names == ["argument [0]"], names  # the learning rate and weight decay are state
    # lifted: the model's weight and bias, the optimizer's lr and weight_decay; nothing of `earlier`
    assert len(report.captured.state_specs) == 4, report.captured.state_specs
    assert earlier.param_groups[0]["lr"] == 0.1
