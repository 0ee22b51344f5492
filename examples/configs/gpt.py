"""A small GPT language model and a synthetic token data processor for `gpt.yaml`.

`GPTLanguageModel` is a decoder-only transformer: token and position embeddings,
pre-LayerNorm blocks (causal multi-head `scaled_dot_product_attention`, GELU MLP), a
final LayerNorm and an output head tied to the token embedding. Its forward takes the
loader's batch, an int64 tensor [B, seq_len + 1] of token ids, predicts
`batch[:, 1:]` from `batch[:, :-1]` and returns the mean cross-entropy; in eval mode it
also updates its `PerplexityMetric("eval/perplexity")`, which the `ModelEvalMetrics`
callback logs at the end of every validation.

`TokenDataProcessor` generates its tokens in code (no files, no downloads): sequences
of a fixed random first-order Markov chain over `vocab_size` tokens in which every
token has only a few possible successors, so a model that learns the transitions gets
a loss far below the uniform `log(vocab_size)` (`bayes_loss()` is the floor). The chain
depends only on `chain_seed`; `seed` and `split` pick the sampled sequences (so train
and val come from the same chain but differ) and `seed` also orders the batches.

The YAML names both classes by file: `gpt.py:GPTLanguageModel`,
`gpt.py:TokenDataProcessor` (paths relative to the YAML's folder).
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import cerebras.pytorch as cstorch


class Block(nn.Module):
    """x + dropout(attn(ln(x))), then x + dropout(mlp(ln(x))); causal multi-head attention."""

    def __init__(self, d_model: int, num_heads: int, dropout: float):
        super().__init__()
        self.num_heads = num_heads
        self.ln_attn = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln_mlp = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))
        self.drop_attn = nn.Dropout(dropout)
        self.drop_mlp = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln_attn(x)).chunk(3, dim=-1)
        q, k, v = (z.reshape(b, t, self.num_heads, d // self.num_heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.drop_attn(self.proj(y.transpose(1, 2).reshape(b, t, d)))
        return x + self.drop_mlp(self.mlp(self.ln_mlp(x)))


class GPTLanguageModel(nn.Module):
    """A pre-LayerNorm decoder over `vocab_size` tokens with contexts of up to `seq_len`.

    `forward(batch)`: batch is int64 [B, T + 1] with T <= seq_len; returns the mean
    next-token cross-entropy of `logits(batch[:, :-1])` against `batch[:, 1:]`. In eval
    mode (`not self.training`) it also updates `self.perplexity`
    (`PerplexityMetric("eval/perplexity")`, exp of the mean loss per target token).
    `tie_embeddings` (default True) shares the output head's weight with the token
    embedding. Weights start from N(0, 0.02) and biases from 0, so the initial loss is
    close to log(vocab_size).
    """

    def __init__(self, vocab_size: int, seq_len: int, d_model: int = 64, num_heads: int = 2, num_layers: int = 2,
                 dropout: float = 0.0, tie_embeddings: bool = True):
        super().__init__()
        for name, value in (("vocab_size", vocab_size), ("seq_len", seq_len), ("d_model", d_model),
                            ("num_heads", num_heads), ("num_layers", num_layers)):
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"GPTLanguageModel: {name} must be a positive int, got {value!r}")
        if d_model % num_heads:
            raise ValueError(f"GPTLanguageModel: d_model ({d_model}) must be divisible by num_heads ({num_heads})")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"GPTLanguageModel: dropout must be in [0, 1), got {dropout!r}")
        self.vocab_size = vocab_size
        self.seq_len = seq_len
        self.tok = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(seq_len, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.Sequential(*(Block(d_model, num_heads, dropout) for _ in range(num_layers)))
        self.ln = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self.apply(self._init_weights)
        if tie_embeddings:
            self.head.weight = self.tok.weight
        self.perplexity = cstorch.metrics.PerplexityMetric("eval/perplexity")

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def logits(self, tokens: torch.Tensor) -> torch.Tensor:
        """Next-token scores [B, T, vocab_size] for token ids [B, T], T <= seq_len."""
        if tokens.dim() != 2 or tokens.shape[1] > self.seq_len:
            raise ValueError(f"GPTLanguageModel: expected token ids [batch, T] with T <= seq_len={self.seq_len}, "
                             f"got shape {list(tokens.shape)}")
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.drop(self.tok(tokens) + self.pos(positions))
        return self.head(self.ln(self.blocks(x)))

    def forward(self, batch: torch.Tensor) -> torch.Tensor:
        if not isinstance(batch, torch.Tensor) or batch.dim() != 2 or batch.shape[1] < 2:
            got = list(batch.shape) if isinstance(batch, torch.Tensor) else type(batch).__name__
            raise ValueError(f"GPTLanguageModel: the batch must be an int64 tensor [batch, seq_len + 1] of token ids "
                             f"(inputs batch[:, :-1], targets batch[:, 1:]), got {got}")
        inputs, targets = batch[:, :-1], batch[:, 1:]
        logits = self.logits(inputs)
        loss = F.cross_entropy(logits.reshape(-1, self.vocab_size), targets.reshape(-1))
        if not self.training:
            self.perplexity(labels=targets, loss=loss * targets.numel())
        return loss


def markov_chain(vocab_size: int, successors: int, chain_seed: int) -> np.ndarray:
    """A [vocab_size, vocab_size] float64 transition matrix: row i puts Dirichlet(1)
    weights on `successors` distinct tokens drawn at random and 0 elsewhere."""
    rng = np.random.default_rng(chain_seed)
    matrix = np.zeros((vocab_size, vocab_size))
    for i in range(vocab_size):
        nxt = rng.choice(vocab_size, size=successors, replace=False)
        matrix[i, nxt] = rng.dirichlet(np.ones(successors))
    return matrix


def sample_sequences(matrix: np.ndarray, num_sequences: int, length: int, rng: np.random.Generator) -> np.ndarray:
    """int64 [num_sequences, length]: first tokens uniform, then the chain's transitions."""
    vocab_size = matrix.shape[0]
    cdf = np.cumsum(matrix, axis=1)
    cdf /= cdf[:, -1:]  # every row ends at exactly 1.0
    out = np.empty((num_sequences, length), dtype=np.int64)
    out[:, 0] = rng.integers(vocab_size, size=num_sequences)
    for t in range(1, length):
        u = rng.random(num_sequences)[:, None]  # in [0, 1)
        # the first index whose cdf exceeds u: always a token of positive probability
        out[:, t] = (cdf[out[:, t - 1]] <= u).sum(axis=1)
    return out


class _Rows(torch.utils.data.Dataset):
    """The rows of one tensor (a batch is their stack, a plain tensor)."""

    def __init__(self, data: torch.Tensor):
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i):
        return self.data[i]


_SPLITS = {"train": 0, "val": 1}


class TokenDataProcessor:
    """Batches int64 [batch_size, seq_len + 1] of Markov-chain token sequences.

    Args:
        batch_size: sequences per batch; the partial last batch is dropped.
        seq_len: the model's context length (each sequence has seq_len + 1 tokens).
        vocab_size: number of token ids.
        num_sequences: sequences in this split (at least batch_size).
        split: "train" or "val": same chain, different sampled sequences.
        shuffle: reshuffle every pass from a `torch.Generator` seeded with `seed`.
        seed: picks the sequences (with `split`) and the shuffling order.
        successors: possible next tokens per token (the chain's sparsity).
        chain_seed: the transition matrix's seed (keep it equal for train and val).
        drop_last: must stay True (every batch of a compiled step has one shape).
    """

    def __init__(self, batch_size: int, seq_len: int, vocab_size: int, num_sequences: int, split: str = "train",
                 shuffle: bool = True, seed: int = 0, successors: int = 4, chain_seed: int = 0,
                 drop_last: bool = True):
        for name, value in (("batch_size", batch_size), ("seq_len", seq_len), ("vocab_size", vocab_size),
                            ("num_sequences", num_sequences), ("successors", successors)):
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"TokenDataProcessor: {name} must be a positive int, got {value!r}")
        if split not in _SPLITS:
            raise ValueError(f"TokenDataProcessor: split must be 'train' or 'val', got {split!r}")
        if successors > vocab_size:
            raise ValueError(f"TokenDataProcessor: successors ({successors}) cannot exceed vocab_size ({vocab_size})")
        if num_sequences < batch_size:
            raise ValueError(f"TokenDataProcessor: num_sequences ({num_sequences}) is smaller than batch_size "
                             f"({batch_size}), so no full batch exists; raise num_sequences")
        if not drop_last:
            raise ValueError("TokenDataProcessor: drop_last must be True (a compiled step needs every batch to "
                             "have the same shape); remove `drop_last: false` from the dataloader config")
        self.batch_size = batch_size
        self.seq_len = seq_len
        self.vocab_size = vocab_size
        self.num_sequences = num_sequences
        self.split = split
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        self.drop_last = True
        self.transition_matrix = markov_chain(vocab_size, successors, chain_seed)
        rng = np.random.default_rng([self.seed, _SPLITS[split]])
        self.tokens = torch.from_numpy(sample_sequences(self.transition_matrix, num_sequences, seq_len + 1, rng))

    def bayes_loss(self) -> float:
        """The mean cross-entropy of the true chain on this split's targets: the loss
        floor of any model (compare with the uniform log(vocab_size))."""
        prev, nxt = self.tokens[:, :-1].numpy(), self.tokens[:, 1:].numpy()
        return float(-np.log(self.transition_matrix[prev, nxt]).mean())

    def uniform_loss(self) -> float:
        """log(vocab_size): the loss of predicting every token with equal probability."""
        return math.log(self.vocab_size)

    def create_dataloader(self) -> torch.utils.data.DataLoader:
        generator = torch.Generator().manual_seed(self.seed) if self.shuffle else None
        return torch.utils.data.DataLoader(_Rows(self.tokens), batch_size=self.batch_size, shuffle=self.shuffle,
                                           drop_last=True, generator=generator)
