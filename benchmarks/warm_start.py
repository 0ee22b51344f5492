"""Cold and warm start of one workload's cstorch step, each in its own process.

    python -m benchmarks.warm_start --workload gpt [--quick] --cache-dir DIR

builds the workload, runs its first cstorch CSX step and prints one JSON line: the trace +
compile seconds of that step and whether it came from the persistent compile cache
(`cstorch_jax/compile_cache.py`) under DIR. The suite runs it twice on a fresh folder:
the first process compiles (cold), the second loads what the first stored (warm).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.warm_start")
    p.add_argument("--workload", required=True)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--cache-dir", required=True)
    args = p.parse_args(argv)
    os.environ["CSTORCH_CACHE"] = "1"
    os.environ["CSTORCH_CACHE_DIR"] = args.cache_dir

    import torch

    import cstorch

    from .steps import cstorch_train_step
    from .workloads import BUILDERS

    wl = BUILDERS[args.workload](args.quick)
    torch.manual_seed(0)
    model = wl.build_model()
    backend = cstorch.backend("CSX")
    cstorch.backends.csx.performance.progress = False
    compiled = cstorch.compile(model, backend)
    train_step = cstorch_train_step(compiled, wl.optimizer.cstorch(model.parameters()), wl.torch_loss)

    loader = cstorch.utils.data.DataLoader(lambda: wl.batches[:1])
    for batch in cstorch.utils.data.DataExecutor(loader, num_steps=1):
        loss = float(train_step(*batch))
    prog = train_step.program
    ex = prog.executable
    print(json.dumps({"seconds": prog.trace_seconds + ex.lower_seconds + ex.compile_seconds,
                      "from_cache": ex.from_cache, "loss": loss}))
    return 0


def cold_and_warm(workload: str, quick: bool) -> dict:
    """{"cold": s, "warm": s, "warm_from_cache": bool, "same_loss": bool}: two processes
    on one fresh cache folder (removed afterwards)."""
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory(prefix="cstorch-bench-cache-") as folder:
        runs = []
        for _ in range(2):
            cmd = [sys.executable, "-m", "benchmarks.warm_start", "--workload", workload, "--cache-dir", folder]
            out = subprocess.run(cmd + (["--quick"] if quick else []), capture_output=True, text=True, cwd=root,
                                 timeout=1800)
            if out.returncode != 0:
                raise RuntimeError(f"warm-start run failed: {out.stderr.strip().splitlines()[-1:]}")
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    cold, warm = runs
    return {"cold": cold["seconds"], "warm": warm["seconds"], "warm_from_cache": warm["from_cache"],
            "cold_from_cache": cold["from_cache"], "same_loss": cold["loss"] == warm["loss"]}


if __name__ == "__main__":
    raise SystemExit(main())
