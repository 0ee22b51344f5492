"""`DistributedSampler`: order against permutations computed here with torch.Generator."""
import itertools
import pickle

import pytest
import torch

import cstorch
from cstorch.utils.data import DistributedSampler
from cstorch.utils.data.sampler import BatchSampler, ShardedSampler, ShuffleSampler, pad_index


def _perm(n, seed):
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()


def _stream(seed, n, epochs):
    """The whole index stream: epoch e is randperm(n) seeded with seed + e."""
    return [i for e in range(epochs) for i in _perm(n, seed + e)]


def _take(sampler, k):
    """The first k items over consecutive epochs (each epoch one full iteration)."""
    out = []
    while len(out) < k:
        out.extend(iter(sampler))
    return out[:k]


def test_unbatched_shuffle_is_seed_plus_epoch():
    s = DistributedSampler(list(range(10)), seed=7)
    assert len(s) == 10
    assert list(s) == _perm(10, 7)
    assert list(s) == _perm(10, 8)  # the next epoch reseeds with seed + 1


def test_no_shuffle_is_in_order():
    assert list(DistributedSampler(list(range(5)), shuffle=False)) == [0, 1, 2, 3, 4]
    # num_samples below / above the dataset size truncates / repeats it
    assert list(DistributedSampler(list(range(5)), shuffle=False, num_samples=3)) == [0, 1, 2]
    assert list(DistributedSampler(list(range(5)), shuffle=False, num_samples=8)) == [0, 1, 2, 3, 4, 0, 1, 2]


def test_drop_last_carries_leftovers_into_the_next_epoch():
    s = DistributedSampler(list(range(10)), seed=3, batch_size=4)
    stream = _stream(3, 10, 4)
    epoch0 = list(s)
    assert epoch0 == [stream[0:4], stream[4:8]]  # samples 8, 9 of the stream wait
    assert len(s) == 3  # 2 leftovers + 10 new samples
    epoch1 = list(s)
    assert epoch1 == [stream[8:12], stream[12:16], stream[16:20]]
    assert all(len(b) == 4 for b in epoch0 + epoch1)


def test_no_drop_last_short_or_padded_last_batch():
    s = DistributedSampler(list(range(10)), shuffle=False, batch_size=4, drop_last=False)
    assert list(s) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]] and len(s) == 3
    s = DistributedSampler(list(range(10)), shuffle=False, batch_size=4, drop_last=False, pad_last=True)
    assert list(s) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, pad_index, pad_index]]
    assert pickle.loads(pickle.dumps(pad_index)) is pad_index and repr(pad_index) == "pad_index"


def test_set_state_resumes_the_stream():
    bs, n, seed = 4, 10, 11
    full = [i for b in _take(DistributedSampler(list(range(n)), seed=seed, batch_size=bs), 12) for i in b]
    assert full == _stream(seed, n, 5)[: 12 * bs]
    for consumed in (1, 2, 3, 5, 7):  # batches an earlier run streamed
        s = DistributedSampler(list(range(n)), seed=seed, batch_size=bs)
        s.set_state(consumed * bs)
        resumed = [i for b in _take(s, 12 - consumed) for i in b]
        assert resumed == full[consumed * bs:], consumed


def test_num_samples_larger_than_dataset():
    n, num, seed = 4, 10, 5
    g = torch.Generator().manual_seed(seed)
    order = torch.cat([torch.arange(n), torch.arange(n), torch.randperm(n, generator=g)])[:num]
    expected = order[torch.randperm(num, generator=g)].tolist()
    s = DistributedSampler(list(range(n)), seed=seed, num_samples=num)
    assert list(s) == expected and len(s) == num
    assert sorted(expected) == sorted([0, 1, 2, 3] * 2 + order[8:].tolist())


def test_seed_none_draws_one_seed_from_torch():
    torch.manual_seed(0)
    a = DistributedSampler(list(range(20)))
    torch.manual_seed(0)
    b = DistributedSampler(list(range(20)))
    assert list(a) == list(b) and sorted(list(a)) == list(range(20))
    seed = a.kwargs["seed"]
    b.set_state(23)  # the drawn seed is kept: epoch 1, 3 samples in
    assert list(b) == _perm(20, seed + 1)[3:]


def test_round_robin_sharding_by_global_batch_index():
    batches = [[i] for i in range(7)]
    w = [ShardedSampler(batches, num_workers=3, worker_id=k) for k in range(3)]
    assert [list(x) for x in w] == [[[0], [3], [6]], [[1], [4]], [[2], [5]]]
    # the next epoch continues the global count: batch 7 of the stream is epoch 2's first
    assert [len(x) for x in w] == [2, 3, 2]
    assert [list(x) for x in w] == [[[2], [5]], [[0], [3], [6]], [[1], [4]]]
    assert list(ShardedSampler(batches)) == batches  # one worker on this system
    with pytest.raises(ValueError):
        ShardedSampler(batches, num_workers=2, worker_id=2)


def test_with_a_torch_dataloader():
    data = torch.arange(10.0)
    s = DistributedSampler(data, seed=0, batch_size=4)
    loader = torch.utils.data.DataLoader(data, batch_sampler=s)
    got = [b.tolist() for b in itertools.chain(loader, loader)]
    stream = _stream(0, 10, 2)
    assert got == [[float(i) for i in stream[k:k + 4]] for k in range(0, 20, 4)]


def test_validation():
    with pytest.raises(ValueError, match="batch_size should be a positive integer value"):
        DistributedSampler(list(range(4)), batch_size=0)
    with pytest.raises(ValueError, match="drop_last should be a boolean value"):
        BatchSampler(range(4), 2, drop_last=1)
    with pytest.raises(ValueError, match="num_samples should be a positive integer value"):
        ShuffleSampler(list(range(4)), num_samples=0)
    grow = list(range(4))
    s = ShuffleSampler(grow, shuffle=False)
    grow.append(4)
    with pytest.raises(RuntimeError, match="must have the same length every epoch"):
        list(s)


def test_csx_rules():
    cstorch.backend("CSX")
    with pytest.raises(ValueError, match="Please set `drop_last=True` or `pad_last=True`"):
        DistributedSampler(list(range(8)), batch_size=4, drop_last=False)
    with pytest.raises(ValueError, match="batch_size must be the global batch size"):
        DistributedSampler(list(range(8)))
    DistributedSampler(list(range(8)), batch_size=4, drop_last=False, pad_last=True)
    DistributedSampler(list(range(8)), shard=False)
