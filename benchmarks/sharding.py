"""Sharded vs replicated state: per-device memory and step time of the GPT workload.

    python -m benchmarks.sharding                      # N = 1, 2, 4, 8 host devices, then the width search
    python -m benchmarks.sharding --quick              # tiny GPT, N = 1, 2; no width search (CI smoke run)
    python -m benchmarks.sharding --out benchmarks/RESULTS.md   # also record the tables there

The GPT workload of `benchmarks.workloads` (4 layers, d 256, 4 heads, seq 128, vocab
2048, batch 8, AdamW) trains on the CSX backend with `ClusterConfig(num_csx=N)`, once
with replicated state and once with `cstorch.backends.csx.cluster.shard_state = True`
(every parameter and AdamW moment split over the N devices). For each run: the bytes of
state one device holds, XLA's per-device argument / temporary bytes and its peak
estimate (arguments + outputs - aliased + temporaries), the trace + compile seconds, the
median ms per step (from fetching the batch to the loss on the host; warm-up steps
first) and the last loss, which must agree between the modes (relative 1e-4; otherwise
the exit status is 1).

The width search then compiles (without running) the same GPT at growing d_model on
`--search-devices` devices in each mode and reports the largest width whose per-device
peak estimate stays under `--budget-mib`: what the split state buys in model size.

The N devices are XLA host devices sharing this machine's CPU cores (the script asks
XLA for 8 before JAX starts), so the step times show the cost of the collectives and of
partitioning, not a speed-up; on a loaded machine they are indicative only.
"""
from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

MAX_DEVICES = 8


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="tiny GPT, N = 1, 2, few steps, no width search")
    p.add_argument("--devices", default=None, help="comma-separated N (default 1,2,4,8; --quick: 1,2)")
    p.add_argument("--steps", type=int, default=None, help="timed steps per run (default 10; --quick: 2)")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first (the first compiles)")
    p.add_argument("--search-devices", type=int, default=4)
    p.add_argument("--budget-mib", type=float, default=256.0, help="per-device memory budget of the width search")
    p.add_argument("--widths", default="256,384,512,640,768,1024,1280",
                   help="d_model values the width search compiles, in increasing order")
    p.add_argument("--out", default=None, help="record the tables as a section of this markdown file")
    return p.parse_args(argv)


args = parse_args() if __name__ == "__main__" else None
if "host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):  # before JAX starts
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               f" --xla_force_host_platform_device_count={MAX_DEVICES}").strip()

import torch  # noqa: E402

import cstorch  # noqa: E402
from cstorch._backend import _reset_backend  # noqa: E402

from .models import GPT  # noqa: E402
from .report import machine, versions  # noqa: E402
from .sections import replace_section  # noqa: E402
from .steps import cstorch_train_step  # noqa: E402
from .workloads import gpt_workload  # noqa: E402

MODES = {"replicated": False, "sharded": True}
LOSS_TOL = 1e-4


@dataclass
class Row:
    n: int
    mode: str
    state_bytes: int
    argument_bytes: int
    temp_bytes: int
    peak_bytes: int
    split: str
    compile_s: float
    ms: float
    loss: float


def _mib(n: int) -> str:
    return f"{n / 2 ** 20:.2f}"


def peak_bytes(mem) -> int:
    """XLA's per-device estimate of the live bytes: arguments + outputs - aliased + temporaries."""
    return mem.argument_bytes + mem.output_bytes - mem.alias_bytes + mem.temp_bytes


def _backend(n: int, shard: bool):
    _reset_backend()
    cstorch.backends.csx.cluster.shard_state = shard
    return cstorch.backend("CSX", cluster_config=cstorch.distributed.ClusterConfig(num_csx=n))


def _step(wl, model, backend):
    compiled = cstorch.compile(model, backend)
    return cstorch_train_step(compiled, wl.optimizer.cstorch(model.parameters()), wl.torch_loss)


def measure(wl, n: int, mode: str, warmup: int, steps: int) -> Row:
    """Train the workload `warmup + steps` steps on n devices in this mode."""
    backend = _backend(n, MODES[mode])
    torch.manual_seed(0)
    train_step = _step(wl, wl.build_model(), backend)
    batches = list(wl.batches)
    loader = cstorch.utils.data.DataLoader(lambda: batches)
    times, loss = [], float("nan")
    start = time.perf_counter()
    for i, batch in enumerate(cstorch.utils.data.DataExecutor(loader, num_steps=warmup + steps)):
        loss = float(train_step(*batch))
        now = time.perf_counter()
        if i >= warmup:
            times.append(now - start)
        start = now
    report, prog = train_step.report, train_step.program
    mem = report.memory
    return Row(n, mode, mem.state_bytes, mem.argument_bytes, mem.temp_bytes, peak_bytes(mem),
               f"{mem.state.split} / {len(mem.state.rows)}",
               prog.trace_seconds + prog.executable.lower_seconds + prog.executable.compile_seconds,
               1e3 * statistics.median(times), loss)


def compiled_peak(wl, d_model: int, n: int, mode: str) -> int:
    """XLA's per-device peak estimate of the GPT workload at width `d_model`, compiled
    (not run) on n devices in this mode."""
    backend = _backend(n, MODES[mode])
    torch.manual_seed(0)
    model = GPT(vocab=2048, seq=128, d_model=d_model, n_heads=4, n_layers=4, dropout=0.0)
    return peak_bytes(_step(wl, model, backend).lower(*wl.batches[0]).memory)


def width_search(wl, n: int, widths: list[int], budget: float) -> dict:
    """Per mode: [(width, peak bytes)] compiled in increasing order until one exceeds
    the budget, and the largest width within it (None if even the first does not fit)."""
    out = {}
    for mode in MODES:
        tried, best = [], None
        for d in widths:
            peak = compiled_peak(wl, d, n, mode)
            tried.append((d, peak))
            print(f"  width {d:5d}  {mode:<10}  peak {_mib(peak):>9} MiB per device", flush=True)
            if peak > budget:
                break
            best = d
        out[mode] = (tried, best)
    return out


def markdown(rows: list[Row], search, wl, a, seconds: float, load: tuple) -> str:
    lines = ["## Sharded state (`python -m benchmarks.sharding`)", "",
             f"Written on {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC ({seconds:.0f} s). "
             f"Machine: {machine()}; load average {load[0]:.1f} at the start, {load[1]:.1f} at the end. "
             f"{versions()}.", "",
             f"**{wl.description}**, trained {a.warmup} warm-up + {a.steps} timed steps per run on N XLA host "
             f"devices, state replicated or split (`cstorch.backends.csx.cluster.shard_state = True`). Bytes are "
             f"per device, from XLA's memory analysis of the compiled step; peak = arguments + outputs - aliased "
             f"+ temporaries. The N host devices share the machine's CPU cores, and other work ran on them: the "
             f"step times show what partitioning and the collectives cost, they are indicative only and no "
             f"speed-up is expected.", "",
             "| N | state | state MiB / device | arguments MiB | temporaries MiB | peak MiB | tensors split | "
             "trace + compile s | ms/step (median) | loss @ last step |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r.n} | {r.mode} | {_mib(r.state_bytes)} | {_mib(r.argument_bytes)} | "
                     f"{_mib(r.temp_bytes)} | {_mib(r.peak_bytes)} | {r.split} | {r.compile_s:.1f} | "
                     f"{r.ms:.1f} | {r.loss:.6f} |")
    if search:
        n = a.search_devices
        lines += ["", f"Largest d_model (4 layers, 4 heads, seq 128, vocab 2048, batch 8, AdamW) whose compiled "
                      f"step fits a budget of {a.budget_mib:g} MiB per device on N = {n}, widths tried in order "
                      f"until one does not fit:", "",
                  "| state | widths tried (peak MiB per device) | largest width within the budget |",
                  "|---|---|---:|"]
        for mode, (tried, best) in search.items():
            cells = ", ".join(f"{d} ({_mib(p)})" for d, p in tried)
            lines.append(f"| {mode} | {cells} | {best if best is not None else 'none'} |")
    return "\n".join(lines) + "\n"


def main(a) -> int:
    devices = [int(x) for x in (a.devices or ("1,2" if a.quick else "1,2,4,8")).split(",")]
    a.steps = a.steps if a.steps is not None else (2 if a.quick else 10)
    wl = gpt_workload(a.quick)
    t0, load0 = time.perf_counter(), os.getloadavg()[0]
    rows = []
    for n in devices:
        for mode in (["replicated"] if n == 1 else list(MODES)):  # one device: nothing to split
            row = measure(wl, n, mode, a.warmup, a.steps)
            rows.append(row)
            print(f"N={n} {mode:<10} state {_mib(row.state_bytes):>8} MiB/device  peak {_mib(row.peak_bytes):>8} "
                  f"MiB  split {row.split:>9}  compile {row.compile_s:5.1f} s  {row.ms:8.1f} ms/step  "
                  f"loss {row.loss:.6f}", flush=True)
    search = None
    if not a.quick:
        widths = [int(w) for w in a.widths.split(",")]
        print(f"width search on N={a.search_devices}, budget {a.budget_mib:g} MiB per device:", flush=True)
        search = width_search(wl, a.search_devices, widths, a.budget_mib * 2 ** 20)
        for mode, (_, best) in search.items():
            print(f"largest width within the budget, {mode}: {best}", flush=True)
    _reset_backend()
    cstorch.backends.csx.cluster.shard_state = False
    ref = rows[0].loss
    bad = [r for r in rows if abs(r.loss - ref) > LOSS_TOL * max(1.0, abs(ref))]
    for r in bad:
        print(f"LOSS MISMATCH: N={r.n} {r.mode} loss {r.loss} vs {ref} (one device)", flush=True)
    if a.out:
        replace_section(Path(a.out), "sharding", markdown(rows, search, wl, a, time.perf_counter() - t0,
                                                          (load0, os.getloadavg()[0])))
        print(f"wrote the sharding section of {a.out}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(args))
