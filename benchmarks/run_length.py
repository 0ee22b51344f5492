"""Run length: what a cstorch run costs per step and per run, next to the hand-written scan.

    python -m benchmarks.run_length                                  # MNIST, MLP, decoder
    python -m benchmarks.run_length --quick                          # tiny sizes (CI smoke run)
    python -m benchmarks.run_length --out benchmarks/RESULTS.md      # also record its section

The suite's pipelined rows time blocks of 40-60 steps, each a run of its own, so a cost
paid once per run counts there as a cost per step. Here, for each workload in one
process, cstorch's documentation loop (`impls.CstorchPipelined`: a `DataExecutor` run, the
loss read in a step closure, windows of `steps_per_launch` calls) and the hand-written
`lax.scan` of K steps (`impls.JaxScanPipelined`) train from the same initial weights on
the same batches in runs of N steps, for each N of `--lengths`, alternating between the
two round by round after warm-up runs that compile every launch count the runs use. The
median seconds of a run of each length are fitted by least squares as

    seconds(N) = per_run + per_step * N

`per_step` is what a long run pays per step; `per_run` what every run pays once (for
cstorch the state's upload at its first launch and its copy back at its end, and the first
window, which the host fills while the device waits). Printed with the ratio of the
per-step costs and the other processes' CPU use during the rounds. The losses of the two
must agree within the workload's tolerance at every step of as many as the suite checks
against eager torch (its warm-up and timed steps; float32 rounding grows chaotically over
the thousands of steps a whole measurement trains); otherwise it exits with status 1.
The figures are measurements, never assertions.
"""
from __future__ import annotations

import argparse
import copy
import gc
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch

import cerebras.pytorch as cstorch

from .impls import CstorchPipelined, JaxScanPipelined
from .report import machine
from .suite import CpuMonitor
from .workloads import BUILDERS

DEFAULT_WORKLOADS = ("mnist", "mlp", "decoder")
DEFAULT_LENGTHS = (32, 64, 128, 256)
QUICK_LENGTHS = (4, 8)


def one_run(impl, n: int) -> float:
    """Seconds of one run of `n` steps, from its start to its last loss on the host."""
    t0 = time.perf_counter()
    impl.begin(n)
    for _ in range(n):
        impl.step()
    impl.end()
    impl.losses.extend(impl.take_losses())
    return time.perf_counter() - t0


def fit(lengths, seconds) -> tuple[float, float]:
    """(per_step, per_run) seconds of the least-squares line through (N, seconds(N))."""
    per_step, per_run = np.polyfit(np.asarray(lengths, float), np.asarray(seconds, float), 1)
    return float(per_step), float(per_run)


def measure(key: str, quick: bool, lengths, rounds: int, backend) -> dict:
    """One workload: median seconds per run length of both implementations, their fits,
    the other processes' CPU and the largest loss difference."""
    wl = BUILDERS[key](quick)
    torch.manual_seed(0)
    model = wl.build_model()
    impls = [CstorchPipelined(wl, copy.deepcopy(model), backend),
             JaxScanPipelined(wl, copy.deepcopy(model))]
    for impl in impls:
        impl.setup(0)
        impl.losses = []
        one_run(impl, lengths[0])  # the first step traces and compiles
        impl.after_warmup()
        for n in lengths:
            impl.before_rounds(n)
        for n in list(lengths) * 2:  # a launch count compiles when it comes a second time
            one_run(impl, n)
    times = {(impl.key, n): [] for impl in impls for n in lengths}
    monitor = CpuMonitor()
    for r in range(rounds):
        gc.collect()
        for n in lengths:
            for impl in (impls if r % 2 == 0 else impls[::-1]):
                times[(impl.key, n)].append(one_run(impl, n))
    foreign = monitor.stop()
    cs, scan = impls
    checked = wl.warmup + wl.rounds * wl.steps_per_round  # the steps the suite checks against eager
    diffs = [abs(a - b) / max(1.0, abs(b)) for a, b in zip(cs.losses[:checked], scan.losses[:checked])]
    result = {"workload": wl, "lengths": list(lengths), "foreign": foreign, "tol": wl.tol, "checked": len(diffs),
              "loss_diff": max(diffs) if diffs else float("nan"), "same_steps": len(cs.losses) == len(scan.losses)}
    for impl in impls:
        medians = [statistics.median(times[(impl.key, n)]) for n in lengths]
        result[impl.key] = {"medians": medians, "fit": fit(lengths, medians)}
    return result


def report(results: list[dict], rounds: int, quick: bool) -> str:
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    k = cstorch.backends.csx.performance.steps_per_launch
    cs, scan = CstorchPipelined.key, JaxScanPipelined.key
    lines = [
        "## Run length: cost per step and per run (`python -m benchmarks.run_length`)", "",
        f"Written on {when} ({machine()}; torch {torch.__version__}){' with --quick sizes' if quick else ''}: runs of N steps of cstorch's documentation "
        f"loop (windows of {k}) and of the hand-written `lax.scan` of {k} steps, the same weights and batches, "
        f"{rounds} rounds alternating between the two; the median seconds of each N fitted as per_run + per_step x N.",
        "", "| workload | cstorch ms/step | cstorch ms/run | scan ms/step | scan ms/run | per step: cstorch / scan "
            "| other processes' CPU (cores) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for res in results:
        (cs_step, cs_run), (sc_step, sc_run) = res[cs]["fit"], res[scan]["fit"]
        foreign = "-" if res["foreign"] is None else f"{res['foreign']:.2f}"
        lines.append(f"| {res['workload'].name} | {cs_step * 1e3:.3f} | {cs_run * 1e3:.1f} | {sc_step * 1e3:.3f} | "
                     f"{sc_run * 1e3:.1f} | {cs_step / sc_step:.2f} | {foreign} |")
    lines += ["", "Median ms per run:", "",
              "| workload | implementation | " + " | ".join(f"N = {n}" for n in results[0]["lengths"]) + " |",
              "|---|---|" + "---:|" * len(results[0]["lengths"])]
    for res in results:
        for key in (cs, scan):
            lines.append(f"| {res['workload'].name} | {key} | "
                         + " | ".join(f"{m * 1e3:.1f}" for m in res[key]["medians"]) + " |")
    lines += ["", "Losses, cstorch against the scan at each of the first steps (|a - b| / max(1, |b|), largest): "
              + ", ".join(f"{res['workload'].name} {res['loss_diff']:.1e} over {res['checked']} steps "
                          f"(tolerance {res['tol']:g})" for res in results) + "."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.run_length", description=__doc__.split("\n\n")[0])
    p.add_argument("--workloads", default=",".join(DEFAULT_WORKLOADS),
                   help=f"comma-separated subset of {','.join(BUILDERS)} (default {','.join(DEFAULT_WORKLOADS)})")
    p.add_argument("--lengths", default=None, help="comma-separated run lengths N (default 32,64,128,256; --quick 4,8)")
    p.add_argument("--rounds", type=int, default=None, help="timed rounds (default 7; --quick 1)")
    p.add_argument("--quick", action="store_true", help="tiny sizes, short runs, one round (CI smoke run)")
    p.add_argument("--out", type=Path, default=None, help="record the table as the 'run-length' section of this file")
    args = p.parse_args(argv)
    keys = [w for w in args.workloads.split(",") if w]
    unknown = [w for w in keys if w not in BUILDERS]
    if unknown or not keys:
        p.error(f"--workloads: unknown {unknown or 'none given'}; choose from {','.join(BUILDERS)}")
    try:
        lengths = ([int(n) for n in args.lengths.split(",")] if args.lengths
                   else list(QUICK_LENGTHS if args.quick else DEFAULT_LENGTHS))
    except ValueError:
        p.error(f"--lengths {args.lengths!r}: give comma-separated integers, e.g. 32,64,128")
    if len(set(lengths)) < 2 or min(lengths) < 1:
        p.error("--lengths: at least two different run lengths, each at least 1 step")
    rounds = args.rounds if args.rounds is not None else (1 if args.quick else 7)
    if rounds < 1:
        p.error("--rounds must be >= 1")
    cstorch.backends.csx.performance.progress = False
    backend = cstorch.backend("CSX")
    results = []
    for key in keys:
        print(f"run length: {key} ...", file=sys.stderr, flush=True)
        results.append(measure(key, args.quick, lengths, rounds, backend))
    text = report(results, rounds, args.quick)
    print(text)
    if args.out is not None:
        from .sections import replace_section

        replace_section(args.out, "run-length", text)
    bad = [r["workload"].name for r in results if not r["same_steps"] or not r["loss_diff"] <= r["tol"]]
    if bad:
        print(f"losses disagree beyond the tolerance: {', '.join(bad)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
