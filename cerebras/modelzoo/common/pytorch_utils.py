"""PyTorch helpers of Model Zoo code: `SampleGenerator` (synthetic data),
`get_checkpoints`, `visit_structure`."""
from __future__ import annotations

import os
import re
from typing import Any, Callable, Iterator, List, Optional, Tuple


class SampleGenerator:
    """An iterable that yields the same `data` `sample_count` times, in place of a
    DataLoader for synthetic data. `len()` is `sample_count`; every `iter()` starts a new
    pass of `sample_count` items (the object itself is also an iterator over one pass)."""

    def __init__(self, data, sample_count: int):
        self._data = data
        self._sample_count = sample_count
        self._count = 0

    def __iter__(self) -> "SampleGenerator":
        return SampleGenerator(self._data, self._sample_count)

    def __len__(self) -> int:
        return self._sample_count

    def __next__(self):
        return self.next()

    def next(self):
        """The next item: `data`, until `sample_count` were returned (then StopIteration)."""
        if self._count >= self._sample_count:
            raise StopIteration
        self._count += 1
        return self._data


def get_checkpoints(model_dir: str) -> List[str]:
    """The paths of the `checkpoint_<step>.mdl` files of `model_dir`, by step."""
    found = [(int(m.group(1)), name) for name in os.listdir(model_dir)
             if (m := re.fullmatch(r"checkpoint_(\d+)\.mdl", name))]
    return [os.path.join(model_dir, name) for _, name in sorted(found)]


def visit_structure(data_structure: Any, select_fn: Callable[[Any], bool], strict: bool = False,
                    scope: Optional[List[str]] = None) -> Iterator[Tuple[List[str], Any]]:
    """Yield `(scope, item)` for every item of a nested list/tuple/dict structure that
    `select_fn` selects; `scope` is the list of keys/indices (as strings) leading to it.
    With `strict`, an item that is neither a container nor selected is a ValueError."""
    scope = scope or []
    if isinstance(data_structure, (list, tuple)):
        for i, value in enumerate(data_structure):
            yield from visit_structure(value, select_fn, strict, scope + [str(i)])
    elif isinstance(data_structure, dict):
        for key, value in data_structure.items():
            yield from visit_structure(value, select_fn, strict, scope + [str(key)])
    elif select_fn(data_structure):
        yield scope, data_structure
    elif strict:
        raise ValueError(f"Unknown data structure: {data_structure}")


__all__ = ["SampleGenerator", "get_checkpoints", "visit_structure"]
