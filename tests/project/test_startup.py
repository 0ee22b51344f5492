"""Start-up: what `import cerebras.pytorch` and the `cstorch` command load, checked by the
modules a fresh process holds (times are measured by `python -m benchmarks.import_time`,
not asserted: they depend on the machine and its load).

- `import cerebras.pytorch` loads torch and jax but not what only a compiled step or a
  report needs: sympy (torch's symbolic shapes), the lowering tables (every
  `cstorch_jax.lowering` module), the graph passes and the report layer
  (`cstorch_jax.explore`); the first compiled step loads them, and trains;
- `cstorch --help`, `cstorch fit --help` and a usage error import neither torch nor jax
  nor cstorch (the console scripts start in `cstorch_cli`).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: loaded when a step is first compiled or explored, never by the import
ON_FIRST_USE = ("sympy", "torch.fx.experimental.symbolic_shapes", "cstorch_jax.lowering",
                "cstorch_jax.lowering.pointwise", "cstorch_jax.lowering.linear_algebra", "cstorch_jax.passes",
                "cstorch_jax.explore")

#: prints, as JSON, the modules of ON_FIRST_USE the process holds
LOADED = """
import json, sys
print(json.dumps(sorted(m for m in {watched!r} if m in sys.modules)))
"""


def _run(code: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CSTORCH_CACHE": "0"}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300,
                          cwd=ROOT, env=env)


def _loaded(lines: str) -> list[list[str]]:
    return [json.loads(line) for line in lines.splitlines() if line.startswith("[")]


def test_import_loads_no_compile_time_module_and_the_first_step_loads_them():
    code = ("import torch, torch.nn.functional as F\nimport cerebras.pytorch as cstorch\n"
            + LOADED.format(watched=ON_FIRST_USE) + """
torch.manual_seed(0)
backend = cstorch.backend("CSX")
model = torch.nn.Linear(4, 2)
compiled = cstorch.compile(model, backend)
optimizer = cstorch.optim.SGD(model.parameters(), lr=0.1)

@cstorch.trace
def train_step(x, y):
    loss = F.mse_loss(compiled(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss

x, y = torch.randn(8, 4), torch.randn(8, 2)
loader = cstorch.utils.data.DataLoader(lambda: [(x, y)] * 3)
losses = [float(train_step(bx, by)) for bx, by in cstorch.utils.data.DataExecutor(loader, num_steps=3)]
assert losses[2] < losses[0], losses
print(train_step.report.cost.flops > 0)
""" + LOADED.format(watched=ON_FIRST_USE))
    proc = _run(code)
    assert proc.returncode == 0, proc.stderr[-4000:]
    at_import, after_step = _loaded(proc.stdout)
    assert at_import == [], f"`import cerebras.pytorch` loaded {at_import}"
    assert {"cstorch_jax.lowering", "cstorch_jax.lowering.pointwise", "cstorch_jax.passes",
            "cstorch_jax.explore"} <= set(after_step), after_step
    assert "True" in proc.stdout.splitlines()


def test_the_engine_reaches_its_lazy_submodules_as_attributes():
    code = ("import cstorch_jax\n" + LOADED.format(watched=ON_FIRST_USE)
            + "print(cstorch_jax.explore.StepReport.__name__, len(cstorch_jax.lowering.LOWERINGS) > 400)\n"
            + LOADED.format(watched=ON_FIRST_USE))
    proc = _run(code)
    assert proc.returncode == 0, proc.stderr[-4000:]
    at_import, after = _loaded(proc.stdout)
    assert at_import == [] and "StepReport True" in proc.stdout
    assert {"cstorch_jax.explore", "cstorch_jax.lowering"} <= set(after)


@pytest.mark.parametrize("argv, status, shows", [
    (["--help"], 0, "usage: cstorch [-h] {fit,validate,validate_all}"),
    (["fit", "--help"], 0, "--target_device {CSX,CPU,GPU}"),
    (["fit"], 2, "cstorch fit: error: the following arguments are required: params"),
])
def test_the_command_answers_help_and_usage_errors_without_torch(argv, status, shows):
    """As the console script runs it (`[project.scripts]`: `cstorch_cli:main`)."""
    code = ("import json, sys\nfrom cstorch_cli import main\nsys.argv[0] = 'cstorch'\n"
            "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
            "print(json.dumps([code, sorted(m for m in ('torch', 'jax', 'cstorch', 'cstorch_jax') "
            "if m in sys.modules)]), file=sys.stderr)\n")
    proc = _run(code, *argv)
    code, imported = json.loads(proc.stderr.strip().splitlines()[-1])
    assert code == status and imported == []
    assert shows in proc.stdout + proc.stderr


def test_the_command_runs_the_trainer_cli(tmp_path, capsys):
    """A command that runs goes on to `cstorch.trainer.cli.run`: a missing YAML is its
    configuration error, printed under the program's name."""
    from cstorch_cli import main

    assert main(["validate", str(tmp_path / "none.yaml")], prog="cszoo") == 2
    assert capsys.readouterr().err.startswith("cszoo: error: params file")
