"""The train data stream of a fit: one continuing sequence of batches across the fit's
executors, that a restarted run re-enters at the same batch.

A fit runs several `DataExecutor`s (one per stretch between validations). Each would
restart its loader from the beginning; `TrainStream` instead hands every executor the
same continuing iterator per data worker, which moves on to the loader's next pass
when one ends. Its `position` is the number of global batches taken since the start of
training; a run resumed from a checkpoint builds the stream at the saved position, and
each worker skips the batches it had already delivered by replaying its loader. So
resuming is exact for loaders whose order depends only on their own seeded state (a
`torch.Generator` given to the sampler), not on torch's global RNG.
"""
from __future__ import annotations

from ..utils.data import DataLoader
from ..utils.data.streamer import LoaderPasses, share


class _Continuing:
    """An endless iterator over `loader`'s passes, starting after `skip` batches."""

    def __init__(self, loader, skip: int):
        self._passes = LoaderPasses(loader)
        self._skip = skip

    def __iter__(self):
        return self

    def __next__(self):
        while self._skip:
            next(self._passes)
            self._skip -= 1
        return next(self._passes)


class TrainStream(DataLoader):
    """`source`'s batches as one continuing stream, starting at global batch `position`."""

    def __init__(self, source: DataLoader, position: int = 0):
        if not isinstance(source, DataLoader):
            raise TypeError(f"Expected a cstorch.utils.data.DataLoader, got {type(source).__name__}")
        super().__init__(source.input_fn, *source.input_args, **source.input_kwargs)
        self.source = source
        self.position = position

    def _build_workers(self, count: int) -> list:
        loaders = super()._build_workers(count)
        return [_Continuing(inner, share(self.position, w, count)) for w, inner in enumerate(loaders)]

    def __len__(self) -> int:
        return len(self.source)
