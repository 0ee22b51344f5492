"""`DistributedSampler`: shuffling, batching and sharding of a map-style dataset whose
order does not depend on how many workers stream it.

It chains three samplers:

* `ShuffleSampler` yields sample indices epoch after epoch. With `shuffle`, epoch `e`
  is `torch.randperm(len, generator=torch.Generator().manual_seed(seed + e))`; a
  `num_samples` larger than the dataset repeats it (shuffled together), a smaller one
  truncates each epoch. `start_index` skips that many samples of the whole stream.
* `BatchSampler` groups indices into lists of `batch_size`. With `drop_last`, the
  samples that do not fill a batch at the end of an epoch start the next epoch's first
  batch, so no sample is lost and the stream of batches is the same however the run
  is split; with `drop_last=False` the last batch is short, or filled with
  `pad_index` when `pad_last`.
* `ShardedSampler` hands global batch `i` to worker `i % num_workers` (round robin).
  The workers default to the data workers of the run (`num_workers_per_csx`, see
  `cstorch.distributed.streaming`): built inside `input_fn`, each worker keeps its
  share, and the executor, taking global batch `k` from worker `k % W`, sees the same
  stream of batches as with one worker.

`set_state(start_index)` restarts the chain after `start_index` samples, which makes
a resumed run see exactly the batches the interrupted one would have seen.
"""
from __future__ import annotations

import math
from typing import Iterable, Iterator, Optional

import torch

from ..._backend import use_cs

from ...distributed.streaming import get_streaming_rank, num_streamers


class _PadIndex:
    """The index that fills a padded last batch (`pad_last=True`)."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "pad_index"

    def __reduce__(self):
        return (_PadIndex, ())


pad_index = _PadIndex()


def _random_seed() -> int:
    """A seed drawn from torch's global generator (reproducible under torch.manual_seed)."""
    return int(torch.randint(0, 2**31 - 1, (), dtype=torch.int64).item())


class ShuffleSampler(torch.utils.data.Sampler):
    """Sample indices of `data_source`, one logical epoch of `num_samples` (default
    `len(data_source)`) after another, starting `start_index` samples in."""

    def __init__(self, data_source, num_samples: Optional[int] = None, shuffle: bool = True,
                 seed: Optional[int] = None, start_index: int = 0):
        self._data_source = data_source
        self._num_samples = num_samples
        n = self.num_samples
        if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={n}")
        self._frozen_num_samples = n
        self.shuffle = shuffle
        self.seed = _random_seed() if (seed is None and shuffle) else seed
        self.epoch, self.start_index = divmod(start_index, n)

    @property
    def num_samples(self) -> int:
        return len(self._data_source) if self._num_samples is None else self._num_samples

    def _epoch_order(self) -> torch.Tensor:
        size = len(self._data_source)
        n = self.num_samples
        g = torch.Generator()
        g.manual_seed(self.seed + self.epoch)
        if n <= size:
            return torch.randperm(size, generator=g)[:n]
        # more samples than the dataset: all but the last copy in order, the last copy
        # shuffled, truncated to n, and then the whole epoch shuffled together
        copies = math.ceil(n / size)
        order = torch.cat([torch.arange(size)] * (copies - 1) + [torch.randperm(size, generator=g)])[:n]
        return order[torch.randperm(n, generator=g)]

    def __iter__(self) -> Iterator[int]:
        if self.num_samples != self._frozen_num_samples:
            raise RuntimeError(
                f"Data source passed into Sampler must have the same length every epoch. Original length was "
                f"{self._frozen_num_samples}, new length is {self.num_samples}"
            )
        if self.shuffle:
            yield from self._epoch_order()[self.start_index:].tolist()
        else:
            size = len(self._data_source)
            for i in range(self.start_index, self.num_samples):
                yield i % size
        self.epoch += 1
        self.start_index = 0

    def __len__(self) -> int:
        return self.num_samples - self.start_index


class BatchSampler(torch.utils.data.Sampler):
    """Lists of `batch_size` items of `sampler`. With `drop_last`, an epoch's
    incomplete tail is carried into the next epoch instead of being dropped."""

    def __init__(self, sampler: Iterable, batch_size: int, drop_last: bool, pad_last: bool = False):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.pad_last = pad_last
        self.leftover_samples: list = []
        if len(sampler) < batch_size:
            # the rest of this epoch cannot fill a batch: it opens the next epoch's first one
            self.leftover_samples = list(sampler)

    def __iter__(self) -> Iterator[list]:
        bs = self.batch_size
        if self.drop_last:
            batch = list(self.leftover_samples)  # kept until this epoch ends
            for idx in self.sampler:
                batch.append(idx)
                if len(batch) == bs:
                    yield batch
                    batch = []
            self.leftover_samples = batch
            return
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == bs:
                yield batch
                batch = []
        if batch:
            if self.pad_last:
                batch.extend([pad_index] * (bs - len(batch)))
            yield batch

    def __len__(self) -> int:
        if self.drop_last:
            return (len(self.sampler) + len(self.leftover_samples)) // self.batch_size
        return -(-len(self.sampler) // self.batch_size)


class ShardedSampler(torch.utils.data.Sampler):
    """Round robin of the items of `data_source` (global batches) over the data
    workers: worker `w` of `n` gets items `i` with `i % n == w`, counting across
    epochs. `num_workers`/`worker_id` default to `num_streamers()` and
    `get_streaming_rank()` read at construction: the calling data worker inside
    `input_fn`, one worker (all items) elsewhere."""

    def __init__(self, data_source: Iterable, num_workers: Optional[int] = None, worker_id: Optional[int] = None):
        self._data_source = data_source
        self._num_groups = num_streamers() if num_workers is None else num_workers
        self._group_idx = get_streaming_rank() if worker_id is None else worker_id
        if not isinstance(self._num_groups, int) or self._num_groups < 1:
            raise ValueError(f"num_workers must be a positive integer, got {self._num_groups}")
        if not isinstance(self._group_idx, int) or not 0 <= self._group_idx < self._num_groups:
            raise ValueError(f"worker_id must be in [0, {self._num_groups}), got {self._group_idx}")
        self._starting_group = 0  # global index (mod workers) of the next epoch's first item

    def __iter__(self) -> Iterator:
        if self._num_groups == 1:
            yield from self._data_source
            return
        count = 0
        for i, item in enumerate(self._data_source, start=self._starting_group):
            count += 1
            if i % self._num_groups == self._group_idx:
                yield item
        self._starting_group = (self._starting_group + count) % self._num_groups

    def __len__(self) -> int:
        total = len(self._data_source)
        mine = total // self._num_groups
        offset = (self._group_idx - self._starting_group) % self._num_groups
        return mine + int(offset < total % self._num_groups)


class DistributedSampler(torch.utils.data.Sampler):
    """Shuffle, batch and shard a map-style dataset (see the module docstring).

    Pass it as `batch_sampler=` to a torch DataLoader when `batch_size` is given (it
    yields lists of indices), as `sampler=` otherwise. `seed=None` draws a seed from
    torch's global generator once, at construction.

    Args:
        data_source: the map-style dataset (anything with a length).
        shuffle: shuffle each epoch (epoch e with the seed `seed + e`).
        seed: the shuffle's seed; None: drawn from torch's global generator now.
        start_index: skip this many samples of the whole stream (a resumed run's position).
        shard: hand global batch i to data worker i % W (round robin over the run's data workers).
        batch_size: group the indices into lists of this size (the global batch size on CSX); None: yield
            single indices.
        drop_last: the samples that do not fill a batch at the end of an epoch start the next epoch's first
            batch; False: the last batch of an epoch is short (or padded with `pad_last`).
        num_samples: the number of samples per epoch (more than the dataset repeats it, fewer truncates);
            None: the dataset's length.
        pad_last: with `drop_last=False`, fill the last batch with `pad_index`.

    Differences from the real system:
        `shard=True` shards by data worker (the workers are threads of one process), so
        W workers stream the same sequence as one worker.
    """

    def __init__(self, data_source, shuffle: bool = True, seed: Optional[int] = None, start_index: int = 0,
                 shard: bool = True, batch_size: Optional[int] = None, drop_last: bool = True,
                 num_samples: Optional[int] = None, pad_last: bool = False):
        if use_cs() and not drop_last and not pad_last:
            raise ValueError(
                "Running on CSX requires all batches to have the same batch size. Setting `drop_last=False` and "
                "`pad_last=False` violates this condition as the last batch may have a smaller batch size. "
                "Please set `drop_last=True` or `pad_last=True`."
            )
        if use_cs() and batch_size is None and shard:
            raise ValueError(
                "Running on CSX but batch_size is None and shard is enabled. When running on CSX, the batch_size "
                "must be the global batch size."
            )
        if seed is None and shuffle:
            seed = _random_seed()
        chain = ShuffleSampler(data_source, num_samples=num_samples, shuffle=shuffle, seed=seed,
                               start_index=start_index)
        if batch_size is not None:
            chain = BatchSampler(chain, batch_size, drop_last, pad_last)
        if shard:
            chain = ShardedSampler(chain)
        self.sampler = chain
        self.start_index = start_index
        self.kwargs = dict(data_source=data_source, shuffle=shuffle, seed=seed, shard=shard, batch_size=batch_size,
                           drop_last=drop_last, num_samples=num_samples, pad_last=pad_last)

    def __iter__(self) -> Iterator:
        return iter(self.sampler)

    def __len__(self) -> int:
        return len(self.sampler)

    def set_state(self, start_index: int) -> None:
        """Continue from a previous run that streamed `start_index` samples in total."""
        self.__init__(**self.kwargs, start_index=start_index)
