"""A minimal custom training loop in the Cerebras PyTorch style.

A fully connected classifier on MNIST-shaped data. The data are scikit-learn's
bundled `load_digits` (1797 8x8 grey-scale digits, so nothing is downloaded),
upsampled to 1x28x28 and normalised, with a fixed train/test split.

Run it from the repository root:

    python examples/mnist.py                  # CSX backend: the step is compiled once
    python examples/mnist.py --backend CPU    # the same script as eager PyTorch
    python examples/mnist.py --steps 500 --batch-size 64 --lr 0.05 --checkpoint-steps 100

Every run writes its checkpoints to a fresh folder `<out-dir>/run_NNN` (default
out-dir: ./mnist_out), so a run never collides with an earlier one. Read one back with

    state = cstorch.load("mnist_out/run_000/checkpoint_300.mdl")
    model.load_state_dict(state["model"])

What to look at:

* `@cstorch.trace` marks the training step. On CSX its first call captures forward,
  backward and optimizer update as one graph and compiles it; every later call
  replays that executable and returns at once with a deferred loss.
* `@cstorch.step_closure` is host code that receives the step's values as plain
  tensors once they exist (printing the loss here never stalls the device).
* `@cstorch.checkpoint_closure` runs only on the executor's checkpoint steps, when
  the model and optimizer tensors hold that step's values.
* `cstorch.utils.data.DataExecutor` drives the run; after the loop the model's
  parameters hold the trained values, so evaluation is plain eager PyTorch.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import cerebras.pytorch as cstorch


def load_data(seed: int = 0):
    """Digits as float32 [N, 1, 28, 28] images normalised with the training set's
    statistics, and int64 labels; a fixed, stratified 80/20 train/test split."""
    digits = load_digits()
    images = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0  # [N, 1, 8, 8] in [0, 1]
    images = F.interpolate(images, size=(28, 28), mode="bilinear", align_corners=False)
    labels = torch.tensor(digits.target, dtype=torch.int64)
    train_idx, test_idx = train_test_split(
        torch.arange(len(labels)).numpy(), test_size=0.2, random_state=seed, stratify=labels.numpy()
    )
    x_train, y_train = images[train_idx], labels[train_idx]
    x_test, y_test = images[test_idx], labels[test_idx]
    mean, std = x_train.mean(), x_train.std()
    return (x_train - mean) / std, y_train, (x_test - mean) / std, y_test


def make_model() -> nn.Module:
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(28 * 28, 256),
        nn.ReLU(),
        nn.Linear(256, 128),
        nn.ReLU(),
        nn.Linear(128, 10),
    )


def fresh_run_dir(out_dir: str) -> str:
    """`out_dir/run_NNN` with the first NNN not taken yet (created atomically)."""
    os.makedirs(out_dir, exist_ok=True)
    for n in range(10_000):
        path = os.path.join(out_dir, f"run_{n:03d}")
        try:
            os.mkdir(path)
            return path
        except FileExistsError:
            continue
    sys.exit(f"error: {out_dir} already holds 10000 runs; pass another --out-dir")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--backend", default="CSX", choices=["CSX", "CPU"], type=str.upper)
    p.add_argument("--steps", type=int, default=300, help="training steps")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05, help="SGD learning rate (momentum 0.9)")
    p.add_argument("--checkpoint-steps", type=int, default=100, help="save every N steps (and at the last step)")
    p.add_argument("--log-steps", type=int, default=25, help="print the loss every N steps")
    p.add_argument("--out-dir", default="./mnist_out", help="checkpoints go to a fresh run_NNN folder inside it")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    x_train, y_train, x_test, y_test = load_data(args.seed)
    out_dir = fresh_run_dir(args.out_dir)

    # One backend per process. The model is built as usual, then compiled for it.
    backend = cstorch.backend(args.backend)
    model = make_model()
    compiled = cstorch.compile(model, backend)
    optimizer = cstorch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    @cstorch.trace
    def train_step(x, y):
        loss = F.cross_entropy(compiled(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss

    @cstorch.step_closure
    def log_loss(loss, step):
        if step == 1 or step % args.log_steps == 0 or step == args.steps:
            print(f"step {step}: loss {loss.item():.4f}", flush=True)

    @cstorch.checkpoint_closure
    def save_checkpoint(step):
        path = os.path.join(out_dir, f"checkpoint_{step}.mdl")
        cstorch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, path)
        print(f"step {step}: saved {path}", flush=True)

    def input_fn():
        # Every batch must have the same shape on CSX: drop the partial last batch.
        generator = torch.Generator().manual_seed(args.seed)
        dataset = torch.utils.data.TensorDataset(x_train, y_train)
        return torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, shuffle=True, drop_last=True,
                                           generator=generator)

    loader = cstorch.utils.data.DataLoader(input_fn)
    executor = cstorch.utils.data.DataExecutor(loader, num_steps=args.steps, checkpoint_steps=args.checkpoint_steps)

    start = time.perf_counter()
    for x, y in executor:
        loss = train_step(x, y)  # on CSX: returns at once, loss is still being computed
        log_loss(loss, executor.user_iteration)
        save_checkpoint(executor.user_iteration)
    seconds = time.perf_counter() - start

    # After the loop the model holds the trained parameters: evaluate eagerly on the host.
    model.eval()
    with torch.no_grad():
        accuracy = (model(x_test).argmax(dim=1) == y_test).float().mean().item()
    print(f"trained {args.steps} steps on {args.backend} in {seconds:.1f} s")
    print(f"test accuracy: {accuracy:.2%} ({len(y_test)} images)")
    print(f"checkpoints: {os.path.abspath(out_dir)}")


if __name__ == "__main__":
    main()
