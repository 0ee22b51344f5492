"""Host-side reads and edits of training state between CSX steps act as on the CPU backend
(issue 20, item 1; `cstorch/run/host_edits.py`): in-place writes under no_grad, model and
optimizer `load_state_dict`, scheduler and scaler state loads, a Parameter replaced
everywhere it is held. Edits that would need another graph are a StaticGraphError that
names the tensor. Each run is compared with the CPU backend running the same script."""
import copy

import pytest
import torch
import torch.nn.functional as F

import cstorch
from cstorch._backend import _reset_backend

STEPS = 6
EDIT_AT = 3  # the edit runs after this step's call (0-based), before the next step


def _batches():
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(4, 5, generator=g), torch.randn(4, 3, generator=g)) for _ in range(STEPS)]


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(5, 8, bias=False)  # a bias before BatchNorm gets only rounding noise
        self.bn = torch.nn.BatchNorm1d(8)
        self.fc2 = torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(torch.tanh(self.bn(self.fc1(x))))


def run(backend_type: str, edit, optimizer="adamw", with_scaler=False):
    """Train STEPS steps; after step EDIT_AT (and after step 1, where `edit` may take a
    snapshot) call `edit(i, objects)`. Returns the final parameters, buffers and the
    optimizer state."""
    _reset_backend()
    torch.manual_seed(0)
    backend = cstorch.backend(backend_type)
    model = Net()
    compiled = cstorch.compile(model, backend)
    if optimizer == "adamw":
        opt = cstorch.optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.1)
    else:
        opt = cstorch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sched = cstorch.optim.StepLR(opt, 0.05, 2, 0.5)
    scaler = cstorch.amp.GradScaler(loss_scale="dynamic", init_scale=2.0 ** 10, steps_per_increase=2) \
        if with_scaler else None
    objects = dict(model=model, opt=opt, sched=sched, scaler=scaler, snapshots={})

    @cstorch.trace
    def step(x, y):
        loss = F.mse_loss(compiled(x), y)
        if scaler is not None:
            cstorch.amp.optimizer_step(loss, opt, scaler)
        else:
            loss.backward()
            opt.step()
            opt.zero_grad()
        sched.step()
        return loss

    losses = []
    loader = cstorch.utils.data.DataLoader(_batches)
    for i, (x, y) in enumerate(cstorch.utils.data.DataExecutor(loader, num_steps=STEPS)):
        losses.append(step(x, y))
        edit(i, objects)
    out = {f"model.{k}": v.detach().clone() for k, v in model.state_dict().items()}
    for pi, st in opt.state_dict()["state"].items():
        out.update({f"opt.{pi}.{k}": torch.as_tensor(v).clone() for k, v in st.items()})
    out["lr"] = torch.as_tensor(opt.param_groups[0]["lr"]).clone()
    out["losses"] = torch.stack([torch.as_tensor(float(loss.detach())) for loss in losses])
    if scaler is not None:
        out["scale"] = scaler.get_scale().clone()
    return out


def assert_same_as_cpu(edit, **kw):
    cpu = run("CPU", edit, **kw)
    csx = run("CSX", edit, **kw)
    untouched = run("CPU", lambda i, o: None, **kw)
    assert any(not torch.equal(cpu[k], untouched[k]) for k in cpu), "the edit changed nothing on CPU"
    for k, v in cpu.items():
        torch.testing.assert_close(csx[k], v, rtol=1e-5, atol=1e-6, msg=k)
    _reset_backend()


def test_in_place_writes_under_no_grad():
    """Relative edits (they read the device's newest values) and a partial one."""
    def edit(i, o):
        if i == EDIT_AT:
            with torch.no_grad():
                o["model"].fc1.weight.mul_(0.5)
                o["model"].fc2.bias[1:].zero_()
                o["model"].bn.running_var.add_(1.0)

    assert_same_as_cpu(edit)


def test_writes_through_data_and_reads_mid_run():
    def edit(i, o):
        if i == 1:
            o["snapshots"]["w"] = o["model"].fc2.weight.detach().clone()  # a read mid-run
        if i == EDIT_AT:
            o["model"].fc2.weight.data.copy_(o["snapshots"]["w"] * 2)
            o["model"].fc2.bias.data = torch.full((3,), 0.25)  # a new storage of the same shape

    assert_same_as_cpu(edit)


def test_model_and_optimizer_load_state_dict_mid_run():
    """Reloading a snapshot between stretches (read mid-run, loaded later)."""
    def edit(i, o):
        if i == 1:
            o["snapshots"]["model"] = copy.deepcopy(o["model"].state_dict())
            o["snapshots"]["opt"] = copy.deepcopy(o["opt"].state_dict())
        if i == EDIT_AT:
            o["model"].load_state_dict(o["snapshots"]["model"])
            o["opt"].load_state_dict(o["snapshots"]["opt"])

    assert_same_as_cpu(edit)


def test_scheduler_and_scaler_state_loads_mid_run():
    def edit(i, o):
        if i == 1:
            o["snapshots"]["sched"] = copy.deepcopy(o["sched"].state_dict())
            o["snapshots"]["scaler"] = copy.deepcopy(o["scaler"].state_dict())
        if i == EDIT_AT:
            o["sched"].load_state_dict(o["snapshots"]["sched"])
            o["scaler"].load_state_dict(o["snapshots"]["scaler"])

    assert_same_as_cpu(edit, with_scaler=True)


def test_weight_decay_assigned_between_steps():
    def edit(i, o):
        if i == EDIT_AT:
            o["opt"].param_groups[0]["weight_decay"] = 0.5

    assert_same_as_cpu(edit)


def test_a_parameter_replaced_everywhere_it_is_held():
    """A new Parameter object on the module, in the optimizer's param groups and as the
    key of its state: the compiled step follows it."""
    def edit(i, o):
        if i == EDIT_AT:
            model, opt = o["model"], o["opt"]
            old = model.fc2.weight
            new = torch.nn.Parameter(old.detach() * -1.0)
            model.fc2.weight = new
            for group in opt.param_groups:
                group["params"] = [new if p is old else p for p in group["params"]]
            opt.state[new] = opt.state.pop(old)
            o["snapshots"]["old"] = old

    assert_same_as_cpu(edit, optimizer="sgd")


def test_a_parameter_replaced_inside_the_param_list_and_a_new_group_key():
    """The param list edited in place (the list object kept, one item replaced) after one
    step and a key of the user's own added to the group after another: the compiled step
    follows the new Parameter, and the key is no graph change. The module's entry is set
    in its `_parameters` dict, which no registration hook sees: only the param list's
    items show the replacement."""
    def edit(i, o):
        model, opt = o["model"], o["opt"]
        if i == 1:
            opt.param_groups[0]["note"] = "warm"  # neither a hyper-parameter nor a graph constant
        if i == EDIT_AT:
            old = model.fc1.weight
            new = torch.nn.Parameter(old.detach() * 0.5)
            model.fc1._parameters["weight"] = new
            params = opt.param_groups[0]["params"]
            params[next(k for k, p in enumerate(params) if p is old)] = new
            opt.state[new] = opt.state.pop(old)

    assert_same_as_cpu(edit, optimizer="sgd")


@pytest.mark.parametrize("kind,match", [
    ("replaced on the module only", r"model\.fc2\.weight and optimizer0\.param\d+ were one tensor"),
    ("requires_grad_", r"model\.fc1\.weight had requires_grad=True .* now has requires_grad=False"),
    ("new shape", r"model\.fc2\.bias was compiled as float32\[3\] and is now float32\[4\]"),
])
def test_edits_that_change_the_graph_are_refused(kind, match):
    def edit(i, o):
        if i == EDIT_AT:
            model = o["model"]
            if kind == "replaced on the module only":  # on CPU the optimizer would go on updating the old one
                model.fc2.weight = torch.nn.Parameter(model.fc2.weight.detach().clone())
            elif kind == "requires_grad_":
                model.fc1.weight.requires_grad_(False)
            else:
                model.fc2.bias.data = torch.zeros(4)

    with pytest.raises(cstorch.StaticGraphError, match=match):
        run("CSX", edit)


def test_reads_between_steps_see_the_device_and_are_no_edits(monkeypatch):
    """Reading state between steps gives the values the CPU backend has at that point,
    uploads nothing, and leaves the step outputs (and staged batches) as in a run
    without reads."""
    import cstorch_jax

    uploads = []
    state_arrays = cstorch_jax.SingleDevice.state_arrays
    monkeypatch.setattr(cstorch_jax.SingleDevice, "state_arrays",
                        lambda self, tensors, names: uploads.extend(names) or state_arrays(self, tensors, names))

    def read(i, o):
        o["snapshots"][i] = [p.detach().clone() for p in o["model"].parameters()]
        o["snapshots"][f"lr{i}"] = float(o["opt"].param_groups[0]["lr"])

    reads = {}

    def keep(backend_type):
        def edit(i, o):
            read(i, o)
            reads.setdefault(backend_type, []).append(o["snapshots"][i] + [torch.tensor(o["snapshots"][f"lr{i}"])])
        return edit

    cpu = run("CPU", keep("CPU"))
    uploads.clear()
    csx = run("CSX", keep("CSX"))
    with_reads = list(uploads)
    uploads.clear()
    plain = run("CSX", lambda i, o: None)
    assert with_reads == uploads, "a read between steps made the next step upload state"
    for step_cpu, step_csx in zip(reads["CPU"], reads["CSX"]):
        for a, b in zip(step_csx, step_cpu):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    for k, v in cpu.items():
        torch.testing.assert_close(csx[k], v, rtol=1e-5, atol=1e-6, msg=k)
        torch.testing.assert_close(plain[k], csx[k], rtol=0, atol=0, msg=k)
