"""`cerebras.modelzoo.common` helpers against their Model Zoo semantics."""
from __future__ import annotations

import logging
import os

import pytest
import torch

import cstorch
from cerebras.modelzoo.common.input_utils import get_streaming_batch_size
from cerebras.modelzoo.common.pytorch_utils import SampleGenerator, get_checkpoints, visit_structure
from cstorch.distributed.streaming import streaming_worker


def test_sample_generator_yields_the_same_data_count_times_per_pass():
    data = (torch.zeros(2), torch.ones(2))
    gen = SampleGenerator(data=data, sample_count=3)
    assert len(gen) == 3
    first, second = list(gen), list(gen)  # every iter() is a new pass
    assert len(first) == len(second) == 3 and all(item is data for item in first)
    it = iter(gen)
    assert [next(it), it.next()] == [data, data]
    next(it)
    with pytest.raises(StopIteration):
        next(it)
    assert list(SampleGenerator(data, 0)) == []
    loader = cstorch.utils.data.DataLoader(lambda: SampleGenerator(data, 2))
    assert len(list(loader)) == 2


def test_streaming_batch_size_is_the_effective_batch_size(caplog):
    with caplog.at_level(logging.INFO, logger="cerebras.modelzoo.common.input_utils"):
        assert get_streaming_batch_size(8) == 8
    assert "Effective batch size is 8." in caplog.text
    with streaming_worker(1, 2):  # one process streams the global batch; the mesh splits it
        assert get_streaming_batch_size(8) == 8
    for bad in (0, -1):  # the real errors (cstorch.distributed.get_streaming_batch_size)
        with pytest.raises(ValueError, match="positive integer"):
            get_streaming_batch_size(bad)
    with pytest.raises(TypeError, match="integer"):
        get_streaming_batch_size(2.5)


def test_get_checkpoints_sorts_by_step(tmp_path):
    for name in ("checkpoint_10.mdl", "checkpoint_2.mdl", "checkpoint_x.mdl", "other.mdl", "checkpoint_3.mdl.tmp"):
        (tmp_path / name).write_text("")
    assert get_checkpoints(str(tmp_path)) == [os.path.join(str(tmp_path), f"checkpoint_{s}.mdl") for s in (2, 10)]


def test_visit_structure():
    tree = {"a": [1, "x", {"b": 2}], "c": 3.0}
    assert list(visit_structure(tree, lambda v: isinstance(v, int))) == [(["a", "0"], 1), (["a", "2", "b"], 2)]
    with pytest.raises(ValueError, match="Unknown data structure"):
        list(visit_structure(tree, lambda v: isinstance(v, int), strict=True))
