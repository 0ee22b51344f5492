"""The first training step of a deep model: how it grows with depth.

    python -m benchmarks.cold_start                       # 2, 8, 16 and 32 layers
    python -m benchmarks.cold_start --layers 2,4 --out /tmp/cold.md

The GPT block stack of `benchmarks.models` (d 128, 4 heads, seq 64, vocab 512, batch 4,
AdamW) at each depth, every case in a fresh process with the compile caches off, so each
first step is cold:

* ``cstorch``: `@cstorch.trace` step on CSX; its phases are the capture (the step traced
  into one ATen graph), the lowering to jax, the XLA compile, and the first step's run;
* ``jax.jit``: the same model written by hand (`benchmarks.jax_models.gpt_loss_2d`, the
  blocks unrolled) with optax, traced and lowered, compiled, run;
* ``jax.scan``: the same with the blocks as one `lax.scan` over stacked weights
  (`gpt_loss_2d_scan`), which JAX users write to keep compile time flat in depth;
* ``torch.compile``: model + loss and the optimizer step compiled by inductor (lazily,
  inside the first call: one figure).

Each case prints one JSON line; the table gives seconds to the first loss on the host and
the ratios that issue 47 targets (cstorch at 32 layers vs 2; cstorch vs jax.jit)."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONFIG = dict(d_model=128, n_heads=4, seq=64, vocab=512)
BATCH = 4
IMPLS = ("cstorch", "jax.jit", "jax.scan", "torch.compile")


def _model_and_batch(n_layers: int):
    import torch

    from .models import GPT

    torch.manual_seed(0)
    model = GPT(vocab=CONFIG["vocab"], seq=CONFIG["seq"], d_model=CONFIG["d_model"], n_heads=CONFIG["n_heads"],
                n_layers=n_layers, dropout=0.0)
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, CONFIG["vocab"], (BATCH, CONFIG["seq"] + 1), generator=g)
    return model, (tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous())


def _cstorch(n_layers: int) -> dict:
    import cstorch

    from .steps import cstorch_train_step

    model, batch = _model_and_batch(n_layers)
    backend = cstorch.backend("CSX")
    cstorch.backends.csx.performance.progress = False
    compiled = cstorch.compile(model, backend)
    opt = cstorch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    step = cstorch_train_step(compiled, opt, lambda model, idx, targets: model(idx, targets))

    loader = cstorch.utils.data.DataLoader(lambda: [batch])
    t0 = time.perf_counter()
    for idx, targets in cstorch.utils.data.DataExecutor(loader, num_steps=1):
        loss = float(step(idx, targets))
    total = time.perf_counter() - t0
    prog = step.program
    ex = prog.executable
    phases = {"capture": prog.trace_seconds, "lowering": ex.lower_seconds, "compile": ex.compile_seconds}
    phases["run"] = max(0.0, total - sum(phases.values()))
    return {"first_step": total, "phases": phases, "loss": loss}


def _jax(n_layers: int, scan: bool) -> dict:
    import jax
    import optax

    from cstorch_jax.xla_options import compiler_options

    from .jax_models import gpt_loss_2d, gpt_loss_2d_scan, stack_blocks

    model, batch = _model_and_batch(n_layers)
    params = {n: jax.numpy.asarray(p.detach().numpy()) for n, p in model.named_parameters()}
    if scan:
        params = stack_blocks(params, n_layers)
        loss_fn = lambda p, idx, t: gpt_loss_2d_scan(p, idx, t, n_heads=CONFIG["n_heads"])  # noqa: E731
    else:
        loss_fn = lambda p, idx, t: gpt_loss_2d(p, idx, t, n_layers=n_layers, n_heads=CONFIG["n_heads"])  # noqa: E731
    tx = optax.adamw(1e-3, weight_decay=0.01)

    def step(params, opt_state, idx, targets):
        loss, grads = jax.value_and_grad(loss_fn)(params, idx, targets)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    idx, targets = (t.numpy().astype("int32") for t in batch)
    t0 = time.perf_counter()
    opt_state = tx.init(params)
    lowered = jax.jit(step, donate_argnums=(0, 1)).trace(params, opt_state, idx, targets).lower()
    t1 = time.perf_counter()
    compiled = lowered.compile(compiler_options=compiler_options(jax.devices()[0].platform))
    t2 = time.perf_counter()
    loss = float(compiled(params, opt_state, idx, targets)[2])
    t3 = time.perf_counter()
    return {"first_step": t3 - t0, "phases": {"trace+lower": t1 - t0, "compile": t2 - t1, "run": t3 - t2},
            "loss": loss}


def _torch_compile(n_layers: int) -> dict:
    import torch

    model, batch = _model_and_batch(n_layers)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    forward = torch.compile(lambda idx, t: model(idx, t))
    opt_step = torch.compile(opt.step)
    t0 = time.perf_counter()
    loss = forward(*batch)
    loss.backward()
    opt_step()
    value = loss.item()
    return {"first_step": time.perf_counter() - t0, "phases": {}, "loss": value}


def run_case(impl: str, n_layers: int) -> dict:
    if impl == "cstorch":
        return _cstorch(n_layers)
    if impl in ("jax.jit", "jax.scan"):
        return _jax(n_layers, scan=impl == "jax.scan")
    if impl == "torch.compile":
        return _torch_compile(n_layers)
    raise ValueError(f"unknown implementation {impl!r}; choose from {', '.join(IMPLS)}")


def _in_fresh_process(impl: str, n_layers: int, inductor_cache: str) -> dict:
    env = dict(os.environ, CSTORCH_CACHE="0", TORCHINDUCTOR_CACHE_DIR=inductor_cache,
               JAX_ENABLE_COMPILATION_CACHE="false")
    out = subprocess.run([sys.executable, "-m", "benchmarks.cold_start", "--case", impl, "--n-layers", str(n_layers)],
                         env=env, capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def _cell(result: dict | None) -> str:
    if result is None:
        return "not run"
    if "error" in result:
        return "failed"
    phases = ", ".join(f"{k} {v:.1f}" for k, v in result["phases"].items())
    return f"{result['first_step']:.1f}" + (f" ({phases})" if phases else "")


def table(results: dict, layers: list[int], impls: list[str]) -> list[str]:
    lines = ["| layers | " + " | ".join(impls) + " | cstorch / jax.jit |", "|---:|" + "---|" * (len(impls) + 1)]
    for n in layers:
        row = [_cell(results.get((impl, n))) for impl in impls]
        ours, jit = results.get(("cstorch", n)), results.get(("jax.jit", n))
        ratio = (f"{ours['first_step'] / jit['first_step']:.2f}x" if ours and jit and "error" not in ours
                 and "error" not in jit else "-")
        lines.append(f"| {n} | " + " | ".join(row) + f" | {ratio} |")
    first, last = results.get(("cstorch", layers[0])), results.get(("cstorch", layers[-1]))
    if first and last and "error" not in first and "error" not in last and len(layers) > 1:
        lines += ["", f"cstorch's first step at {layers[-1]} layers is {last['first_step'] / first['first_step']:.1f}x "
                      f"its first step at {layers[0]} layers."]
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.cold_start", description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", default="2,8,16,32", help="comma-separated depths")
    p.add_argument("--impls", default=",".join(IMPLS), help=f"comma-separated subset of {','.join(IMPLS)}")
    p.add_argument("--out", type=Path, default=None, help="also write the table to this markdown file")
    p.add_argument("--record", action="store_true",
                   help="also record the table as the cold-start section of benchmarks/RESULTS.md")
    p.add_argument("--case", default=None, help=argparse.SUPPRESS)  # one case, in this process (internal)
    p.add_argument("--n-layers", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.case is not None:
        print(json.dumps(run_case(args.case, args.n_layers)))
        return 0
    from .report import machine
    layers = [int(v) for v in args.layers.split(",") if v.strip()]
    impls = [v.strip() for v in args.impls.split(",") if v.strip()]
    bad = sorted(set(impls) - set(IMPLS))
    if bad or not layers or min(layers) < 1:
        p.error(f"--layers: positive depths; --impls: a subset of {', '.join(IMPLS)} (unknown: {bad})")
    load = os.getloadavg()[0]
    print(f"cold start, GPT d {CONFIG['d_model']}, {CONFIG['n_heads']} heads, seq {CONFIG['seq']}, batch {BATCH}, "
          f"AdamW; load average {load:.1f} on {os.cpu_count()} cores", flush=True)
    results = {}
    with tempfile.TemporaryDirectory(prefix="cstorch-cold-inductor-") as cache:
        for n in layers:
            for impl in impls:
                results[(impl, n)] = r = _in_fresh_process(impl, n, cache)
                print(f"  {n} layers, {impl}: {_cell(r)}", flush=True)
    lines = table(results, layers, impls)
    print("\n" + "\n".join(lines))
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    header = [f"GPT d {CONFIG['d_model']}, {CONFIG['n_heads']} heads, seq {CONFIG['seq']}, vocab {CONFIG['vocab']}, "
              f"batch {BATCH}, AdamW; seconds to the first loss on the host, one fresh process per case, "
              f"compile caches off; {time.strftime('%Y-%m-%d %H:%M %Z')}, {machine()}, load average "
              f"{load:.1f} before and {os.getloadavg()[0]:.1f} after.", ""]
    if args.out is not None:
        args.out.write_text("\n".join(["# Cold start (seconds to the first loss)", "", *header, *lines]) + "\n")
    if args.record:
        from .sections import replace_section

        replace_section(Path(__file__).resolve().parent / "RESULTS.md", "cold-start",
                        "\n".join(["## Cold start (`python -m benchmarks.cold_start`)", "", *header, *lines]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
