"""The first training step of a deep model: how it grows with depth.

    python -m benchmarks.cold_start                       # 2, 8, 16 and 32 layers, the Model Zoo row
    python -m benchmarks.cold_start --layers 2,4 --out /tmp/cold.md

The GPT block stack of `benchmarks.models` (d 128, 4 heads, seq 64, vocab 512, batch 4,
AdamW) at each depth, every case in a fresh process with the compile caches off, so each
first step is cold:

* ``cstorch``: `@cstorch.trace` step on CSX; its phases are the capture (the step traced
  into one ATen graph), the lowering to jax, the XLA compile, and the first step's run;
* ``cstorch.stacked``: the same with the repeated layers' state held stacked
  (`performance.stack_repeated_layers_from = 2`, `cstorch_jax.stacked_state`: a run of layers
  as one loop over stacked weights; off by default, see docs/guides/performance.md);
* ``jax.jit``: the same model written by hand (`benchmarks.jax_models.gpt_loss_2d`, the
  blocks unrolled) with optax, traced and lowered, compiled, run;
* ``jax.scan``: the same with the blocks as one `lax.scan` over stacked weights
  (`gpt_loss_2d_scan`), which JAX users write to keep compile time flat in depth;
* ``torch.compile``: model + loss and the optimizer step compiled by inductor (lazily,
  inside the first call: one figure).

A last row does the same for the real Model Zoo's GPT-3 of a published YAML
(`Cerebras_GPT/1p3b.yaml`: 24 layers), widths set to the GPT stack's (hidden size, heads,
filter size 4 x hidden, vocab, positions), its depth and the rest as published; the model
is built by the Model Zoo's registry from the YAML's model section, as `cszoo fit` builds it,
in a process set up as docs/guides/modelzoo.md says (`--modelzoo` names the Model Zoo's src
folder; default: the snapshot beside the clone; the row is left out, with the reason, where
the Model Zoo cannot run). The jax columns of that row have no Model Zoo counterpart: they
are the hand-written GPT stack of the same depth and widths (the same pre-LN GELU decoder,
with an untied head).

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
IMPLS = ("cstorch", "cstorch.stacked", "jax.jit", "jax.scan", "torch.compile")
REPO = Path(__file__).resolve().parents[1]
#: the Model Zoo case: a published YAML (under the Model Zoo's src/), its widths set to CONFIG's
ZOO_YAML = "cerebras/modelzoo/models/nlp/gpt3/configs/Cerebras_GPT/1p3b.yaml"
ZOO_SRC = REPO.parent / "shared" / "third_party" / "modelzoo-2.10" / "src"  # the snapshot beside a clone
ZOO_DEPS = REPO / ".modelzoo-deps"  # docs/guides/modelzoo.md: its runtime packages


def _model_and_batch(n_layers: int):
    import torch

    from .models import GPT

    torch.manual_seed(0)
    model = GPT(vocab=CONFIG["vocab"], seq=CONFIG["seq"], d_model=CONFIG["d_model"], n_heads=CONFIG["n_heads"],
                n_layers=n_layers, dropout=0.0)
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, CONFIG["vocab"], (BATCH, CONFIG["seq"] + 1), generator=g)
    return model, (tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous())


def _cstorch_first_step(model, batch: tuple, loss) -> dict:
    """Seconds to the first loss on the host of a `@cstorch.trace` AdamW step of `model` on
    `batch` (`loss(compiled, *batch)` is the scalar loss), and its phases."""
    import cstorch

    from .steps import cstorch_train_step

    backend = cstorch.backend("CSX")
    cstorch.backends.csx.performance.progress = False
    compiled = cstorch.compile(model, backend)
    opt = cstorch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    step = cstorch_train_step(compiled, opt, loss)

    loader = cstorch.utils.data.DataLoader(lambda: [batch])
    t0 = time.perf_counter()
    for data in cstorch.utils.data.DataExecutor(loader, num_steps=1):
        loss_value = float(step(*data))
    total = time.perf_counter() - t0
    prog = step.program
    ex = prog.executable
    phases = {"capture": prog.trace_seconds, "lowering": ex.lower_seconds, "compile": ex.compile_seconds}
    phases["run"] = max(0.0, total - sum(phases.values()))
    return {"first_step": total, "phases": phases, "loss": loss_value}


def zoo_missing(src: Path) -> str | None:
    """Why the Model Zoo case cannot run here with the Model Zoo's `src` folder (None when
    it can)."""
    if not (src / ZOO_YAML).is_file():
        return f"no Model Zoo 2.10 at {src} (its {ZOO_YAML} is not there; --modelzoo <modelzoo>/src)"
    if sys.version_info[:2] != (3, 11):
        return "the Model Zoo 2.10 runs on CPython 3.11 only (its cerebras-appliance package)"
    if not (ZOO_DEPS / "cerebras" / "appliance").is_dir():
        return (f"the Model Zoo's runtime packages are not at {ZOO_DEPS}: "
                "pip install --no-deps --target .modelzoo-deps -r requirements-modelzoo.txt")
    return None


def zoo_pythonpath(src: Path) -> str:
    """The PYTHONPATH of a process beside the Model Zoo of `src`: its runtime packages, then
    `src` (docs/guides/modelzoo.md)."""
    return os.pathsep.join([str(ZOO_DEPS), str(src)])


def zoo_params(src: Path) -> dict:
    """The model section of the Model Zoo YAML `ZOO_YAML` (under `src`), its widths set to
    `CONFIG`'s (its depth and everything else as published)."""
    import yaml

    params = yaml.safe_load((src / ZOO_YAML).read_text())["trainer"]["init"]["model"]
    widths = {"hidden_size": CONFIG["d_model"], "num_heads": CONFIG["n_heads"], "filter_size": 4 * CONFIG["d_model"],
              "vocab_size": CONFIG["vocab"], "max_position_embeddings": CONFIG["seq"]}
    unknown = sorted(set(widths) - set(params))
    if unknown:
        raise KeyError(f"{ZOO_YAML} has no model key {unknown}: the width keys changed")
    return {**params, **widths}


def _zoo_model_and_data(src: Path):
    """The real Model Zoo model of `ZOO_YAML` (built by its registry from the YAML's model
    section, as `cszoo fit` builds it; the process runs beside the Model Zoo) and a batch
    as its data processor gives one."""
    import torch

    from cstorch.trainer.real_modelzoo import model_class

    params = zoo_params(src)
    torch.manual_seed(0)
    model = model_class(params["name"])(params)
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, CONFIG["vocab"], (BATCH, CONFIG["seq"] + 1), generator=g, dtype=torch.int32)
    return model, {"input_ids": tokens[:, :-1].contiguous(), "labels": tokens[:, 1:].contiguous(),
                   "attention_mask": torch.ones(BATCH, CONFIG["seq"], dtype=torch.int32)}


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


def _torch_compile(model, batch: tuple, loss) -> dict:
    """Seconds to the first loss of `loss(model, *batch)` compiled by inductor, with its
    backward and the AdamW step compiled too (lazily, inside the first call: one figure)."""
    import torch

    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    forward = torch.compile(lambda *batch: loss(model, *batch))
    opt_step = torch.compile(opt.step)
    t0 = time.perf_counter()
    value = forward(*batch)
    value.backward()
    opt_step()
    return {"first_step": time.perf_counter() - t0, "phases": {}, "loss": value.item()}


def run_case(impl: str, n_layers: int | None, zoo: Path | None = None) -> dict:
    """One case in this process: `impl` on the GPT stack of `n_layers` layers, or on the
    Model Zoo model (`zoo`: the Model Zoo's src folder; the jax implementations, which have
    no Model Zoo counterpart, run the GPT stack of the Model Zoo model's depth)."""
    if impl in ("jax.jit", "jax.scan"):
        return _jax(zoo_params(zoo)["num_hidden_layers"] if zoo else n_layers, scan=impl == "jax.scan")
    if impl not in ("cstorch", "cstorch.stacked", "torch.compile"):
        raise ValueError(f"unknown implementation {impl!r}; choose from {', '.join(IMPLS)}")
    if impl == "cstorch.stacked":
        import cstorch

        cstorch.backends.csx.performance.stack_repeated_layers_from = 2
    if zoo:
        model, data = _zoo_model_and_data(zoo)
        model_batch_loss = (model, (data,), lambda model, data: model(data))
    else:
        model, batch = _model_and_batch(n_layers)
        model_batch_loss = (model, batch, lambda model, idx, targets: model(idx, targets))
    return _torch_compile(*model_batch_loss) if impl == "torch.compile" else _cstorch_first_step(*model_batch_loss)


def _in_fresh_process(impl: str, workload: int | Path, inductor_cache: str) -> dict:
    """`run_case` in a new process, on the GPT stack of `workload` layers or the Model Zoo
    model (`workload`: the Model Zoo's src folder, put on PYTHONPATH after its runtime
    packages, as docs/guides/modelzoo.md tells a user to)."""
    env = dict(os.environ, CSTORCH_CACHE="0", TORCHINDUCTOR_CACHE_DIR=inductor_cache,
               JAX_ENABLE_COMPILATION_CACHE="false")
    if isinstance(workload, Path):
        case = ["--zoo", str(workload)]
        env["PYTHONPATH"] = zoo_pythonpath(workload)
    else:
        case = ["--n-layers", str(workload)]
    out = subprocess.run([sys.executable, "-m", "benchmarks.cold_start", "--case", impl, *case],
                         env=env, capture_output=True, text=True, cwd=REPO)
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


def table(results: dict, layers: list[int], impls: list[str], zoo_layers: int | None = None) -> list[str]:
    """The markdown table of `results` ({(impl, depth or "zoo"): result}); the Model Zoo row
    last where `zoo_layers` (its depth) is given."""
    lines = ["| layers | " + " | ".join(impls) + " | cstorch / jax.jit |", "|---:|" + "---|" * (len(impls) + 1)]
    rows = [(n, str(n)) for n in layers]
    if zoo_layers is not None:
        family, config = ZOO_YAML.split("/configs/")
        rows.append(("zoo", f"{zoo_layers}, Model Zoo {family.rsplit('/', 1)[1]} `{config}`"))
    for n, label in rows:
        row = [_cell(results.get((impl, n))) for impl in impls]
        ours, jit = results.get(("cstorch", n)), results.get(("jax.jit", n))
        ratio = (f"{ours['first_step'] / jit['first_step']:.2f}x" if ours and jit and "error" not in ours
                 and "error" not in jit else "-")
        lines.append(f"| {label} | " + " | ".join(row) + f" | {ratio} |")
    if len(layers) > 1:
        first = results.get(("cstorch", layers[0]))
        for impl, what in (("cstorch", "cstorch's first step"),
                           ("cstorch.stacked", "With the repeated layers' state stacked, the first step")):
            last = results.get((impl, layers[-1]))
            if first and last and "error" not in first and "error" not in last:
                lines += ["", f"{what} at {layers[-1]} layers is {last['first_step'] / first['first_step']:.1f}x "
                              f"cstorch's first step at {layers[0]} layers."]
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.cold_start", description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", default="2,8,16,32", help="comma-separated depths")
    p.add_argument("--impls", default=",".join(IMPLS), help=f"comma-separated subset of {','.join(IMPLS)}")
    p.add_argument("--out", type=Path, default=None, help="also write the table to this markdown file")
    p.add_argument("--record", action="store_true",
                   help="also record the table as the cold-start section of benchmarks/RESULTS.md")
    p.add_argument("--modelzoo", type=Path, default=ZOO_SRC,
                   help="the Model Zoo 2.10's src folder, for the Model Zoo row (default: the snapshot beside the "
                        "clone)")
    p.add_argument("--no-zoo", action="store_true", help="leave the Model Zoo row out")
    p.add_argument("--case", default=None, help=argparse.SUPPRESS)  # one case, in this process (internal)
    p.add_argument("--n-layers", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--zoo", type=Path, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.case is not None:
        print(json.dumps(run_case(args.case, args.n_layers, args.zoo)))
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
    zoo = None if args.no_zoo else args.modelzoo.resolve()
    why = zoo and zoo_missing(zoo)
    if why:
        print(f"  the Model Zoo row is left out: {why}", flush=True)
        zoo = None
    workloads = [*layers, *([zoo] if zoo else [])]
    results = {}
    with tempfile.TemporaryDirectory(prefix="cstorch-cold-inductor-") as cache:
        for workload in workloads:
            key = "zoo" if isinstance(workload, Path) else workload
            for impl in impls:
                results[(impl, key)] = r = _in_fresh_process(impl, workload, cache)
                print(f"  {'Model Zoo' if key == 'zoo' else f'{key} layers'}, {impl}: {_cell(r)}", flush=True)
    lines = table(results, layers, impls, zoo_params(zoo)["num_hidden_layers"] if zoo else None)
    print("\n" + "\n".join(lines))
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    header = [f"GPT d {CONFIG['d_model']}, {CONFIG['n_heads']} heads, seq {CONFIG['seq']}, vocab {CONFIG['vocab']}, "
              f"batch {BATCH}, AdamW; seconds to the first loss on the host, one fresh process per case, "
              f"compile caches off; {time.strftime('%Y-%m-%d %H:%M %Z')}, {machine()}, load average "
              f"{load:.1f} before and {os.getloadavg()[0]:.1f} after."
              + (f" Last row: the real Model Zoo's model of `{ZOO_YAML.split('/configs/')[1]}` (all its layers, the "
                 "widths above, plain float32 AdamW), built by its registry from the YAML; its jax columns are the "
                 "GPT stack of the same depth." if zoo else ""), ""]
    if args.out is not None:
        args.out.write_text("\n".join(["# Cold start (seconds to the first loss)", "", *header, *lines]) + "\n")
    if args.record:
        from .sections import replace_section

        replace_section(Path(__file__).resolve().parent / "RESULTS.md", "cold-start",
                        "\n".join(["## Cold start (`python -m benchmarks.cold_start`)", "", *header, *lines]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
