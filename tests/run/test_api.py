"""The cstorch facade: names, defaults and rules of the real API."""
import warnings

import pytest
import torch
import torch.nn as nn

import cstorch
from cstorch import BackendType
from cstorch.distributed import ClusterConfig


def test_cerebras_pytorch_alias_is_the_same_package():
    import cerebras.pytorch as cs
    import cerebras.pytorch.optim
    from cerebras.pytorch.utils.data import DataExecutor

    assert cs is cstorch
    assert cerebras.pytorch.optim is cstorch.optim
    assert DataExecutor is cstorch.utils.data.DataExecutor


def test_backend_types():
    assert BackendType.from_str("csx") is BackendType.CSX
    assert BackendType.from_str("XLA") is BackendType.CSX
    assert BackendType.from_str("cpu").is_cpu and BackendType.CSX.is_csx and not BackendType.GPU.is_cpu
    assert cstorch.backend() is None
    assert not cstorch.use_cs() and cstorch.current_torch_device() == torch.device("cpu")
    b = cstorch.backend("XLA")
    assert cstorch.backend() is b and b.is_csx and cstorch.use_cs()
    assert b.cluster_config == ClusterConfig()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert cstorch.current_backend() is b
    assert any(issubclass(x.category, DeprecationWarning) for x in w)


def test_backend_arguments():
    with pytest.raises(TypeError, match="no backend_type"):
        cstorch.backend(artifact_dir="x")
    with pytest.raises(ValueError, match="autocast"):
        cstorch.backend("CPU", mixed_precision=True)
    with pytest.raises(TypeError, match="unexpected keyword"):
        cstorch.backend("CSX", bogus=1)
    with pytest.raises(ValueError, match="num_csx"):
        cstorch.backend("CSX", cluster_config=ClusterConfig(num_csx=0))
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA"):
            cstorch.backend("GPU")


def test_current_backend_without_one():
    with pytest.raises(RuntimeError, match="No active Cerebras backend"):
        cstorch.current_backend(raise_warning=False)
    assert cstorch.current_backend(raise_exception=False, raise_warning=False) is None


def test_cluster_config_defaults_and_validation():
    c = ClusterConfig()
    assert (c.num_csx, c.max_wgt_servers, c.num_workers_per_csx, c.job_priority, c.automount) == (1, 0, 1, "p2", True)
    assert c.get_default("num_csx") == 1
    for bad in (dict(num_csx=-1), dict(job_priority="p9"), dict(mgmt_address="nohost"), dict(job_time_sec=0),
                dict(job_labels=["novalue"])):
        with pytest.raises(ValueError):
            ClusterConfig(**bad)
    ClusterConfig(mgmt_address="coordinator:1234", job_labels=["team=ml"])


def test_compile_returns_a_callable_with_the_models_methods():
    model = nn.Linear(2, 2)
    compiled = cstorch.compile(model)  # creates the default CPU backend
    assert cstorch.backend().is_cpu
    x = torch.randn(3, 2)
    assert torch.equal(compiled(x), model(x))
    compiled.eval()
    assert not model.training
    assert compiled.device == torch.device("cpu")
    assert model.device == torch.device("cpu")  # set on the module too, as the real API does
    with pytest.raises(TypeError):
        cstorch.compile(lambda x: x)


def test_compile_step_is_an_alias_of_trace():
    assert cstorch.compile_step is cstorch.trace


def test_cpu_backend_runs_the_body_every_step():
    cstorch.backend("CPU")
    calls = []

    @cstorch.trace
    def step(x):
        calls.append(1)
        return x * 2

    loader = cstorch.utils.data.DataLoader(lambda: [torch.ones(2)] * 3)
    outs = [step(x) for x in cstorch.utils.data.DataExecutor(loader, num_steps=3)]
    assert len(calls) == 3 and all(torch.equal(o, torch.full((2,), 2.0)) for o in outs)


def test_csx_backend_runs_the_body_once():
    cstorch.backend("CSX")
    calls = []

    @cstorch.trace
    def step(x):
        calls.append(1)
        return x * 2

    loader = cstorch.utils.data.DataLoader(lambda: [torch.ones(2), torch.full((2,), 3.0), torch.ones(2)])
    outs = [step(x) for x in cstorch.utils.data.DataExecutor(loader, num_steps=3)]
    assert len(calls) == 1
    assert [o.tolist() for o in outs] == [[2.0, 2.0], [6.0, 6.0], [2.0, 2.0]]
    assert step.executable is not None and len(step.executable.graph_hash) == 64


def test_data_executor_steps_and_checkpoint_schedule():
    cstorch.backend("CPU")
    loader = cstorch.utils.data.DataLoader(lambda: [torch.tensor(i) for i in range(3)])
    ex = cstorch.utils.data.DataExecutor(loader, num_steps=7, checkpoint_steps=3)
    seen = [int(b) for b in ex]  # the loader restarts when exhausted
    assert seen == [0, 1, 2, 0, 1, 2, 0]
    assert [s for s in range(7) if ex.checkpoint_step(s)] == [2, 5, 6]
    assert len(cstorch.utils.data.DataExecutor(loader)) == 3  # num_steps defaults to len(loader)
    none = cstorch.utils.data.DataExecutor(loader, num_steps=4, checkpoint_steps=0)
    assert not any(none.checkpoint_step(s) for s in range(4))
    with pytest.raises(ValueError, match="num_steps >= 1"):
        cstorch.utils.data.DataExecutor(loader, num_steps=0)
    with pytest.raises(ValueError, match="checkpoint_steps must be"):
        cstorch.utils.data.DataExecutor(loader, num_steps=2, checkpoint_steps=1.5)
    with pytest.raises(RuntimeError):
        cstorch.utils.data.DataExecutor(loader, num_steps=2, checkpoint_steps=-1)
    endless = cstorch.utils.data.DataLoader(lambda: iter(lambda: torch.ones(1), None))
    with pytest.raises(ValueError, match="provide num_steps"):
        cstorch.utils.data.DataExecutor(endless)
    with pytest.raises(TypeError):
        cstorch.utils.data.DataLoader("not callable")


def test_empty_dataloader_is_an_error():
    cstorch.backend("CPU")
    loader = cstorch.utils.data.DataLoader(lambda: [])
    with pytest.raises(RuntimeError, match="did not return any values"):
        for _ in cstorch.utils.data.DataExecutor(loader, num_steps=2):
            pass


def test_current_executor():
    cstorch.backend("CPU")
    with pytest.raises(RuntimeError, match="data executor"):
        cstorch.current_executor()
    ex = cstorch.utils.data.DataExecutor(cstorch.utils.data.DataLoader(lambda: [1, 2]), num_steps=2)
    for _ in ex:
        assert cstorch.current_executor() is ex


def test_step_closure_without_backend_runs_at_once():
    got = []
    cstorch.step_closure(got.append)(5)
    assert got == [5]


def test_optimizer_validation():
    p = [nn.Parameter(torch.randn(2))]
    with pytest.raises(ValueError, match="Invalid learning rate"):
        cstorch.optim.SGD(p, lr=-1)
    with pytest.raises(ValueError, match="Nesterov"):
        cstorch.optim.SGD(p, lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="beta"):
        cstorch.optim.AdamW(p, betas=(1.0, 0.9))
    opt = cstorch.optim.AdamW(p)
    assert set(opt.state[p[0]]) == {"step", "exp_avg", "exp_avg_sq"}  # preinitialised, torch.optim.AdamW's keys
    with pytest.raises(TypeError):
        cstorch.optim.Optimizer(p, {})  # abstract


def test_state_the_step_never_touches_is_not_an_input():
    """A second registered model and its optimizer are neither inputs of the executable nor
    frozen into it: switching that model to eval mode is not a graph change."""
    b = cstorch.backend("CSX")
    torch.manual_seed(0)
    used, other = nn.Linear(4, 2), nn.Linear(3, 3)
    compiled = cstorch.compile(used, b)
    cstorch.compile(other, b)
    opt = cstorch.optim.SGD(used.parameters(), lr=0.1, momentum=0.9)
    cstorch.optim.SGD(other.parameters(), lr=0.1, momentum=0.9)

    @cstorch.trace
    def step(x):
        loss = compiled(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    loader = cstorch.utils.data.DataLoader(lambda: [torch.randn(2, 4)] * 3)
    for i, x in enumerate(cstorch.utils.data.DataExecutor(loader, num_steps=3)):
        if i == 1:
            other.eval()
        step(x)
    captured = step.executable.captured
    names = step.program.state.names
    inputs = {names[i] for i in (*captured.mutated, *captured.read_only)}
    assert inputs == {"model0.weight", "model0.bias", "optimizer0.state.0.momentum_buffer",
                      "optimizer0.state.1.momentum_buffer", "optimizer0.param_groups.0.lr",
                      "optimizer0.param_groups.0.weight_decay"}
    assert {names[i] for i in captured.unused} >= {"model1.weight", "model1.bias"}


def test_two_runs_reuse_one_executable_and_continue_like_eager():
    from cstorch._backend import _reset_backend

    results = {}
    for kind in ("CPU", "CSX"):
        _reset_backend()
        torch.manual_seed(0)
        b = cstorch.backend(kind)
        model = nn.Linear(4, 2)
        compiled = cstorch.compile(model, b)
        opt = cstorch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        traces = []

        @cstorch.trace
        def step(x):
            traces.append(1)
            loss = compiled(x).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss

        g = torch.Generator().manual_seed(1)
        batches = [torch.randn(3, 4, generator=g) for _ in range(4)]
        loader = cstorch.utils.data.DataLoader(lambda: batches)
        for _ in range(2):  # two runs; the host holds the state in between
            for x in cstorch.utils.data.DataExecutor(loader, num_steps=4):
                step(x)
            with torch.no_grad():
                model.weight.mul_(0.5)  # a host-side change between runs is picked up by the next run
        results[kind] = (len(traces), {k: v.clone() for k, v in model.state_dict().items()})
    assert results["CPU"][0] == 8 and results["CSX"][0] == 1
    for k, v in results["CPU"][1].items():
        torch.testing.assert_close(results["CSX"][1][k], v, rtol=1e-5, atol=1e-6)
