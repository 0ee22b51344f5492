"""cstorch.trainer.config and .registry: YAML loading, legacy conversion, validation
errors (each mistake its own message, raised before any backend exists), name
resolution, and building a Trainer from a dict (no training here)."""
import textwrap

import pytest

import cstorch
from cstorch.trainer import build, config, registry
from cstorch.trainer.config import ConfigError

pytestmark = pytest.mark.usefixtures("no_backend")




@pytest.fixture
def clean_registry():
    """The registry is process-wide: names a test registers are removed afterwards."""
    saved = {kind: dict(table) for kind, table in registry._REGISTRY.items()}
    yield
    for kind, table in registry._REGISTRY.items():
        table.clear()
        table.update(saved[kind])


def good_trainer(tmp_path):
    return {
        "init": {
            "device": "CPU",
            "model_dir": str(tmp_path / "model_dir"),
            "seed": 1,
            "model": {"name": "toy.py:Toy", "width": 4},
            "optimizer": {"AdamW": {"lr": 0.01, "weight_decay": 0.1}},
            "schedulers": [{"SequentialLR": {"schedulers": [
                {"LinearLR": {"initial_learning_rate": 0.0, "end_learning_rate": 0.01, "total_iters": 2}},
                {"CosineDecayLR": {"initial_learning_rate": 0.01, "end_learning_rate": 0.0, "total_iters": 6}},
            ]}}],
            "precision": {"enabled": False, "max_gradient_norm": 1.0},
            "loop": {"max_steps": 8, "eval_frequency": 4, "eval_steps": 2, "grad_accum_steps": 2},
            "checkpoint": {"steps": 4},
            "logging": {"log_steps": 2},
            "callbacks": [{"ModelEvalMetrics": {}}],
            "loggers": [{"CSVLogger": {}}],
        },
        "fit": {
            "train_dataloader": {"data_processor": "toy.py:ToyData", "batch_size": 8},
            "val_dataloader": {"data_processor": "toy.py:ToyData", "batch_size": 8, "split": "val"},
        },
    }


# --------------------------------------------------------------------------- loading
def test_load_params_reads_exponent_floats_and_rejects_duplicates(tmp_path):
    p = tmp_path / "p.yaml"
    p.write_text("trainer:\n  init:\n    optimizer: {SGD: {lr: 1e-3}}\n")
    assert config.load_params(p)["trainer"]["init"]["optimizer"]["SGD"]["lr"] == pytest.approx(1e-3)
    p.write_text("trainer:\n  init: {}\n  init: {}\n")
    with pytest.raises(ConfigError, match="duplicate key 'init'"):
        config.load_params(p)
    p.write_text("trainer: [unclosed\n")
    with pytest.raises(ConfigError, match="is not valid YAML"):
        config.load_params(p)
    with pytest.raises(ConfigError, match="does not exist"):
        config.load_params(tmp_path / "missing.yaml")


# --------------------------------------------------------------------------- legacy
LEGACY = {
    "train_input": {"data_processor": "Digits", "batch_size": 32, "shuffle": True},
    "eval_input": {"data_processor": "Digits", "batch_size": 64, "split": "val"},
    "model": {"name": "digits", "hidden_sizes": [64], "mixed_precision": True, "fp16_type": "bfloat16"},
    "optimizer": {
        "optimizer_type": "adamw",
        "weight_decay": 0.01,
        "learning_rate": [
            {"scheduler": "Linear", "initial_learning_rate": 0.0, "end_learning_rate": 1e-3, "total_iters": 10},
            {"scheduler": "CosineDecay", "initial_learning_rate": 1e-3, "end_learning_rate": 0.0,
             "total_iters": 90},
        ],
        "loss_scaling_factor": "dynamic",
        "max_gradient_norm": 1.0,
    },
    "runconfig": {
        "max_steps": 100, "eval_steps": 5, "eval_frequency": 50, "checkpoint_steps": 50, "log_steps": 10,
        "model_dir": "out", "seed": 7, "checkpoint_path": "out/checkpoint_50.mdl", "target_device": "CSX",
        "num_csx": 2, "compile_only": False,
    },
}


def test_convert_legacy_full():
    expected = {"trainer": {
        "init": {
            "loop": {"max_steps": 100, "eval_steps": 5, "eval_frequency": 50},
            "checkpoint": {"steps": 50},
            "logging": {"log_steps": 10},
            "model_dir": "out",
            "seed": 7,
            "backend": {"backend_type": "CSX", "compile_only": False, "cluster_config": {"num_csx": 2}},
            "model": {"name": "digits", "hidden_sizes": [64]},
            "optimizer": {"AdamW": {"weight_decay": 0.01}},
            "schedulers": [{"learning_rate": LEGACY["optimizer"]["learning_rate"]}],
            "precision": {"enabled": True, "fp16_type": "bfloat16", "loss_scaling_factor": "dynamic",
                          "max_gradient_norm": 1.0},
        },
        "fit": {"train_dataloader": LEGACY["train_input"], "val_dataloader": LEGACY["eval_input"],
                "ckpt_path": "out/checkpoint_50.mdl"},
        "validate": {"val_dataloader": LEGACY["eval_input"], "ckpt_path": "out/checkpoint_50.mdl"},
        "validate_all": {"val_dataloaders": [LEGACY["eval_input"]], "ckpt_paths": "out/checkpoint_50.mdl"},
    }}
    assert config.is_legacy(LEGACY)
    assert config.convert_legacy(LEGACY) == expected
    assert LEGACY["optimizer"]["optimizer_type"] == "adamw"  # input untouched


def test_convert_legacy_number_lr_and_cpu_device():
    out = config.convert_legacy({"optimizer": {"optimizer_type": "SGD", "learning_rate": 0.1, "momentum": 0.9},
                                 "runconfig": {"target_device": "cpu", "num_steps": 3}}, model_name="m")
    assert out["trainer"]["init"] == {"optimizer": {"SGD": {"lr": 0.1, "momentum": 0.9}}, "device": "CPU",
                                      "loop": {"num_steps": 3}, "model": {"name": "m"}}


@pytest.mark.parametrize("params, message", [
    ({"runconfig": {"max_step": 10}}, "runconfig.max_step has no equivalent.*max_steps"),
    ({"runconfig": {}, "train_inptu": {}}, "Unknown key <top level>.train_inptu.*train_input"),
    ({"optimizer": {"learning_rate": 0.1}}, "optimizer.optimizer_type"),
])
def test_convert_legacy_rejects_unmapped_keys(params, message):
    with pytest.raises(ConfigError, match=message):
        config.convert_legacy(params)


# --------------------------------------------------------------------------- validation errors
def _set(d, dotted, value):
    keys = [int(k) if k.isdigit() else k for k in dotted.split(".")]
    for k in keys[:-1]:
        d = d[k]
    if value is _DELETE:
        del d[keys[-1]]
    else:
        d[keys[-1]] = value


_DELETE = object()

BAD = [
    ("init.modle", {}, "Unknown key trainer.init.modle .*Did you mean 'model'"),
    ("init.loop.max_step", 8, "Unknown key trainer.init.loop.max_step: TrainingLoop .*'max_steps'"),
    ("fit.train_dataloder", {}, "Unknown key trainer.fit.train_dataloder.*'train_dataloader'"),
    ("init.backend", {"backend_type": "CSX"}, "trainer.init.device and trainer.init.backend are mutually exclusive"),
    ("init.model_dir", None, "model_dir is a required argument"),
    ("init.loop.grad_accum_steps", 3, r"batch_size \(8\) is not divisible by trainer.init.loop.grad_accum_steps \(3\)"),
    ("init.optimizer", {"AdamWW": {"lr": 0.1}}, "unknown optimizer 'AdamWW'.*'AdamW'"),
    ("init.optimizer.AdamW.beta1", 0.9, "older format.*beta1 -> betas"),
    ("fit.train_dataloader.data_processor", "NoSuchProcessor", "Unknown data processor 'NoSuchProcessor'"),
    ("fit.train_dataloader.batch_sise", 8,
     "Unknown key trainer.fit.train_dataloader.batch_sise: ToyData.*'batch_size'"),
    ("init.model.widht", 4, "Unknown key trainer.init.model.widht: Toy .*'width'"),
    ("init.schedulers", [{"CosineDecay": {}}], "unknown scheduler 'CosineDecay'.*'CosineDecayLR'"),
    ("init.callbacks", [{"ModelEvalMetric": {}}], "Unknown callback 'ModelEvalMetric'.*'ModelEvalMetrics'"),
    ("init.loop.eval_frequency", -1, "trainer.init.loop: eval_frequency must be"),
    ("init.callbacks", [{"TrainingLoop": {}}], r"callbacks\[0\].TrainingLoop: TrainingLoop is a core callback"),
    ("init.loggers", [{"ModelEvalMetrics": {}}], r"loggers\[0\].ModelEvalMetrics: ModelEvalMetrics is not a Logger"),
    ("init.schedulers.0.SequentialLR.milestones", [1, 2],
     r"trainer.init.schedulers\[0\].SequentialLR.milestones must be a list of 1 step number"),
    ("init.schedulers.0.SequentialLR.schedulers.0.LinearLR.total_iters", _DELETE,
     r"schedulers\[0\].LinearLR: LinearLR needs the argument\(s\) total_iters"),
]


@pytest.mark.parametrize("key, value, message", BAD, ids=[b[0] for b in BAD])
def test_each_mistake_has_its_own_error_and_no_backend_is_made(toy_dir, key, value, message):
    params = good_trainer(toy_dir)
    _set(params, key, value)
    with pytest.raises(ConfigError, match=message):
        build.run_trainer("train_and_eval", {"trainer": params}, base_dir=str(toy_dir))
    assert cstorch.backend() is None


def test_error_messages_are_distinct(toy_dir):
    messages = set()
    for key, value, _ in BAD:
        params = good_trainer(toy_dir)
        _set(params, key, value)
        with pytest.raises(ConfigError) as info:
            config.validate_params({"trainer": params}, "train_and_eval", str(toy_dir))
        messages.add(str(info.value))
    assert len(messages) == len(BAD)


def test_bad_mode_and_mode_requirements(toy_dir):
    params = {"trainer": good_trainer(toy_dir)}
    with pytest.raises(ConfigError, match="Unknown mode 'training'; expected one of train, train_and_eval, eval"):
        build.run_trainer("training", params, base_dir=str(toy_dir))
    with pytest.raises(ConfigError, match=r"mode 'eval_all' needs trainer.validate_all.val_dataloaders"):
        del params["trainer"]["fit"]["val_dataloader"]
        build.run_trainer("eval_all", params, base_dir=str(toy_dir))
    assert cstorch.backend() is None


def test_every_trainer_of_a_list_is_validated_before_the_first_runs(toy_dir):
    second = good_trainer(toy_dir)
    second["init"]["loop"]["max_stpes"] = 3
    params = {"trainer": [{"trainer": good_trainer(toy_dir)}, {"trainer": second}]}
    with pytest.raises(ConfigError, match=r"Unknown key trainer\[1\].init.loop.max_stpes"):
        build.run_trainer("train", params, base_dir=str(toy_dir))
    assert cstorch.backend() is None


def test_legacy_learning_rate_form_is_checked_statically(toy_dir):
    params = good_trainer(toy_dir)
    params["init"]["schedulers"] = [{"learning_rate": {"scheduler": "CosineDecay", "initial_learning_rate": 0.1,
                                                       "end_learning_rate": 0.0, "decay_steps": 5}}]
    with pytest.raises(ConfigError, match="decay_steps.*renamed to 'total_iters'"):
        config.validate_trainer(params, "train", str(toy_dir))
    # a missing argument is reported now too, not when configure_lr_scheduler builds it
    params["init"]["schedulers"] = [{"learning_rate": {"scheduler": "CosineDecay", "initial_learning_rate": 0.1,
                                                       "end_learning_rate": 0.0}}]
    with pytest.raises(ConfigError, match=r"schedulers\[0\].learning_rate: CosineDecayLR needs the argument\(s\) "
                                          r"total_iters"):
        config.validate_trainer(params, "train", str(toy_dir))
    # in a list, total_iters is each scheduler's duration in the sequence, also for one that does not take it
    params["init"]["schedulers"] = [{"learning_rate": [
        {"scheduler": "Constant", "learning_rate": 0.1, "total_iters": 2},
        {"scheduler": "CosineDecay", "initial_learning_rate": 0.1, "end_learning_rate": 0.0, "total_iters": 6}]}]
    config.validate_trainer(params, "train", str(toy_dir))


# --------------------------------------------------------------------------- one backend for a list
def two_trainers(toy_dir, first: dict, second: dict) -> dict:
    """A list of two good trainers whose device/backend settings are `first` / `second`."""
    specs = []
    for i, device in enumerate((first, second)):
        spec = good_trainer(toy_dir)
        del spec["init"]["device"]
        spec["init"].update(device)
        spec["init"]["model_dir"] = str(toy_dir / f"model_dir_{i}")
        specs.append(spec)
    return {"trainer": [{"trainer": specs[0]}, specs[1]]}


DIFFERENT_BACKENDS = [
    ({"device": "CPU"}, {"device": "CSX"},
     r"trainer\[1\].init.device \('CSX'\) does not match trainer\[0\].init.device \('CPU'\): they differ in the "
     r"device type"),
    ({"device": "GPU"}, {"backend": {"backend_type": "CPU"}},
     r"trainer\[1\].init.backend \(\{'backend_type': 'CPU'\}\) does not match trainer\[0\].init.device \('GPU'\)"),
    ({"backend": {"backend_type": "CSX"}}, {"backend": {"backend_type": "CSX", "compile_only": True}},
     r"trainer\[1\].init.backend \(.*'compile_only': True.*\) does not match trainer\[0\].init.backend "
     r"\(\{'backend_type': 'CSX'\}\): they differ in compile_only"),
    ({"device": "CSX"}, {"backend": {"backend_type": "XLA", "cluster_config": {"num_csx": 2}}},
     r"does not match trainer\[0\].init.device \('CSX'\): they differ in cluster_config"),
    ({}, {"device": "CPU"},
     r"trainer\[1\].init.device \('CPU'\) does not match trainer\[0\].init \(neither device nor backend.*'CSX'\)"),
]


@pytest.mark.parametrize("first, second, message", DIFFERENT_BACKENDS,
                         ids=["cpu-csx", "gpu-cpu", "compile_only", "cluster_config", "default-cpu"])
def test_a_list_of_trainers_needs_one_backend(toy_dir, first, second, message):
    """Trainer 1 would fail when it is built (the process has trainer 0's backend):
    validation reports it before trainer 0 runs."""
    params = two_trainers(toy_dir, first, second)
    with pytest.raises(ConfigError, match=message):
        config.validate_params(params, "train", str(toy_dir))
    with pytest.raises(ConfigError, match=message):
        build.run_trainer("train", params, base_dir=str(toy_dir))
    assert cstorch.backend() is None


@pytest.mark.parametrize("first, second", [
    ({"device": "CPU"}, {}),                                       # neither: the existing backend
    ({"device": "cpu"}, {"backend": {"backend_type": "CPU", "artifact_dir": "elsewhere"}}),
    ({"device": "XLA"}, {"device": "CSX"}),                         # XLA is CSX
    ({"backend": {"backend_type": "CSX", "cluster_config": {"num_csx": 2}}}, {"device": "CSX"}),
    ({"backend": {"backend_type": "CSX", "cluster_config": {"num_csx": 2}}},
     {"backend": {"backend_type": "CSX", "cluster_config": {"num_csx": 2}, "compile_only": False}}),
], ids=["cpu-default", "cpu-backend", "xla-csx", "backend-device", "same-backend"])
def test_a_list_of_trainers_on_one_backend_is_valid(toy_dir, first, second):
    assert len(config.validate_params(two_trainers(toy_dir, first, second), "train", str(toy_dir))) == 2


def test_one_backend_is_checked_after_the_command_line_overrides(toy_dir):
    from cstorch.trainer import cli

    params = two_trainers(toy_dir, {"device": "CPU"}, {"backend": {"backend_type": "CSX", "compile_only": True}})
    with pytest.raises(ConfigError, match="does not match"):
        config.validate_params(params, "train", str(toy_dir))
    args = cli.build_parser().parse_args(["fit", "p.yaml", "--target_device", "CPU"])
    with pytest.warns(UserWarning, match="are ignored"):  # the CSX backend block goes
        effective = cli.effective_params(args, params)
    assert len(config.validate_params(effective, "train", str(toy_dir))) == 2


def test_the_existing_backend_counts_as_the_first(toy_dir):
    cstorch.backend("CPU")
    params = two_trainers(toy_dir, {}, {"device": "CPU"})
    assert len(config.validate_params(params, "train", str(toy_dir))) == 2
    params = two_trainers(toy_dir, {}, {"device": "CSX"})
    with pytest.raises(ConfigError, match=r"trainer\[1\].init.device \('CSX'\) does not match this process's "
                                          r"existing CPU backend"):
        config.validate_params(params, "train", str(toy_dir))


# --------------------------------------------------------------------------- building
def test_configure_trainer_from_config_builds_everything(toy_dir):
    trainer, run_kwargs = build.configure_trainer_from_config(good_trainer(toy_dir), "train_and_eval",
                                                               base_dir=str(toy_dir))
    assert cstorch.backend() is trainer.backend and trainer.backend.is_cpu
    assert type(trainer.optimizer).__name__ == "AdamW"
    decays = sorted(g["weight_decay"] for g in trainer.optimizer.param_groups)
    assert decays == [0.0, 0.1]  # biases and the LayerNorm get no weight decay
    (scheduler,) = trainer.schedulers
    assert type(scheduler).__name__ == "SequentialLR" and scheduler.milestones == [2]
    assert (trainer.loop.max_steps, trainer.loop.grad_accum_steps) == (8, 2)
    assert trainer.checkpoint.steps == 4 and trainer.logging.log_steps == 2
    assert [type(c).__name__ for c in trainer.loggers] == ["CSVLogger"]
    assert set(run_kwargs) == {"train_dataloader", "val_dataloader"}
    assert isinstance(run_kwargs["train_dataloader"], cstorch.utils.data.DataLoader)


def test_configure_trainer_from_config_validates(toy_dir):
    params = good_trainer(toy_dir)
    params["init"]["loop"]["max_step"] = 3
    with pytest.raises(ConfigError, match="Unknown key trainer.init.loop.max_step"):
        build.configure_trainer_from_config({"trainer": params}, "train", base_dir=str(toy_dir))
    assert cstorch.backend() is None


RECORDING = textwrap.dedent('''
    from cstorch.trainer.callbacks import Callback
    from cstorch.trainer.loggers import CSVLogger

    OPENED = []

    class RecordingCSV(CSVLogger):
        def setup(self, trainer):
            super().setup(trainer)
            OPENED.append(self)

    class Boom(Callback):
        def on_train_batch_end(self, trainer, model, outputs, batch, batch_idx):
            raise ValueError("boom")
''')


def test_run_trainer_runs_a_list_validates_once_and_closes_the_loggers(toy_dir, monkeypatch):
    from cstorch.trainer.loggers import CSVLogger, TensorBoardLogger

    validated = []
    validate = config.validate_trainer
    monkeypatch.setattr(config, "validate_trainer", lambda spec, *a, **k: validated.append(spec) or validate(
        spec, *a, **k))
    params = two_trainers(toy_dir, {"device": "CPU"}, {})  # the second one takes the CPU backend
    for item in (params["trainer"][0]["trainer"], params["trainer"][1]):
        item["init"]["loggers"] = [{"CSVLogger": {}}, {"TensorBoardLogger": {}}]
        item["init"]["loop"]["max_steps"] = 2
    trainers = build.run_trainer("train", params, base_dir=str(toy_dir))
    assert len(trainers) == 2 and trainers[1].backend is trainers[0].backend and trainers[0].backend.is_cpu
    assert len(validated) == 2  # once per trainer
    for trainer in trainers:
        assert trainer.global_step == 2
        assert trainer.get_callback(CSVLogger)._file is None
        assert trainer.get_callback(TensorBoardLogger).writer is None


def test_run_trainer_closes_the_loggers_when_the_run_fails(toy_dir):
    (toy_dir / "recording.py").write_text(RECORDING)
    params = good_trainer(toy_dir)
    params["init"]["loggers"] = [{"recording.py:RecordingCSV": {}}]
    params["init"]["callbacks"] = [{"recording.py:Boom": {}}]
    opened = registry.load_file(str(toy_dir / "recording.py")).OPENED
    with pytest.raises(ValueError, match="boom"):
        build.run_trainer("train", {"trainer": params}, base_dir=str(toy_dir))
    assert len(opened) == 1 and opened[0]._file is None


def test_explicit_milestones(toy_dir):
    params = good_trainer(toy_dir)
    params["init"]["schedulers"][0]["SequentialLR"]["milestones"] = [3]
    trainer, _ = build.configure_trainer_from_config(params, "train", base_dir=str(toy_dir))
    assert trainer.schedulers[0].milestones == [3]


def test_piecewise_constant_lr_takes_values_not_schedulers(toy_dir):
    """PiecewiseConstantLR derives from the sequence scheduler but takes learning rates:
    only a class whose constructor takes `schedulers` gets a nested list."""
    params = good_trainer(toy_dir)
    params["init"]["schedulers"] = [{"PiecewiseConstantLR": {"learning_rates": [0.01, 0.001], "milestones": [3]}}]
    trainer, _ = build.configure_trainer_from_config(params, "train", base_dir=str(toy_dir))
    (scheduler,) = trainer.schedulers
    assert type(scheduler).__name__ == "PiecewiseConstantLR" and list(scheduler.milestones) == [3]
    params["init"]["schedulers"] = [{"ChainedLR": {"schedulers": [{"ConstantLR": {"learning_rate": 0.1}}],
                                                   "milestones": [3]}}]
    with pytest.raises(ConfigError, match=r"Unknown key trainer.init.schedulers\[0\].ChainedLR.milestones"):
        config.validate_trainer(params, "train", str(toy_dir))


def test_eval_mode_builds_a_validation_loop_and_no_optimizer(toy_dir):
    params = good_trainer(toy_dir)
    params["validate"] = {"ckpt_path": None}
    trainer, run_kwargs = build.configure_trainer_from_config({"trainer": params}, "eval", base_dir=str(toy_dir))
    assert type(trainer.loop).__name__ == "ValidationLoop" and trainer.loop.eval_steps == 2
    assert trainer.optimizer is None
    assert run_kwargs["ckpt_path"] is None and "val_dataloader" in run_kwargs


def test_legacy_learning_rate_builds_with_configure_lr_scheduler(toy_dir):
    params = good_trainer(toy_dir)
    params["init"]["optimizer"] = {"SGD": {"adjust_learning_rate": {"lin": 0.5}}}
    params["init"]["schedulers"] = [{"learning_rate": [
        {"scheduler": "Linear", "initial_learning_rate": 0.0, "end_learning_rate": 0.1, "total_iters": 3},
        {"scheduler": "Constant", "learning_rate": 0.1}]}]
    trainer, _ = build.configure_trainer_from_config(params, "train", base_dir=str(toy_dir))
    (scheduler,) = trainer.schedulers
    assert type(scheduler).__name__ == "ScalePerParamLR"  # the optimizer has adjust_learning_rate groups


# --------------------------------------------------------------------------- registry
def test_registry_resolves_all_four_forms(tmp_path, clean_registry):
    @registry.register_model("test_config_toy")
    class Registered:
        pass

    assert registry.resolve("model", "test_config_toy") is Registered
    from cstorch.trainer.callbacks import ModelEvalMetrics
    from cstorch.trainer.loggers import CSVLogger

    assert registry.resolve("callback", "ModelEvalMetrics") is ModelEvalMetrics
    assert registry.resolve("logger", "CSVLogger") is CSVLogger
    import torch

    assert registry.resolve("model", "torch.nn.Linear") is torch.nn.Linear
    assert registry.resolve("model", "torch.nn:Linear") is torch.nn.Linear
    sub = tmp_path / "models"
    sub.mkdir()
    (sub / "mine.py").write_text("class Net:\n    pass\n\nclass Proc:\n    pass\n")
    first = registry.resolve("model", "models/mine.py:Net", base_dir=str(tmp_path))
    again = registry.resolve("data_processor", f"{sub}/mine.py:Proc")
    assert first.__name__ == "Net" and again.__module__ == first.__module__  # one module per file
    assert registry.resolve("model", "mine.py:Net", base_dir=str(sub)) is first


def test_registry_unknown_names(tmp_path, clean_registry):
    @registry.register_data_processor("TestConfigDigits")
    class Digits:
        pass

    with pytest.raises(ValueError, match=r"Unknown data processor 'TestConfigDigit'.*Did you mean 'TestConfigDigits'"):
        registry.resolve("data_processor", "TestConfigDigit")
    with pytest.raises(ValueError, match="does not exist"):
        registry.resolve("model", "nope.py:Net", base_dir=str(tmp_path))
    with pytest.raises(ValueError, match="no module named 'no_such_pkg.mod'"):
        registry.resolve("model", "no_such_pkg.mod.Net")
    with pytest.raises(ValueError, match="Unknown registry kind"):
        registry.resolve("optimizer", "SGD")


def test_registered_names_do_not_leak_between_tests(clean_registry):
    assert "test_config_toy" not in registry.registered("model")
    assert "TestConfigDigits" not in registry.registered("data_processor")
