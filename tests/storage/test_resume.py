"""Exact resume: a run killed with SIGKILL after a checkpoint and restarted from it
matches an uninterrupted run bit for bit (losses and final state), and leaving out
any restored part breaks that. Also the pieces: restartable loaders and RNG state."""
import os
import signal
import subprocess
import sys

import pytest
import torch

import cstorch
from cstorch._backend import _reset_backend

SCRIPT = os.path.join(os.path.dirname(__file__), "resume_script.py")
STEPS, EVERY, KILL_AFTER = 12, 4, 8


def _run(directory, *args, expect_kill=False):
    os.makedirs(directory, exist_ok=True)
    proc = subprocess.run([sys.executable, SCRIPT, "--dir", str(directory), "--steps", str(STEPS),
                           "--every", str(EVERY), *args], capture_output=True, text=True, timeout=300)
    if expect_kill:
        assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    else:
        assert proc.returncode == 0, proc.stderr[-3000:]


def _losses(directory):
    lines = (directory / "losses.txt").read_text().split()
    return dict(zip(map(int, lines[0::2]), lines[1::2]))


def _flat(state, prefix=""):
    if isinstance(state, dict):
        for k, v in state.items():
            yield from _flat(v, f"{prefix}{k}.")
    elif isinstance(state, (list, tuple)):
        for i, v in enumerate(state):
            yield from _flat(v, f"{prefix}{i}.")
    else:
        yield prefix.rstrip("."), state


def _same(a, b) -> list[str]:
    """Keys whose values differ (tensors compared bit for bit)."""
    fa, fb = dict(_flat(a)), dict(_flat(b))
    assert fa.keys() == fb.keys()
    diff = []
    for k in fa:
        x, y = fa[k], fb[k]
        if isinstance(x, torch.Tensor):
            if x.dtype != y.dtype or x.shape != y.shape or not torch.equal(x.view(-1).view(torch.uint8),
                                                                          y.view(-1).view(torch.uint8)):
                diff.append(k)
        elif x != y:
            diff.append(k)
    return diff


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("resume")
    _run(root / "whole")
    _run(root / "killed", "--kill-after", str(KILL_AFTER), expect_kill=True)
    return root


@pytest.mark.slow
def test_killed_and_resumed_run_matches_the_uninterrupted_one(runs):
    whole, killed = runs / "whole", runs / "killed"
    assert not (killed / "final.pt").exists()  # it really died
    assert sorted(p.name for p in killed.glob("ckpt_*.mdl")) == ["ckpt_4.mdl", "ckpt_8.mdl"]
    resumed = runs / "resumed"
    _run(resumed, "--resume", str(killed / f"ckpt_{KILL_AFTER}.mdl"))
    want = _losses(whole)
    assert sorted(want) == list(range(STEPS))
    got = {**_losses(killed), **_losses(resumed)}
    assert sorted(_losses(resumed)) == list(range(KILL_AFTER, STEPS))
    assert got == want  # every step's loss, bit for bit
    diff = _same(torch.load(resumed / "final.pt"), torch.load(whole / "final.pt"))
    assert diff == []


@pytest.mark.slow
@pytest.mark.parametrize("part,shows_in", [
    ("rng", "losses"), ("dataloader", "losses"), ("optimizer", "losses"), ("scheduler", "losses"),
    ("grad_scaler", "grad_scaler.loss_scale"),
])
def test_each_restored_part_is_needed(runs, part, shows_in):
    """Negative controls: resuming without one part must change what the check sees."""
    out = runs / f"forget_{part}"
    _run(out, "--resume", str(runs / "killed" / f"ckpt_{KILL_AFTER}.mdl"), "--forget", part)
    whole = runs / "whole"
    if shows_in == "losses":
        want = _losses(whole)
        assert any(_losses(out)[k] != want[k] for k in range(KILL_AFTER, STEPS))
    diff = _same(torch.load(out / "final.pt"), torch.load(whole / "final.pt"))
    assert diff and (shows_in == "losses" or shows_in in diff)


# -- the pieces -------------------------------------------------------------------------------
class Countdown:
    """A restartable loader over range(n) batches of one scalar each."""

    def __init__(self, n=10):
        self.n, self.start, self.seen_worker_states = n, 0, []

    def __iter__(self):
        for i in range(self.start, self.n):
            yield torch.full((2,), float(i))

    def __len__(self):
        return self.n

    def state_dict(self):
        w = cstorch.distributed.get_worker_state()
        self.seen_worker_states.append(w)
        return {"next": self.start + w.worker_step}

    def load_state_dict(self, sd, strict=True):
        self.start = sd["next"]

    def aggregate_state_dict(self, states):
        return states[0]

    def deaggregate_state_dict(self, sd, strict=True):
        return sd


@pytest.mark.parametrize("backend_type", ["CPU", "CSX"])
def test_dataloader_state_on_checkpoint_steps(backend_type):
    _reset_backend()
    cstorch.backend(backend_type)
    loader = cstorch.utils.data.DataLoader(Countdown)
    assert loader.is_restartable and loader.state_dict() == {"next": 0}  # before the run
    states = []

    @cstorch.checkpoint_closure
    def save():
        states.append(loader.state_dict())

    for _ in cstorch.utils.data.DataExecutor(loader, num_steps=5, checkpoint_steps=2):
        save()
    assert states == [{"next": 2}, {"next": 4}, {"next": 5}]
    w = loader.dataloader.seen_worker_states[-1]
    assert w.worker_step == 5 and w.samples_streamed == 10
    resumed = cstorch.utils.data.DataLoader(Countdown)
    resumed.load_state_dict(states[1])
    assert [b[0].item() for b in cstorch.utils.data.DataExecutor(resumed, num_steps=3)] == [4.0, 5.0, 6.0]
    _reset_backend()


def test_dataloader_state_errors():
    _reset_backend()
    cstorch.backend("CPU")
    plain = cstorch.utils.data.DataLoader(lambda: [torch.ones(2)] * 3)
    with pytest.raises(RuntimeError, match="implement RestartableDataLoader"):
        plain.state_dict()
    loader = cstorch.utils.data.DataLoader(Countdown)
    with pytest.raises(RuntimeError, match="only be requested at a checkpoint step"):
        for _ in cstorch.utils.data.DataExecutor(loader, num_steps=3, checkpoint_steps=2):
            loader.state_dict()
    loader = cstorch.utils.data.DataLoader(Countdown)
    with pytest.raises(RuntimeError, match="only be loaded onto before execution"):
        for _ in cstorch.utils.data.DataExecutor(loader, num_steps=3):
            loader.load_state_dict({"next": 0})
    with pytest.raises(RuntimeError, match="only available inside the state_dict"):
        cstorch.distributed.get_worker_state()

    class HalfStrict(Countdown):
        def deaggregate_state_dict(self, sd):
            return sd

    with pytest.raises(TypeError, match="both take a `strict` argument or neither"):
        cstorch.utils.data.DataLoader(HalfStrict).load_state_dict({"next": 0})
    _reset_backend()


def test_rng_state_round_trip_on_csx():
    """Restoring the key replays the same random draws in the compiled step."""
    _reset_backend()
    backend = cstorch.backend("CSX")
    model = torch.nn.Dropout(0.5)
    compiled = cstorch.compile(model, backend)

    @cstorch.trace
    def step(x):
        return compiled(x)

    def draws(n):
        out = []
        for x in cstorch.utils.data.DataExecutor(cstorch.utils.data.DataLoader(lambda: [torch.ones(64)] * n)):
            out.append(step(x))
        return [o + 0 for o in out]

    cstorch.manual_seed(3)
    state = cstorch.get_rng_state()
    assert state.dtype == torch.uint32
    first = draws(3)
    cstorch.set_rng_state(state)
    again = draws(3)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not torch.equal(first[0], first[1])  # the key advances every step
    with pytest.raises(ValueError, match="saved by a CPU/GPU backend run"):
        cstorch.set_rng_state(torch.get_rng_state())
    _reset_backend()


def test_rng_state_on_cpu_is_torchs():
    _reset_backend()
    cstorch.backend("CPU")
    state = cstorch.get_rng_state()
    a = torch.rand(3)
    cstorch.set_rng_state(state)
    assert torch.equal(torch.rand(3), a)
    with pytest.raises(ValueError, match="saved by a CSX run"):
        cstorch.set_rng_state(torch.zeros(2, dtype=torch.uint32))
    _reset_backend()


def test_cpu_rng_state_restores_from_a_checkpoint_file(tmp_path):
    """A checkpoint's tensors load lazily; torch's generator needs real storage."""
    _reset_backend()
    cstorch.backend("CPU")
    cstorch.save({"rng": cstorch.get_rng_state()}, str(tmp_path / "rng.mdl"))
    a = torch.rand(3)
    cstorch.set_rng_state(cstorch.load(str(tmp_path / "rng.mdl"))["rng"])
    assert torch.equal(torch.rand(3), a)
    _reset_backend()
