"""`Schedule` and the executor's checkpoint schedule, against closed-form lists."""
import pytest
import torch

import cstorch
from cstorch.utils.data import DataExecutor, DataLoader, Schedule

R = Schedule.Range


def _loader(n=3):
    return DataLoader(lambda: [torch.ones(2, 1) * i for i in range(n)])


@pytest.mark.parametrize("rng, expected", [
    (R(0, 10, 3, False), [0, 3, 6, 9]),
    (R(0, 10, 4, False), [0, 4, 8]),
    (R(0, 10, 4, True), [0, 4, 8, 9]),
    (R(2, 9, 3, True), [2, 5, 8]),  # end - 1 already on the stride: not repeated
    (R(5, 6, 7, False), [5]),
])
def test_range_members(rng, expected):
    assert [i for i in range(20) if rng.match(i)] == expected
    assert list(rng) == expected and len(rng) == len(expected)
    assert rng.final_step == expected[-1]


def test_schedule_of_several_ranges():
    s = Schedule([R(0, 5, 2, False), R(5, 12, 3, True)])
    expected = [0, 2, 4, 5, 8, 11]
    assert [i for i in range(15) if s.match(i)] == expected == list(s)
    assert len(s) == 6 and s.start == 0 and s.final_step == 11
    assert [s.next_immediate_step(t) for t in (0, 1, 3, 5, 6, 9, 10, 11)] == [0, 2, 4, 5, 8, 11, 11, 11]
    with pytest.raises(ValueError, match="exceeds the last interval step 11"):
        s.next_immediate_step(12)
    empty = Schedule([])
    assert not any(empty.match(i) for i in range(5)) and len(empty) == 0
    assert empty.start is None and empty.final_step is None and empty.next_immediate_step(3) is None


@pytest.mark.parametrize("args, msg", [
    ((-1, 5, 1, False), r"start \(-1\) must an integer >= 0"),
    ((3, 3, 1, False), r"end \(3\) must be an integer greater than start 3"),
    ((0, 5, 0, False), r"step \(0\) must be an integer greater than zero"),
    ((0, 5, 1, 1), "include_last must be a bool"),
])
def test_range_validation(args, msg):
    with pytest.raises(ValueError, match=msg):
        R(*args)


def test_schedule_validation():
    with pytest.raises(ValueError, match="Intervals must be non-overlapping"):
        Schedule([R(0, 5, 1, False), R(4, 8, 1, False)])
    with pytest.raises(ValueError, match="interval must of type"):
        Schedule([(0, 5, 1, False)])


@pytest.mark.parametrize("n, steps, expected", [
    (3, 7, [2, 5, 6]),
    (3, 9, [2, 5, 8]),
    (1, 4, [0, 1, 2, 3]),
    (10, 4, [3]),  # N > num_steps: only the last step
    (4, 4, [3]),
    (0, 5, []),
    (None, 5, []),
])
def test_int_checkpoint_steps(n, steps, expected):
    cstorch.backend("CPU")
    ex = DataExecutor(_loader(), num_steps=steps, checkpoint_steps=n)
    assert [s for s in range(steps) if ex.checkpoint_step(s)] == expected
    seen = [ex.iteration for _ in ex if ex.is_checkpoint_step]
    assert seen == expected


def test_schedule_checkpoint_steps_are_used_as_given():
    cstorch.backend("CPU")
    sched = Schedule([R(1, 4, 2, True), R(6, 10, 3, False)])
    ex = DataExecutor(_loader(), num_steps=10, checkpoint_steps=sched)
    assert [ex.iteration for _ in ex if ex.is_checkpoint_step] == [1, 3, 6, 9]
    ex = DataExecutor(_loader(), num_steps=5, checkpoint_steps=Schedule([R(0, 2, 1, False)]))
    assert [ex.iteration for _ in ex if ex.is_checkpoint_step] == [0, 1]  # no forced last step


def test_bad_checkpoint_steps():
    cstorch.backend("CPU")
    for bad in (1.5, "3", [3]):
        with pytest.raises(ValueError, match="checkpoint_steps must be None, integer, or a Schedule, but got"):
            DataExecutor(_loader(), num_steps=3, checkpoint_steps=bad)
    with pytest.raises(RuntimeError, match='Expected checkpoint_steps to be an integer >= 0 or "None". Got: -2'):
        DataExecutor(_loader(), num_steps=3, checkpoint_steps=-2)


def test_checkpoint_closures_follow_a_schedule():
    cstorch.backend("CPU")
    saved = []

    @cstorch.checkpoint_closure
    def save(i):
        saved.append(i)

    ex = DataExecutor(_loader(), num_steps=8, checkpoint_steps=Schedule([R(1, 5, 2, True)]))
    for _ in ex:
        save(ex.iteration)
    assert saved == [1, 3, 4]


def test_num_steps_errors_keep_both_exception_types():
    cstorch.backend("CPU")
    for exc in (ValueError, RuntimeError):
        with pytest.raises(exc, match="Expected num_steps >= 1"):
            DataExecutor(_loader(), num_steps=0)
        with pytest.raises(exc, match="provide num_steps"):
            DataExecutor(DataLoader(lambda: iter([torch.ones(1)])))
