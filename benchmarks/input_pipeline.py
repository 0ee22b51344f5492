"""Input pipeline: how much of a slow loader the host prefetch hides behind the step.

    python -m benchmarks.input_pipeline            # MLP 784-512-512-10, batch 128
    python -m benchmarks.input_pipeline --quick    # tiny MLP, few steps (CI smoke run)

One process, one CSX run setup: an MLP from `benchmarks.models` trained by a
`@cstorch.trace` step (forward, `loss.backward()`, `cstorch.optim.SGD` step,
`zero_grad`). First the step's compute time is measured with a fast loader (batches
already in memory); then the loader is made slow: its `input_fn` sleeps that long
before every batch, as if each batch were read and decoded on the host. Three modes
then run in alternating rounds, so that drift in machine load hits them alike:

* `fast loader`: no sleep, the default `prefetch_batches="auto"` (the compute bound;
  on the cpu platform no producer thread starts for it);
* `prefetch_batches=0`: the slow loader pulled on the main thread at each step;
* `prefetch_batches=2`: the slow loader run ahead by the input pipeline's producer;
* `prefetch_batches=auto`: the slow loader under the default (on the cpu platform the
  producer starts once the first pulls found the loader slow).

Each round of each mode is one fresh `DataExecutor` run of the same steps on the same
batches, starting from the same weights and optimizer state (a saved `state_dict` is
loaded before every round); the step is traced and compiled once and reused. A step
closure fetches the loss on every `--fetch-every`-th step and on the last, so a round
ends only when the device has finished it; a round is timed from `iter(executor)` to
the end of the run. Reported per mode: median/min/max ms per step over the rounds,
the main thread's wait for input per step (`DataExecutor.pipeline_stats`), the ratio
of the two slow-loader modes, and "input hidden": the share of the sleep that did not
show in the step time, `1 - (ms/step - compute ms/step) / sleep ms` (100% means the
loader cost nothing, 0% that it added its whole sleep). The losses of the two
slow-loader modes must agree (within --tol); otherwise the script exits with status
1. Timings are measurements, never assertions.
"""
from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from dataclasses import dataclass, field

import jax
import torch
import torch.nn.functional as F

import cstorch

from .models import MLP

PERF = cstorch.backends.csx.performance


@dataclass
class Mode:
    name: str
    prefetch: int | str
    sleep: bool
    ms_per_step: list = field(default_factory=list)  # one entry per round
    wait_ms_per_step: list = field(default_factory=list)  # main thread waiting for input, per round
    losses: list = field(default_factory=list)  # fetched losses of every round, in order


@dataclass
class Setup:
    model: torch.nn.Module
    optimizer: cstorch.optim.Optimizer
    step: object  # the @cstorch.trace step
    batches: list
    initial: dict  # state dicts restored before every round
    fetched: list  # where the loss closure appends


def build(quick: bool) -> tuple[Setup, str]:
    sizes, batch, lr, momentum = ((784, 64, 64, 10), 16, 0.01, 0.9) if quick else ((784, 512, 512, 10), 128, 0.01, 0.9)
    torch.manual_seed(0)
    backend = cstorch.backend("CSX")
    model = MLP(sizes)
    compiled = cstorch.compile(model, backend)
    optimizer = cstorch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    fetched: list = []

    @cstorch.step_closure
    def fetch(loss):
        fetched.append(float(loss))

    @cstorch.trace
    def step(x, y):
        loss = F.cross_entropy(compiled(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        fetch(loss)
        return loss

    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(batch, 1, 28, 28, generator=g), torch.randint(0, 10, (batch,), generator=g))
               for _ in range(8)]
    initial = copy.deepcopy({"model": model.state_dict(), "optimizer": optimizer.state_dict()})
    description = f"MLP {'-'.join(map(str, sizes))} b{batch} SGD(lr={lr}, momentum={momentum})"
    return Setup(model, optimizer, step, batches, initial, fetched), description


class SlowLoader:
    """The batches, each after `sleep_s` seconds of pretended host work (an `input_fn`)."""

    def __init__(self, batches: list, sleep_s: float):
        self.batches, self.sleep_s = batches, sleep_s

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self):
        for b in self.batches:
            if self.sleep_s:
                time.sleep(self.sleep_s)
            yield b


def run_round(setup: Setup, prefetch: int, sleep_s: float, steps: int, fetch_every: int):
    """One fresh DataExecutor run from the initial state: (seconds, fetched losses,
    the run's `pipeline_stats`)."""
    setup.model.load_state_dict(setup.initial["model"])
    setup.optimizer.load_state_dict(setup.initial["optimizer"])
    setup.fetched.clear()
    PERF.prefetch_batches = prefetch
    loader = cstorch.utils.data.DataLoader(SlowLoader, setup.batches, sleep_s)
    executor = cstorch.utils.data.DataExecutor(loader, num_steps=steps, activation_steps=fetch_every)
    start = time.perf_counter()
    for x, y in executor:
        setup.step(x, y)
    return time.perf_counter() - start, list(setup.fetched), executor.pipeline_stats


def _ms(xs):
    return statistics.median(xs), min(xs), max(xs)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="tiny MLP and few steps (CI)")
    p.add_argument("--rounds", type=int, default=None, help="alternating timed rounds per mode (default 5)")
    p.add_argument("--steps", type=int, default=None, help="steps per round (default 64)")
    p.add_argument("--fetch-every", type=int, default=8, help="fetch the loss every N steps (and on the last)")
    p.add_argument("--sleep-ms", type=float, default=None,
                   help="loader sleep per batch (default: the measured compute time of a step)")
    p.add_argument("--tol", type=float, default=1e-6, help="allowed |loss difference| (relative above 1)")
    args = p.parse_args(argv)
    if args.rounds is None:
        args.rounds = 2 if args.quick else 5
    if args.steps is None:
        args.steps = 16 if args.quick else 64
    if args.rounds < 1 or args.steps < 1 or args.fetch_every < 1:
        p.error("--rounds, --steps and --fetch-every must be >= 1")
    if args.sleep_ms is not None and args.sleep_ms < 0:
        p.error("--sleep-ms must be >= 0")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    PERF.progress = False
    setup, description = build(args.quick)
    print(f"input pipeline: host prefetch vs none, CSX backend "
          f"(jax {jax.__version__} on {jax.devices()[0].platform}, torch {torch.__version__})")
    print(description)

    # warm-up (traces and compiles the step), then calibrate the compute time per step
    run_round(setup, "auto", 0.0, 2, args.fetch_every)
    calib = [run_round(setup, "auto", 0.0, args.steps, args.fetch_every)[0] / args.steps * 1e3 for _ in range(3)]
    sleep_ms = args.sleep_ms if args.sleep_ms is not None else round(min(calib), 2)
    print(f"compute per step with a fast loader (calibration): {min(calib):.2f} ms -> loader sleeps "
          f"{sleep_ms:.2f} ms per batch")
    print(f"{args.rounds} alternating rounds of {args.steps} steps per mode; loss fetched every "
          f"{args.fetch_every} steps and on the last\n")

    modes = [Mode("fast loader", "auto", False), Mode("prefetch_batches=0", 0, True),
             Mode("prefetch_batches=2", 2, True), Mode("prefetch_batches=auto", "auto", True)]
    for r in range(args.rounds):
        for mode in modes[r % len(modes):] + modes[:r % len(modes)]:
            seconds, losses, stats = run_round(setup, mode.prefetch, sleep_ms / 1e3 if mode.sleep else 0.0,
                                               args.steps, args.fetch_every)
            mode.ms_per_step.append(seconds / args.steps * 1e3)
            mode.wait_ms_per_step.append(stats.input_wait_s / args.steps * 1e3)
            mode.losses.extend(losses)

    compute = _ms(modes[0].ms_per_step)[0]
    header = (f"{'mode':<23} {'median ms/step':>14} {'min':>8} {'max':>8} {'input wait ms/step':>18} "
              f"{'input hidden':>12}")
    print(header)
    print("-" * len(header))
    for mode in modes:
        med, lo, hi = _ms(mode.ms_per_step)
        hidden = f"{1 - (med - compute) / sleep_ms:.0%}" if mode.sleep and sleep_ms > 0 else "-"
        wait = statistics.median(mode.wait_ms_per_step)
        print(f"{mode.name:<23} {med:14.3f} {lo:8.3f} {hi:8.3f} {wait:18.3f} {hidden:>12}")
    slow0, slow2, slow_auto = (_ms(m.ms_per_step)[0] for m in modes[1:])
    print(f"\nratio prefetch_batches=0 / prefetch_batches=2 (median): {slow0 / slow2:.2f}x")
    if sleep_ms > 0:
        print(f"input hidden: {1 - (slow2 - compute) / sleep_ms:.0%} with prefetch_batches=2, "
              f"{1 - (slow_auto - compute) / sleep_ms:.0%} with auto, {1 - (slow0 - compute) / sleep_ms:.0%} without "
              f"(sleep {sleep_ms:.2f} ms per batch, compute {compute:.2f} ms per step)")

    a = modes[1].losses
    others = [m.losses for m in modes[2:]]
    worst = max((abs(x - y) / max(1.0, abs(y)) for b in others for x, y in zip(a, b)), default=float("inf"))
    ok = all(len(a) == len(b) > 0 for b in others) and worst <= args.tol
    print(f"losses: prefetch_batches=0 vs 2 and auto, {len(a)} fetched, max |diff| {worst:.2e} "
          f"({'OK' if ok else 'MISMATCH'}, tol {args.tol:g})")
    if not ok:
        print("\nFAILED: the losses with and without prefetch disagree")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
