"""A checkpoint-inspection script (`ckpt_inspect.py`, run as `__main__` the way an external
tool runs one) on files `cstorch.save` wrote, checked against values known by hand and
against eager torch:

- `list` gives every tensor's name, dtype, shape and item size in the file's order from
  `cstorch.load(path, map_location=None)` without reading one value (lazy H5 tensors);
- `compare` reads the lazy tensors of two files in row blocks (slices, `.to("cpu")`,
  float64 numpy, `isfinite`/`masked_select`/min/max in the stored dtype) from several
  threads: the counts and differences of hand-made files are exact, whatever the block size;
- the checkpoints of a custom loop (`cstorch.backend`, `compile`, `trace`, `DataExecutor`
  with `checkpoint_steps`, a `checkpoint_closure` calling `cstorch.save` on the model's flat
  state dict) on CSX and on the CPU backend exist for the checkpoint steps only and hold
  eager torch's weights of those steps; the script sees CSX = CPU and the change from the
  initial weights that eager torch computes;
- a path that is not a checkpoint is reported, not raised."""
from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import os
import runpy
import sys

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import cstorch
from cstorch.storage import H5Tensor

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ckpt_inspect.py")


def run_script(*argv) -> list[dict]:
    """Run ckpt_inspect.py as __main__ with `argv`; its JSON lines."""
    out = io.StringIO()
    saved_argv = sys.argv
    sys.argv = [SCRIPT, *map(str, argv)]
    try:
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
            runpy.run_path(SCRIPT, run_name="__main__")
    finally:
        sys.argv = saved_argv
    assert done.value.code == 0
    return [json.loads(line) for line in out.getvalue().splitlines()]


@pytest.fixture
def value_reads(monkeypatch):
    """How many times a lazy H5 tensor's values were read from its file."""
    reads = []
    fetch = H5Tensor._fetch

    def counting(self):
        reads.append(self.shape)
        return fetch(self)

    monkeypatch.setattr(H5Tensor, "_fetch", counting)
    return reads


def hand_made(tmp_path):
    old = {
        "w": torch.arange(12, dtype=torch.float32).reshape(4, 3),
        "special": torch.tensor([1.0, math.nan, math.inf, -2.0]),
        "counts": torch.tensor([1, 2, 3], dtype=torch.int64),
        "opt": {"scale": torch.tensor(3.5), "half": torch.tensor([0.5, 1.5], dtype=torch.bfloat16)},
        "odd": torch.zeros(2, 2),
        "gone": torch.ones(1),
    }
    new = copy.deepcopy(old)
    del new["gone"]
    new["w"][0, 1] += 0.25
    new["w"][3, 2] = -4.0
    new["special"][2] = 5.0  # inf -> 5: a non-finite mismatch; the NaNs are equal
    new["counts"][2] = 7
    new["opt"]["scale"] = torch.tensor(3.0)
    new["odd"] = torch.zeros(4)
    new["added"] = torch.ones(2, dtype=torch.int32)
    cstorch.save(old, tmp_path / "old.mdl")
    cstorch.save(new, tmp_path / "new.mdl")
    return tmp_path / "old.mdl", tmp_path / "new.mdl"


def test_list_reports_metadata_without_reading_values(tmp_path, value_reads):
    old, _ = hand_made(tmp_path)
    assert run_script("list", old) == [
        {"name": "w", "dtype": "torch.float32", "shape": [4, 3], "itemsize": 4},
        {"name": "special", "dtype": "torch.float32", "shape": [4], "itemsize": 4},
        {"name": "counts", "dtype": "torch.int64", "shape": [3], "itemsize": 8},
        {"name": "opt/scale", "dtype": "torch.float32", "shape": [], "itemsize": 4},
        {"name": "opt/half", "dtype": "torch.bfloat16", "shape": [2], "itemsize": 2},
        {"name": "odd", "dtype": "torch.float32", "shape": [2, 2], "itemsize": 4},
        {"name": "gone", "dtype": "torch.float32", "shape": [1], "itemsize": 4},
    ]
    assert value_reads == []


def hist_tvd(a, b, bins):
    """The histogram distance of two float64 vectors, straight from numpy (the truth)."""
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    both = np.concatenate([a, b])
    p = np.histogram(a, bins=bins, range=(both.min(), both.max()))[0]
    q = np.histogram(b, bins=bins, range=(both.min(), both.max()))[0]
    return 0.5 * np.abs(p / p.sum() - q / q.sum()).sum()


@pytest.mark.parametrize("rows,jobs", [(1, 3), (1000, 1)])
def test_compare_is_exact_on_hand_made_files(tmp_path, value_reads, rows, jobs):
    old, new = hand_made(tmp_path)
    *results, summary = run_script("compare", old, new, "--rows", rows, "--bins", 8, "--jobs", jobs)
    got = {r.pop("name"): r for r in results}
    assert summary == {"summary": {"old_only": ["gone"], "new_only": ["added"], "compared": 6}}
    assert got["odd"] == {"error": "shapes differ: [2, 2] vs [4]"}

    w_old = np.arange(12, dtype=np.float64)
    w_new = w_old.copy()
    w_new[1] += 0.25
    w_new[11] = -4.0
    special_old, special_new = np.array([1, np.nan, np.inf, -2]), np.array([1, np.nan, 5, -2])
    expected = {
        "w": dict(elements=12, differing=2, max_abs=15.0, mean_abs=15.25 / 12, nonfinite_mismatch=0,
                  tvd=hist_tvd(w_old, w_new, 8)),
        "special": dict(elements=4, differing=1, max_abs=0.0, mean_abs=0.0, nonfinite_mismatch=1,
                        tvd=hist_tvd(special_old, special_new, 8)),
        "counts": dict(elements=3, differing=1, max_abs=4.0, mean_abs=4 / 3, nonfinite_mismatch=0,
                       tvd=hist_tvd(np.array([1., 2, 3]), np.array([1., 2, 7]), 8)),
        "opt/scale": dict(elements=1, differing=1, max_abs=0.5, mean_abs=0.5, nonfinite_mismatch=0, tvd=1.0),
        "opt/half": dict(elements=2, differing=0, max_abs=0.0, mean_abs=0.0, nonfinite_mismatch=0, tvd=0.0),
    }
    for name, want in expected.items():
        assert got[name] == pytest.approx(want, rel=1e-12, abs=1e-12), name
    assert expected["w"]["tvd"] > 0 and expected["counts"]["tvd"] > 0  # the histograms can tell
    assert len(value_reads) > 0  # and these values did come from the files


def test_a_file_that_is_not_a_checkpoint_is_reported(tmp_path):
    bogus = tmp_path / "notes.txt"
    bogus.write_text("not a checkpoint")
    [listing] = run_script("list", bogus)
    assert listing["error"].startswith(f"cannot load {bogus}: InvalidCheckpointError")
    missing = tmp_path / "missing.mdl"
    assert [line["error"].split(":")[:2] for line in run_script("compare", bogus, missing)] == [
        [f"cannot load {bogus}", " InvalidCheckpointError"], [f"cannot load {missing}", " FileNotFoundError"]]


# -- checkpoints of a custom training loop --------------------------------------------------------
class TwoLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(4, 10)
        self.head = nn.Linear(10, 3)

    def forward(self, x, y):
        return F.cross_entropy(self.head(F.gelu(self.hidden(x))), y)


STEPS, EVERY = 4, 2


def batches():
    g = torch.Generator().manual_seed(4)
    x, y = torch.randn(STEPS * 5, 4, generator=g), torch.randint(0, 3, (STEPS * 5,), generator=g)
    return x, y


def train_with_closures(device: str, out_dir, initial: nn.Module) -> None:
    """`initial`'s copy trained STEPS steps; the flat model state saved by a checkpoint
    closure as step_<n>.mdl (on the executor's checkpoint steps)."""
    cstorch._backend._reset_backend()
    backend = cstorch.backend(device)
    model = copy.deepcopy(initial)
    compiled = cstorch.compile(model, backend)
    optimizer = cstorch.optim.SGD(model.parameters(), lr=0.3, momentum=0.8)

    @cstorch.trace
    def step(x, y):
        loss = compiled(x, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss

    @cstorch.checkpoint_closure
    def save(n):
        cstorch.save(model.state_dict(), os.path.join(out_dir, f"step_{n}.mdl"))

    x, y = batches()
    loader = cstorch.utils.data.DataLoader(
        lambda: torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=5))
    for n, (bx, by) in enumerate(cstorch.utils.data.DataExecutor(loader, num_steps=STEPS, checkpoint_steps=EVERY),
                                 start=1):
        step(bx, by)
        save(n)
    cstorch._backend._reset_backend()


def eager_states(initial: nn.Module) -> dict[int, dict]:
    model = copy.deepcopy(initial)
    opt = torch.optim.SGD(model.parameters(), lr=0.3, momentum=0.8)
    x, y = batches()
    states = {0: copy.deepcopy(model.state_dict())}
    for n in range(1, STEPS + 1):
        opt.zero_grad()
        model(x[(n - 1) * 5:n * 5], y[(n - 1) * 5:n * 5]).backward()
        opt.step()
        states[n] = copy.deepcopy(model.state_dict())
    return states


def test_script_reads_the_checkpoints_of_a_custom_loop_on_csx_and_cpu(tmp_path):
    torch.manual_seed(0)
    initial = TwoLayer()
    truth = eager_states(initial)
    cstorch.save(initial.state_dict(), tmp_path / "initial.mdl")
    dirs = {}
    for device in ("CSX", "CPU"):
        dirs[device] = tmp_path / device
        dirs[device].mkdir()
        train_with_closures(device, str(dirs[device]), initial)
        assert sorted(os.listdir(dirs[device])) == ["step_2.mdl", "step_4.mdl"]  # checkpoint steps only
        for n in (2, 4):
            state = cstorch.load(dirs[device] / f"step_{n}.mdl")
            assert list(state) == list(truth[n])
            for name, want in truth[n].items():
                torch.testing.assert_close(torch.as_tensor(state[name]), want, rtol=1e-5, atol=1e-6)

    names = list(truth[0])
    assert run_script("list", dirs["CSX"] / "step_4.mdl") == [
        {"name": k, "dtype": "torch.float32", "shape": list(v.shape), "itemsize": 4} for k, v in truth[4].items()]

    *same, summary = run_script("compare", dirs["CSX"] / "step_4.mdl", dirs["CPU"] / "step_4.mdl", "--jobs", 2)
    assert summary["summary"]["compared"] == len(names)
    for r in same:
        assert r["max_abs"] <= 1e-5 * truth[4][r["name"]].abs().max().item(), r

    *moved, _ = run_script("compare", tmp_path / "initial.mdl", dirs["CSX"] / "step_2.mdl", "--jobs", 2)
    for r in moved:
        delta = (truth[2][r["name"]] - truth[0][r["name"]]).double().abs()
        assert r["differing"] == int((delta > 0).sum()) > 0, r
        assert r["max_abs"] == pytest.approx(delta.max().item(), rel=1e-4), r
