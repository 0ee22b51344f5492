"""The `cszoo` program (the `cstorch` CLI under the Model Zoo's name) and the Model Zoo
2.x `run.py` entry point (`cerebras.modelzoo.common.run_utils`)."""
from __future__ import annotations

import os
import re

import pytest
import yaml

from cerebras.modelzoo.cli import main as cszoo_main
from cerebras.modelzoo.common import run_utils
from cstorch.trainer import cli

pytestmark = pytest.mark.usefixtures("shared_compile_cache")  # its scripts compile once per run (conftest)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_cszoo_is_the_cstorch_program():
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        scripts = re.search(r"\[project\.scripts\]\n((?:.+\n)+)", f.read()).group(1)
    assert re.search(r'^cszoo = "cstorch_cli:main"', scripts, re.M) and re.search(r'^cstorch = "cstorch_cli:main"',
                                                                                   scripts, re.M)
    assert cli.program_name("/usr/bin/cszoo") == "cszoo" and cli.program_name("cstorch") == "cstorch"
    assert cli.program_name("/x/__main__.py") == "cstorch"


def test_errors_print_the_program_name(tmp_path, capsys):
    missing = str(tmp_path / "none.yaml")
    assert cszoo_main.main(["fit", missing]) == 2
    assert capsys.readouterr().err.startswith("cszoo: error: params file")
    assert cli.main(["validate", missing], prog="cstorch") == 2
    assert capsys.readouterr().err.startswith("cstorch: error: params file")
    with pytest.raises(SystemExit):
        cszoo_main.main(["train", missing])  # the subcommands are fit, validate, validate_all
    assert "cszoo" in capsys.readouterr().err


def test_cluster_flags_go_to_the_cluster_config():
    params = {"trainer": {"init": {"device": "CSX", "model": {"name": "m"}}}}
    args = cli.build_parser("cszoo").parse_args([
        "fit", "p.yaml", "--mgmt_address", "10.0.0.1:9000", "--job_labels", "a=1", "b=2", "--job_priority", "p1",
        "--mount_dirs", "/d", "--python_paths", "/p", "--credentials_path", "/c", "--disable_version_check"])
    backend = cli.effective_params(args, params)["trainer"]["init"]["backend"]
    assert backend == {"backend_type": "CSX", "cluster_config": {
        "mgmt_address": "10.0.0.1:9000", "job_labels": ["a=1", "b=2"], "job_priority": "p1", "mount_dirs": ["/d"],
        "python_paths": ["/p"], "credentials_path": "/c", "disable_version_check": True}}
    cpu = cli.build_parser("cszoo").parse_args(["fit", "p.yaml", "--target_device", "CPU", "--mount_dirs", "/d"])
    with pytest.raises(cli.ConfigError, match="--mount_dirs: CSX settings, but the target device is CPU"):
        cli.effective_params(cpu, params)


def test_run_utils_reads_the_command_line_into_runconfig(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({"trainer": {"init": {"model": {"name": "m"}, "loop": {"num_steps": 5}}}}))
    params = run_utils.get_params_from_args(argv=["CPU", "--params", str(path), "--mode", "train", "-o", "out",
                                                  "--max_steps", "3"])
    assert params["runconfig"] == {"target_device": "CPU", "params": str(path), "mode": "train", "model_dir": "out",
                                   "max_steps": 3}
    with pytest.raises(cli.ConfigError, match="runconfig.mode must be one of"):
        run_utils.main({"trainer": {}, "runconfig": {}})


def test_run_utils_runs_a_model_zoo_yaml(tmp_path):
    example = os.path.join(ROOT, "examples", "configs", "modelzoo_mlp", "configs", "params_mlp_digits.yaml")
    (trainer,) = run_utils.run(argv=["CPU", "--params", example, "--mode", "train", "-o", str(tmp_path),
                                     "--max_steps", "2"])
    assert trainer.global_step == 2 and type(trainer.model).__name__ == "MLPClassifier"
    assert sorted(p.name for p in tmp_path.glob("*.mdl")) == ["checkpoint_2.mdl"]
