"""Step overhead: cstorch's compiled CSX step next to a hand-written `jax.jit` step.

    python -m benchmarks.step_overhead            # MNIST network + MLP + small GPT
    python -m benchmarks.step_overhead --full     # GPT with 4 layers, d256, seq 128, vocab 2048
    python -m benchmarks.step_overhead --quick    # tiny sizes, few steps (CI smoke run)
    python -m benchmarks.step_overhead --out benchmarks/RESULTS.md   # also record the table there

For each model, one process measures side by side:

* cstorch: the torch model from `benchmarks.models`, a `@cstorch.trace` training step
  (forward, `loss.backward()`, `opt.step()`, `opt.zero_grad()`) with a cstorch
  optimizer, driven by a `DataExecutor` on the CSX backend;
* jax: the same model written in jax.numpy with the weights copied from the same
  torch initialisation, the same loss, and the same optimizer math (the jnp rules
  of the `cstorch_jax.optim` algorithms `sgd_update` / `adam_update`), as one `jax.jit` step that donates
  the parameters and optimizer state.

Both run the same sequence of batches. A step is timed from fetching its batch to
having its loss on the host (`float(loss)`), so every step ends in a sync; for cstorch
this includes the executor's per-step bookkeeping. Each side first runs warm-up steps
(the first one traces and compiles), then rounds of steps alternate between the two
so that drift in machine load hits both alike. Reported: median/min/max ms per step,
the ratio cstorch/jax of the medians, the trace and compile seconds of each, and the
loss of both after the same number of steps. The losses must agree (within --tol at
every step and after training); otherwise the script exits with status 1. The ratios
are measurements, never assertions.
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path
from dataclasses import dataclass, field
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import torch
import torch.nn.functional as F

import cstorch
from cstorch_jax.optim import Hyper
from cstorch_jax.optim.algorithms.adam import ADAM_ALGORITHM, AdamHyper, AdamState
from cstorch_jax.optim.algorithms.sgd import SGD_ALGORITHM, SGDHyper, SGDState

from .jax_models import gpt_loss, mlp_loss
from .models import GPT, MLP
from .report import machine
from .sections import replace_section
from .steps import cstorch_train_step


# --------------------------------------------------------------------------------------
# The optimizers in jax.numpy: state init and update, on lists in torch parameter order.
# --------------------------------------------------------------------------------------
def sgd_init(params):
    return [jnp.zeros_like(p) for p in params]


def sgd_update(params, grads, bufs, lr, wd, *, momentum):
    hp = Hyper(SGDHyper(momentum=momentum, dampening=0.0, nesterov=False, maximize=False), lr, wd)
    out = [SGD_ALGORITHM.update(p, g, SGDState(b), hp) for p, g, b in zip(params, grads, bufs)]
    return [p for p, _ in out], [st.momentum_buffer for _, st in out]


def adamw_init(params):
    # one distinct buffer each, since the state is donated
    return [{"step": jnp.zeros((), jnp.float32), "exp_avg": jnp.zeros_like(p), "exp_avg_sq": jnp.zeros_like(p)}
            for p in params]


def adamw_update(params, grads, state, lr, wd, *, betas, eps):
    hp = Hyper(AdamHyper(beta1=betas[0], beta2=betas[1], eps=eps, decoupled=True, amsgrad=False, correct_bias=True,
                         maximize=False), lr, wd)
    out = [ADAM_ALGORITHM.update(p, g, AdamState(st["step"], st["exp_avg"], st["exp_avg_sq"], None), hp)
           for p, g, st in zip(params, grads, state)]
    return [p for p, _ in out], [{"step": st.step, "exp_avg": st.exp_avg, "exp_avg_sq": st.exp_avg_sq} for _, st in out]


# --------------------------------------------------------------------------------------
# One benchmark case: the torch side and its jax twin.
# --------------------------------------------------------------------------------------
@dataclass
class Case:
    name: str
    description: str
    build_model: Callable[[], torch.nn.Module]
    make_optimizer: Callable  # params -> cstorch optimizer
    torch_loss: Callable  # (compiled_model, *batch) -> loss
    jax_loss: Callable  # (param_dict, *batch) -> loss
    opt_init: Callable  # param_list -> opt_state
    opt_update: Callable  # (params, grads, opt_state, lr, wd) -> (params, opt_state)
    lr: float
    weight_decay: float
    batches: list = field(default_factory=list)  # list of tuples of torch tensors


def mlp_case(quick: bool, n_batches: int, mnist: bool = False) -> Case:
    """The MLP (784-512-512-10, batch 128), or with `mnist` the documentation's MNIST
    network (784-256-10, batch 64), where the step is short and host work shows most."""
    if mnist:
        sizes, batch = ((784, 32, 10), 16) if quick else ((784, 256, 10), 64)
    else:
        sizes, batch = ((784, 64, 64, 10), 16) if quick else ((784, 512, 512, 10), 128)
    lr, momentum = 0.01, 0.9
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(batch, 1, 28, 28, generator=g), torch.randint(0, 10, (batch,), generator=g))
               for _ in range(n_batches)]
    return Case(
        name="MNIST" if mnist else "MLP",
        description=f"{'-'.join(map(str, sizes))} b{batch} SGD(lr={lr}, momentum={momentum})",
        build_model=lambda: MLP(sizes),
        make_optimizer=lambda ps: cstorch.optim.SGD(ps, lr=lr, momentum=momentum),
        torch_loss=lambda model, x, y: F.cross_entropy(model(x), y),
        jax_loss=lambda p, x, y: mlp_loss(p, x, y, n_layers=len(sizes) - 1),
        opt_init=sgd_init,
        opt_update=lambda ps, gs, st, lr_, wd: sgd_update(ps, gs, st, lr_, wd, momentum=momentum),
        lr=lr, weight_decay=0.0, batches=batches,
    )


def gpt_case(quick: bool, full: bool, n_batches: int) -> Case:
    if quick:
        cfg = dict(n_layers=1, d_model=32, n_heads=2, seq=16, vocab=64)
        batch = 2
    elif full:
        cfg = dict(n_layers=4, d_model=256, n_heads=4, seq=128, vocab=2048)
        batch = 8
    else:
        cfg = dict(n_layers=2, d_model=128, n_heads=4, seq=64, vocab=512)
        batch = 8
    lr, wd, betas, eps = 1e-3, 0.01, (0.9, 0.999), 1e-6
    g = torch.Generator().manual_seed(2)
    batches = []
    for _ in range(n_batches):
        tokens = torch.randint(0, cfg["vocab"], (batch, cfg["seq"] + 1), generator=g)
        batches.append((tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()))
    return Case(
        name="GPT",
        description=(f"L{cfg['n_layers']} d{cfg['d_model']} h{cfg['n_heads']} seq{cfg['seq']} "
                     f"vocab{cfg['vocab']} b{batch} AdamW(lr={lr}, wd={wd})"),
        build_model=lambda: GPT(vocab=cfg["vocab"], seq=cfg["seq"], d_model=cfg["d_model"], n_heads=cfg["n_heads"],
                                n_layers=cfg["n_layers"], dropout=0.0),
        make_optimizer=lambda ps: cstorch.optim.AdamW(ps, lr=lr, betas=betas, eps=eps, weight_decay=wd),
        torch_loss=lambda model, idx, targets: model(idx, targets),
        jax_loss=lambda p, idx, targets: gpt_loss(p, idx, targets, n_layers=cfg["n_layers"], n_heads=cfg["n_heads"]),
        opt_init=adamw_init,
        opt_update=lambda ps, gs, st, lr_, wd_: adamw_update(ps, gs, st, lr_, wd_, betas=betas, eps=eps),
        lr=lr, weight_decay=wd, batches=batches,
    )


# --------------------------------------------------------------------------------------
# Running one case.
# --------------------------------------------------------------------------------------
@dataclass
class Side:
    times: list = field(default_factory=list)  # seconds per timed step
    losses: list = field(default_factory=list)  # loss of every step, warm-up included
    from_cache: bool = False  # cstorch: the step's program came from the compile cache
    trace_s: float = 0.0
    compile_s: float = 0.0
    eval_loss: float = float("nan")  # loss of the trained parameters on batch 0


def _to_numpy(t: torch.Tensor) -> np.ndarray:
    return t.numpy().astype(np.int32) if t.dtype == torch.int64 else t.numpy()


def run_case(case: Case, backend, warmup: int, rounds: int, steps_per_round: int) -> tuple[Side, Side]:
    torch.manual_seed(0)
    model = case.build_model()
    names = [n for n, _ in model.named_parameters()]
    init = [p.detach().numpy().copy() for p in model.parameters()]
    total = warmup + rounds * steps_per_round
    n_batches = len(case.batches)

    # ---- cstorch ----
    compiled = cstorch.compile(model, backend)
    optimizer = case.make_optimizer(model.parameters())
    cs_step = cstorch_train_step(compiled, optimizer, case.torch_loss)

    # ---- jax ----
    def jax_step(params, opt_state, batch, lr, wd):
        loss, grads = jax.value_and_grad(lambda ps: case.jax_loss(dict(zip(names, ps)), *batch))(params)
        params, opt_state = case.opt_update(params, grads, opt_state, lr, wd)
        return params, opt_state, loss

    jx_step = jax.jit(jax_step, donate_argnums=(0, 1))
    params = [jnp.asarray(a) for a in init]
    opt_state = case.opt_init(params)
    lr, wd = jnp.float32(case.lr), jnp.float32(case.weight_decay)
    np_batches = [tuple(_to_numpy(t) for t in b) for b in case.batches]

    cs, jx = Side(), Side()
    t0 = time.perf_counter()
    lowered = jx_step.trace(params, opt_state, np_batches[0], lr, wd).lower()
    t1 = time.perf_counter()
    lowered.compile()  # jx_step's own cache reuses this compilation
    jx.trace_s, jx.compile_s = t1 - t0, time.perf_counter() - t1

    def run_jax(n: int, timed: bool) -> None:
        nonlocal params, opt_state
        for _ in range(n):
            start = time.perf_counter()
            batch = np_batches[len(jx.losses) % n_batches]
            params, opt_state, loss = jx_step(params, opt_state, batch, lr, wd)
            value = float(loss)
            if timed:
                jx.times.append(time.perf_counter() - start)
            jx.losses.append(value)

    # cstorch steps: one DataExecutor run over every step; the jax rounds run between
    # them. A cstorch step's time covers next(executor) (the previous step's
    # bookkeeping and fetching the batch), the step call and `float(loss)`.
    loader = cstorch.utils.data.DataLoader(lambda: list(case.batches))
    executor = iter(cstorch.utils.data.DataExecutor(loader, num_steps=total))

    def run_cstorch(n: int, timed: bool) -> None:
        for _ in range(n):
            start = time.perf_counter()
            batch = next(executor)
            loss = cs_step(*batch)
            value = float(loss)
            if timed:
                cs.times.append(time.perf_counter() - start)
            cs.losses.append(value)

    run_cstorch(warmup, timed=False)
    run_jax(warmup, timed=False)
    for _ in range(rounds):
        run_cstorch(steps_per_round, timed=True)
        run_jax(steps_per_round, timed=True)
    for _ in executor:  # ends the run: the trained values are copied into the torch model
        raise AssertionError("the executor ran more steps than asked")

    prog = cs_step.program
    cs.trace_s = prog.trace_seconds + prog.executable.lower_seconds
    cs.compile_s = prog.executable.compile_seconds
    cs.from_cache = prog.executable.from_cache

    # The loss of the trained parameters on batch 0: eager torch on the host model
    # (cstorch leaves the trained values there) and the jax function on jax's params.
    with torch.no_grad():
        cs.eval_loss = float(case.torch_loss(model, *case.batches[0]))
    jx.eval_loss = float(jax.jit(lambda ps, b: case.jax_loss(dict(zip(names, ps)), *b))(params, np_batches[0]))
    return cs, jx


# --------------------------------------------------------------------------------------
def _ms(xs):
    xs = [x * 1e3 for x in xs]
    return statistics.median(xs), min(xs), max(xs)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="tiny models and few steps (CI)")
    size.add_argument("--full", action="store_true", help="GPT with 4 layers, d_model 256, seq 128, vocab 2048")
    p.add_argument("--warmup", type=int, default=None, help="untimed steps per side before timing (default 10)")
    p.add_argument("--rounds", type=int, default=None, help="alternating timed rounds (default 10)")
    p.add_argument("--steps-per-round", type=int, default=None, help="timed steps per side per round (default 10)")
    p.add_argument("--tol", type=float, default=1e-4, help="allowed |loss difference| (relative above 1)")
    p.add_argument("--out", default=None, help="record the table as the 'step-overhead' section of this markdown file")
    p.add_argument("--models", default="MNIST,MLP,GPT", help="comma-separated subset of MNIST,MLP,GPT")
    args = p.parse_args(argv)
    quick_defaults, defaults = (2, 3, 3), (10, 10, 10)
    for name, q, d in zip(("warmup", "rounds", "steps_per_round"), quick_defaults, defaults):
        if getattr(args, name) is None:
            setattr(args, name, q if args.quick else d)
    if args.warmup < 1 or args.rounds < 1 or args.steps_per_round < 1:
        p.error("--warmup, --rounds and --steps-per-round must be >= 1")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    wanted = [m.strip().upper() for m in args.models.split(",") if m.strip()]
    unknown = sorted(set(wanted) - {"MNIST", "MLP", "GPT"})
    if unknown:
        sys.exit(f"error: unknown model(s) {unknown}; choose from MNIST, MLP, GPT")
    backend = cstorch.backend("CSX")
    n_batches = 8
    cases = []
    if "MNIST" in wanted:
        cases.append(mlp_case(args.quick, n_batches, mnist=True))
    if "MLP" in wanted:
        cases.append(mlp_case(args.quick, n_batches))
    if "GPT" in wanted:
        cases.append(gpt_case(args.quick, args.full, n_batches))

    total = args.warmup + args.rounds * args.steps_per_round
    print(f"step overhead: cstorch CSX step vs hand-written jax.jit step "
          f"(jax {jax.__version__} on {jax.devices()[0].platform}, torch {torch.__version__})")
    print(f"{args.warmup} warm-up steps per side, then {args.rounds} alternating rounds of "
          f"{args.steps_per_round} timed steps per side; every step ends in a sync; {total} steps in all\n")
    header = (f"{'model':<6} {'impl':<8} {'median ms':>9} {'min ms':>8} {'max ms':>8} {'trace s':>8} "
              f"{'compile s':>9} {f'loss @{total}':>11} {'trained loss':>12}")
    rows, failures, table = [], [], []
    for case in cases:
        cs, jx = run_case(case, backend, args.warmup, args.rounds, args.steps_per_round)
        rows.append((case, cs, jx))
    print(header)
    print("-" * len(header))
    for case, cs, jx in rows:
        for impl, side in (("cstorch", cs), ("jax.jit", jx)):
            med, lo, hi = _ms(side.times)
            print(f"{case.name:<6} {impl:<8} {med:9.3f} {lo:8.3f} {hi:8.3f} {side.trace_s:8.2f} "
                  f"{side.compile_s:9.2f} {side.losses[-1]:11.6f} {side.eval_loss:12.6f}")
        ratio = _ms(cs.times)[0] / _ms(jx.times)[0]
        extra_us = (_ms(cs.times)[0] - _ms(jx.times)[0]) * 1e3
        diffs = [abs(a - b) / max(1.0, abs(b)) for a, b in zip(cs.losses, jx.losses)]
        diffs.append(abs(cs.eval_loss - jx.eval_loss) / max(1.0, abs(jx.eval_loss)))
        worst = max(d if math.isfinite(d) else math.inf for d in diffs)
        ok = worst <= args.tol
        print(f"{case.name:<6} ratio cstorch/jax (median): {ratio:.2f}x, cstorch - jax.jit per step "
              f"(median difference): {extra_us:+.0f} us   |loss diff| max over "
              f"{len(cs.losses)} steps and trained loss: {worst:.2e} ({'OK' if ok else 'MISMATCH'}, tol {args.tol:g})")
        print(f"{'':<6} {case.description}")
        cached = " (cached)" if cs.from_cache else ""
        table.append(f"| {case.name} {case.description} | {_ms(cs.times)[0]:.3f} | {_ms(jx.times)[0]:.3f} | "
                     f"{ratio:.2f}x | {extra_us:+.0f} | {cs.trace_s + cs.compile_s:.2f}{cached} / "
                     f"{jx.trace_s + jx.compile_s:.2f} | {worst:.1e} |")
        if not ok:
            failures.append(case.name)
    if args.out is not None:
        replace_section(Path(args.out), "step-overhead", "\n".join([
            "## Step overhead: cstorch against a hand-written jax.jit step", "",
            f"Written by `python -m benchmarks.step_overhead` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} "
            f"({machine()}; jax {jax.__version__} on {jax.devices()[0].platform}, torch {torch.__version__}): "
            f"{args.warmup} warm-up steps per side, then {args.rounds} alternating rounds of {args.steps_per_round} "
            f"timed steps per side, every step synced (`float(loss)`).", "",
            "| model | cstorch ms/step (median) | jax.jit ms/step | ratio | cstorch - jax.jit us/step | "
            "trace + compile s (cstorch / jax) | max loss diff |",
            "|---|---:|---:|---:|---:|---:|---:|", *table]))
        print(f"wrote the step-overhead section of {args.out}")
    if failures:
        print(f"\nFAILED: cstorch and jax losses disagree for {', '.join(failures)} (tolerance {args.tol:g})")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
