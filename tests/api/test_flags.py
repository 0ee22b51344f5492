"""`cstorch.backends` against the real flags (`inventory_2_10.json`): every flag with its
default, the real type and range errors, the flag-tree methods, and the flags that take
effect here (compress_weights, transfer_processes, micro_batch_size)."""
import re
import threading
import typing

import h5py
import pytest
import torch
import torch.nn as nn

import cstorch
from cstorch.backends import MAX_MESSAGE_LENGTH, backends
from cstorch.storage import layout

from .compat import INVENTORY

FLAGS = INVENTORY["flags"]


@pytest.fixture(autouse=True)
def default_flags():
    yield
    from cstorch._backend import _reset_backend

    _reset_backend()
    backends.reset()


def _group_and_name(path):
    node = backends
    *groups, name = path.split(".")
    for g in groups:
        node = getattr(node, g)
    return node, name


def test_the_real_constants():
    assert MAX_MESSAGE_LENGTH == INVENTORY["constants"]["MAX_MESSAGE_LENGTH"]


@pytest.mark.parametrize("path", sorted(FLAGS))
def test_every_real_flag_exists_with_its_default(path):
    group, name = _group_and_name(path)
    value = getattr(group, name)
    default = FLAGS[path].get("default")
    if isinstance(default, dict):  # a default made by a factory (INI(), DebugArgs())
        assert isinstance(value, dict) and value == {}
    else:
        assert value == default and type(value) is type(default)
    hint = FLAGS[path]["type"]
    if hint in ("int", "bool", "Optional[int]", "Optional[str]"):
        theirs = eval(hint, {"Optional": typing.Optional})
        assert group._flags[name].hint == theirs


@pytest.mark.parametrize("path, bad", [
    ("csx.performance.transfer_processes", "3"), ("csx.performance.compress_weights", 1),
    ("csx.precision.optimization_level", 1.0), ("csx.debug.retrace_every_iteration", "yes"),
    ("csx.debug.op_definition_module", 3), ("csx.debug.wgt_memory_gi", 2.5),
    ("csx.debug.fabric_type_blacklist", ["cs9"]), ("csx.performance.micro_batch_size", "fast"),
    ("csx.storage.s3.profile", 1), ("csx.cluster.auto_taint", None),
])
def test_a_value_of_the_wrong_type_is_the_real_type_error(path, bad):
    group, name = _group_and_name(path)
    before = getattr(group, name)
    with pytest.raises(TypeError, match=rf"Expected .* for `{name}`\. Got <class"):
        setattr(group, name, bad)
    assert getattr(group, name) == before


def _real_message(path, **values):
    """The real validator's message with its fields filled in, as a regex."""
    (template,) = [m.split(": ", 1)[1] for m in FLAGS[path]["errors"] if m.startswith("ValueError")]
    text = re.escape(template)
    for field, value in values.items():
        text = text.replace(re.escape("{" + field + "}"), re.escape(str(value)))
    return text


@pytest.mark.parametrize("path, bad, fields", [
    ("csx.performance.transfer_processes", 0, {"value": 0}),
    ("csx.performance.max_transfer_bytes", MAX_MESSAGE_LENGTH + 1,
     {"value": MAX_MESSAGE_LENGTH + 1, "MAX_MESSAGE_LENGTH": MAX_MESSAGE_LENGTH}),
    ("csx.performance.max_transfer_bytes", -1, {"value": -1, "MAX_MESSAGE_LENGTH": MAX_MESSAGE_LENGTH}),
    ("csx.precision.optimization_level", 3, {"value": 3, "self.name": "optimization_level"}),
    ("csx.performance.micro_batch_size", 0, {"micro_batch_size": 0}),
    ("csx.performance.micro_batch_size", {"search": {"min": 2}}, {"micro_batch_size": {"search": {"min": 2}}}),
])
def test_a_value_out_of_range_is_the_real_value_error(path, bad, fields):
    group, name = _group_and_name(path)
    with pytest.raises(ValueError, match=_real_message(path, **fields)):
        setattr(group, name, bad)


def test_accepted_values_and_what_is_kept():
    perf = backends.csx.performance
    for v in ("auto", "explore", None, 4):
        perf.micro_batch_size = v
        assert perf.micro_batch_size == v
    perf.micro_batch_size = {"explore": {"min": 2, "max": 8}}  # the bounds tune the wafer compiler's search
    assert perf.micro_batch_size == "explore"
    backends.csx.debug.ini = {"ws_opt_x": 1}
    assert backends.csx.debug.ini.ws_opt_x == 1
    backends.csx.debug.fabric_type_blacklist = ["cs2"]
    backends.csx.precision.optimization_level = 0
    assert cstorch.current_pol() == 0


def test_unknown_flags_and_groups_are_refused():
    with pytest.raises(AttributeError, match="has no flag 'bogus'"):
        backends.csx.debug.bogus = 1
    with pytest.raises(AttributeError, match="nested flag and cannot be set directly"):
        backends.csx.debug = {}


def test_tree_methods_default_context_and_load():
    perf = backends.csx.performance
    with perf:
        perf.transfer_processes = 9
        assert dict(perf)["transfer_processes"] == 9
    assert perf.transfer_processes == 5
    perf.transfer_processes = 7
    perf.transfer_processes = backends.DEFAULT
    assert perf.transfer_processes == 5
    backends.csx.load_flags({"performance": {"compress_weights": True}, "debug": {"drop_data": True}})
    assert perf.compress_weights and backends.csx.debug.drop_data
    assert backends.asdict()["csx"]["performance"]["compress_weights"] is True
    backends.reset()
    assert not perf.compress_weights and not backends.csx.debug.drop_data
    assert cstorch.backends is backends and cstorch.backends.csx is cstorch.backends.csx


def test_s3_profile_is_the_aws_profile_variable(monkeypatch):
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    backends.csx.storage.s3.profile = "team"
    import os

    assert os.environ["AWS_PROFILE"] == "team" and backends.csx.storage.s3.profile == "team"
    backends.csx.storage.s3.profile = None
    assert "AWS_PROFILE" not in os.environ


def test_changing_a_real_flag_during_a_run_is_refused():
    cstorch.backend("CPU")
    ex = cstorch.utils.data.DataExecutor(cstorch.utils.data.DataLoader(lambda: [torch.ones(1)] * 2), num_steps=2)
    for _ in ex:
        with pytest.raises(RuntimeError, match="Detected changes in the backend flags"):
            backends.csx.performance.micro_batch_size = 2
        backends.csx.performance.micro_batch_size = "auto"  # the same value is no change


# -- flags with an effect ----------------------------------------------------------------------
def test_compress_weights_is_the_compressed_attribute_of_saved_tensors(tmp_path):
    state = {"w": torch.arange(6.0).reshape(2, 3)}
    cstorch.save(state, tmp_path / "a.mdl")
    backends.csx.performance.compress_weights = True
    cstorch.save(state, tmp_path / "b.mdl")
    with h5py.File(tmp_path / "a.mdl") as a, h5py.File(tmp_path / "b.mdl") as b:
        assert a["w"].attrs["compressed"] == False and b["w"].attrs["compressed"] == True  # noqa: E712
        assert "32004" in a["w"]._filters and "32004" in b["w"]._filters  # LZ4 either way, as the real H5 writer
    assert torch.equal(cstorch.load(tmp_path / "b.mdl")["w"], state["w"])


def test_transfer_processes_is_the_save_thread_pool(tmp_path, monkeypatch):
    seen = set()
    original = layout.Entry.__init__

    def recording(self, *args, **kwargs):
        original(self, *args, **kwargs)
        payload = self.payload
        if payload is not None:
            def made():
                seen.add(threading.current_thread().name)
                return payload()
            self.payload = made

    monkeypatch.setattr(layout.Entry, "__init__", recording)
    backends.csx.performance.transfer_processes = 3
    state = {f"t{i}": torch.full((4,), float(i)) for i in range(12)}
    cstorch.save(state, tmp_path / "c.mdl")
    assert seen and all(name.startswith("cstorch-save") for name in seen) and len(seen) <= 3
    loaded = cstorch.load(tmp_path / "c.mdl")
    assert all(torch.equal(loaded[k], v) for k, v in state.items())


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, batch):
        x, y = batch
        return nn.functional.cross_entropy(self.fc(x), y)


def _train(device, micro_batch_size, tmp_path, accum=1):
    from cstorch._backend import _reset_backend
    from cstorch.trainer import Callback, Checkpoint, Logging, Trainer, TrainingLoop

    _reset_backend()
    backends.csx.performance.micro_batch_size = micro_batch_size
    forwards = []

    class Count(Callback):
        def on_before_forward(self, trainer, model, batch, args, kwargs):
            forwards.append(batch[0].shape[0])

    torch.manual_seed(0)
    data = [(torch.randn(8, 3), torch.randint(0, 2, (8,))) for _ in range(3)]
    trainer = Trainer(device=device, model_dir=str(tmp_path / f"{device}{micro_batch_size}{accum}"), seed=0,
                      model=_Net, optimizer=lambda m: cstorch.optim.SGD(m.parameters(), lr=0.5),
                      loop=TrainingLoop(num_steps=3, grad_accum_steps=accum), checkpoint=Checkpoint(),
                      logging=Logging(log_steps=10), callbacks=[Count()], loggers=[])
    trainer.fit(cstorch.utils.data.DataLoader(lambda: data))
    return {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}, forwards


def test_micro_batch_size_splits_the_compiled_train_step(tmp_path):
    whole, whole_forwards = _train("CSX", "auto", tmp_path)
    micro, micro_forwards = _train("CSX", 2, tmp_path)
    eager, _ = _train("CPU", 2, tmp_path)  # CPU: the flag is a CSX one; the whole batch
    assert whole_forwards == [8] and micro_forwards == [2, 2, 2, 2]  # CSX: the body runs once, at capture
    for k in whole:
        torch.testing.assert_close(micro[k], whole[k], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(eager[k], whole[k], rtol=1e-5, atol=1e-6)
    with pytest.warns(UserWarning, match="grad_accum_steps=2 is ignored on CSX"):
        ignored, forwards = _train("CSX", 4, tmp_path, accum=2)
    assert forwards == [4, 4]


def test_micro_batch_size_must_divide_the_batch(tmp_path):
    with pytest.raises(ValueError, match="micro_batch_size=3 must divide the batch"):
        _train("CSX", 3, tmp_path)


def test_every_flag_says_what_it_does_here():
    """The flag-tree page is generated from each flag's definition: every flag says whether
    it takes effect here, and has a text of its own or its group's; the cstorch-only flags
    are exactly those the real tree lacks."""
    from cstorch.backends import EFFECTS, OWN

    def walk(group):
        for name, flag in group._flags.items():
            yield group, name, flag
        for sub in group._groups.values():
            yield from walk(sub)

    own = set()
    for group, name, flag in walk(backends.csx):
        path = f"{group._path}.{name}"
        assert flag.effect in EFFECTS, path
        assert flag.doc or flag.differs or group._doc or group._differs, path
        if flag.effect == OWN:
            own.add(path[len("cstorch.backends."):])
    assert own == {"csx.performance.prefetch_batches", "csx.performance.progress", "csx.cluster.shard_state",
                   "csx.performance.steps_per_launch", "csx.performance.trace_repeated_layers",
                   "csx.performance.stack_repeated_layers_from"}
    assert own.isdisjoint(FLAGS)
