"""Synthetic data in the exact on-disk formats the real Model Zoo's data processors read.

Nothing is downloaded: each writer makes a small, seeded data set in the layout its reader
expects, so the real reader code runs unchanged.

- `write_mnist`: torchvision's MNIST folder (`<root>/MNIST/raw/{train,t10k}-{images-idx3,
  labels-idx1}-ubyte`, the IDX format: a big-endian magic number 0x0803 / 0x0801, the
  dimensions as big-endian int32, then the uint8 values).
- `write_gpt_hdf5`: the GPT pre-training HDF5 shards of `HDF5IterableDataset`
  (`*.h5` files, dataset `data` of shape [n, 3, msl] int32: input_ids, attention_mask,
  labels, with the labels the inputs shifted by one; attribute `n_examples`).
- `write_bert_csv` + `write_wordpiece_vocab`: the pre-training CSV folder of
  `BertCSVDynamicMaskDataProcessor` (a `meta.dat` of `<file name> <number of rows>` lines,
  then CSV files with the header `tokens,segment_ids,is_random_next`: per row the tokens of
  `[CLS] A [SEP] B [SEP]` as a Python list literal of strings, the segment ids as a list
  literal `[0, ..., 1, ...]` of the same length, and the next-sentence label 0 / 1; the
  reader masks tokens itself) and its vocabulary (one token a line, the line number its
  id, with `[PAD] [UNK] [CLS] [SEP] [MASK]`).
- `write_t5_text` + `write_sentencepiece_vocab`: the tokenized text folder of
  `T5DynamicDataProcessor` (a `meta.dat` of `<file name> <number of lines>` lines, then
  text files of one document a line, its tokens separated by spaces; the reader splits,
  corrupts spans and adds the sentinels itself) and its vocabulary (one token a line, with
  `<pad> </s> <unk> <s>`).
- `write_mlm_hdf5` / `write_mlm_csv`: a masked-language-model data set of protein-like
  sequences, as ESM-2 reads it: for training the HDF5 shards of `BertHDF5DataProcessor`
  (`*.h5` files with dataset `data` of shape [n, 2, msl] int32: input_ids, attention_mask,
  and dataset `labels` of shape [n, 1, msl] int32, plus a `data_params.json` naming the
  `mlm` training objective without gathered labels), for evaluation the CSV folder of
  `BertCSVDataProcessor` (a `meta.dat`, then CSV files with the columns `input_ids`,
  `attention_mask`, `labels`, each a Python list literal of `msl` ints). The labels are the
  unmasked tokens at every position; about 15 % of the inputs are the mask token.
- `write_translation_text` (+ `write_sentencepiece_vocab`): the parallel text folder of
  `TransformerDynamicDataProcessor` (a `meta.dat` of `<source file> <target file> <number
  of lines>` lines, the two paths as given, not relative to the folder, so absolute here;
  then line-aligned text files of one sentence a line, its tokens separated by spaces).
- `write_imagenet`: the ImageNet folder of `ImageNet1KProcessor` (torchvision's
  `ImageNet`): `meta.bin` (`torch.save` of the pair ({wnid: (class name,)}, [the wnid of
  each val image])) and per split an image folder `<split>/<wnid>/<name>.JPEG` (RGB JPEG
  files; torchvision reads them with PIL).
- `write_latent_imagenet`: a VAE-latent ImageNet folder of `DiffusionLatentImageNet1KProcessor`
  (per split `<split>/<class folder>/<name>.npz`, each file holding `vae_output`, float32
  [2 x latent channels, height, width]: the latent distribution's mean then log-variance,
  and `label`, the class index as an int array).
- `write_dpr_hdf5`: the question / passage HDF5 shards of `DPRHDF5DataProcessor` (`*.h5`
  files, attribute `n_examples`, with two feature groups: dataset `data_0` [n, 3, msl]
  int32: the question's input_ids, attention_mask, token_type_ids, and dataset `data_1`
  [n, 3, contexts, msl] int32: the same three for each context passage, the positive
  first; a `data_params.json` names the features of each group, `data_0_features` and
  `data_1_features`).
- `write_dpo_hdf5`: the preference-pair HDF5 shards of `DpoHDF5DataProcessor` (`*.h5`
  files, attribute `n_examples`, dataset `data` of shape [n, 6, msl] int32: the chosen
  sequence's input_ids, attention_mask (the loss mask: 1 on the response's tokens),
  labels (the inputs shifted by one), then the same three for the rejected sequence).
- `write_multimodal_hdf5`: the image-text HDF5 shards of `MultimodalSimpleHDF5MapDataProcessor`
  (`*.h5` files with dataset `data` of shape [n, 5, msl] int32: text_input_ids, loss_mask,
  labels (the inputs shifted by one), key_padding_mask (1 = padding), token_modality_idx
  (1 = an image patch's position); dataset `img_path` [n, images] of byte strings, each
  image's file name under the image folder (`None` for none); dataset `img_data_loc`
  [n, images, patches] int32, the sequence positions that receive each image's patch
  features), and that image folder (PNG files).
- `write_llava_hdf5`: the same for `LlavaHDF5MapDataProcessor` (dataset `data` [n, 4, msl]:
  text_input_ids, loss_mask, labels, key_padding_mask; dataset `img_path` [n, 1]; the
  model puts the image's patch features after the first token, `image_start_idx` 1).
"""
from __future__ import annotations

import csv
import json
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


def _markov_tokens(rng: np.random.Generator, step: np.ndarray, length: int) -> np.ndarray:
    """`length` ids of the chain id -> id + step[id] (mod len(step)) from a random start, one
    in ten drawn at random instead."""
    n = len(step)
    ids = np.empty(length, dtype=np.int64)
    ids[0] = rng.integers(0, n)
    for t in range(1, length):
        ids[t] = rng.integers(0, n) if rng.random() < 0.1 else (ids[t - 1] + step[ids[t - 1]]) % n
    return ids


def _meta(folder: Path, counts: dict) -> None:
    (folder / "meta.dat").write_text("".join(f"{name} {n}\n" for name, n in counts.items()))


#: the special tokens of a BERT (WordPiece) vocabulary, first in `write_wordpiece_vocab`'s file
WORDPIECE_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
#: the special tokens of a T5 (SentencePiece) vocabulary, first in `write_sentencepiece_vocab`'s file
SENTENCEPIECE_SPECIALS = ("<pad>", "</s>", "<unk>", "<s>")


def _words(vocab_size: int, specials: tuple) -> list:
    """The ordinary (lower-case ASCII) tokens of a `vocab_size` vocabulary after `specials`."""
    assert vocab_size > len(specials)
    return [f"tok{i}" for i in range(vocab_size - len(specials))]


def _write_vocab(path: Path, vocab_size: int, specials: tuple) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{token}\n" for token in (*specials, *_words(vocab_size, specials))))
    return path


def write_wordpiece_vocab(path: Path, vocab_size: int) -> Path:
    """A BERT vocabulary file of `vocab_size` lines; returns `path`."""
    return _write_vocab(path, vocab_size, WORDPIECE_SPECIALS)


def write_sentencepiece_vocab(path: Path, vocab_size: int) -> Path:
    """A T5 vocabulary file of `vocab_size` lines; returns `path`."""
    return _write_vocab(path, vocab_size, SENTENCEPIECE_SPECIALS)


def _csv_shards(folder: Path, n_rows: int, files: int, fieldnames: list, make_row) -> Path:
    """`n_rows` rows (`make_row(i)`: a dict by field name, values as their text) in `files`
    CSV files with a header, and the folder's `meta.dat`; returns `folder`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    counts = {}
    for k, rows in enumerate(np.array_split(np.arange(n_rows), files)):
        name = f"data-{k:05d}.csv"
        with open(folder / name, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=fieldnames)
            writer.writeheader()
            writer.writerows(make_row(int(i)) for i in rows)
        counts[name] = len(rows)
    _meta(folder, counts)
    return folder


def _text_corpus(folder: Path, vocab_size: int, specials: tuple, seed: int) -> tuple:
    """(a seeded generator, `folder` made, the ordinary words of the vocabulary, the Markov
    chain's step per word) for the text writers below."""
    rng = np.random.default_rng(seed)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    words = _words(vocab_size, specials)
    return rng, folder, words, rng.integers(1, len(words), size=len(words))


def write_bert_csv(folder: Path, n_examples: int, msl: int, vocab_size: int, files: int = 2,
                   seed: int = 0) -> Path:
    """`n_examples` sentence pairs of at most `msl` tokens (with `[CLS]` and the two `[SEP]`)
    over the words of `write_wordpiece_vocab(.., vocab_size)`, in `files` CSV files: segment
    B continues segment A's Markov chain, or (next-sentence label 1, half the time) starts
    anywhere; returns `folder`."""
    rng, folder, words, step = _text_corpus(folder, vocab_size, WORDPIECE_SPECIALS, seed)

    def row(_):
        n_a = int(rng.integers(2, (msl - 3) // 2 + 1))
        n_b = int(rng.integers(2, msl - 3 - n_a + 1))
        chain = _markov_tokens(rng, step, n_a + n_b)
        is_random_next = int(rng.random() < 0.5)
        b = _markov_tokens(rng, step, n_b) if is_random_next else chain[n_a:]
        tokens = ["[CLS]", *(words[i] for i in chain[:n_a]), "[SEP]", *(words[i] for i in b), "[SEP]"]
        segment_ids = [0] * (n_a + 2) + [1] * (n_b + 1)
        return {"tokens": str(tokens), "segment_ids": str(segment_ids), "is_random_next": is_random_next}

    return _csv_shards(folder, n_examples, files, ["tokens", "segment_ids", "is_random_next"], row)


def write_t5_text(folder: Path, n_documents: int, max_length: int, vocab_size: int, files: int = 2,
                  seed: int = 0) -> Path:
    """`n_documents` documents of `max_length` // 2 to `max_length` tokens over the words of
    `write_sentencepiece_vocab(.., vocab_size)`, one a line, in `files` text files; returns
    `folder`."""
    rng, folder, words, step = _text_corpus(folder, vocab_size, SENTENCEPIECE_SPECIALS, seed)
    counts = {}
    for k, docs in enumerate(np.array_split(np.arange(n_documents), files)):
        name = f"data-{k:05d}.txt"
        lengths = rng.integers(max_length // 2, max_length + 1, size=len(docs))
        lines = [" ".join(words[i] for i in _markov_tokens(rng, step, int(n))) for n in lengths]
        (folder / name).write_text("".join(f"{line}\n" for line in lines))
        counts[name] = len(lines)
    _meta(folder, counts)
    return folder


#: ESM-2's vocabulary: <cls> <pad> <eos> <unk>, the residues from 4 on, <mask> last
ESM_CLS, ESM_PAD, ESM_EOS, ESM_RESIDUES, ESM_MASK = 0, 1, 2, range(4, 29), 32


def _mlm_rows(n: int, msl: int, seed: int) -> tuple:
    """(input_ids, attention_mask, labels), each [n, msl] int32: `<cls>`, a Markov chain of
    residues, `<eos>`, then `<pad>`; one residue in about seven replaced by `<mask>` in the
    inputs."""
    rng = np.random.default_rng(seed)
    residues = np.asarray(ESM_RESIDUES)
    step = rng.integers(1, len(residues), size=len(residues))
    labels = np.full((n, msl), ESM_PAD, np.int32)
    mask = np.zeros((n, msl), np.int32)
    for i in range(n):
        length = int(rng.integers(msl // 2, msl - 1))
        labels[i, 0] = ESM_CLS
        labels[i, 1:length + 1] = residues[_markov_tokens(rng, step, length)]
        labels[i, length + 1] = ESM_EOS
        mask[i, :length + 2] = 1
    inputs = labels.copy()
    masked = (rng.random((n, msl)) < 0.15) & np.isin(labels, residues)
    inputs[masked] = ESM_MASK
    return inputs, mask, labels


def write_mlm_hdf5(folder: Path, n_examples: int, msl: int, files: int = 2, seed: int = 0) -> Path:
    """`n_examples` masked sequences of `msl` tokens (`_mlm_rows`) in `files` HDF5 shards and
    the folder's `data_params.json`; returns `folder`."""
    import h5py

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    inputs, mask, labels = _mlm_rows(n_examples, msl, seed)
    for k, rows in enumerate(np.array_split(np.arange(n_examples), files)):
        with h5py.File(folder / f"data-{k:05d}.h5", "w") as f:
            f.create_dataset("data", data=np.stack([inputs[rows], mask[rows]], axis=1))
            f.create_dataset("labels", data=labels[rows][:, None, :])
    (folder / "data_params.json").write_text(json.dumps(
        {"dataset": {"training_objective": "mlm", "mlm_with_gather": False}}))
    return folder


def write_mlm_csv(folder: Path, n_examples: int, msl: int, files: int = 2, seed: int = 0) -> Path:
    """The same kind of rows as `write_mlm_hdf5`, as `BertCSVDataProcessor`'s CSV folder;
    returns `folder`."""
    inputs, mask, labels = _mlm_rows(n_examples, msl, seed)
    return _csv_shards(folder, n_examples, files, ["input_ids", "attention_mask", "labels"],
                       lambda i: {"input_ids": str(inputs[i].tolist()), "attention_mask": str(mask[i].tolist()),
                                  "labels": str(labels[i].tolist())})


def write_translation_text(folder: Path, n_pairs: int, max_length: int, vocab_size: int, files: int = 2,
                           seed: int = 0) -> Path:
    """`n_pairs` sentence pairs of `max_length` // 4 to `max_length` - 2 tokens over the words
    of `write_sentencepiece_vocab(.., vocab_size)`, in `files` pairs of source and target
    files: the source a Markov chain, the target its words mapped one to one by a fixed
    permutation, in reverse order (something to learn); returns `folder`."""
    rng = np.random.default_rng(seed)
    folder = Path(folder).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    words = _words(vocab_size, SENTENCEPIECE_SPECIALS)
    step = rng.integers(1, len(words), size=len(words))
    translate = np.random.default_rng(1234).permutation(len(words))
    lines = []
    for k, pairs in enumerate(np.array_split(np.arange(n_pairs), files)):
        src, tgt = folder / f"src-{k:05d}.txt", folder / f"tgt-{k:05d}.txt"
        lengths = rng.integers(max(1, max_length // 4), max_length - 1, size=len(pairs))
        chains = [_markov_tokens(rng, step, int(n)) for n in lengths]
        src.write_text("".join(" ".join(words[i] for i in ids) + "\n" for ids in chains))
        tgt.write_text("".join(" ".join(words[i] for i in translate[ids][::-1]) + "\n" for ids in chains))
        lines.append(f"{src} {tgt} {len(pairs)}\n")
    (folder / "meta.dat").write_text("".join(lines))
    return folder


def _class_images(rng: np.random.Generator, labels: np.ndarray, size: int, n_classes: int) -> np.ndarray:
    """[n, size, size, 3] uint8 RGB images: noise plus a bright band whose row and colour
    depend on the class (something to learn)."""
    images = rng.integers(0, 96, size=(len(labels), size, size, 3), dtype=np.uint8)
    band = max(1, size // (2 * n_classes))
    for i, label in enumerate(labels):
        row = (2 * label * size) // (2 * n_classes)
        images[i, row:row + band, :, label % 3] = 255
    return images


def write_imagenet(root: Path, n_train: int, n_val: int, size: int, n_classes: int = 4, seed: int = 0) -> Path:
    """`n_classes` classes (wnids `n0000000k`) of `size` x `size` images (`_class_images`),
    `n_train` in `train`, `n_val` in `val`; returns `root`."""
    import torch
    from PIL import Image

    rng = np.random.default_rng(seed)
    root = Path(root)
    wnids = [f"n{k:08d}" for k in range(n_classes)]
    val_wnids = []
    for split, n in (("train", n_train), ("val", n_val)):
        labels = np.arange(n) % n_classes
        for i, (label, image) in enumerate(zip(labels, _class_images(rng, labels, size, n_classes))):
            folder = root / split / wnids[label]
            folder.mkdir(parents=True, exist_ok=True)
            Image.fromarray(image).save(folder / f"{split}_{i:05d}.JPEG", quality=95)
        if split == "val":
            val_wnids = [wnids[label] for label in labels]
    torch.save(({wnid: (f"class {k}",) for k, wnid in enumerate(wnids)}, val_wnids), root / "meta.bin")
    return root


def write_latent_imagenet(root: Path, n_train: int, n_val: int, channels: int, size: int, n_classes: int = 4,
                          seed: int = 0) -> Path:
    """`n_classes` classes of `channels` x `size` x `size` latents (a class-dependent mean
    plus noise, log-variance -4), `n_train` in `train`, `n_val` in `val`; returns `root`."""
    rng = np.random.default_rng(seed)
    root = Path(root)
    centres = rng.normal(size=(n_classes, channels, size, size)).astype(np.float32)
    for split, n in (("train", n_train), ("val", n_val)):
        for i in range(n):
            label = i % n_classes
            folder = root / split / f"n{label:08d}"
            folder.mkdir(parents=True, exist_ok=True)
            mean = centres[label] + 0.3 * rng.normal(size=centres[label].shape).astype(np.float32)
            logvar = np.full_like(mean, -4.0)
            np.savez(folder / f"{split}_{i:05d}.npz", vae_output=np.concatenate([mean, logvar]),
                     label=np.array(label, dtype=np.int64))
    return root


def write_dpr_hdf5(folder: Path, n_examples: int, msl: int, vocab_size: int, contexts: int = 2, files: int = 2,
                   seed: int = 0) -> Path:
    """`n_examples` questions of `msl` // 2 tokens (ids from 1; 0 pads), each with `contexts`
    passages of `msl` tokens: the positive continues the question's Markov chain, the hard
    negatives start anywhere; returns `folder`."""
    import h5py

    rng = np.random.default_rng(seed)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    step = rng.integers(1, vocab_size - 1, size=vocab_size - 1)
    q = np.zeros((n_examples, 3, msl), np.int32)
    ctx = np.zeros((n_examples, 3, contexts, msl), np.int32)
    n_q = msl // 2
    for i in range(n_examples):
        chain = 1 + _markov_tokens(rng, step, n_q + msl)
        q[i, 0, :n_q], q[i, 1, :n_q] = chain[:n_q], 1
        ctx[i, 0, 0], ctx[i, 1, 0] = chain[n_q:], 1
        for c in range(1, contexts):
            ctx[i, 0, c], ctx[i, 1, c] = 1 + _markov_tokens(rng, step, msl), 1
    for k, rows in enumerate(np.array_split(np.arange(n_examples), files)):
        with h5py.File(folder / f"data-{k:05d}.h5", "w") as f:
            f.create_dataset("data_0", data=q[rows])
            f.create_dataset("data_1", data=ctx[rows])
            f.attrs["n_examples"] = len(rows)
    (folder / "data_params.json").write_text(json.dumps({
        "data_0_features": ["questions_input_ids", "questions_attention_mask", "questions_token_type_ids"],
        "data_1_features": ["ctx_input_ids", "ctx_attention_mask", "ctx_token_type_ids"]}))
    return folder


def write_dpo_hdf5(folder: Path, n_examples: int, msl: int, vocab_size: int, files: int = 2, seed: int = 0) -> Path:
    """`n_examples` pairs of `msl` + 1 tokens, a prompt of `msl` // 2 then a response: the
    chosen one continues the prompt's Markov chain, the rejected one starts anywhere;
    returns `folder`."""
    import h5py

    rng = np.random.default_rng(seed)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    step = rng.integers(1, vocab_size, size=vocab_size)
    prompt = msl // 2
    data = np.zeros((n_examples, 6, msl), np.int32)
    for i in range(n_examples):
        chosen = _markov_tokens(rng, step, msl + 1)
        rejected = np.concatenate([chosen[:prompt], _markov_tokens(rng, step, msl + 1 - prompt)])
        for j, seq in enumerate((chosen, rejected)):
            data[i, 3 * j] = seq[:-1]
            data[i, 3 * j + 1, prompt - 1:] = 1
            data[i, 3 * j + 2] = seq[1:]
    for k, rows in enumerate(np.array_split(np.arange(n_examples), files)):
        with h5py.File(folder / f"data-{k:05d}.h5", "w") as f:
            f.create_dataset("data", data=data[rows])
            f.attrs["n_examples"] = len(rows)
    return folder


def _image_text_rows(folder: Path, images: Path, n_examples: int, msl: int, vocab_size: int, patches: int,
                     size: int, first: int, n_classes: int, seed: int) -> tuple:
    """(ids, loss_mask, labels, image file names) of `n_examples` sequences of `msl` tokens:
    one image (`_class_images`, `size` x `size`, PNG under `images`) whose `patches` patch
    features fill positions `first`.. (id 0 there, and before), then a caption: a Markov
    chain over the ids from 1 whose first token is the image's class, in the loss."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    images = Path(images)
    images.mkdir(parents=True, exist_ok=True)
    step = rng.integers(1, vocab_size - 1, size=vocab_size - 1)
    labels = rng.integers(0, n_classes, size=n_examples)
    ids, mask, targets = (np.zeros((n_examples, msl), np.int32) for _ in range(3))
    paths = []
    lead = first + patches
    for i, (label, image) in enumerate(zip(labels, _class_images(rng, labels, size, n_classes))):
        name = f"{Path(folder).name}_{i:05d}.png"
        Image.fromarray(image).save(images / name)
        paths.append([name.encode()])
        text = 1 + _markov_tokens(rng, step, msl - lead + 1)
        text[0] = 1 + label
        tokens = np.concatenate([np.zeros(lead, np.int64), text])
        ids[i], targets[i] = tokens[:-1], tokens[1:]
        mask[i, lead - 1:] = 1
    return ids, mask, targets, np.array(paths, dtype="S")


def _write_shards(folder: Path, files: int, **datasets) -> Path:
    """`files` HDF5 shards of the rows of `datasets` ({name: array}), `n_examples` set."""
    import h5py

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    n = len(next(iter(datasets.values())))
    for k, rows in enumerate(np.array_split(np.arange(n), files)):
        with h5py.File(folder / f"data-{k:05d}.h5", "w") as f:
            for name, array in datasets.items():
                f.create_dataset(name, data=array[rows])
            f.attrs["n_examples"] = len(rows)
    return folder


def write_multimodal_hdf5(folder: Path, images: Path, n_examples: int, msl: int, vocab_size: int, patches: int,
                          size: int, n_classes: int = 4, files: int = 2, seed: int = 0) -> Path:
    """`n_examples` sequences of one image in the first `patches` positions, then a caption
    (`_image_text_rows`); returns `folder`."""
    ids, mask, labels, paths = _image_text_rows(folder, images, n_examples, msl, vocab_size, patches, size, 0,
                                                n_classes, seed)
    image = np.zeros_like(ids)
    image[:, :patches] = 1
    loc = np.broadcast_to(np.arange(patches, dtype=np.int32), (n_examples, 1, patches))
    return _write_shards(folder, files, data=np.stack([ids, mask, labels, np.zeros_like(ids), image], axis=1),
                         img_path=paths, img_data_loc=np.ascontiguousarray(loc))


def write_llava_hdf5(folder: Path, images: Path, n_examples: int, msl: int, vocab_size: int, patches: int,
                     size: int, n_classes: int = 4, files: int = 2, seed: int = 0) -> Path:
    """`n_examples` sequences of a first token, one image's `patches` positions, then a
    caption (`_image_text_rows`); returns `folder`."""
    ids, mask, labels, paths = _image_text_rows(folder, images, n_examples, msl, vocab_size, patches, size, 1,
                                                n_classes, seed)
    return _write_shards(folder, files, data=np.stack([ids, mask, labels, np.zeros_like(ids)], axis=1),
                         img_path=paths)
