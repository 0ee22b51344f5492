"""`SyntheticDataset` and the uniform batch size rule of the DataLoader."""
import collections
import warnings

import pytest
import torch

import cstorch
from cstorch.utils.data import DataExecutor, DataLoader, SyntheticDataset
from cstorch.utils.data.utils import infer_batch_size


def test_synthetic_samples_and_batches():
    ds = SyntheticDataset({"x": torch.ones(3, 5), "y": lambda i: torch.tensor(i % 4)}, num_samples=10)
    samples = list(ds)
    assert len(ds) == 10 and len(samples) == 10
    assert all(s["x"].shape == (3, 5) and torch.equal(s["x"], torch.ones(3, 5)) for s in samples)
    assert [int(s["y"]) for s in samples] == [i % 4 for i in range(10)]
    samples[0]["x"].add_(1)  # each sample is a clone
    assert torch.equal(next(iter(ds))["x"], torch.ones(3, 5))
    batches = list(torch.utils.data.DataLoader(ds, batch_size=4, drop_last=True))
    assert len(batches) == 2 and batches[0]["x"].shape == (4, 3, 5) and batches[0]["y"].dtype == torch.int64


def test_synthetic_containers_and_endless():
    P = collections.namedtuple("P", "a b")
    ds = SyntheticDataset([P(torch.zeros(2), torch.zeros(1, dtype=torch.int32)), (torch.ones(()),)])
    it = iter(ds)
    for _ in range(50):
        s = next(it)
    assert isinstance(s[0], P) and s[0].b.dtype == torch.int32 and s[1][0].shape == ()
    with pytest.raises(TypeError, match="does not have a length because `num_samples` was not provided"):
        len(ds)


@pytest.mark.parametrize("spec, num, exc, msg", [
    ({}, None, ValueError, "must be a non-empty python tree"),
    ({"x": 3}, None, ValueError, "but got an item of type `<class 'int'>`"),
    (torch.ones(1), 0, ValueError, "`num_samples` must be a positive integer, but got `0`"),
    (torch.ones(1), 2.5, TypeError, "`num_samples` must be a positive integer or None"),
])
def test_synthetic_validation(spec, num, exc, msg):
    with pytest.raises(exc, match=msg.replace("(", r"\(")):
        SyntheticDataset(spec, num)


def test_synthetic_feeds_an_executor():
    cstorch.backend("CPU")
    ds = SyntheticDataset((torch.zeros(4), torch.tensor(1)))
    loader = DataLoader(torch.utils.data.DataLoader, ds, batch_size=2)
    shapes = [(x.shape, y.shape) for x, y in DataExecutor(loader, num_steps=3)]
    assert shapes == [((2, 4), (2,))] * 3 and loader.batch_size == 2


def test_infer_batch_size():
    assert infer_batch_size({"a": torch.ones(3, 2), "b": [torch.ones(3)]}, is_csx=True) == 3
    assert infer_batch_size(torch.tensor(5.0), is_csx=True) == 1
    with pytest.raises(RuntimeError, match=r"Only uniform batch sizes are supported in CS runs.*\{2, 3\}"):
        infer_batch_size((torch.ones(2), torch.ones(3)), is_csx=True)
    with pytest.raises(RuntimeError, match="batch sizes 4 and 3. Make sure to set `drop_last=True`"):
        infer_batch_size(torch.ones(3), 4, is_csx=True)
    with pytest.warns(UserWarning, match="non-uniform batch sizes within the same batch"):
        assert infer_batch_size((torch.ones(2), torch.ones(3)), is_csx=False) is None
    with pytest.warns(UserWarning, match=r"non-uniform batch sizes between batches \(4 vs 3\)"):
        assert infer_batch_size(torch.ones(3), 4, is_csx=False) == 3


def test_dataloader_batch_sizes_on_cpu_warn():
    cstorch.backend("CPU")
    loader = DataLoader(lambda: [torch.ones(4, 2), torch.ones(4, 2), torch.ones(3, 2)])
    with pytest.warns(UserWarning, match=r"between batches \(4 vs 3\)"):
        list(DataExecutor(loader, num_steps=3))
    assert loader.batch_size == 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        list(DataExecutor(DataLoader(lambda: [torch.ones(4, 2)] * 3), num_steps=3))


def test_dataloader_non_uniform_batch_on_csx_raises():
    cstorch.backend("CSX")
    loader = DataLoader(lambda: [(torch.ones(4, 2), torch.ones(3))])
    with pytest.raises(RuntimeError, match="Only uniform batch sizes are supported in CS runs"):
        list(DataExecutor(loader, num_steps=1))
