"""Running the real Cerebras Model Zoo 2.10 (the snapshot in `../shared/third_party`) on
cstorch, as a user would: its `cszoo` command on one of its own YAML files.

A YAML is changed only through its own keys (`shrink` refuses a key the file does not
have), to make the run small: sizes, steps, data paths. Each run is a process of its own
whose PYTHONPATH is what docs/guides/modelzoo.md tells a user to set, nothing more: the
packages of `requirements-modelzoo.txt` installed beside cstorch (`.modelzoo-deps`) and
the snapshot's `src/`."""
from __future__ import annotations

import copy
import csv
import os
import subprocess
import sys
from pathlib import Path

import torch
import yaml

import cstorch

REPO = Path(__file__).resolve().parents[3]
SNAPSHOT = REPO.parent / "shared" / "third_party" / "modelzoo-2.10"
SRC = SNAPSHOT / "src"
MODELS = SRC / "cerebras" / "modelzoo" / "models"
DEPS = REPO / ".modelzoo-deps"


def missing() -> str | None:
    """Why the real Model Zoo cannot run here (None when it can)."""
    if not SRC.is_dir():
        return f"the Model Zoo snapshot is not at {SNAPSHOT}"
    if sys.version_info[:2] != (3, 11):
        return ("the Model Zoo 2.10 imports cerebras-appliance 2.10.0, which is published for CPython 3.11 "
                f"only (this is {sys.version.split()[0]})")
    if not (DEPS / "cerebras" / "appliance").is_dir():
        return (f"the Model Zoo's runtime packages are not installed at {DEPS}: "
                "pip install --no-deps --target .modelzoo-deps -r requirements-modelzoo.txt")
    return None


def env() -> dict:
    paths = [str(DEPS), str(SRC)]  # the guide's `export PYTHONPATH=$PWD/.modelzoo-deps:<modelzoo>/src`
    return dict(os.environ, PYTHONPATH=os.pathsep.join(paths), PYTHONDONTWRITEBYTECODE="1")


def _set(tree: dict, dotted: str, value, new: bool = False) -> None:
    keys = dotted.split(".")
    node = tree
    for i, key in enumerate(keys[:-1]):
        if isinstance(node, list):
            key = int(key)
        elif key not in node:
            raise KeyError(f"{'.'.join(keys[:i + 1])} is not a key of the published YAML")
        node = node[key]
    last = keys[-1]
    if isinstance(node, list):
        node[int(last)] = value
    elif new and last in node:
        raise KeyError(f"{dotted} is a key of the published YAML: change it, do not add it")
    elif not new and last not in node:
        raise KeyError(f"{dotted} is not a key of the published YAML")
    else:
        node[last] = value


def shrink(published: Path, dest: Path, changes: dict, drop: tuple = (), add: dict | None = None) -> Path:
    """Write `published` to `dest` with `changes` ({dotted key path: value}) applied to keys
    the YAML has, the entries of `add` ({dotted key path: value}) set as new keys of
    mappings it has (only for what the YAML leaves to a default, as the initial checkpoint;
    a key it has is refused there), and the list entries or keys of `drop` (dotted paths)
    removed; YAML anchors are expanded (the copy is a plain tree). Returns `dest`."""
    tree = yaml.safe_load(Path(published).read_text())
    tree = copy.deepcopy(tree)
    for dotted, value in changes.items():
        _set(tree, dotted, value)
    for dotted, value in (add or {}).items():
        _set(tree, dotted, value, new=True)
    for dotted in drop:
        *parent, last = dotted.split(".")
        node = tree
        for key in parent:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if isinstance(node, list):
            del node[int(last)]
        else:
            del node[last]
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(yaml.safe_dump(tree, sort_keys=False))
    return dest


def _cszoo_command() -> list:
    """The installed `cszoo` script (cstorch's), else the module it runs."""
    script = Path(sys.executable).parent / "cszoo"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "cstorch.trainer"]


def cszoo(*args, cwd: Path, timeout: int = 900) -> subprocess.CompletedProcess:
    """`cszoo <args>` in a new process beside the real Model Zoo; fails the test with the
    end of its output when it does not exit 0."""
    done = subprocess.run([*_cszoo_command(), *map(str, args)],
                          env=env(), cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise AssertionError(f"cszoo {' '.join(map(str, args))} exited {done.returncode}:\n"
                             f"{done.stdout[-3000:]}\n{done.stderr[-6000:]}")
    return done


def checkpoint(model_dir: Path, step: int) -> dict:
    """The model state of `checkpoint_<step>.mdl` in `model_dir`, as torch tensors."""
    state = cstorch.load(str(Path(model_dir) / f"checkpoint_{step}.mdl"))
    return {k: torch.as_tensor(v) for k, v in state["model"].items()}


def assert_same_parameters(csx: dict, cpu: dict, rtol: float, atol: float) -> None:
    assert csx.keys() == cpu.keys() and cpu
    for k in cpu:
        torch.testing.assert_close(csx[k], cpu[k], rtol=rtol, atol=atol, msg=lambda m, k=k: f"{k}: {m}")


def eval_loss(done: subprocess.CompletedProcess) -> float:
    """The last `eval/loss=` a run logged."""
    lines = [ln for ln in (done.stdout + done.stderr).splitlines() if "eval/loss=" in ln]
    assert lines, "the run logged no eval/loss"
    return float(lines[-1].split("eval/loss=")[1].split(",")[0].split()[0])


def update_differences(csx: dict, cpu: dict, initial: dict) -> dict:
    """{tensor name: (||upd_csx - upd_cpu||, ||upd_cpu||)}, each tensor's training update
    upd = final - initial."""
    assert csx.keys() == cpu.keys() == initial.keys() and cpu
    out = {}
    for k in cpu:
        upd_cpu = cpu[k].double() - initial[k].double()
        upd_csx = csx[k].double() - initial[k].double()
        out[k] = (float((upd_csx - upd_cpu).norm()), float(upd_cpu.norm()))
    return out


def assert_same_updates(csx: dict, cpu: dict, initial: dict, rtol: float, atol: float = 0.0) -> None:
    """Each tensor's training update (final - initial) agrees in norm:
    ||upd_csx - upd_cpu|| <= rtol max(||upd_cpu||, atol sqrt(numel)). The floor, the norm of
    an update of `atol` per weight, is for tensors that training does not move, whose
    gradient is zero in exact arithmetic (BERT's key bias): their update is rounding noise,
    with no size of its own to be relative to."""
    for k, (err, size) in update_differences(csx, cpu, initial).items():
        floor = atol * cpu[k].numel() ** 0.5
        assert err <= rtol * max(size, floor), f"{k}: update differs by {err / max(size, 1e-300):.3g} of its norm"


def fit_on_both_backends(tmp_path: Path, params: Path, steps: int, atol: float, loss_rtol: float,
                         update_rtol: float | None = None) -> dict:
    """`cszoo fit` on the CPU backend (which saves the initial weights, `checkpoint_0.mdl`),
    then on CSX from those weights (`--checkpoint_path`): the published YAMLs set no seed,
    so this is how the two runs start equal. Checks that the CSX parameters after `steps`
    steps equal the CPU ones within (rtol, atol) and that training moved them by far more
    than that (atol absolute per weight); with `update_rtol`, each tensor's update is compared
    in norm instead (`assert_same_updates`, with `atol` per weight as the floor of the
    norm: for backends computing in different 16-bit formats, where single near-zero
    gradient entries may round to opposite signs). The CSX fit validates its last checkpoint in
    the same process (its validation after the last step, as `cszoo fit` does); `cszoo validate
    --checkpoint_path` of that checkpoint on the CPU backend must give the same eval loss
    (within loss_rtol). Returns the checkpoints and each fit's logged metrics
    (`logged_metrics`) by backend."""
    cpu_dir, csx_dir = tmp_path / "model_cpu", tmp_path / "model_csx"
    cszoo("fit", params, "--target_device", "CPU", "--model_dir", cpu_dir, cwd=tmp_path)
    csx_fit = cszoo("fit", params, "--target_device", "CSX", "--model_dir", csx_dir,
                    "--checkpoint_path", cpu_dir / "checkpoint_0.mdl", cwd=tmp_path)
    initial, cpu, csx = checkpoint(cpu_dir, 0), checkpoint(cpu_dir, steps), checkpoint(csx_dir, steps)
    if update_rtol is None:
        assert_same_parameters(csx, cpu, rtol=0.0, atol=atol)
    else:
        assert_same_updates(csx, cpu, initial, rtol=update_rtol, atol=atol)
    moved = max(float((cpu[k].double() - initial[k].double()).abs().max()) for k in cpu)
    assert moved > 10 * atol, f"training moved the parameters by {moved} only: the comparison would say nothing"
    losses = {"CSX": eval_loss(csx_fit),
              "CPU": eval_loss(cszoo("validate", params, "--target_device", "CPU", "--model_dir",
                                     tmp_path / "validate_CPU", "--checkpoint_path",
                                     csx_dir / f"checkpoint_{steps}.mdl", cwd=tmp_path))}
    assert abs(losses["CSX"] - losses["CPU"]) <= loss_rtol * abs(losses["CPU"]), losses
    return {"CPU": cpu, "CSX": csx,
            "metrics": {"CPU": logged_metrics(cpu_dir), "CSX": logged_metrics(csx_dir)}}


def logged_metrics(model_dir: Path) -> dict[str, dict[int, float]]:
    """{metric name: {step: value}} of the run in `model_dir` (its `metrics.csv`; the model
    dir must hold one run)."""
    (path,) = Path(model_dir).glob("*/metrics.csv")
    out: dict[str, dict[int, float]] = {}
    with open(path) as f:
        for row in csv.DictReader(f):
            out.setdefault(row["name"], {})[int(row["step"])] = float(row["value"])
    return out
