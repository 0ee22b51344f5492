"""The benchmark suite: five workloads under seven implementations, in one process.

    python -m benchmarks                          # full sizes; writes benchmarks/RESULTS.md + results.png
    python -m benchmarks --quick                  # tiny sizes, few steps (CI smoke run)
    python -m benchmarks --workloads mlp,gpt --out /tmp/r.md

Workloads (`benchmarks.workloads`): an MLP 784-512-512-10 (batch 128, SGD momentum 0.9),
a CNN (two 3x3 convolutions, max-pool, linear; 28x28 inputs, batch 64, Adam), the GPT
decoder of `benchmarks.models` (4 layers, d 256, 4 heads, seq 128, vocab 2048, batch 8,
AdamW), the documentation's MNIST network (784-256-10, batch 64, SGD momentum 0.9) and a
small decoder (2 layers, d 64, seq 64, vocab 512, batch 8, AdamW). Implementations, all on
the same initial weights and the same batches:

* ``eager``: the torch model, torch.optim, ``loss.item()`` every step;
* ``torch.compile``: the model + loss as one ``torch.compile`` function (AOTAutograd
  compiles its backward too) and ``opt.step`` as a second compiled function, the
  documented compiled-optimizer recipe, default inductor backend (cold: a fresh inductor
  cache, except with --quick);
  a failure is recorded as its error text and the suite carries on;
* ``cstorch``: ``cstorch.backend("CSX")``, ``cstorch.compile(model)``, a ``@cstorch.trace``
  step with the cstorch optimizer, one ``DataExecutor`` run per block of steps (compiled
  once), ``float(loss)`` every step (the step is timed from ``next(executor)`` to the
  loss on the host);
* ``jax.jit``: the model written by hand in jax.numpy (`benchmarks.jax_models`) with
  optax, one ``jax.jit`` step donating parameters and optimizer state, ``float(loss)``
  every step;
* ``cstorch pipelined`` and ``jax.jit pipelined``: the same steps with the loss read as a
  program that lets the device run ahead reads it: in a step closure (cstorch, as the
  documentation's loop does; its calls launch ``steps_per_launch`` at a time) or at the end
  of the block (jax); a block is timed from its start to its last loss on the host, and
  counted as its mean per step;
* ``jax.scan pipelined``: the hand-written step as one ``lax.scan`` of K steps over K
  batches stacked on the host, K being cstorch's ``steps_per_launch``. Eager torch and
  torch.compile read the loss every step in both measurements.

For each workload every implementation first runs its warm-up steps (the first ones
trace and compile), then timed rounds alternate between the implementations (the order
rotates every round) so that drift in the machine's load hits all alike. Reported per
(workload, implementation): median/min/max ms per step, ratio to eager (medians),
trace + compile seconds, achieved GFLOP/s from an analytic FLOP count and its fraction of
the float32 matmul peak measured in the same process. The losses of every implementation
must agree with eager's at every step (relative tolerance per workload); otherwise a
warning is printed and the exit status is 1.
"""
from __future__ import annotations

import argparse
import copy
import gc
import math
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import torch

import cstorch

from .impls import (CstorchCSX, CstorchPipelined, EagerTorch, JaxJit, JaxJitPipelined, JaxScanPipelined,
                    TorchCompile, error_text, run_steps)
from .report import IMPLS, machine, print_table, versions, write_markdown, write_plot
from .warm_start import cold_and_warm
from .workloads import BUILDERS, Workload, WorkloadResult

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "RESULTS.md"
DEFAULT_QUICK_OUT = HERE / "RESULTS-quick.md"  # git-ignored
PAUSE_S = 0.4  # between two implementations' blocks: libgomp's spinning workers go idle


def measure_peak(n: int, reps: int) -> dict:
    """Median GFLOP/s of an n x n x n float32 product (2 n^3 FLOPs) with torch.mm and with
    a jitted jnp.dot; the faster is the machine's matmul peak for this run."""
    flops = 2.0 * n ** 3
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)
    ja, jb = jnp.asarray(a.numpy()), jnp.asarray(b.numpy())
    dot = jax.jit(jnp.dot)

    def rate(fn):
        for _ in range(2):
            fn()
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        return flops / statistics.median(ts) / 1e9

    torch_rate = rate(lambda: torch.mm(a, b))
    jax_rate = rate(lambda: dot(ja, jb).block_until_ready())
    return {"n": n, "reps": reps, "torch.mm": torch_rate, "jnp.dot": jax_rate, "peak": max(torch_rate, jax_rate)}


class CpuMonitor:
    """CPU cores used by other processes while the timed rounds ran (Linux /proc/stat:
    the machine's busy time minus this process's own CPU time, per wall second)."""

    def __init__(self):
        self.start = self._snap()

    @staticmethod
    def _snap():
        try:
            with open("/proc/stat") as f:
                vals = [int(v) for v in f.readline().split()[1:9]]
        except (OSError, ValueError):
            return None
        busy = (sum(vals) - vals[3] - vals[4]) / os.sysconf("SC_CLK_TCK")  # minus idle and iowait
        t = os.times()
        return time.monotonic(), busy, t.user + t.system + t.children_user + t.children_system

    def stop(self) -> float | None:
        end = self._snap()
        if self.start is None or end is None or end[0] <= self.start[0]:
            return None
        return max(0.0, ((end[1] - self.start[1]) - (end[2] - self.start[2])) / (end[0] - self.start[0]))


# --------------------------------------------------------------------------------------
# One workload.
# --------------------------------------------------------------------------------------
IMPL_CLASSES = {"eager": EagerTorch, "torch.compile": TorchCompile, "jax.jit": JaxJit,
                "jax.jit pipelined": JaxJitPipelined, "jax.scan pipelined": JaxScanPipelined}


def run_workload(wl: Workload, backend, impl_keys, warmup: int, rounds: int, steps_per_round: int,
                 log=print) -> WorkloadResult:
    torch.manual_seed(0)
    model = wl.build_model()
    total = warmup + rounds * steps_per_round
    impls = []
    for key in impl_keys:
        m = copy.deepcopy(model)  # same initial weights everywhere
        if key in ("cstorch", "cstorch pipelined"):
            impls.append((CstorchCSX if key == "cstorch" else CstorchPipelined)(wl, m, backend))
        else:
            impls.append(IMPL_CLASSES[key](wl, m))

    for impl in impls:
        log(f"  {wl.name}: {impl.key}: setup + {warmup} warm-up steps ...")
        try:
            impl.setup(total)
        except Exception as e:
            impl.error = error_text(e)
            log(f"  {wl.name}: {impl.key}: FAILED: {impl.error}")
            continue
        t1 = time.perf_counter()
        run_steps(impl, 1, timed=False)
        impl.first_step_s = time.perf_counter() - t1
        run_steps(impl, warmup - 1, timed=False)
        impl.warmup_s = time.perf_counter() - t1
        if impl.error is None:
            try:
                impl.after_warmup()
                impl.before_rounds(steps_per_round)
            except Exception as e:
                impl.error = error_text(e)
        if impl.error is not None:
            log(f"  {wl.name}: {impl.key}: FAILED: {impl.error}")

    log(f"  {wl.name}: {rounds} timed rounds of {steps_per_round} steps per implementation ...")
    monitor = CpuMonitor()
    for r in range(rounds):
        gc.collect()
        for k in range(len(impls)):
            time.sleep(PAUSE_S)  # the previous block's OpenMP workers stop spinning before this one
            run_steps(impls[(r + k) % len(impls)], steps_per_round, timed=True)
    foreign = monitor.stop()

    for impl in impls:
        try:
            impl.finish()
        except Exception as e:
            impl.error = impl.error or error_text(e)
        if impl.key == "torch.compile" and impl.error is None and impl.times:
            impl.compile_s = max(0.0, impl.warmup_s - warmup * impl.median_s)

    res = WorkloadResult(wl, impls, warmup, rounds, steps_per_round, foreign_cores=foreign)
    _check_losses(res)
    _check_parameters(res)
    return res


def _check_losses(res: WorkloadResult) -> None:
    """Every implementation's loss at every step against eager's: |a - b| / max(1, |b|)."""
    eager = res.impl("eager")
    ref = eager.losses if eager is not None and eager.error is None else None
    for impl in res.impls:
        if impl.key == "eager" or impl.error is not None:
            continue
        if ref is None or len(impl.losses) != len(ref):
            continue
        diffs = [abs(a - b) / max(1.0, abs(b)) for a, b in zip(impl.losses, ref)]
        worst = max((d if math.isfinite(d) else math.inf for d in diffs), default=0.0)
        res.loss_check[impl.key] = worst
        if not worst <= res.wl.tol:
            res.loss_ok = False
    if ref is not None and not all(math.isfinite(v) for v in ref):
        res.loss_ok = False


def _check_parameters(res: WorkloadResult) -> None:
    """Every implementation's parameters after the last step against eager's: the largest
    over the tensors of ||p - eager||_2 / ||eager||_2 (why a norm: `Workload.param_tol`)."""
    eager = res.impl("eager")
    if eager is None or eager.error is not None:
        return
    ref = eager.parameters()
    for impl in res.impls:
        if impl.key == "eager" or impl.error is not None:
            continue
        got = impl.parameters()
        if set(got) != set(ref):
            res.param_check[impl.key] = math.inf
        else:
            res.param_check[impl.key] = max(
                float(np.linalg.norm(got[n] - ref[n]) / max(np.linalg.norm(ref[n]), 1e-12)) for n in ref)
        if not res.param_check[impl.key] <= res.wl.param_tol:
            res.loss_ok = False


# --------------------------------------------------------------------------------------
def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes and few steps (CI smoke run)")
    p.add_argument("--workloads", default=",".join(BUILDERS), help=f"comma-separated subset of {','.join(BUILDERS)}")
    p.add_argument("--impls", default=",".join(IMPLS), help=f"comma-separated subset of {','.join(IMPLS)}")
    p.add_argument("--out", type=Path, default=None,
                   help=f"markdown report (default {DEFAULT_OUT.relative_to(HERE.parent)}; with --quick "
                        f"{DEFAULT_QUICK_OUT.relative_to(HERE.parent)}, git-ignored)")
    p.add_argument("--plot", type=Path, default=None,
                   help="PNG bar plot (default: results.png next to the default report, else the report's "
                        "path with .png)")
    p.add_argument("--warmup", type=int, default=None, help="warm-up steps per implementation (default per workload)")
    p.add_argument("--rounds", type=int, default=None, help="timed rounds (default per workload)")
    p.add_argument("--steps-per-round", type=int, default=None, help="timed steps per implementation and round")
    p.add_argument("--no-warm-start", action="store_true",
                   help="skip the cold/warm-start measurement of the persistent compile cache (two processes)")
    args = p.parse_args(argv)
    args.workload_keys = [w.strip().lower() for w in args.workloads.split(",") if w.strip()]
    bad = sorted(set(args.workload_keys) - set(BUILDERS))
    if bad or not args.workload_keys:
        p.error(f"unknown workload(s) {bad}; choose from {', '.join(BUILDERS)}")
    args.impl_keys = [k.strip() for k in args.impls.split(",") if k.strip()]
    bad = sorted(set(args.impl_keys) - set(IMPLS))
    if bad or not args.impl_keys:
        p.error(f"unknown implementation(s) {bad}; choose from {', '.join(IMPLS)}")
    args.impl_keys = [k for k in IMPLS if k in args.impl_keys]
    for name in ("warmup", "rounds", "steps_per_round"):
        v = getattr(args, name)
        if v is not None and v < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.out is None:
        args.out = DEFAULT_QUICK_OUT if args.quick else DEFAULT_OUT
    if args.plot is None:
        args.plot = HERE / "results.png" if args.out.resolve() == DEFAULT_OUT else args.out.with_suffix(".png")
    return args


def _probe_inductor_isa() -> float:
    """Inductor's C++ backend first compiles test programs to find the CPU's vector ISA
    (several seconds on 2 cores, cached in its cache directory). Done here, so that the
    first workload's torch.compile time is not charged with it."""
    t0 = time.perf_counter()
    try:
        from torch._inductor import cpu_vec_isa
        cpu_vec_isa.pick_vec_isa()
    except Exception:  # the real compile will report the problem
        pass
    return time.perf_counter() - t0


def main(argv=None) -> int:
    args = parse_args(argv)
    t_start = time.perf_counter()
    # every compile in this process is cold; the warm start is measured in two fresh processes
    os.environ["CSTORCH_CACHE"] = "0"
    # The full run measures torch.compile cold: a fresh inductor cache (unless the caller
    # chose one with TORCHINDUCTOR_CACHE_DIR). --quick keeps inductor's default persistent
    # cache, so repeated smoke runs skip the C++ compiles.
    tmp_cache = None
    args.inductor_cache = "TORCHINDUCTOR_CACHE_DIR" if "TORCHINDUCTOR_CACHE_DIR" in os.environ else (
        "default (persistent)" if args.quick else "fresh (cold)")
    if args.inductor_cache == "fresh (cold)":
        tmp_cache = tempfile.mkdtemp(prefix="cstorch-bench-inductor-")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = tmp_cache
    try:
        return _run(args, t_start)
    finally:
        if tmp_cache is not None:
            shutil.rmtree(tmp_cache, ignore_errors=True)


def _run(args, t_start) -> int:
    log = lambda msg: print(msg, flush=True)  # noqa: E731
    backend = cstorch.backend("CSX")  # one backend per process, shared by the workloads
    cstorch.backends.csx.performance.progress = False
    log(f"benchmark suite{' (--quick)' if args.quick else ''}: {', '.join(args.impl_keys)} on "
        f"{', '.join(w.upper() for w in args.workload_keys)}")
    log(f"machine: {machine()}")
    log(f"versions: {versions()}")
    peak = measure_peak(512, 3) if args.quick else measure_peak(2048, 10)
    log(f"float32 matmul {peak['n']}^3: torch.mm {peak['torch.mm']:.1f} GFLOP/s, jnp.dot {peak['jnp.dot']:.1f} "
        f"GFLOP/s -> peak {peak['peak']:.1f} GFLOP/s")

    args.isa_probe_s = None
    if "torch.compile" in args.impl_keys:
        args.isa_probe_s = _probe_inductor_isa()
        log(f"inductor: CPU vector ISA probe {args.isa_probe_s:.1f} s (once per process and cache, not counted "
            f"in any compile time); cache: {args.inductor_cache}")

    results = []
    for key in args.workload_keys:
        wl = BUILDERS[key](args.quick)
        warmup = args.warmup or wl.warmup
        rounds = args.rounds or wl.rounds
        spr = args.steps_per_round or wl.steps_per_round
        log(f"{wl.name}: {wl.description}")
        results.append(run_workload(wl, backend, args.impl_keys, warmup, rounds, spr, log=log))
        if "cstorch" in args.impl_keys and not args.no_warm_start:
            log(f"  {wl.name}: cold and warm start of the cstorch step, in two fresh processes ...")
            try:
                results[-1].warm_start = cold_and_warm(key, args.quick)
            except Exception as e:
                results[-1].warm_start = {"error": error_text(e)}

    print("")
    print_table(results, peak)
    wall = time.perf_counter() - t_start
    write_plot(args.plot, results, peak, args.quick)
    write_markdown(args.out, args.plot, results, peak, args, wall)
    print(f"\nwrote {args.out} and {args.plot} ({wall:.0f} s)")

    status = 0
    failed = [(r.wl.name, i.key, i.error) for r in results for i in r.impls
              if i.key != "torch.compile" and (i.error is not None or not i.times)]
    for name, key, err in failed:
        print(f"WARNING: {name} {key} failed: {err}")
        status = 1
    mismatched = [r.wl.name for r in results if not r.loss_ok]
    if mismatched:
        print(f"WARNING: the implementations' losses disagree for {', '.join(mismatched)} (see the loss check)")
        status = 1
    return status
