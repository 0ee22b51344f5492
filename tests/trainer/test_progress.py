"""The Trainer's progress object (`cstorch/trainer/progress.py`): the stream position it
derives for a step, what a checkpoint keeps of it, and how the Trainer reads it."""
from __future__ import annotations

import pytest

from cstorch.trainer.callbacks.loop import TrainingLoop
from cstorch.trainer.progress import Progress


def test_a_fit_counts_batches_from_where_the_stream_stood():
    p = Progress(global_step=4, batches_consumed=10)  # e.g. loaded: 10 batches for 4 steps (a skipped epoch end)
    p.start_fit(TrainingLoop(max_steps=7).plan(p.global_step, None, validate=False))
    assert (p.fit_start, p.fit_batches) == (4, 10)
    p.start_step()
    assert p.current_step == 5
    p.count_step()
    assert (p.global_step, p.step_pending, p.current_step) == (5, False, 5)
    assert p.batches_at(5) == 11 and p.state_dict(5) == {"global_step": 5, "dataloader": {"batches_consumed": 11}}
    p.count_step()
    p.end_fit()
    assert p.batches_consumed == 12


def test_a_closure_names_the_step_of_its_iteration_in_the_stretch():
    p = Progress(global_step=9)
    p.start_stretch(6)
    assert [p.closure_step(i) for i in range(3)] == [7, 8, 9]
    assert p.closure_step(None) == 9


@pytest.mark.parametrize("state, want", [
    ({"global_step": 8, "dataloader": {"batches_consumed": 12}}, (8, 12)),
    ({"global_step": 8}, (8, 8)),  # no stream position: one batch per step
    ({}, (0, 0)),
])
def test_a_checkpoint_restores_it_whole(state, want):
    p = Progress(global_step=3, batches_consumed=5, step_pending=True)
    p.load_state_dict(state)
    assert (p.global_step, p.batches_consumed, p.step_pending) == (*want, False)
