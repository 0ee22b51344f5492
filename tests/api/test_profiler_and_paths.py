"""`DataExecutor.profiler` (rate tracker values read in step closures, as real training
loops log them), `cstorch.utils.tracker.RateTracker`, the run artifact folders and the
`pathlib.Path`s of `backend.artifact_dir` and `Trainer.model_dir`."""
import pathlib
import time

import pytest
import torch
import torch.nn as nn

import cstorch
from cstorch.utils.profiler import Activity, Profiler, RateTrackerActivity
from cstorch.utils.tracker import RateTracker


def test_rate_tracker_rates():
    tracker = RateTracker(smooth_factor=0.5)
    tracker.reset_time(offset=2.0)  # as if started 2 s ago
    tracker.add(100)
    first = tracker.rate()
    assert 45 < first <= 50 and tracker.total_count == 100
    assert 45 < tracker.global_rate() <= 50 and tracker.elapsed_seconds() >= 2.0
    time.sleep(0.01)
    assert tracker.rate() == pytest.approx(0.5 * first)  # no new samples: 0.5 * 0 + 0.5 * the previous rate
    tracker.reset()
    assert tracker.total_count == 0 and tracker.global_rate() == 0.0


@pytest.mark.parametrize("kind", ["CPU", "CSX"])
def test_the_profiler_of_a_run_counts_samples_and_rates(kind):
    cstorch.backend(kind)

    @cstorch.trace
    def step(x):
        return x.sum()

    seen = []
    loader = cstorch.utils.data.DataLoader(lambda: [torch.ones(4, 2)] * 3)
    executor = cstorch.utils.data.DataExecutor(loader, num_steps=5)
    assert executor.profiler is None

    @cstorch.step_closure
    def log(_):
        tracker = executor.profiler.rate_tracker  # what real loops read in their logging closure
        seen.append((float(tracker.total_samples), tracker.rate, tracker.rate(), tracker.global_rate,
                     tracker.samples_per_sec, tracker.flops_utilization))

    for x in executor:
        log(step(x))
    assert [s[0] for s in seen] == [4.0, 8.0, 12.0, 16.0, 20.0]
    assert all(s[1] >= 0 and s[1] == s[2] and s[3] == s[4] and s[5] is None for s in seen)
    assert seen[-1][3] > 0
    values = executor.profiler.rate_tracker()
    assert set(values) == {"total_samples", "total_time", "rate", "global_rate", "samples_per_sec",
                           "flops_utilization"}


def test_profiler_activities_are_checked():
    class Steps(Activity):
        def __init__(self):
            self.n = 0

        @classmethod
        def name(cls):
            return "steps"

        def update(self, batch_size):
            self.n += 1

        def compute(self):
            return self.n

    p = Profiler("unused", [Steps, RateTrackerActivity])
    p.step(3)
    assert p.steps() == 1 and p.rate_tracker.total_samples == 3
    with pytest.raises(TypeError, match="subclass of Activity"):
        Profiler("x", [int])
    with pytest.raises(ValueError, match="already exists"):
        Profiler("x", [Steps, Steps])
    with pytest.raises(RuntimeError, match="before it's computed"):
        RateTrackerActivity().rate  # noqa: B018
    cstorch.backend("CPU")
    loader = cstorch.utils.data.DataLoader(lambda: [torch.ones(2)])
    ex = cstorch.utils.data.DataExecutor(loader, num_steps=2, profiler_activities=[Steps])
    for _ in ex:
        pass
    assert ex.profiler.steps() == 2 and not hasattr(ex.profiler, "rate_tracker")
    with pytest.raises(TypeError):
        cstorch.utils.data.DataExecutor(loader, num_steps=1, profiler_activities=[object])


def test_compile_only_runs_have_no_profiler(tmp_path):
    cstorch.backend("CSX", artifact_dir=tmp_path, compile_only=True)
    loader = cstorch.utils.data.DataLoader(lambda: [torch.ones(2)])
    ex = cstorch.utils.data.DataExecutor(loader, num_steps=1)
    for _ in ex:
        pass
    assert ex.profiler is None


def test_artifact_dirs_are_paths_made_when_something_is_written_there(tmp_path):
    b = cstorch.backend("CSX", artifact_dir=tmp_path / "logs")
    assert isinstance(b.artifact_dir, pathlib.Path) and b.artifact_dir == tmp_path / "logs"
    assert not b.artifact_dir.exists()
    loader = cstorch.utils.data.DataLoader(lambda: [torch.ones(2)])
    first = cstorch.utils.data.DataExecutor(loader, num_steps=1)
    with pytest.raises(RuntimeError, match="must be iterated before having an artifact directory"):
        first.artifact_dir  # noqa: B018
    for _ in first:
        pass
    assert not b.artifact_dir.exists(), "a run that writes nothing there leaves no (empty) artifact folder"
    first.artifact_dir  # noqa: B018  (a reader that writes there creates it)
    assert b.artifact_dir.is_dir()
    second = cstorch.utils.data.DataExecutor(loader, num_steps=1)
    for _ in second:
        pass
    assert first.artifact_dir == b.artifact_dir / "executors" / "000001" and first.artifact_dir.is_dir()
    assert second.artifact_dir == b.artifact_dir / "executors" / "000002"
    assert (b.artifact_dir / "executors" / "latest").resolve() == second.artifact_dir.resolve()


class _Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 1)

    def forward(self, batch):
        return self.fc(batch).square().mean()


def test_trainer_dirs_are_paths(tmp_path):
    from cstorch.trainer import Callback, Trainer, TrainingLoop

    written = []

    class WritesNextToTheCheckpoints(Callback):  # as real callbacks do: trainer.model_dir / "file"
        def on_fit_end(self, trainer, loop):
            path = trainer.model_dir / "done.txt"
            path.write_text("ok")
            written.append(path)

    trainer = Trainer(device="CPU", model_dir=str(tmp_path / "run"), seed=0, model=_Tiny,
                      optimizer=lambda m: cstorch.optim.SGD(m.parameters(), lr=0.1),
                      loop=TrainingLoop(num_steps=2), callbacks=[WritesNextToTheCheckpoints()], loggers=[])
    assert isinstance(trainer.model_dir, pathlib.Path) and trainer.model_dir == tmp_path / "run"
    assert isinstance(trainer.artifact_dir, pathlib.Path) and isinstance(trainer.summary_dir, pathlib.Path)
    assert isinstance(trainer.backend.artifact_dir, pathlib.Path)
    trainer.fit(cstorch.utils.data.DataLoader(lambda: [torch.ones(2, 2)] * 2))
    assert written and written[0].read_text() == "ok"
    assert trainer.backend.artifact_dir.is_dir()
