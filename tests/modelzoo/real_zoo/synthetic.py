"""Synthetic data in the exact on-disk formats the real Model Zoo's data processors read.

Nothing is downloaded: each writer makes a small, seeded data set in the layout its reader
expects, so the real reader code runs unchanged.

- `write_mnist`: torchvision's MNIST folder (`<root>/MNIST/raw/{train,t10k}-{images-idx3,
  labels-idx1}-ubyte`, the IDX format: a big-endian magic number 0x0803 / 0x0801, the
  dimensions as big-endian int32, then the uint8 values).
- `write_gpt_hdf5`: the GPT pre-training HDF5 shards of `HDF5IterableDataset`
  (`*.h5` files, dataset `data` of shape [n, 3, msl] int32: input_ids, attention_mask,
  labels, with the labels the inputs shifted by one; attribute `n_examples`).
"""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np


def _idx(path: Path, array: np.ndarray) -> None:
    magic = 0x0800 | 0x03 if array.ndim == 3 else 0x0800 | 0x01
    with open(path, "wb") as f:
        f.write(struct.pack(">i", magic))
        f.write(struct.pack(f">{array.ndim}i", *array.shape))
        f.write(np.ascontiguousarray(array, dtype=np.uint8).tobytes())


def write_mnist(root: Path, n_train: int = 256, n_test: int = 64, seed: int = 0) -> Path:
    """Digit-like 28x28 images (a class-dependent bright stripe plus noise) with labels,
    under `root/MNIST/raw`; returns `root`."""
    rng = np.random.default_rng(seed)
    raw = Path(root) / "MNIST" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        labels = rng.integers(0, 10, size=n, dtype=np.uint8)
        images = rng.integers(0, 64, size=(n, 28, 28), dtype=np.uint8)
        for i, label in enumerate(labels):
            images[i, 2 + 2 * label: 4 + 2 * label, 4:24] = 255
        _idx(raw / f"{prefix}-images-idx3-ubyte", images)
        _idx(raw / f"{prefix}-labels-idx1-ubyte", labels)
    return Path(root)


def write_gpt_hdf5(folder: Path, n_examples: int, msl: int, vocab_size: int, files: int = 2,
                   seed: int = 0) -> Path:
    """`files` shards of token sequences drawn from a seeded Markov chain (so there is
    something to learn), `n_examples` in all; returns `folder`."""
    import h5py

    rng = np.random.default_rng(seed)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    step = rng.integers(1, vocab_size, size=vocab_size)
    per_file = np.array_split(np.arange(n_examples), files)
    for k, rows in enumerate(per_file):
        tokens = np.empty((len(rows), msl + 1), dtype=np.int32)
        tokens[:, 0] = rng.integers(0, vocab_size, size=len(rows))
        for t in range(1, msl + 1):
            noise = rng.random(len(rows)) < 0.1
            nxt = (tokens[:, t - 1] + step[tokens[:, t - 1]]) % vocab_size
            tokens[:, t] = np.where(noise, rng.integers(0, vocab_size, size=len(rows)), nxt)
        data = np.stack([tokens[:, :-1], np.ones((len(rows), msl), np.int32), tokens[:, 1:]], axis=1)
        with h5py.File(folder / f"data-{k:05d}.h5", "w") as f:
            f.create_dataset("data", data=data)
            f.attrs["n_examples"] = len(rows)
    return folder
