"""cstorch.trainer.cli: argument parsing, command-line overrides of the YAML
(`effective_params`, nothing is run), XLA_FLAGS for num_csx > 1, and the exit status
and message of a configuration mistake."""
import argparse
import logging
import os
import subprocess
import sys

import pytest

import cstorch
from cstorch.trainer import cli, config
from cstorch.trainer.config import RUN_MODES, ConfigError

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def params(**init):
    base = {"model_dir": "yaml_dir", "device": "CSX", "model": {"name": "m"},
            "loop": {"num_epochs": 3, "steps_per_epoch": 5, "eval_steps": 7}}
    base.update(init)
    return {"trainer": {"init": base, "fit": {"train_dataloader": {"data_processor": "p", "batch_size": 4}}}}


def effective(argv, p):
    return cli.effective_params(cli.build_parser().parse_args(argv), p)


def parsed(p, toy_dir):
    """The specs of `p` with its model and data processor named as the toy classes
    next to the YAML (`toy_dir`), so that parsing resolves them."""
    def named(value):
        if isinstance(value, dict):
            value = {k: named(v) for k, v in value.items()}
            if value.get("name") == "m":
                value["name"] = "toy.py:Toy"
            if value.get("data_processor") == "p":
                value["data_processor"] = "toy.py:ToyData"
            return value
        return [named(v) for v in value] if isinstance(value, list) else value

    return config.validate_params(named(p), None, str(toy_dir))


def test_parse_subcommands_and_flags():
    args = cli.build_parser().parse_args(["validate", "p.yaml", "--target_device", "cpu", "-o", "out",
                                          "--checkpoint_path", "c.mdl", "--logging", "debug", "--eval_steps", "2"])
    assert (args.command, args.params, args.target_device, args.model_dir) == ("validate", "p.yaml", "CPU", "out")
    assert (args.checkpoint_path, args.logging, args.eval_steps, args.max_steps) == ("c.mdl", "DEBUG", 2, None)
    for bad in (["fit", "p.yaml", "--compile_only", "--validate_only"], ["fit", "p.yaml", "--num_csx", "0"],
                ["fit", "p.yaml", "--target_device", "TPU"], ["run", "p.yaml"]):
        with pytest.raises(SystemExit) as info:
            cli.build_parser().parse_args(bad)
        assert info.value.code == 2


def test_no_flags_keep_the_yaml():
    p = params()
    assert effective(["fit", "p.yaml"], p) == p


def test_flags_override_the_yaml():
    p = params()
    out = effective(["fit", "p.yaml", "-o", "cli_dir", "--checkpoint_path", "c.mdl", "--max_steps", "9",
                     "--eval_steps", "2", "--logging", "warning"], p)
    t = out["trainer"]
    assert t["init"]["model_dir"] == "cli_dir"
    assert t["init"]["loop"] == {"max_steps": 9, "eval_steps": 2}  # --max_steps replaces the YAML's length
    assert t["init"]["logging"] == {"log_level": "WARNING"}
    assert (t["fit"]["ckpt_path"], t["validate"]["ckpt_path"], t["validate_all"]["ckpt_paths"]) == ("c.mdl",) * 3
    assert p["trainer"]["init"]["model_dir"] == "yaml_dir"  # input untouched


def test_target_device_and_csx_flags(toy_dir):
    out = effective(["fit", "p.yaml", "--num_csx", "4", "--num_workers_per_csx", "2", "--compile_only"], params())
    init = out["trainer"]["init"]
    assert "device" not in init
    assert init["backend"] == {"backend_type": "CSX", "compile_only": True, "validate_only": False,
                               "cluster_config": {"num_csx": 4, "num_workers_per_csx": 2}}
    assert cli.num_csx(parsed(out, toy_dir)) == 4

    yaml_backend = params(backend={"backend_type": "CSX", "cluster_config": {"num_csx": 2}})
    del yaml_backend["trainer"]["init"]["device"]
    with pytest.warns(UserWarning, match=r"CSX backend settings \(backend.cluster_config\) are ignored"):
        out = effective(["fit", "p.yaml", "--target_device", "CPU"], yaml_backend)
    assert out["trainer"]["init"]["device"] == "CPU" and "backend" not in out["trainer"]["init"]
    assert cli.num_csx(parsed(out, toy_dir)) == 1

    out = effective(["fit", "p.yaml", "--target_device", "CSX"], params(device="CPU"))
    assert out["trainer"]["init"]["device"] == "CSX"
    with pytest.raises(ConfigError, match="--num_csx: CSX settings, but the target device is CPU"):
        effective(["fit", "p.yaml", "--target_device", "CPU", "--num_csx", "2"], params())


def test_overrides_apply_to_every_trainer_and_to_legacy_configs():
    two = {"trainer": [{"trainer": params()["trainer"]}, params()["trainer"]]}
    out = effective(["fit", "p.yaml", "-o", "d"], two)
    assert [item.get("trainer", item)["init"]["model_dir"] for item in out["trainer"]] == ["d", "d"]
    legacy = {"runconfig": {"max_steps": 5, "model_dir": "old"}, "train_input": {"data_processor": "p"}}
    out = effective(["fit", "p.yaml", "-o", "new"], legacy)
    assert out["trainer"]["init"]["model_dir"] == "new" and out["trainer"]["init"]["loop"] == {"max_steps": 5}


def test_fit_mode_depends_on_val_dataloader(toy_dir):
    p = params()
    assert cli.run_mode("fit", parsed(p, toy_dir)) == "train"
    p["trainer"]["fit"]["val_dataloader"] = {"data_processor": "p"}
    specs = parsed(p, toy_dir)
    assert cli.run_mode("fit", specs) == "train_and_eval"
    assert (cli.run_mode("validate", specs), cli.run_mode("validate_all", specs)) == ("eval", "eval_all")
    two = {"trainer": [params()["trainer"], p["trainer"]]}  # one trainer with a val dataloader is enough
    assert cli.run_mode("fit", parsed(two, toy_dir)) == "train_and_eval"
    with pytest.raises(ConfigError, match="Unknown Trainer method 'train'"):
        cli.run_mode("train", specs)


def test_subcommands_are_the_run_methods_of_the_mode_table(toy_dir):
    (subparsers,) = [a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(subparsers.choices) == {m.method for m in RUN_MODES.values()}
    for command in subparsers.choices:
        assert RUN_MODES[cli.run_mode(command, parsed(params(), toy_dir))].method == command


def test_override_errors_name_the_trainer():
    two = {"trainer": [params()["trainer"], params(loop=3)["trainer"]]}
    with pytest.raises(ConfigError, match=r"trainer\[1\].init.loop must be a mapping"):
        effective(["fit", "p.yaml", "--eval_steps", "2"], two)


def test_shared_override_helpers():
    loop = {"num_steps": 4, "num_epochs": 2, "steps_per_epoch": 3, "eval_steps": 1}
    cli.set_max_steps(loop, 9)
    assert loop == {"eval_steps": 1, "max_steps": 9}
    backend = {"validate_only": True}
    cli.set_compile_mode(backend, {"compile_only": True})
    assert backend == {"compile_only": True, "validate_only": False}
    args = cli.build_parser().parse_args(["fit", "p.yaml", "--validate_only", "--num_workers_per_csx", "2"])
    assert cli.csx_flags(args) == {"num_workers_per_csx": 2, "validate_only": True}
    cli.check_csx_target(cli.csx_flags(args), "xla")  # XLA is CSX
    with pytest.raises(ConfigError, match="--num_workers_per_csx, --validate_only: CSX settings, but the target "
                                          "device is GPU"):
        cli.check_csx_target(cli.csx_flags(args), "gpu")


def test_xla_flags_for_several_csx(monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    assert cli.ensure_host_device_count(1) is None and "XLA_FLAGS" not in os.environ
    assert cli.ensure_host_device_count(4) == "--xla_force_host_platform_device_count=4"
    assert os.environ["XLA_FLAGS"] == "--xla_force_host_platform_device_count=4"
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/x")
    cli.ensure_host_device_count(2)
    assert os.environ["XLA_FLAGS"] == "--xla_dump_to=/tmp/x --xla_force_host_platform_device_count=2"
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
    cli.ensure_host_device_count(2)  # the user's own count wins
    assert os.environ["XLA_FLAGS"] == "--xla_force_host_platform_device_count=8"


DATA = ("class Data:\n    def __init__(self, batch_size: int):\n        self.batch_size = batch_size\n\n"
        "    def create_dataloader(self):\n        return []\n")
TRAINER = ("{init: {device: %s, model: {name: torch.nn.Linear, in_features: 2, out_features: 1}, "
           "optimizer: {SGD: {lr: 0.1}}, loop: {max_steps: 1}}, fit: {train_dataloader: "
           "{data_processor: data.py:Data, batch_size: 2}}}")


def test_trainers_with_different_devices_exit_2_before_any_runs(tmp_path, capsys):
    (tmp_path / "data.py").write_text(DATA)
    p = tmp_path / "two.yaml"
    p.write_text(f"trainer:\n  - trainer: {TRAINER % 'CPU'}\n  - {TRAINER % 'CSX'}\n")
    level = logging.getLogger("cstorch").level
    try:
        assert cli.main(["fit", str(p)]) == 2
    finally:
        logging.getLogger("cstorch").setLevel(level)
    err = capsys.readouterr().err
    assert err.startswith("cstorch: error: trainer[1].init.device ('CSX') does not match trainer[0].init.device "
                          "('CPU')"), err

    assert cstorch.backend() is None
    # with --target_device every trainer asks for the same backend
    args = cli.build_parser().parse_args(["fit", str(p), "--target_device", "CPU"])
    assert len(config.validate_params(cli.effective_params(args, config.load_params(p)), "train",
                                      str(tmp_path))) == 2


@pytest.mark.parametrize("name", ["digits", "gpt"])
def test_example_configs_validate_after_the_overrides(name):
    """What `cstorch fit examples/configs/<name>.yaml --target_device CPU --max_steps 2` runs
    is valid (nothing is built)."""
    path = os.path.join(REPO, "examples", "configs", f"{name}.yaml")
    args = cli.build_parser().parse_args(["fit", path, "--target_device", "CPU", "--max_steps", "2"])
    p = cli.effective_params(args, config.load_params(path))
    specs = config.validate_params(p, None, os.path.dirname(path))
    assert cli.run_mode("fit", specs) == "train_and_eval" and cli.num_csx(specs) == 1
    (spec,) = config.validate_params(p, "train_and_eval", os.path.dirname(path))
    assert spec.init.device == "CPU" and spec.init.loop.kwargs["max_steps"] == 2
    assert cstorch.backend() is None


def test_bad_config_exits_2_with_a_message(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("trainer:\n  init:\n    device: CPU\n    model: {name: torch.nn.Linear, in_features: 2, "
                   "out_features: 1}\n    loop: {max_step: 3}\n")
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "cstorch.trainer", "fit", str(bad)], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("cstorch: error: Unknown key trainer.init.loop.max_step"), proc.stderr
    assert "Did you mean 'max_steps'" in proc.stderr and "Traceback" not in proc.stderr
