"""The Trainer: hook order, numerics against eager torch, logging, checkpoints, errors."""
from __future__ import annotations

import csv
import os
import warnings

import pytest
import torch
import torch.nn.functional as F
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import cstorch
from cstorch.trainer import (
    Callback,
    Checkpoint,
    CSVLogger,
    KeepNCheckpoints,
    Logging,
    MixedPrecision,
    ModelEvalMetrics,
    TensorBoardLogger,
    Trainer,
    TrainingLoop,
    ValidationCallback,
)
from cstorch.trainer.loggers import Logger
from toy import Net, cosine, data, loader, sgd

HOOKS = [name for name in dir(ValidationCallback) if name.startswith(("on_", "pre_", "post_", "setup", "run_",
                                                                      "preprocess_", "postprocess_"))]


class Recorder(ValidationCallback):
    """Records the name of every hook called on it."""

    def __init__(self):
        self.calls: list[str] = []

    def __getattribute__(self, name):
        if name in HOOKS:
            calls = object.__getattribute__(self, "calls")
            return lambda trainer, *a, **k: calls.append(name)
        return object.__getattribute__(self, name)


def _trainer(device, tmp_path, loop, callbacks=(), **kw):
    kw.setdefault("loggers", [])
    return Trainer(device=device, model_dir=str(tmp_path / "model"), model=Net, optimizer=sgd(), seed=1,
                   schedulers=cosine(20), loop=loop, callbacks=list(callbacks), **kw)


# -- the documented hook order (cstorch/trainer/trainer.py) ----------------------------------
IN_TRAIN_STEP = ["on_train_step_start", "on_before_forward", "on_after_forward", "on_before_backward",
                 "on_after_backward", "on_before_optimizer_step", "on_after_optimizer_step",
                 "on_before_optimizer_zero_grad", "on_after_optimizer_zero_grad", "on_before_scheduler_step",
                 "on_after_scheduler_step", "on_train_step_end"]
IN_VALIDATE_STEP = ["on_validate_step_start", "on_before_forward", "on_after_forward", "on_validate_step_end"]
SAVE = ["on_save_checkpoint", "postprocess_checkpoint", "on_after_save_checkpoint"]


def expected_fit(steps, eval_frequency, eval_steps, checkpoint_steps, step_traced_once):
    seq = ["on_enter_fit", "on_fit_start"]
    first_train = first_eval = True
    for start in range(0, steps, eval_frequency):
        seq += ["on_enter_train", "on_train_start"]
        for g in range(start + 1, start + eval_frequency + 1):
            seq.append("on_train_batch_start")
            if first_train or not step_traced_once:
                seq += IN_TRAIN_STEP
            first_train = False
            seq.append("on_train_batch_end")
            if g % checkpoint_steps == 0 or g == steps:
                seq += SAVE
        seq += ["on_train_end", "on_enter_validate", "on_validate_start"]
        for _ in range(eval_steps):
            seq.append("on_validate_batch_start")
            if first_eval or not step_traced_once:
                seq += IN_VALIDATE_STEP
            first_eval = False
            seq.append("on_validate_batch_end")
        seq += ["on_validate_end", "run_validation"]
    return seq + ["on_fit_end"]


@pytest.mark.parametrize("device", ["CPU", "CSX"])
def test_hook_sequence_of_a_fit_with_validation(device, tmp_path):
    rec = Recorder()
    trainer = _trainer(device, tmp_path, TrainingLoop(max_steps=4, eval_frequency=2, eval_steps=2), [rec],
                       checkpoint=Checkpoint(steps=2))
    assert rec.calls == ["pre_setup", "setup", "post_setup"]
    rec.calls.clear()
    trainer.fit(loader(), loader(32, seed=1))
    assert rec.calls == expected_fit(4, 2, 2, 2, step_traced_once=device == "CSX")
    assert trainer.global_step == 4


def _eager_reference(steps, batch_size=8, lr=0.1, n=64, seed=0):
    """The same training as eager torch (no cstorch): SGD momentum 0.9, CosineDecayLR."""
    torch.manual_seed(1)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    x, y = data(n, seed)
    batches = []
    g = torch.Generator().manual_seed(seed)
    torch_loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=batch_size,
                                               shuffle=True, drop_last=True, generator=g)
    while len(batches) < steps:
        batches.extend(torch_loader)
    for k, (xb, yb) in enumerate(batches[:steps]):
        for group in opt.param_groups:
            group["lr"] = 0.01 + 0.5 * (0.1 - 0.01) * (1 + torch.cos(torch.tensor(torch.pi * k / 20))).item()
        F.cross_entropy(model.body(xb), yb).backward()
        opt.step()
        opt.zero_grad()
    return model.state_dict()


@pytest.mark.parametrize("device,grad_accum", [("CPU", 1), ("CSX", 1), ("CPU", 2), ("CSX", 4)])
def test_fit_parameters_match_eager_torch(device, grad_accum, tmp_path):
    """10 steps through two validations (the stream continues across executors), with the
    batch split into micro-batches or not: the parameters equal eager torch's."""
    trainer = _trainer(device, tmp_path, TrainingLoop(max_steps=10, eval_frequency=4, eval_steps=2,
                                                      grad_accum_steps=grad_accum))
    trainer.fit(loader(), loader(32, seed=1))
    reference = _eager_reference(10)
    for name, value in reference.items():
        torch.testing.assert_close(trainer.model.state_dict()[name], value, rtol=1e-5, atol=1e-6,
                                   msg=lambda m: f"{name}: {m}")


def test_grad_accumulation_with_an_indivisible_batch_fails_before_compiling(tmp_path):
    trainer = _trainer("CSX", tmp_path, TrainingLoop(max_steps=4, grad_accum_steps=3))
    with pytest.raises(ValueError, match=r"grad_accum_steps=3 .* has 8 samples: make the batch size a multiple "
                                         r"of 3"):
        trainer.fit(loader())
    assert trainer._traced_train.program is None  # nothing was captured or compiled


def _scalars(summary_dir):
    acc = EventAccumulator(str(summary_dir))  # a pathlib.Path, as the real Trainer's
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_tensorboard_and_csv_hold_the_logged_scalars(tmp_path):
    trainer = _trainer("CSX", tmp_path, TrainingLoop(max_steps=7, eval_frequency=4, eval_steps=2),
                       [ModelEvalMetrics()], logging=Logging(log_steps=3), loggers=[TensorBoardLogger(), CSVLogger()],
                       precision=MixedPrecision(fp16_type="float16", loss_scaling_factor="dynamic",
                                                initial_loss_scale=2.0 ** 10))
    losses = {}

    class LossRecorder(Callback):
        def on_train_batch_end(self, trainer, model, outputs, batch, batch_idx):
            losses[trainer.global_step] = outputs["loss"]

    trainer.callbacks.insert(-1, LossRecorder())
    trainer.fit(loader(), loader(32, seed=1))
    trainer.finalize()
    scalars = _scalars(trainer.summary_dir)
    assert [s for s, _ in scalars["loss"]] == [3, 6, 7]  # log steps, and the last step
    for step, value in scalars["loss"]:
        assert value == pytest.approx(float(losses[step]), rel=1e-6)
    lr = dict(scalars["lr"])  # the rate this step used: CosineDecayLR at step - 1
    for step in (3, 6, 7):
        expected = 0.01 + 0.5 * 0.09 * (1 + torch.cos(torch.tensor(torch.pi * (step - 1) / 20))).item()
        assert lr[step] == pytest.approx(expected, rel=1e-5)
    assert [v for _, v in scalars["loss_scale"]] == [2.0 ** 10] * 3  # dynamic scaling, no overflow
    # samples/s since the previous log step of the same stretch between validations
    assert [s for s, _ in scalars["throughput"]] == [7] and scalars["throughput"][0][1] > 0
    assert [s for s, _ in scalars["eval/loss"]] == [4, 7]
    assert [s for s, _ in scalars["eval/accuracy"]] == [4, 7]
    assert all(0.0 <= v <= 1.0 for _, v in scalars["eval/accuracy"])
    with open(os.path.join(trainer.summary_dir, "metrics.csv")) as f:
        rows = list(csv.DictReader(f))
    from_csv = {(int(r["step"]), r["name"]): float(r["value"]) for r in rows}
    for tag, series in scalars.items():
        for step, value in series:
            assert from_csv[(step, tag)] == pytest.approx(value, rel=1e-6)


def test_log_metrics_inside_the_step_and_name_scope(tmp_path):
    class Norm(Callback):
        def on_train_step_end(self, trainer, model, outputs, batch):
            with trainer.name_scope("norms"):
                trainer.log_metrics(weight=model.body[0].weight.norm())

    trainer = _trainer("CSX", tmp_path, TrainingLoop(max_steps=4, eval_frequency=None), [Norm()],
                       logging=Logging(log_steps=2), loggers=[CSVLogger()])
    norms = {}

    class Snapshot(Callback):
        def on_train_batch_end(self, trainer, model, outputs, batch, batch_idx):
            cstorch.backend().run.sync_state_to_host()
            norms[trainer.global_step] = model.body[0].weight.norm().item()

    trainer.callbacks.insert(-1, Snapshot())
    trainer.fit(loader())
    trainer.finalize()
    with open(trainer.get_callback(CSVLogger).path) as f:
        logged = {int(r["step"]): float(r["value"]) for r in csv.DictReader(f) if r["name"] == "norms/weight"}
    assert sorted(logged) == [2, 4]
    for step, value in logged.items():
        assert value == pytest.approx(norms[step], rel=1e-5)


def test_callbacks_see_unscaled_gradients_before_the_optimizer_step(tmp_path):
    """A gradient norm logged in on_before_optimizer_step (as the Model Zoo's ComputeNorm)
    under float16 with dynamic loss scaling equals the float32 run's, within float16's
    precision: the gradients are unscaled before the hook, as the real trainer's precision
    callback does (the loss scale 2^10 made it 1024x too large)."""
    class GradNorm(Callback):
        def on_before_optimizer_step(self, trainer, model, optimizer):
            grads = [p.grad for p in model.parameters() if p.grad is not None]
            trainer.log_metrics(grad_norm=torch.norm(torch.stack([torch.norm(g.float()) for g in grads])))

    logged = {}
    for name, precision in (("fp32", None), ("fp16", MixedPrecision(fp16_type="float16", loss_scaling_factor="dynamic",
                                                                     initial_loss_scale=2.0 ** 10))):
        kw = {"precision": precision} if precision is not None else {}
        trainer = _trainer("CSX", tmp_path / name, TrainingLoop(max_steps=2, eval_frequency=None), [GradNorm()],
                           logging=Logging(log_steps=1), loggers=[CSVLogger()], **kw)
        trainer.fit(loader())
        trainer.finalize()
        with open(trainer.get_callback(CSVLogger).path) as f:
            logged[name] = {int(r["step"]): float(r["value"]) for r in csv.DictReader(f) if r["name"] == "grad_norm"}
        cstorch.amp.precision._reset()
    assert sorted(logged["fp16"]) == [1, 2]
    assert logged["fp16"][1] == pytest.approx(logged["fp32"][1], rel=2e-2)


@pytest.mark.parametrize("device", ["CPU", "CSX"])
def test_values_logged_inside_a_step_share_its_record_with_its_loss_and_lr(tmp_path, device):
    """One record per log step: a value logged inside the step (as the Model Zoo's
    summarize_scalar does from the forward) beside that step's loss and learning rate, not
    in a record of its own with the learning rate of a later step."""
    class Norm(Callback):
        def on_train_step_end(self, trainer, model, outputs, batch):
            trainer.log_metrics(weight_norm=model.body[0].weight.norm())

    class Records(Logger):
        def __init__(self):
            self.records = []

        def log_metrics(self, metrics, step):
            self.records.append((step, dict(metrics)))

    records = Records()
    trainer = _trainer(device, tmp_path, TrainingLoop(max_steps=3, eval_frequency=None), [Norm()],
                       logging=Logging(log_steps=1), loggers=[records])
    trainer.fit(loader())
    assert [step for step, _ in records.records] == [1, 2, 3]
    for step, metrics in records.records:
        assert {"weight_norm", "loss", "lr"} <= metrics.keys(), metrics
        # the rate this step used: CosineDecayLR at step - 1
        expected = 0.01 + 0.5 * 0.09 * (1 + torch.cos(torch.tensor(torch.pi * (step - 1) / 20))).item()
        assert metrics["lr"] == pytest.approx(expected, rel=1e-5)


def test_checkpoints_naming_keep_n_latest_and_validate_all(tmp_path):
    rec = Recorder()
    trainer = _trainer("CPU", tmp_path, TrainingLoop(max_steps=6, eval_frequency=None), [KeepNCheckpoints(2), rec],
                       checkpoint=Checkpoint(steps=2))
    trainer.fit(loader())
    ckpt = trainer.checkpoint
    assert [step for step, _ in ckpt.checkpoints()] == [4, 6]
    assert os.path.basename(ckpt.latest()) == "checkpoint_6.mdl"
    state = cstorch.load(ckpt.latest())
    assert state["global_step"] == 6 and state["dataloader"] == {"batches_consumed": 6}
    for name, value in trainer.model.state_dict().items():
        torch.testing.assert_close(state["model"][name], value)
    assert ckpt.path_for(6) != ckpt.latest() and os.path.basename(ckpt.path_for(6)).startswith("checkpoint_6_")
    rec.calls.clear()
    trainer.validate_all(loader(32, seed=1), loop=None)
    assert rec.calls.count("on_before_load_checkpoint") == 2 and rec.calls.count("on_validate_end") == 2


class CountSteps(Callback):
    """A callback with state: the train batches it has seen, across resumes."""

    def __init__(self):
        self.seen = 0

    def on_train_batch_end(self, trainer, model, outputs, batch, batch_idx):
        self.seen += 1

    def state_dict(self):
        return {"seen": self.seen}

    def load_state_dict(self, state_dict):
        self.seen = state_dict["seen"]


def test_callback_state_is_saved_in_checkpoints_and_restored_on_resume(tmp_path):
    first = CountSteps()
    _trainer("CPU", tmp_path, TrainingLoop(max_steps=4, eval_frequency=None), [first],
             checkpoint=Checkpoint(steps=2)).fit(loader())
    state = cstorch.load(str(tmp_path / "model" / "checkpoint_4.mdl"))
    assert state["callbacks"] == {"CountSteps": {"seen": 4}}
    cstorch._backend._reset_backend()
    again = CountSteps()
    _trainer("CPU", tmp_path, TrainingLoop(max_steps=6, eval_frequency=None), [again],
             checkpoint=Checkpoint(steps=2)).fit(loader())
    assert again.seen == 6  # 4 restored from checkpoint_4, then 2 more


def test_two_callbacks_with_state_under_one_key_are_refused_before_training(tmp_path):
    with pytest.raises(ValueError, match="both have checkpoint state under the key 'CountSteps'"):
        _trainer("CPU", tmp_path, TrainingLoop(max_steps=2, eval_frequency=None), [CountSteps(), CountSteps()])


def test_fit_autoloads_the_latest_checkpoint_and_continues_to_max_steps(tmp_path):
    first = _trainer("CPU", tmp_path, TrainingLoop(max_steps=4, eval_frequency=None), checkpoint=Checkpoint(steps=2))
    first.fit(loader())
    cstorch._backend._reset_backend()
    again = _trainer("CPU", tmp_path, TrainingLoop(max_steps=6, eval_frequency=None), checkpoint=Checkpoint(steps=2))
    again.fit(loader())
    assert again.global_step == 6
    for name, value in _eager_reference(6).items():
        torch.testing.assert_close(again.model.state_dict()[name], value, rtol=1e-5, atol=1e-6)


def test_hook_errors_keep_their_type_and_name_the_callback_and_hook(tmp_path):
    class Broken(Callback):
        def on_fit_start(self, trainer, *args):
            raise KeyError("boom")

    trainer = _trainer("CPU", tmp_path, TrainingLoop(max_steps=2), [Broken()])
    with pytest.raises(KeyError, match="boom") as caught:
        trainer.fit(loader())
    assert caught.value.__notes__ == ["Encountered error when calling Broken.on_fit_start"]


def test_an_engine_error_in_a_traced_hook_keeps_its_type(tmp_path):
    """A hook inside the CSX step that reads a value the static graph cannot give (a
    tensor's value as a Python bool) raises the engine's own error type, which a user can
    catch as such."""
    class ReadsAValue(Callback):
        def on_after_forward(self, trainer, model, outputs, batch):
            if outputs["loss"] > 0:  # data-dependent Python control flow
                pass

    trainer = _trainer("CSX", tmp_path, TrainingLoop(max_steps=2, eval_frequency=None), [ReadsAValue()])
    with pytest.raises(cstorch.MaterializationError) as caught:
        trainer.fit(loader())
    assert "Encountered error when calling ReadsAValue.on_after_forward" in caught.value.__notes__


@pytest.mark.parametrize("kwargs,error,message", [
    (dict(model_dir=None), ValueError, "model_dir is a required argument"),
    (dict(device="CPU", backend="make"), ValueError, "Exactly one of device and backend"),
    (dict(device="TPU"), ValueError, "device must be one of"),
    (dict(model=None), ValueError, "model is a required argument"),
    (dict(callbacks=[Checkpoint()]), ValueError, "core callback"),
    (dict(optimizer="instance", model=Net), ValueError, "needs the model instance"),
    (dict(sparsity={"algorithm": "static"}), NotImplementedError, "sparsity"),
    (dict(schedulers=cosine(4)), ValueError, "schedulers were given without an optimizer"),
    (dict(device="CPU", backend=None, existing="CSX"), ValueError, "different device types"),
    (dict(device=None, backend="other"), ValueError, "not the process's current backend"),
])
def test_bad_arguments_fail_before_anything_is_built(kwargs, error, message, tmp_path):
    args = dict(device="CSX", model_dir=str(tmp_path / "m"), model=Net(), optimizer=None, seed=0)
    args.update(kwargs)
    if args.get("backend") == "make":
        args["backend"] = cstorch.backend("CPU")
    if args.pop("existing", None):
        cstorch.backend("CSX")
    if args.get("backend") == "other":
        args["backend"] = cstorch.Backend(cstorch.BackendType.CPU)
    if args.get("optimizer") == "instance":
        args["optimizer"] = cstorch.optim.SGD(Net().parameters(), lr=0.1)
    backend_before = cstorch.backend()
    with pytest.raises(error, match=message):
        Trainer(**args)
    assert cstorch.backend() is backend_before
    assert not os.path.exists(tmp_path / "m")


def test_loop_arguments_are_checked():
    with pytest.raises(ValueError, match="needs the training length"):
        TrainingLoop()
    with pytest.raises(ValueError, match="not both"):
        TrainingLoop(num_steps=2, num_epochs=1)
    with pytest.raises(ValueError, match="eval_frequency"):
        TrainingLoop(num_steps=2, eval_frequency=1.5)
    with pytest.raises(ValueError, match="grad_accum_steps"):
        TrainingLoop(num_steps=2, grad_accum_steps=0)
    with pytest.raises(ValueError, match="exactly once"):
        Checkpoint(checkpoint_name="ckpt.mdl")
    with pytest.raises(ValueError, match="not both"):
        MixedPrecision(max_gradient_norm=1.0, max_gradient_value=1.0)


def test_a_second_trainer_of_another_device_type_is_refused(tmp_path):
    _trainer("CPU", tmp_path, TrainingLoop(max_steps=1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="Cannot instantiate multiple trainers with different device types"):
            _trainer("CSX", tmp_path, TrainingLoop(max_steps=1))


def test_progress_bar_shows_loss_and_rate(tmp_path, capsys):
    from cstorch.trainer import ProgressLogger

    trainer = _trainer("CSX", tmp_path, TrainingLoop(max_steps=4, eval_frequency=None), loggers=[ProgressLogger(True)])
    trainer.fit(loader())
    err = capsys.readouterr().err
    assert "4/4" in err and "loss=" in err and ("step/s" in err or "s/step" in err)


def _fit_with_dropout(tmp_path, seed):
    cstorch._backend._reset_backend()
    trainer = Trainer(device="CSX", model_dir=str(tmp_path / f"seed{seed}"), model=lambda: Net(dropout=0.5),
                      optimizer=sgd(), seed=seed, loop=TrainingLoop(max_steps=3), loggers=[])
    trainer.fit(loader())
    return trainer.model.state_dict()


def test_the_seed_makes_runs_repeatable(tmp_path):
    first, again, other = (_fit_with_dropout(tmp_path / str(i), seed) for i, seed in enumerate((1, 1, 2)))
    assert all(torch.equal(first[k], again[k]) for k in first)
    assert not all(torch.equal(first[k], other[k]) for k in first)


def test_model_zoo_import_paths_are_the_same_objects():
    import cerebras.modelzoo
    import cstorch.trainer
    from cerebras.modelzoo.trainer.callbacks import Checkpoint as ZooCheckpoint

    assert cerebras.modelzoo.Trainer is Trainer
    assert ZooCheckpoint is Checkpoint
    assert cerebras.modelzoo.trainer is cstorch.trainer


def test_is_log_step_and_is_final_iteration_describe_the_step_being_run(tmp_path):
    seen = []

    class Probe(Callback):
        def on_train_batch_start(self, trainer, model, batch, batch_idx):
            seen.append(("start", trainer.is_log_step, trainer.is_final_iteration))

        def on_train_batch_end(self, trainer, model, outputs, batch, batch_idx):
            seen.append(("end", trainer.is_log_step, trainer.is_final_iteration))

    trainer = _trainer("CPU", tmp_path, TrainingLoop(max_steps=5, eval_frequency=None), [Probe()],
                       logging=Logging(log_steps=2))
    trainer.fit(loader())
    logs = [2, 4, 5]
    assert seen == [(when, step in logs, step == 5) for step in range(1, 6) for when in ("start", "end")]


def test_checkpoints_of_another_version_are_refused_unless_told(tmp_path):
    trainer = _trainer("CPU", tmp_path, TrainingLoop(max_steps=2, eval_frequency=None))
    trainer.fit(loader())
    state = cstorch.load(trainer.checkpoint.latest())
    state = {k: v for k, v in state.items()}
    state["__metadata__"] = [{"version": "1.9.2", "model_name": "Net"}]
    path = str(tmp_path / "old.mdl")
    cstorch.save(state, path)
    with pytest.raises(ValueError, match=r"written by version 1.9.2.*strict_version=False"):
        trainer.load_checkpoint(path)
    trainer.checkpoint.strict_version = False
    trainer.load_checkpoint(path)
    assert trainer.global_step == 2


def test_mixed_precision_of_one_trainer_does_not_leak_into_the_next(tmp_path):
    _trainer("CSX", tmp_path / "a", TrainingLoop(max_steps=1), precision=MixedPrecision(fp16_type="bfloat16"))
    assert cstorch.amp.mixed_precision() and cstorch.amp.get_half_dtype() == torch.bfloat16
    _trainer("CSX", tmp_path / "b", TrainingLoop(max_steps=1))
    assert not cstorch.amp.mixed_precision()


def test_compile_only_compiles_one_train_and_one_validation_step(tmp_path):
    rec = Recorder()
    backend = cstorch.backend("CSX", compile_only=True)
    trainer = Trainer(backend=backend, model_dir=str(tmp_path / "model"), model=Net, optimizer=sgd(), seed=1,
                      loop=TrainingLoop(max_steps=8, eval_frequency=4, eval_steps=2), callbacks=[rec], loggers=[],
                      checkpoint=Checkpoint(steps=2))
    trainer.fit(loader(), loader(32, seed=1))
    assert trainer._traced_train.program is not None and trainer._traced_validate.program is not None
    assert rec.calls.count("on_train_batch_start") == 1 and rec.calls.count("on_validate_batch_start") == 1
    assert trainer.checkpoint.checkpoints() == []


def _counting_loader(calls):
    x, y = data(64, 0)

    def input_fn():
        calls.append(1)
        return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8, drop_last=True)

    return cstorch.utils.data.DataLoader(input_fn)


def test_the_train_loader_is_built_once_unless_an_epoch_count_needs_its_length(tmp_path):
    calls = []
    trainer = _trainer("CPU", tmp_path / "steps", TrainingLoop(max_steps=3, eval_frequency=None))
    trainer.fit(_counting_loader(calls))
    assert trainer.global_step == 3 and len(calls) == 1
    cstorch._backend._reset_backend()
    calls.clear()
    trainer = _trainer("CPU", tmp_path / "epochs", TrainingLoop(num_epochs=2, eval_frequency=None))
    trainer.fit(_counting_loader(calls))
    assert trainer.global_step == 2 * 8  # 64 samples, batches of 8


FULL_DISK_RUN = '''
import os, resource, signal, sys
sys.path.insert(0, sys.argv[2])
from cstorch.trainer import Callback, Checkpoint, Trainer, TrainingLoop
from toy import Net, loader, sgd


class FillTheDisk(Callback):
    """After the first checkpoint, writes past half its size fail (EFBIG, as ENOSPC would)."""

    def on_after_save_checkpoint(self, trainer, ckpt_path):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        limit = os.path.getsize(ckpt_path) // 2
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))


Trainer(device="CPU", model_dir=sys.argv[1], model=Net, optimizer=sgd(), seed=1, loggers=[],
        loop=TrainingLoop(num_steps=3), checkpoint=Checkpoint(steps=1), callbacks=[FillTheDisk()]).fit(loader())
'''


def test_a_run_on_a_full_disk_ends_with_the_error_and_its_last_checkpoint(tmp_path):
    """Issue 49: the run whose checkpoint cannot be written exits with status 1 and the save's
    error (it used to die of SIGSEGV at exit, HDF5 flushing the failed file's datasets again);
    its last good checkpoint loads, and no temporary file is left."""
    import subprocess
    import sys
    from pathlib import Path

    here = Path(__file__).resolve().parent
    model_dir = tmp_path / "model"
    proc = subprocess.run([sys.executable, "-c", FULL_DISK_RUN, str(model_dir), str(here)], capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, PYTHONPATH=str(here.parents[1])))
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-3000:])
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("OSError: [Errno 27] Cannot write the checkpoint") and "checkpoint_2.mdl" in last, last
    assert "earlier checkpoints are untouched" in last, last
    checkpoints = sorted(p.name for p in model_dir.iterdir() if p.name.startswith("checkpoint_"))
    assert checkpoints == ["checkpoint_1.mdl"]
    state = cstorch.load(model_dir / "checkpoint_1.mdl")
    assert state["global_step"] == 1 and set(state["model"]) == set(Net().state_dict())
