"""The 1.8 API's run machinery: `configure` (once, before compile; what the backend
becomes), `compile` backends, the DataLoader's step counts and passes, the checkpoint
steps on which weights can be fetched, and the closures and compile_step around them."""
from __future__ import annotations

import os

import pytest
import torch

import cerebras_pytorch.experimental as cstorch18
import cstorch
from cstorch._backend import _reset_backend

DEVICES = {"CSX": "wse_ws", "CPU": "cpu"}


def batches_fn(n: int = 6, batch_size: int = 2, scale: float = 1.0):
    x = torch.arange(n * batch_size * 3, dtype=torch.float32).reshape(n * batch_size, 3) * scale
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(-1)), batch_size=batch_size)


def first_values(batches) -> list[float]:
    return [float(b[0][0, 0]) for b in batches]


# -- configure / compile ------------------------------------------------------------------
def test_configure_is_called_once_and_before_compile(tmp_path):
    cstorch18.configure(model_dir=str(tmp_path))
    with pytest.raises(RuntimeError, match="already called in this process.*separate processes"):
        cstorch18.configure(model_dir=str(tmp_path))
    cstorch18.compile(torch.nn.Linear(2, 2), backend="cpu")

    cstorch.legacy18._reset()  # a new script in this process, whose backend exists already
    with pytest.raises(RuntimeError, match="before the model is built and compiled, but a CPU backend already"):
        cstorch18.configure()


def test_configure_becomes_the_csx_backend(tmp_path):
    mount = str(tmp_path)
    cstorch18.configure(model_dir=str(tmp_path / "out"), compile_dir="cc", compile_only=True, checkpoint_steps=5,
                        num_csx=1, max_wgt_servers=3, mount_dirs=[mount], python_paths=[mount], transfer_processes=2,
                        num_workers_per_csx=2, job_labels=["team=ml"], max_act_per_csx=2,
                        mgmt_address="mgmt:9000", job_time_sec=60)
    compiled = cstorch18.compile(torch.nn.Linear(2, 2), backend="WSE_WS")
    b = cstorch.backend()
    assert b.is_csx and b.compile_only and not b.validate_only and b.compile_dir == "cc"
    assert os.fspath(b.artifact_dir) == os.path.abspath(tmp_path / "out")
    cfg = b.cluster_config
    assert (cfg.num_csx, cfg.max_wgt_servers, cfg.num_workers_per_csx, cfg.max_act_per_csx) == (1, 3, 2, 2)
    assert (cfg.job_labels, cfg.python_paths) == (["team=ml"], [mount])
    assert [getattr(m, "path", m) for m in cfg.mount_dirs] == [mount]
    assert (cfg.mgmt_address, cfg.job_time_sec) == ("mgmt:9000", 60)
    assert cstorch.backends.csx.performance.transfer_processes == 2
    cstorch.backends.csx.performance.transfer_processes = cstorch.backends.DEFAULT
    assert compiled.backend.is_wse() and not compiled.backend.is_cpu() and compiled.backend.name == "WSE_WS"
    assert compiled.backend.is_csx  # the 2.x backend's attributes too
    assert compiled.in_features == 2  # and the model's


def test_compile_without_configure_uses_the_1_8_defaults():
    cstorch18.compile(torch.nn.Linear(2, 2))
    b = cstorch.backend()
    assert b.is_csx and b.compile_dir == "/opt/cerebras/cached_compile" and b.is_e2e_execution
    assert (b.cluster_config.max_wgt_servers, b.cluster_config.max_act_per_csx) == (24, 1)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"checkpoint_steps": -1}, ValueError, "checkpoint_steps must be an integer >= 0"),
    ({"num_csx": 0}, ValueError, "num_csx must be an integer >= 1"),
    ({"compile_only": True, "validate_only": True}, ValueError, "at most one of compile_only and validate_only"),
    ({"compile_only": "yes"}, TypeError, "compile_only must be True or False"),
    ({"mount_dirs": "/data"}, TypeError, "mount_dirs must be a list of strings"),
    ({"job_labels": ["no-equals-sign"]}, ValueError, "invalid label"),  # ClusterConfig's own checks
    ({"mgmt_address": "no-port"}, ValueError, "<name>:<port>"),
    ({"num_systems": 2}, TypeError, "unexpected keyword argument 'num_systems'"),
])
def test_configure_checks_its_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        cstorch18.configure(**kwargs)


def test_compile_backends():
    with pytest.raises(NotImplementedError, match="pipeline execution is not supported"):
        cstorch18.compile(torch.nn.Linear(2, 2), backend="wse_pipeline")
    with pytest.raises(ValueError, match="unknown backend 'tpu'"):
        cstorch18.compile(torch.nn.Linear(2, 2), backend="tpu")
    compiled = cstorch18.compile(torch.nn.Linear(2, 2), backend="CPU")
    assert cstorch.backend().is_cpu and compiled.backend.is_cpu() and compiled.backend.name == "CPU"
    with pytest.raises(RuntimeError, match="needs a CSX backend, but this process already runs on CPU"):
        cstorch18.compile(torch.nn.Linear(2, 2), backend="wse_ws")
    _reset_backend()
    cstorch.legacy18._reset()
    cstorch18.configure(validate_only=True)
    with pytest.raises(ValueError, match="compile with backend=\"wse_ws\", not 'cpu'"):
        cstorch18.compile(torch.nn.Linear(2, 2), backend="cpu")


# -- DataLoader ---------------------------------------------------------------------------
def test_dataloader_steps_and_passes():
    cstorch18.compile(torch.nn.Linear(3, 1), backend="cpu")
    dl = cstorch18.utils.data.DataLoader(batches_fn, num_steps=8, max_steps=5, n=3, scale=2.0)
    assert (dl.total_steps, dl.num_epochs, len(dl)) == (5, 1, 5)
    assert dl.batch_size == 2 and len(dl.dataset) == 6  # the input_fn's loader's attributes
    assert first_values([next(iter(dl))]) == [0.0]  # a peek does not use up a step
    assert first_values(dl) == [0.0, 12.0, 24.0, 0.0, 12.0]  # input_fn(n=3, scale=2.0), restarted when exhausted
    assert list(dl) == []  # every step ran

    epochs = cstorch18.utils.data.DataLoader(batches_fn, num_epochs=3, steps_per_epoch=2, max_steps=5)
    assert (epochs.total_steps, epochs.num_epochs, len(epochs)) == (5, 3, 2)
    assert [first_values(epochs) for _ in range(epochs.num_epochs)] == [[0.0, 6.0], [0.0, 6.0], [0.0]]

    resumed = cstorch18.utils.data.DataLoader(batches_fn, max_steps=5, initial_step=3)
    assert resumed.total_steps == 2


@pytest.mark.parametrize("kwargs, match", [
    ({"num_steps": 2, "num_epochs": 1}, "mutually exclusive"),
    ({}, "give num_steps, num_epochs"),
    ({"num_steps": 0}, "num_steps must be an integer >= 1"),
    ({"initial_step": -1, "num_steps": 1}, "initial_step must be an integer >= 0"),
])
def test_dataloader_checks_its_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        cstorch18.utils.data.DataLoader(batches_fn, **kwargs)


@pytest.mark.parametrize("every", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("initial_step", [0, 2])
def test_checkpoint_steps_rule_and_its_executor_schedule(every, initial_step):
    if every:
        cstorch18.configure(checkpoint_steps=every)
    dl = cstorch18.utils.data.DataLoader(batches_fn, max_steps=initial_step + 10, initial_step=initial_step)
    rule = {s for s in range(10) if s == 9 or (every and ((initial_step + s) % every == 0
                                                         or (initial_step + s + 1) % every == 0))}
    assert {s for s in range(10) if dl.is_checkpoint_step(s)} == rule
    for first, steps in ((0, 10), (3, 5), (4, 6)):  # a pass's schedule counts from the pass's first step
        assert set(dl._schedule(first, steps)) == {s - first for s in rule if first <= s < first + steps}
    if every == 4 and initial_step == 0:
        assert sorted(rule) == [0, 3, 4, 7, 8, 9]


# -- weights on checkpoint steps ------------------------------------------------------------
class Line(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 1)

    def forward(self, x):
        return self.fc(x).squeeze(-1)


def _train_saving_every_step(tmp_path, device: str):
    """7 SGD steps with checkpoint_steps=3; a closure tries to save after every step."""
    cstorch18.configure(checkpoint_steps=3)
    torch.manual_seed(0)
    model = Line()
    compiled = cstorch18.compile(model, backend=DEVICES[device])
    optimizer = cstorch18.optim.configure_optimizer(optimizer_type="SGD", params=model.parameters(), lr=1e-3)
    saved, refused, in_loop = {}, {}, []

    @cstorch18.compile_step
    def training_step(batch):
        x, y = batch
        loss = torch.nn.functional.mse_loss(compiled(x), y)
        cstorch18.amp.optimizer_step(loss, optimizer, None)
        return loss

    @cstorch18.step_closure
    def try_save(step):
        path = str(tmp_path / f"{device}_{step}.mdl")
        try:
            cstorch18.save({"model": model.state_dict()}, path)
            saved[step] = cstorch.load(path)["model"]
        except RuntimeError as e:
            refused[step] = str(e)

    dl = cstorch18.utils.data.DataLoader(batches_fn, num_steps=7, n=7)
    for i, batch in enumerate(dl):
        training_step(batch)
        try_save(i)
        try:  # a save in the loop body follows the same rule
            cstorch18.save({"model": model.state_dict()}, str(tmp_path / f"{device}_loop_{i}.mdl"))
            in_loop.append(i)
        except RuntimeError:
            pass
    return model, saved, refused, in_loop


def test_weights_are_fetched_only_on_checkpoint_steps(tmp_path):
    results = {}
    for device in DEVICES:  # two 1.8 scripts, one after the other
        _reset_backend()
        cstorch.legacy18._reset()
        results[device] = _train_saving_every_step(tmp_path, device)
    torch.manual_seed(0)
    eager = Line()
    opt = torch.optim.SGD(eager.parameters(), lr=1e-3)
    expected = {}
    for step, (x, y) in enumerate(batches_fn(7)):
        opt.zero_grad()
        torch.nn.functional.mse_loss(eager(x), y).backward()
        opt.step()
        expected[step] = {k: v.clone() for k, v in eager.state_dict().items()}
    for device, (model, saved, refused, in_loop) in results.items():
        assert sorted(saved) == in_loop == [0, 2, 3, 5, 6]  # i % 3 == 0, (i + 1) % 3 == 0, the last step
        assert sorted(refused) == [1, 4]
        assert "possible only on the checkpoint steps set with cstorch.configure(checkpoint_steps=N)" in refused[1]
        assert "Step 1 is not one" in refused[1]
        for step, state in saved.items():  # the weights after that step
            for name, value in state.items():
                torch.testing.assert_close(torch.as_tensor(value), expected[step][name], rtol=1e-5, atol=1e-6)
    cstorch18.save({"model": results["CSX"][0].state_dict()}, str(tmp_path / "after.mdl"))  # outside the loop


@pytest.mark.parametrize("device", DEVICES)
def test_closures_in_the_step_and_checkpoint_closures(tmp_path, device):
    cstorch18.configure(checkpoint_steps=3)
    model = Line()
    compiled = cstorch18.compile(model, backend=DEVICES[device])
    seen, checkpointed, refused = [], [], []

    @cstorch18.step_closure
    def inside(loss):
        seen.append(float(loss))
        try:
            model.state_dict()
        except RuntimeError as e:
            refused.append(str(e))

    @cstorch18.checkpoint_closure
    def checkpoint(step):
        checkpointed.append((step, model.fc.weight.detach().clone()))

    @cstorch18.compile_step
    def eval_step(batch):
        loss = torch.nn.functional.mse_loss(compiled(batch[0]), batch[1])
        inside(loss)
        return loss

    dl = cstorch18.utils.data.DataLoader(batches_fn, num_steps=5)
    with torch.no_grad():
        for i, batch in enumerate(dl):
            eval_step(batch)
            checkpoint(i)
    assert len(seen) == 5 and len(refused) == 5 and "that the compile_step itself called" in refused[0]
    assert [s for s, _ in checkpointed] == [0, 2, 3, 4]
    checkpoint("after")  # outside the loop it runs at once
    assert checkpointed[-1][0] == "after"

    with pytest.raises(TypeError, match="was given the DataLoader itself; a compile_step takes the batch"):
        eval_step(dl)  # the guide's training example has this typo


def test_checkpoint_closure_skips_other_steps():
    cstorch18.configure(checkpoint_steps=4)
    cstorch18.compile(Line(), backend="cpu")
    steps = []
    closure = cstorch18.checkpoint_closure(steps.append)
    for i, _ in enumerate(cstorch18.utils.data.DataLoader(batches_fn, num_steps=6)):
        closure(i)
    assert steps == [0, 3, 4, 5]


def test_compile_step_runs_in_the_dataloader_loop_on_csx():
    compiled = cstorch18.compile(Line(), backend="wse_ws")
    step = cstorch18.compile_step(lambda x: compiled(x).sum())
    with pytest.raises(RuntimeError, match="runs inside the loop over a cstorch.utils.data.DataLoader"):
        step(torch.ones(2, 3))
