"""The one-command check of a GPU machine: correctness tests, the suite's workloads against
eager CUDA torch and torch.compile in float32 and bfloat16, and a ~1B-parameter GPT step.

    python -m benchmarks.device_check                   # on a GPU: about 8 minutes on one H100/H200
    python -m benchmarks.device_check --platform cpu    # the same steps at tiny sizes (dry run)

It needs only what the GPU image has (torch with CUDA, jax with its CUDA plugin, pytest) and
the project's working tree. In order, each part within what is left of `--budget` seconds:

1. the suite's three workloads (`benchmarks.workloads`: MLP, CNN, GPT at their full sizes) in
   float32 and in bfloat16, under eager torch on the device, torch.compile on the device and
   cstorch (CSX on the same device; bfloat16 via `cstorch.amp.set_half_dtype`, eager and
   torch.compile via `torch.autocast`); timed rounds alternate between the three, every step
   synced (`loss.item()` / `float(loss)`); the table gives the median ms per step, the
   ratio to eager and the largest loss difference from eager over the steps;
2. a GPT of about 1B parameters (16 layers, d_model 2048, seq 1024, vocab 32768, batch 4,
   AdamW) for a few bfloat16 steps under cstorch and eager torch, with the model FLOPs
   utilisation (analytic FLOPs per step / step time / the card's dense bfloat16 peak);
3. the model-parity and mixed-precision tests (`tests/models/test_model_parity.py`,
   `tests/models/test_mixed_precision_models.py`) with CSX on the device, in a subprocess.

It writes its results as the section `device-check` of benchmarks/RESULTS.md, naming the card
(`--out` another file; the dry run's default is benchmarks/RESULTS-device-dry-run.md,
git-ignored), and exits 1 when a part failed.
"""
from __future__ import annotations

import argparse
import copy
import gc
import os
import re
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # torch and jax share the GPU's memory

import jax  # noqa: E402
import torch  # noqa: E402

import cstorch  # noqa: E402

from .impls import CstorchCSX, Impl, run_steps  # noqa: E402
from .models import GPT  # noqa: E402
from .report import machine, versions  # noqa: E402
from .sections import replace_section  # noqa: E402
from .workloads import BUILDERS, OptimizerConfig, Workload, _gpt_flops  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_OUT = {"gpu": HERE / "RESULTS.md", "cpu": HERE / "RESULTS-device-dry-run.md"}
# Dense bfloat16 tensor-core peaks (FLOP/s) from the vendors' data sheets, by device name.
BF16_PEAK = {"H200": 989e12, "H100": 989e12, "A100": 312e12, "L40S": 362e12, "L4": 121e12}
TESTS = ["tests/models/test_model_parity.py", "tests/models/test_mixed_precision_models.py"]


class EagerOnDevice(Impl):
    """Eager torch on `device`, under autocast when `half` is set."""
    key = "eager"

    def __init__(self, wl, model, device, half):
        super().__init__(wl, model.to(device))
        self.device, self.half = device, half

    def setup(self, total_steps):
        self.opt = self.wl.optimizer.torch(self.model.parameters())
        self.loss_fn = self.wl.torch_loss

    def _loss(self, batch):
        batch = [t.to(self.device, non_blocking=True) for t in batch]
        with torch.autocast(self.device, dtype=self.half, enabled=self.half is not None):
            return self.loss_fn(self.model, *batch)

    def step(self):
        batch = self._batch()
        self.opt.zero_grad(set_to_none=True)
        loss = self._loss(batch)
        loss.backward()
        self.opt.step()
        return loss.item()

    def parameters(self):
        return {n: p.detach().double().cpu().numpy() for n, p in self.model.named_parameters()}


class CompileOnDevice(EagerOnDevice):
    """torch.compile of the loss (AOTAutograd compiles its backward) and of opt.step."""
    key = "torch.compile"

    def setup(self, total_steps):
        super().setup(total_steps)
        self._loss = torch.compile(self._loss)
        self.opt_step = torch.compile(self.opt.step)
        self.compile_note = "lazy"

    def step(self):
        batch = self._batch()
        self.opt.zero_grad(set_to_none=True)
        loss = self._loss(batch)
        loss.backward()
        self.opt_step()
        return loss.item()


def compare(wl: Workload, device: str, half, backend, log) -> list[Impl]:
    """Warm-up, then timed rounds alternating between eager, torch.compile and cstorch."""
    torch.manual_seed(0)
    model = wl.build_model()
    impls = [EagerOnDevice(wl, copy.deepcopy(model), device, half),
             CompileOnDevice(wl, copy.deepcopy(model), device, half),
             CstorchCSX(wl, copy.deepcopy(model), backend)]
    for impl in impls:
        try:
            impl.setup(0)
        except Exception as e:  # noqa: BLE001 - recorded in the table
            impl.error = f"{type(e).__name__}: {e}"
        run_steps(impl, wl.warmup, timed=False)
    for r in range(wl.rounds):
        gc.collect()
        for k in range(len(impls)):
            run_steps(impls[(r + k) % len(impls)], wl.steps_per_round, timed=True)
    for impl in impls:
        impl.finish()
        log(f"  {wl.name} {_dtype_name(half)} {impl.key}: "
            + (impl.error or f"{impl.median_s * 1e3:.2f} ms/step"))
    return impls


def _dtype_name(half) -> str:
    return "bfloat16" if half is not None else "float32"


def workload_rows(keys, quick: bool, device: str, backend, deadline: float, log) -> list[str]:
    rows = []
    for half in (None, torch.bfloat16):
        if half is not None:
            cstorch.amp.set_half_dtype("bfloat16")  # steps traced from here on compute in bfloat16
        for key in keys:
            if time.monotonic() > deadline:
                rows.append(f"| {key.upper()} | {_dtype_name(half)} | not run: out of time | | |")
                continue
            wl = BUILDERS[key](quick)
            impls = compare(wl, device, half, backend, log)
            eager = impls[0]
            cells = []
            for impl in impls:
                if impl.error:
                    cells.append(f"failed: {impl.error[:120]}")
                    continue
                ratio = impl.median_s / eager.median_s if not eager.error else float("nan")
                diff = max((abs(a - b) / max(1.0, abs(b)) for a, b in zip(impl.losses, eager.losses)), default=0.0)
                cells.append(f"{impl.median_s * 1e3:.2f} ms ({ratio:.2f}x, loss diff {diff:.1e})")
            rows.append(f"| {wl.name} | {_dtype_name(half)} | " + " | ".join(cells) + " |")
    return rows


def big_gpt(quick: bool, device: str, backend, log) -> list[str]:
    """A ~1B-parameter GPT in bfloat16: cstorch's and eager's step time and MFU."""
    cfg = (dict(n_layers=2, d_model=64, n_heads=2, seq=32, vocab=256), 2) if quick else \
        (dict(n_layers=16, d_model=2048, n_heads=16, seq=1024, vocab=32768), 4)
    cfg, batch = cfg
    steps = 3 if quick else 8
    torch.manual_seed(0)
    model = GPT(**cfg, dropout=0.0)
    n_params = sum(p.numel() for p in model.parameters())
    flops = _gpt_flops(batch, cfg["seq"], cfg["d_model"], cfg["n_layers"], cfg["vocab"])
    g = torch.Generator().manual_seed(0)
    tokens = [torch.randint(0, cfg["vocab"], (batch, cfg["seq"] + 1), generator=g) for _ in range(4)]
    cstorch.amp.set_half_dtype("bfloat16")
    wl = Workload(key="gpt1b", name="GPT-1B", description="", build_model=lambda: model,
                  torch_loss=lambda m, idx, tgt: m(idx, tgt), jax_loss=None,
                  optimizer=OptimizerConfig("adamw", lr=1e-4, weight_decay=0.1), flops_per_step=flops,
                  flops_note="", tol=0.0, param_tol=0.0, warmup=2, rounds=1, steps_per_round=steps,
                  batches=[(t[:, :-1], t[:, 1:]) for t in tokens])
    peak = next((v for k, v in BF16_PEAK.items() if k in _device_name(device)), None)
    rows = []
    for impl in (CstorchCSX(wl, copy.deepcopy(model), backend), EagerOnDevice(wl, copy.deepcopy(model), device,
                                                                               torch.bfloat16)):
        t0 = time.perf_counter()
        try:
            impl.setup(0)
        except Exception as e:  # noqa: BLE001
            impl.error = f"{type(e).__name__}: {e}"
        run_steps(impl, wl.warmup, timed=False)
        warm = time.perf_counter() - t0
        run_steps(impl, steps, timed=True)
        impl.finish()
        if impl.error:
            rows.append(f"| {impl.key} | failed: {impl.error[:200]} | | | |")
        else:
            rate = flops / impl.median_s
            mfu = f"{rate / peak:.1%}" if peak else "card not in BF16_PEAK"
            rows.append(f"| {impl.key} | {impl.median_s * 1e3:.1f} ms | {rate / 1e12:.3g} TFLOP/s | {mfu} | "
                        f"{warm:.0f} s |")
        log(f"  GPT-1B {impl.key}: {rows[-1]}")
        del impl
        gc.collect()
        if device == "cuda":
            torch.cuda.empty_cache()
    head = (f"GPT {cfg['n_layers']} layers, d_model {cfg['d_model']}, {cfg['n_heads']} heads, seq {cfg['seq']}, "
            f"vocab {cfg['vocab']}, batch {batch}: {n_params / 1e9:.2f} B parameters, "
            f"{flops / 1e12:.2f} TFLOP per step (analytic, 3x forward matmuls), bfloat16, AdamW")
    return [head, "", "| implementation | median step | achieved | MFU | setup + warm-up |", "|---|---|---|---|---|",
            *rows]


def run_tests(platform: str, quick: bool, seconds: float, log) -> str:
    """The parity tests with CSX on the device, in a subprocess; their summary line."""
    env = dict(os.environ, JAX_PLATFORMS="cuda" if platform == "gpu" else "cpu")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS]
    if quick:
        cmd += ["-k", "mlp or attention"]  # the dry run: a few fast cases of each file
    log(f"  {' '.join(cmd[1:])} (at most {seconds:.0f} s)")
    try:
        done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=max(seconds, 1))
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        return f"stopped after {seconds:.0f} s; so far: {out.count('.')} passed, {out.count('F')} failed"
    summary = [ln for ln in done.stdout.splitlines() if re.search(r"\d+ (passed|failed)", ln)]
    failed = [ln for ln in done.stdout.splitlines() if ln.startswith("FAILED")]
    return (summary[-1].strip("= ") if summary else f"exit {done.returncode}") + "".join(f"<br>{f}" for f in failed)


def _device_name(device: str) -> str:
    if device == "cuda":
        return torch.cuda.get_device_name(0)
    return machine()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--platform", choices=("gpu", "cpu"), default="gpu",
                    help="gpu: the check itself; cpu: a dry run of every part at tiny sizes")
    ap.add_argument("--budget", type=float, default=None,
                    help="seconds for the whole check (default 470 on gpu, 900 for the dry run)")
    ap.add_argument("--workloads", default="mlp,cnn,gpt", help="the suite's workloads to compare (default all)")
    ap.add_argument("--out", type=Path, default=None, help="the Markdown file that gets the section")
    args = ap.parse_args(argv)
    quick = args.platform == "cpu"
    budget = args.budget or (900.0 if quick else 470.0)
    start = time.monotonic()
    deadline = start + budget
    device = "cuda" if args.platform == "gpu" else "cpu"
    if args.platform == "gpu" and (not torch.cuda.is_available() or jax.devices()[0].platform != "gpu"):
        print(f"no GPU: torch.cuda.is_available() = {torch.cuda.is_available()}, jax's devices "
              f"{jax.devices()}; on a CPU machine run --platform cpu", file=sys.stderr)
        return 2

    def log(msg):
        print(f"[{time.monotonic() - start:5.0f} s] {msg}", flush=True)

    cstorch.backends.csx.performance.progress = False
    backend = cstorch.backend("CSX")
    card = _device_name(device)
    log(f"{card}; jax devices {jax.devices()}")
    lines = [f"## Device check: {card}", "",
             f"{'Dry run at tiny sizes on CPU' if quick else 'On ' + card}, `python -m benchmarks.device_check"
             f"{' --platform cpu' if quick else ''}`. {versions()}.", ""]
    log("1. workloads")
    lines += ["| workload | dtype | eager | torch.compile | cstorch |", "|---|---|---|---|---|",
              *workload_rows(args.workloads.split(","), quick, device, backend, deadline - 0.45 * budget, log), ""]
    log("2. GPT-1B in bfloat16")
    lines += big_gpt(quick, device, backend, log) + [""]
    log("3. tests")
    summary = run_tests(args.platform, quick, deadline - time.monotonic(), log)
    lines += [f"Tests ({', '.join(TESTS)}) with CSX on the device: {summary}", ""]
    out = args.out or DEFAULT_OUT[args.platform]
    replace_section(out, "device-check", "\n".join(lines))
    print("\n".join(lines))
    log(f"written to {out} (section device-check)")
    bad = "failed" in "\n".join(lines) or "stopped" in summary
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
