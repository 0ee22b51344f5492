"""A small GPT language model trained data-parallel over several devices.

A byte-level decoder-only transformer (pre-LayerNorm blocks, causal
`scaled_dot_product_attention`, GELU MLP) learns to continue English text. The text is
the help corpus that ships with Python itself (`pydoc_data.topics`, about 700 KB),
so nothing is downloaded.

Run it from the repository root:

    python examples/gpt.py                        # CSX backend, one device
    python examples/gpt.py --num-csx 4            # data parallel over 4 devices
    python examples/gpt.py --num-csx 4 --shard-state   # ... each device holding 1/4 of the state
    python examples/gpt.py --backend CPU          # the same script as eager PyTorch
    python -m cstorch.distributed.launch --num-processes 2 --devices-per-process 2 \\
        examples/gpt.py --num-csx 4               # 2 processes x 2 devices, on loopback

`--num-csx N` is `ClusterConfig(num_csx=N)`: the compiled step runs on a data-parallel
mesh of N devices. The global batch (`--batch-size`, a multiple of N) is split on its
first dimension, the parameters and optimizer state are replicated, and XLA adds the
gradient reductions, so the loss trajectory is the one-device trajectory. With
`--shard-state` (`cstorch.backends.csx.cluster.shard_state = True`, cstorch-only) each
device holds only a 1/N slice of every parameter and AdamW moment instead, and XLA
gathers the weights where the step needs them. On a CPU-only
machine the script asks XLA for N host devices when the environment does not say
otherwise (`XLA_FLAGS=--xla_force_host_platform_device_count=N`, which must be set
before JAX starts).

`--checkpoint-steps N` saves the model and optimizer (`cstorch.save`) every N steps and
at the last one, `--report FILE` writes the per-step losses as JSON and `--save-final FILE`
the trained `model.state_dict()` (torch.save); in a multi-process run only process 0
writes files.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--backend", default="CSX", choices=["CSX", "CPU"], type=str.upper)
    p.add_argument("--num-csx", type=int, default=1, help="devices of the data-parallel mesh (CSX only)")
    p.add_argument("--shard-state", action="store_true",
                   help="split the parameters and optimizer state over the devices (CSX only)")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=16, help="global batch (a multiple of --num-csx)")
    p.add_argument("--seq", type=int, default=64, help="context length in bytes")
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--lr", type=float, default=3e-3, help="AdamW learning rate")
    p.add_argument("--log-steps", type=int, default=20, help="print the loss every N steps")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint-steps", type=int, default=0, help="save every N steps and at the last (0: never)")
    p.add_argument("--out-dir", default="./gpt_out", help="where checkpoints go")
    p.add_argument("--report", default=None, help="write {'losses': [...]} here as JSON")
    p.add_argument("--save-final", default=None, help="torch.save the trained model.state_dict() here")
    return p.parse_args(argv)


def ask_for_host_devices(num_csx: int) -> None:
    """On CPU, N devices exist only if XLA is told so before it starts."""
    flags = os.environ.get("XLA_FLAGS", "")
    if num_csx > 1 and "host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={num_csx}".strip()


args = parse_args() if __name__ == "__main__" else None
if args is not None:
    ask_for_host_devices(args.num_csx)

import torch  # noqa: E402  (after XLA_FLAGS)
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import cerebras.pytorch as cstorch  # noqa: E402


def load_corpus() -> torch.Tensor:
    """Python's bundled help texts as one long uint8 tensor of UTF-8 bytes."""
    from pydoc_data.topics import topics

    text = "\n\n".join(topics[k] for k in sorted(topics))
    return torch.frombuffer(bytearray(text.encode("utf-8")), dtype=torch.uint8)


class Block(nn.Module):
    """x + attn(ln(x)), then x + mlp(ln(x)); attention is causal and multi-head."""

    def __init__(self, d_model: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln_attn = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.ln_mlp = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln_attn(x)).chunk(3, dim=-1)
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(y.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln_mlp(x))


class ByteGPT(nn.Module):
    """Token and position embeddings, `layers` blocks, a final LayerNorm and a linear
    head over the 256 byte values. `forward(tokens, targets)` is the mean next-byte
    cross-entropy."""

    def __init__(self, seq: int, d_model: int, heads: int, layers: int):
        super().__init__()
        self.tok = nn.Embedding(256, d_model)
        self.pos = nn.Embedding(seq, d_model)
        self.blocks = nn.Sequential(*(Block(d_model, heads) for _ in range(layers)))
        self.ln = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, 256, bias=False)

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        logits = self.head(self.ln(self.blocks(self.tok(tokens) + self.pos(positions))))
        return F.cross_entropy(logits.reshape(-1, 256), targets.reshape(-1))


def windows(corpus: torch.Tensor, seq: int) -> torch.utils.data.TensorDataset:
    """Non-overlapping (input, next-byte target) windows of `seq` bytes."""
    n = (len(corpus) - 1) // seq
    x = corpus[: n * seq].long().reshape(n, seq)
    y = corpus[1: n * seq + 1].long().reshape(n, seq)
    return torch.utils.data.TensorDataset(x, y)


def main(args) -> None:
    if args.backend == "CSX":
        cstorch.backends.csx.cluster.shard_state = args.shard_state
        config = cstorch.distributed.ClusterConfig(num_csx=args.num_csx)
        backend = cstorch.backend("CSX", cluster_config=config)
    else:
        backend = cstorch.backend("CPU")
    from cstorch.distributed.processes import is_main_process

    torch.manual_seed(args.seed)
    dataset = windows(load_corpus(), args.seq)
    model = ByteGPT(args.seq, args.d_model, args.heads, args.layers)
    compiled = cstorch.compile(model, backend)
    optimizer = cstorch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)

    @cstorch.trace
    def train_step(tokens, targets):
        loss = compiled(tokens, targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss

    losses = []

    @cstorch.step_closure
    def record(loss, step):
        losses.append(loss.item())
        if step == 1 or step % args.log_steps == 0 or step == args.steps:
            print(f"step {step}: loss {losses[-1]:.5f} ({math.exp(losses[-1]):.1f} perplexity)", flush=True)

    @cstorch.checkpoint_closure
    def save_checkpoint(step):
        path = os.path.join(args.out_dir, f"checkpoint_{step}.mdl")
        cstorch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, path)  # process 0 writes
        print(f"step {step}: saved {path}", flush=True)

    def input_fn():
        generator = torch.Generator().manual_seed(args.seed)
        return torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, shuffle=True, drop_last=True,
                                           generator=generator)

    if args.checkpoint_steps:
        os.makedirs(args.out_dir, exist_ok=True)
    executor = cstorch.utils.data.DataExecutor(cstorch.utils.data.DataLoader(input_fn), num_steps=args.steps,
                                               checkpoint_steps=args.checkpoint_steps)
    start = time.perf_counter()
    for tokens, targets in executor:
        record(train_step(tokens, targets), executor.user_iteration)
        save_checkpoint(executor.user_iteration)
    seconds = time.perf_counter() - start

    where = f"{args.backend}, num_csx={args.num_csx}" if args.backend == "CSX" else args.backend
    if args.backend == "CSX" and args.shard_state:
        where += ", sharded state"
    print(f"trained {args.steps} steps ({where}) in {seconds:.1f} s: {args.steps / seconds:.1f} steps/s")
    if is_main_process():
        if args.report:
            with open(args.report, "w") as f:
                json.dump({"losses": losses}, f)
        if args.save_final:
            torch.save(model.state_dict(), args.save_final)


if __name__ == "__main__":
    sys.exit(main(args))
