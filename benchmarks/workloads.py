"""The five workloads of the benchmark suite: model, batches, optimizer, FLOP count.

Every workload gives the same thing to the four implementations: a torch model built
from a fixed seed (its weights are copied to every implementation), a torch loss, the
same loss in jax.numpy, one optimizer configuration expressed three ways (torch.optim,
cstorch.optim, optax; same math), a list of pre-generated batches (step i uses batch
i mod len(batches) everywhere), and the analytic FLOPs of one training step.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import optax
import torch
import torch.nn as nn
import torch.nn.functional as F

import cstorch

from .jax_models import cnn_loss, gpt_loss_2d, mlp_loss
from .models import GPT, MLP

N_BATCHES = 64  # distinct batches: with few, the MLP memorises random labels and float32 drift grows chaotically


class SmallCNN(nn.Module):
    """conv3x3(1->c1) -> ReLU -> conv3x3(c1->c2) -> ReLU -> max-pool 2 -> linear(->10);
    no padding: 28 -> 26 -> 24 -> 12, so the linear layer sees c2*12*12 features."""

    def __init__(self, in_ch=1, c1=32, c2=64, image=28, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, c1, 3)
        self.conv2 = nn.Conv2d(c1, c2, 3)
        side = (image - 4) // 2
        self.fc = nn.Linear(c2 * side * side, classes)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


@dataclass
class OptimizerConfig:
    """One optimizer, three spellings with the same math (torch's: Adam/AdamW add eps
    after the bias correction; optax.adamw's `p -= lr*(adam + wd*p)` equals torch's
    `p *= 1 - lr*wd; p -= lr*adam`)."""
    kind: str  # "sgd", "adam" or "adamw"
    lr: float
    momentum: float = 0.0
    betas: tuple = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0

    def describe(self) -> str:
        if self.kind == "sgd":
            return f"SGD(lr={self.lr:g}, momentum={self.momentum:g})"
        name = {"adam": "Adam", "adamw": "AdamW"}[self.kind]
        wd = f", weight_decay={self.weight_decay:g}" if self.weight_decay else ""
        return f"{name}(lr={self.lr:g}, betas={self.betas}, eps={self.eps:g}{wd})"

    def torch(self, params):
        if self.kind == "sgd":
            return torch.optim.SGD(params, lr=self.lr, momentum=self.momentum)
        cls = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[self.kind]
        return cls(params, lr=self.lr, betas=self.betas, eps=self.eps, weight_decay=self.weight_decay)

    def cstorch(self, params):
        # every hyper-parameter explicit: cstorch's defaults are the real system's (eps=1e-6)
        if self.kind == "sgd":
            return cstorch.optim.SGD(params, lr=self.lr, momentum=self.momentum)
        cls = {"adam": cstorch.optim.Adam, "adamw": cstorch.optim.AdamW}[self.kind]
        return cls(params, lr=self.lr, betas=self.betas, eps=self.eps, weight_decay=self.weight_decay)

    def optax(self):
        if self.kind == "sgd":
            return optax.sgd(self.lr, momentum=self.momentum)
        if self.kind == "adam":
            assert self.weight_decay == 0.0
            return optax.adam(self.lr, b1=self.betas[0], b2=self.betas[1], eps=self.eps)
        # optax.adamw's default weight_decay is 1e-4: always pass it
        return optax.adamw(self.lr, b1=self.betas[0], b2=self.betas[1], eps=self.eps,
                           weight_decay=self.weight_decay)


@dataclass
class Workload:
    key: str  # "mlp", "cnn", "gpt"
    name: str  # "MLP", "CNN", "GPT"
    description: str
    build_model: Callable[[], nn.Module]
    torch_loss: Callable  # (model, *batch) -> scalar loss tensor
    jax_loss: Callable  # (param dict, *batch) -> scalar loss
    optimizer: OptimizerConfig
    flops_per_step: float  # analytic, see the builders
    flops_note: str
    tol: float  # allowed |loss - eager loss| / max(1, |eager loss|) at every step
    # allowed ||p - eager p||_2 / ||eager p||_2 per parameter tensor after the last step.
    # Adam-type updates are lr * m / sqrt(v): for a weight whose gradient is at the level of
    # float32 summation noise the step's direction is noise, so two correct float32
    # implementations drift apart by up to ~lr per step on single such weights (eager vs the
    # hand-written JAX step and vs cstorch alike: one conv2 weight of the CNN 2e-3 apart
    # after 8 steps, 3e-2 of the tensor's largest entry, while the whole tensor agrees to
    # 6e-4 in norm). A norm averages those few weights out; a wrong rule moves every weight
    # by O(lr) per step and is off by O(1) in norm. SGD passes the noise on scaled by lr,
    # and its check stays tight.
    param_tol: float
    warmup: int
    rounds: int
    steps_per_round: int
    batches: list = field(default_factory=list)  # tuples of torch tensors



@dataclass
class WorkloadResult:
    """One workload's run in the suite: its implementations (`benchmarks.impls.Impl`, each
    with its step times, losses and compile seconds) and the checks against eager."""

    wl: Workload
    impls: list
    warmup: int
    rounds: int
    steps_per_round: int
    foreign_cores: float | None = None
    loss_check: dict = field(default_factory=dict)  # impl key -> max relative diff vs eager
    param_check: dict = field(default_factory=dict)  # impl key -> max per-tensor relative norm diff vs eager
    loss_ok: bool = True  # losses and parameters agree with eager's
    warm_start: dict | None = None  # benchmarks.warm_start.cold_and_warm

    def impl(self, key):
        return next((i for i in self.impls if i.key == key), None)

    @property
    def total_steps(self):
        return self.warmup + self.rounds * self.steps_per_round


# FLOPs: one multiply-add = 2 FLOPs. Only the matmuls and convolutions are counted
# (elementwise ops, softmax, layer norm and the optimizer are ignored), and a training
# step is taken as 3x the forward: the backward pass costs two products of the forward's
# size per matmul/conv (the gradient w.r.t. the input and w.r.t. the weight).
def _mlp_flops(sizes, batch) -> float:
    forward = sum(2 * batch * a * b for a, b in zip(sizes[:-1], sizes[1:]))
    return 3.0 * forward


def _cnn_flops(batch, in_ch, c1, c2, image, classes) -> float:
    s1, s2 = image - 2, image - 4  # 3x3 valid convolutions
    pooled = s2 // 2
    forward = batch * (2 * s1 * s1 * c1 * in_ch * 9  # conv1: per output element, in_ch*9 MACs
                       + 2 * s2 * s2 * c2 * c1 * 9  # conv2
                       + 2 * c2 * pooled * pooled * classes)  # linear
    return 3.0 * forward


def _gpt_flops(batch, seq, d, n_layers, vocab) -> float:
    # per token and layer: qkv 2*d*3d + out-proj 2*d*d + MLP 2*(2*d*4d) = 24 d^2, and the
    # attention products QK^T and AV, 2*T*d each = 4 T d (dense: no saving for the causal
    # mask); plus the head, 2*d*vocab per token. Embedding lookups are not matmuls.
    per_token = n_layers * (24 * d * d + 4 * seq * d) + 2 * d * vocab
    return 3.0 * batch * seq * per_token


def _image_batches(g, n, batch, in_ch, image, classes, learnable: bool = False):
    """`n` batches of random images; random labels, or with `learnable` the labels of a fixed
    random linear teacher (the argmax of `x.flatten(1) @ W`), which a network learns smoothly
    instead of memorising (float32 rounding then stays rounding over hundreds of steps)."""
    teacher = torch.randn(in_ch * image * image, classes, generator=g) if learnable else None
    out = []
    for _ in range(n):
        x = torch.randn(batch, in_ch, image, image, generator=g)
        y = (x.flatten(1) @ teacher).argmax(1) if learnable else torch.randint(0, classes, (batch,), generator=g)
        out.append((x, y))
    return out


def mlp_workload(quick: bool) -> Workload:
    sizes, batch = ((784, 64, 64, 10), 16) if quick else ((784, 512, 512, 10), 128)
    return _mlp_workload("mlp", "MLP", "MLP", sizes, batch, seed=1, quick=quick,
                         rounds=2 if quick else 5, steps_per_round=2 if quick else 40)


def mnist_workload(quick: bool) -> Workload:
    """The documentation's MNIST network (784-256-10, batch 64, SGD momentum): a step of
    ~0.3 MFLOP per example, where the host work around each step decides the speed.

    Its labels are a linear teacher's (`_image_batches(learnable=True)`): on random labels
    this network memorises its 4096 examples and float32 rounding grows chaotically (eager
    float32 against float64: 6e-4 relative in the parameters at step 205, 8e-3 at step 425,
    beyond any tolerance that could still catch a wrong step); on the teacher's, 4e-7 and
    5e-7. Its tolerances are the CNN's and the GPT's (1e-3 on the losses, 1e-2 on the
    parameters), not the MLP's: a ReLU unit that one implementation's rounding switches off
    for a sample is a discrete event (the hand-written jax.jit step against eager on these
    batches: 3e-7 relative in the parameters at step 108, 2e-5 at step 109, 1.5e-3 at step
    425, while cstorch's step stayed at 3e-7 on this seed)."""
    sizes, batch = ((784, 32, 10), 16) if quick else ((784, 256, 10), 64)
    return _mlp_workload("mnist", "MNIST", "the documentation's MNIST network", sizes, batch, seed=4, quick=quick,
                         rounds=2 if quick else 7, steps_per_round=4 if quick else 60, learnable=True,
                         tol=1e-3, param_tol=1e-2)


def _mlp_workload(key: str, name: str, label: str, sizes: tuple, batch: int, seed: int, quick: bool,
                  rounds: int, steps_per_round: int, learnable: bool = False, tol: float = 1e-4,
                  param_tol: float = 1e-4) -> Workload:
    """A ReLU MLP of layer `sizes` on 28x28 images, cross-entropy, SGD momentum 0.9."""
    opt = OptimizerConfig("sgd", lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(seed)
    return Workload(
        key=key, name=name,
        description=f"{label} {'-'.join(map(str, sizes))}, ReLU, batch {batch}, cross-entropy, {opt.describe()}",
        build_model=lambda: MLP(sizes),
        torch_loss=lambda model, x, y: F.cross_entropy(model(x), y),
        jax_loss=lambda p, x, y: mlp_loss(p, x, y, n_layers=len(sizes) - 1),
        optimizer=opt,
        flops_per_step=_mlp_flops(sizes, batch),
        flops_note="3 x forward matmuls, 2*batch*in*out per Linear",
        tol=tol, param_tol=param_tol,
        warmup=2 if quick else 5, rounds=rounds, steps_per_round=steps_per_round,
        batches=_image_batches(g, N_BATCHES, batch, 1, 28, 10, learnable),
    )


def cnn_workload(quick: bool) -> Workload:
    cfg = dict(in_ch=1, c1=4, c2=8, image=12, classes=10) if quick else dict(in_ch=1, c1=32, c2=64, image=28,
                                                                              classes=10)
    batch = 8 if quick else 64
    opt = OptimizerConfig("adam", lr=1e-3)
    g = torch.Generator().manual_seed(3)
    c = cfg
    return Workload(
        key="cnn", name="CNN",
        description=(f"CNN conv3x3({c['in_ch']}->{c['c1']})+ReLU, conv3x3({c['c1']}->{c['c2']})+ReLU, maxpool 2, "
                     f"linear({c['c2'] * ((c['image'] - 4) // 2) ** 2}->{c['classes']}); "
                     f"{c['image']}x{c['image']} input, batch {batch}, cross-entropy, {opt.describe()}"),
        build_model=lambda: SmallCNN(**cfg),
        torch_loss=lambda model, x, y: F.cross_entropy(model(x), y),
        jax_loss=cnn_loss,
        optimizer=opt,
        flops_per_step=_cnn_flops(batch, **cfg),
        flops_note="3 x forward: conv1 + conv2 (2*out_elems*in_ch*9 each) + linear",
        tol=1e-3, param_tol=1e-2,
        warmup=2 if quick else 3, rounds=2 if quick else 8, steps_per_round=2 if quick else 5,
        batches=_image_batches(g, N_BATCHES, batch, cfg["in_ch"], cfg["image"], cfg["classes"]),
    )


def gpt_workload(quick: bool) -> Workload:
    if quick:
        cfg, batch = dict(n_layers=1, d_model=32, n_heads=2, seq=16, vocab=64), 2
    else:
        cfg, batch = dict(n_layers=4, d_model=256, n_heads=4, seq=128, vocab=2048), 8
    return _decoder_workload("gpt", "GPT", cfg, batch, seed=2, quick=quick, steps_per_round=2 if quick else 5)


def small_decoder_workload(quick: bool) -> Workload:
    """A 2-layer d64 decoder: small enough that the host work of a step shows."""
    if quick:
        cfg, batch = dict(n_layers=1, d_model=16, n_heads=2, seq=8, vocab=32), 2
    else:
        cfg, batch = dict(n_layers=2, d_model=64, n_heads=2, seq=64, vocab=512), 8
    return _decoder_workload("decoder", "Decoder", cfg, batch, seed=5, quick=quick,
                             steps_per_round=4 if quick else 40)


def _decoder_workload(key: str, name: str, cfg: dict, batch: int, seed: int, quick: bool,
                      steps_per_round: int) -> Workload:
    opt = OptimizerConfig("adamw", lr=1e-3, weight_decay=0.01)
    g = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(N_BATCHES):
        tokens = torch.randint(0, cfg["vocab"], (batch, cfg["seq"] + 1), generator=g)
        batches.append((tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()))
    return Workload(
        key=key, name=name,
        description=(f"GPT decoder {cfg['n_layers']} layers, d_model {cfg['d_model']}, {cfg['n_heads']} heads, "
                     f"seq {cfg['seq']}, vocab {cfg['vocab']}, batch {batch}, pre-LN, GELU MLP 4x, untied head, "
                     f"{opt.describe()}"),
        build_model=lambda: GPT(vocab=cfg["vocab"], seq=cfg["seq"], d_model=cfg["d_model"], n_heads=cfg["n_heads"],
                                n_layers=cfg["n_layers"], dropout=0.0),
        torch_loss=lambda model, idx, targets: model(idx, targets),
        jax_loss=lambda p, idx, targets: gpt_loss_2d(p, idx, targets, n_layers=cfg["n_layers"],
                                                     n_heads=cfg["n_heads"]),
        optimizer=opt,
        flops_per_step=_gpt_flops(batch, cfg["seq"], cfg["d_model"], cfg["n_layers"], cfg["vocab"]),
        flops_note="3 x forward: per token per layer 24*d^2 + 4*T*d (dense attention), plus 2*d*vocab for the head",
        tol=1e-3, param_tol=1e-2,
        warmup=2 if quick else 3, rounds=2 if quick else 8,
        steps_per_round=steps_per_round,
        batches=batches,
    )


BUILDERS = {"mlp": mlp_workload, "cnn": cnn_workload, "gpt": gpt_workload, "mnist": mnist_workload,
            "decoder": small_decoder_workload}
