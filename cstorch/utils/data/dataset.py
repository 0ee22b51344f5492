"""`SyntheticDataset`: fixed or index-generated samples, for benchmarks and compile
checks that need no data on disk."""
from __future__ import annotations

import copy
from typing import Any, Iterator, Optional

import torch
from torch.utils._pytree import SUPPORTED_NODES, tree_flatten, tree_unflatten

try:  # torch keeps datapipes for now; fall back to a plain iterable dataset without them
    from torch.utils.data import IterDataPipe as _Base
except ImportError:  # pragma: no cover
    from torch.utils.data import IterableDataset as _Base


class _SampleSpec:
    """The flattened sample spec. Kept out of the dataset's containers on purpose: a
    torch DataLoader walks a datapipe's list/dict attributes by pickling them, which
    fails on lambda leaves when dill is not installed."""

    def __init__(self, leaves: list, spec):
        self.leaves = leaves
        self.spec = spec

    def __deepcopy__(self, memo):
        # tree specs are immutable; deep-copying them warns in recent torch
        return _SampleSpec(copy.deepcopy(self.leaves, memo), self.spec)

    def sample(self, index: int):
        values = [leaf.clone() if isinstance(leaf, torch.Tensor) else leaf(index) for leaf in self.leaves]
        return tree_unflatten(values, self.spec)


class SyntheticDataset(_Base):
    """An iterable dataset whose every sample has the structure of `sample_spec`.

    Each leaf of `sample_spec` (a pytree of lists, tuples, dicts, named tuples, ...)
    is either a tensor, cloned into every sample, or a callable `index -> tensor`.
    `num_samples=None` makes the dataset endless (and `len()` a TypeError).

        ds = SyntheticDataset({"x": torch.zeros(784), "y": lambda i: torch.tensor(i % 10)}, num_samples=64)
        loader = torch.utils.data.DataLoader(ds, batch_size=8)

    Args:
        sample_spec: the structure of a sample: a pytree whose leaves are tensors (cloned into every sample)
            or callables `index -> tensor`.
        num_samples: the number of samples; None: endless.
    """

    def __init__(self, sample_spec: Any, num_samples: Optional[int] = None):
        super().__init__()
        leaves, spec = tree_flatten(sample_spec)
        if not leaves:
            raise ValueError("`sample_spec` must be a non-empty python tree of `torch.Tensor` or `Callable`.")
        for leaf in leaves:
            if not isinstance(leaf, torch.Tensor) and not callable(leaf):
                raise ValueError(
                    f"`sample_spec` is expected to contain a python tree of `torch.Tensor`, or `Callable`, but got "
                    f"an item of type `{type(leaf)}`. Supported containers for the leaves are "
                    f"{', '.join(str(t) for t in SUPPORTED_NODES)}."
                )
        if num_samples is not None:
            if not isinstance(num_samples, int) or isinstance(num_samples, bool):
                raise TypeError(
                    f"`num_samples` must be a positive integer or None, but got a value of type `{type(num_samples)}`."
                )
            if num_samples <= 0:
                raise ValueError(f"`num_samples` must be a positive integer, but got `{num_samples}`.")
        self._sample_spec = _SampleSpec(leaves, spec)
        self._num_samples = num_samples

    def __iter__(self) -> Iterator[Any]:
        index = 0
        while self._num_samples is None or index < self._num_samples:
            yield self._sample_spec.sample(index)
            index += 1

    def __len__(self) -> int:
        if self._num_samples is None:
            raise TypeError(
                f"`{type(self).__name__}` does not have a length because `num_samples` was not provided."
            )
        return self._num_samples
