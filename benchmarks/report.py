"""Reporting of a benchmark suite run: the printed table, the markdown report and the
PNG plot (see `benchmarks.suite`). Works on the suite's results: each `WorkloadResult`
holds its workload and one `Impl` per implementation with its step times, losses and
compile seconds."""
from __future__ import annotations

import datetime
import os
import platform
import statistics
from pathlib import Path
from typing import TYPE_CHECKING

import jax
import numpy as np
import optax
import torch

import cstorch
from cstorch_jax.xla_options import compiler_options

from .sections import kept_sections
from .workloads import N_BATCHES, WorkloadResult

if TYPE_CHECKING:
    from .impls import Impl

IMPLS = ("eager", "torch.compile", "cstorch", "jax.jit", "cstorch pipelined", "jax.jit pipelined",
         "jax.scan pipelined")
LABELS = {"eager": "eager torch", "torch.compile": "torch.compile (inductor)", "cstorch": "cstorch CSX",
          "jax.jit": "hand-written jax.jit", "cstorch pipelined": "cstorch CSX, pipelined",
          "jax.jit pipelined": "jax.jit, pipelined", "jax.scan pipelined": "lax.scan of K steps, pipelined"}


def _stats(impl: Impl):
    ms = [t * 1e3 for t in impl.times]
    return statistics.median(ms), min(ms), max(ms)


def _row_values(res: WorkloadResult, impl: Impl, peak: float) -> dict:
    eager = res.impl("eager")
    med, lo, hi = _stats(impl)
    ratio = (med / _stats(eager)[0]) if eager is not None and eager.error is None and eager.times else float("nan")
    gflops = res.wl.flops_per_step / (med / 1e3) / 1e9
    return dict(med=med, lo=lo, hi=hi, ratio=ratio, gflops=gflops, peak_frac=gflops / peak,
                loss=impl.losses[-1] if impl.losses else float("nan"))


def _compile_text(impl: Impl) -> str:
    if impl.compile_s is None:
        return "-"
    return f"{impl.compile_s:.2f}" + (" (lazy)" if impl.compile_note else "")


def print_table(results, peak: dict, print_=print) -> None:
    header = (f"{'workload':<8} {'impl':<17} {'median ms':>10} {'min ms':>9} {'max ms':>9} {'x eager':>8} "
              f"{'compile s':>13} {'GFLOP/s':>8} {'% peak':>7} {'last loss':>10}")
    print_(header)
    print_("-" * len(header))
    for res in results:
        for impl in res.impls:
            if impl.error is not None or not impl.times:
                print_(f"{res.wl.name:<8} {impl.key:<17} ERROR: {impl.error or 'no timed steps'}")
                continue
            v = _row_values(res, impl, peak["peak"])
            print_(f"{res.wl.name:<8} {impl.key:<17} {v['med']:10.2f} {v['lo']:9.2f} {v['hi']:9.2f} "
                   f"{v['ratio']:7.2f}x {_compile_text(impl):>13} {v['gflops']:8.1f} {100 * v['peak_frac']:6.1f}% "
                   f"{v['loss']:10.6f}")
    print_("")
    for res in results:
        checks = ", ".join(f"{k} {d:.1e}" for k, d in res.loss_check.items())
        status = "OK" if res.loss_ok else "MISMATCH"
        print_(f"{res.wl.name:<8} losses vs eager over {res.total_steps} steps, max |diff|/max(1,|loss|): "
               f"{checks or '-'} ({status}, tol {res.wl.tol:g})")
        params = ", ".join(f"{k} {d:.1e}" for k, d in res.param_check.items())
        print_(f"{res.wl.name:<8} parameters vs eager after the last step, max ||p - eager||/||eager||: {params or '-'} "
               f"(tol {res.wl.param_tol:g})")
        ws = res.warm_start
        if ws and "error" not in ws:
            print_(f"{res.wl.name:<8} cstorch trace + compile: cold {ws['cold']:.2f} s, warm {ws['warm']:.2f} s "
                   f"({ws['warm'] / ws['cold']:.0%}; {'from the cache' if ws['warm_from_cache'] else 'NOT CACHED'})")
        elif ws:
            print_(f"{res.wl.name:<8} warm start failed: {ws['error']}")


def versions() -> str:
    import jaxlib
    return (f"Python {platform.python_version()}, torch {torch.__version__} "
            f"({torch.get_num_threads()} intra-op threads), jax/jaxlib {jax.__version__}/{jaxlib.__version__} "
            f"({jax.devices()[0].platform}), optax {optax.__version__}, numpy {np.__version__}")


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{os.cpu_count()} CPU cores (os.cpu_count()), {cpu}, {platform.platform()}"


def _xla_options_text() -> str:
    return ", ".join(f"{k}={v}" for k, v in compiler_options(jax.devices()[0].platform).items()) or "none"


def write_markdown(path: Path, plot_path: Path | None, results, peak: dict, args, wall_s: float) -> None:
    now = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    lines = [f"# Benchmark suite results{' (--quick: tiny sizes, not representative)' if args.quick else ''}", "",
             f"Written by `python -m benchmarks{' --quick' if args.quick else ''}` on {now} "
             f"(whole run {wall_s:.0f} s, one process).", "",
             f"- **Machine:** {machine()}",
             f"- **Versions:** {versions()}",
             f"- **float32 matmul peak** ({peak['n']}x{peak['n']}x{peak['n']}, median of {peak['reps']}): "
             f"torch.mm {peak['torch.mm']:.1f} GFLOP/s, jnp.dot {peak['jnp.dot']:.1f} GFLOP/s -> "
             f"peak {peak['peak']:.1f} GFLOP/s",
             f"- **Method:** same initial weights and batches (step i uses batch i mod {N_BATCHES}) for every "
             "implementation; each implementation runs its warm-up steps (the first trace and compile), then "
             "timed rounds alternate between the implementations (order rotated every round); every step ends "
             "with its loss on the host, except in the pipelined rows, where the loss is read in a step "
             "closure (cstorch) or at the end of the block (jax) and a block's time from its start to its last "
             "loss on the host counts as its mean per step. All run in one process, under the memory policy cstorch sets when "
             "the CSX backend is created (`cstorch_jax/memory_policy.py`: glibc keeps freed memory), eager torch included. "
             "GFLOP/s = analytic FLOPs per step (3 x the forward's matmul/conv "
             "FLOPs) / median step time. `x eager` = median / eager median of the same run. Trace + compile: "
             "cstorch = capture + lowering + XLA compile of the step; jax.jit = lower + compile; torch.compile "
             f"compiles lazily in the first calls (inductor cache: {args.inductor_cache}), so its figure is the "
             "warm-up time minus warm-up steps x median (\"lazy\")"
             + (f"; inductor's one-time CPU ISA probe ({args.isa_probe_s:.1f} s) ran before and is not counted."
                if args.isa_probe_s is not None else "."),
             "- **Implementations:** eager torch (torch.optim, `loss.item()`); torch.compile of model + loss "
             "and of `opt.step` (default inductor); cstorch CSX (`@cstorch.trace` step, cstorch optimizer, "
             "one `DataExecutor` run per block of steps (the step compiled once; no other implementation's "
             "torch ops run inside a cstorch run, where its host-edit guard would see them), `float(loss)`, "
             "timed from `next(executor)`; pipelined, its calls launch "
             f"{cstorch.backends.csx.performance.steps_per_launch} at a time (`steps_per_launch`, the default; "
             "synced, each read of the loss launches its step; the launch counts a block uses compiled after the "
             "warm-up, in trace + compile); compiled with cstorch's XLA options, "
             f"`{_xla_options_text()}`); hand-written jax.numpy model + optax in one `jax.jit` step with donation "
             "(GPT with 2-D matmuls, `benchmarks/jax_models.py`; the same XLA options and process memory "
             "policy as cstorch, no BLAS routing); the same step as one `lax.scan` of K = "
             f"{cstorch.backends.csx.performance.steps_per_launch} steps over K batches stacked on the host "
             "(`jax.scan pipelined`; a block's last steps, fewer than K, one at a time).", ""]
    if plot_path is not None:
        rel = os.path.relpath(plot_path, path.parent)
        lines += [f"![median ms/step relative to eager]({rel})", ""]

    lines += ["## Summary: median ms/step (x eager)", "",
              "| workload | " + " | ".join(LABELS[k] for k in IMPLS) + " |",
              "|---|" + "---:|" * len(IMPLS)]
    for res in results:
        cells = []
        for key in IMPLS:
            impl = res.impl(key)
            if impl is None:
                cells.append("not run")
            elif impl.error is not None or not impl.times:
                cells.append("failed")
            else:
                v = _row_values(res, impl, peak["peak"])
                cells.append(f"{v['med']:.2f} ({v['ratio']:.2f}x)")
        lines.append(f"| {res.wl.name} | " + " | ".join(cells) + " |")
    lines.append("")

    for res in results:
        wl = res.wl
        lines += [f"## {wl.name}", "",
                  f"**{wl.description}** - {wl.flops_per_step / 1e9:.3f} GFLOP/step ({wl.flops_note}). "
                  f"{res.warmup} warm-up steps, then {res.rounds} rounds x {res.steps_per_round} timed steps per "
                  f"implementation.", "",
                  "| implementation | median ms/step | min-max ms | x eager | trace + compile s | first step s "
                  f"| GFLOP/s | % of peak | loss @ step {res.total_steps} |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for impl in res.impls:
            if impl.error is not None or not impl.times:
                lines.append(f"| {LABELS[impl.key]} | **failed:** `{impl.error or 'no timed steps'}` "
                             "| | | | | | | |")
                continue
            v = _row_values(res, impl, peak["peak"])
            lines.append(f"| {LABELS[impl.key]} | {v['med']:.2f} | {v['lo']:.2f}-{v['hi']:.2f} | {v['ratio']:.2f} "
                         f"| {_compile_text(impl)} | {impl.first_step_s:.2f} | {v['gflops']:.1f} "
                         f"| {100 * v['peak_frac']:.0f}% | {v['loss']:.6f} |")
        fc = "n/a" if res.foreign_cores is None else f"{res.foreign_cores:.2f}"
        lines += ["", f"Other processes' CPU use during the timed rounds: {fc} cores of {os.cpu_count()}.", ""]

    lines += ["## Loss check", "",
              "Every implementation's loss at every step against eager torch's, "
              "max over the steps of |loss - eager| / max(1, |eager|).", "",
              "| workload | steps | eager loss @ last step | " + " | ".join(LABELS[k] for k in IMPLS[1:])
              + " | tolerance | result |",
              "|---|---:|---:|" + "---:|" * (len(IMPLS) - 1) + "---:|---|"]
    for res in results:
        eager = res.impl("eager")
        eloss = f"{eager.losses[-1]:.6f}" if eager is not None and eager.losses and eager.error is None else "-"
        cells = []
        for key in IMPLS[1:]:
            impl = res.impl(key)
            if impl is None:
                cells.append("not run")
            elif key in res.loss_check:
                cells.append(f"{res.loss_check[key]:.1e}")
            else:
                cells.append("failed")
        lines.append(f"| {res.wl.name} | {res.total_steps} | {eloss} | " + " | ".join(cells)
                     + f" | {res.wl.tol:g} | {'OK' if res.loss_ok else '**MISMATCH**'} |")
    lines += ["", "Parameters after the last step against eager torch's: max over the parameter tensors of "
              "||p - eager||_2 / ||eager||_2 (Adam's noise on single weights averages out; a wrong rule does not).", "",
              "| workload | " + " | ".join(LABELS[k] for k in IMPLS[1:]) + " | tolerance |",
              "|---|" + "---:|" * (len(IMPLS) - 1) + "---:|"]
    for res in results:
        cells = [f"{res.param_check[k]:.1e}" if k in res.param_check else "-" for k in IMPLS[1:]]
        lines.append(f"| {res.wl.name} | " + " | ".join(cells) + f" | {res.wl.param_tol:g} |")
    lines += ["", "## Cold and warm start", "",
              "Trace + compile seconds of the cstorch step in a fresh process with an empty compile cache "
              "(cold), then in a second process that finds the first one's program in the cache (warm: the "
              "step's body runs once on fake tensors to check its op signature, and the compiled program is "
              "loaded); the suite's own process runs with the cache off. Same first-step loss in both.", "",
              "| workload | cold s | warm s | warm / cold | jax.jit lower + compile s | cold / jax.jit |",
              "|---|---:|---:|---:|---:|---:|"]
    for res in results:
        ws, jit = res.warm_start, res.impl("jax.jit")
        if not ws:
            continue
        if "error" in ws:
            lines.append(f"| {res.wl.name} | **failed:** `{ws['error']}` | | | | |")
            continue
        jit_s = jit.compile_s if jit is not None and jit.error is None and jit.compile_s else None
        note = "" if ws["warm_from_cache"] and ws["same_loss"] else " (**not from the cache**)"
        jit_text = "-" if jit_s is None else f"{jit_s:.2f}"
        ratio_text = "-" if jit_s is None else f"{ws['cold'] / jit_s:.2f}x"
        lines.append(f"| {res.wl.name} | {ws['cold']:.2f} | {ws['warm']:.2f}{note} | {ws['warm'] / ws['cold']:.0%} "
                     f"| {jit_text} | {ratio_text} |")
    lines += ["", "Where the time goes in the compiled steps, and every lowering and XLA flag tried so far: "
              "[PROFILE.md](PROFILE.md).", ""]
    lines += [*(f"{section}\n" for section in kept_sections(path))]  # sections other benchmarks own
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))


def write_plot(path: Path, results, peak: dict, quick: bool) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    colors = {"eager": "#4c72b0", "torch.compile": "#dd8452", "cstorch": "#55a868", "jax.jit": "#c44e52",
              "cstorch pipelined": "#8fd19e", "jax.jit pipelined": "#e8a0a2", "jax.scan pipelined": "#8172b3"}
    width = 0.8 / len(IMPLS)
    fig, ax = plt.subplots(figsize=(9, 4.8))
    ymin = ymax = 1.0
    for j, key in enumerate(IMPLS):
        for i, res in enumerate(results):
            impl, eager = res.impl(key), res.impl("eager")
            x = i + (j - (len(IMPLS) - 1) / 2) * width
            if impl is None:
                continue
            if impl.error is not None or not impl.times or eager is None or eager.error is not None:
                ax.text(x, 1.0, "failed", rotation=90, ha="center", va="bottom", fontsize=8, color=colors[key])
                continue
            med = _stats(impl)[0]
            ratio = med / _stats(eager)[0]
            ymin, ymax = min(ymin, ratio), max(ymax, ratio)
            ax.bar(x, ratio, width, color=colors[key], label=LABELS[key] if i == 0 else None)
            ax.text(x, ratio, f"{med:.3g}", ha="center", va="bottom", fontsize=7)
    ax.set_yscale("log")
    ax.set_ylim(ymin / 1.5, ymax * 1.6)
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.axhline(1.0, color="gray", lw=0.8, ls="--")
    ax.set_xticks(range(len(results)))
    ax.set_xticklabels([f"{r.wl.name}\n({_stats(r.impl('eager'))[0]:.3g} ms eager)"
                        if r.impl("eager") is not None and r.impl("eager").times else r.wl.name for r in results])
    ax.set_ylabel("median ms/step / eager torch (log; lower is faster)")
    ax.set_title(f"Training step time{' (--quick)' if quick else ''}: {os.cpu_count()} CPU cores, "
                 f"matmul peak {peak['peak']:.0f} GFLOP/s; bar labels: ms/step", fontsize=10)
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


