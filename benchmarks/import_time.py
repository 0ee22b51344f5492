"""Start-up: how long `import cerebras.pytorch` takes against `import torch, jax`, and
how long `cstorch --help` takes, each in fresh processes.

    python -m benchmarks.import_time                               # 9 alternating rounds
    python -m benchmarks.import_time --rounds 15 --out benchmarks/RESULTS.md   # also record it there
    python -m benchmarks.import_time --fit <params.yaml>           # and `cszoo fit` to its model built

Each round starts one process per case, in alternating order (one round forwards, the
next backwards, so that neither case always runs after the other): the two imports are
timed inside their process (from before the import statement to after it; the
interpreter's own start is not counted), `cstorch --help` as the whole process, started
as its console script starts (`cstorch_cli.main`). One untimed round first warms the
file cache. With `--fit <yaml>` a fourth case starts `cszoo fit <yaml> --target_device CSX`
(with the caller's environment and working directory, so a Model Zoo YAML runs as the
guide says once its PYTHONPATH is exported) and times it from the process's start to its
line announcing the fit (`fit: global steps ...`), which the Trainer logs once the model,
its compiled form and the optimizer are built; the process is stopped there. It prints
the median, min and max of each, the ratio of the import medians
and the machine's load average (`os.getloadavg`) before and after: on a loaded machine
every time grows, and the ratio is what to compare. Nothing here is asserted; the tests
check the structure instead (`tests/project/test_startup.py`: which modules the import loads).
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_TIMED_IMPORT = "import time\nt = time.perf_counter()\n{statement}\nprint(time.perf_counter() - t)\n"
CASES = {
    "import torch, jax": ("import", "import torch, jax"),
    "import cerebras.pytorch": ("import", "import cerebras.pytorch"),
    "cstorch --help": ("process", "import sys\nfrom cstorch_cli import main\nsys.argv[0] = 'cstorch'\n"
                                  "sys.exit(main())\n"),
}


def _env() -> dict:
    """This checkout's code first on the path, whatever is installed."""
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": str(ROOT) + (os.pathsep + path if path else "")}


def measure(case: str) -> float:
    """Seconds of one fresh process's import (or, for the command, of the whole process)."""
    kind, code = CASES[case]
    if kind == "import":
        out = subprocess.run([sys.executable, "-c", _TIMED_IMPORT.format(statement=code)], capture_output=True,
                             text=True, check=True, cwd=ROOT, env=_env())
        return float(out.stdout.strip().splitlines()[-1])
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code, "--help"], capture_output=True, text=True, cwd=ROOT,
                         env=_env())
    seconds = time.perf_counter() - start
    if out.returncode != 0 or "usage: cstorch" not in out.stdout:
        raise RuntimeError(f"cstorch --help failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    return seconds


#: what the Trainer logs when a fit starts, after building the model and the optimizer
FIT_LINE = "fit: global steps"
_CSZOO = "import sys\nfrom cstorch_cli import main\nsys.argv[0] = 'cszoo'\nsys.exit(main())\n"


def fit_case(yaml: Path) -> str:
    return f"cszoo fit {yaml.name} to the model built"


def measure_fit(yaml: Path) -> float:
    """Seconds from starting `cszoo fit <yaml> --target_device CSX` (a fresh model_dir) to
    its line announcing the fit (module docstring); the process is stopped there."""
    with tempfile.TemporaryDirectory() as model_dir:
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", _CSZOO, "fit", str(yaml), "--target_device", "CSX",
                                 "--model_dir", model_dir], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, env={**_env(), "PYTHONUNBUFFERED": "1"})
        seen = []
        try:
            for line in proc.stdout:
                if FIT_LINE in line:
                    return time.perf_counter() - start
                seen.append(line)
        finally:
            proc.kill()
            proc.wait()
    raise RuntimeError(f"cszoo fit {yaml} exited {proc.returncode} before logging {FIT_LINE!r}:\n"
                       + "".join(seen[-40:]))


def run(rounds: int, fit: Path | None = None) -> tuple[dict[str, list[float]], tuple, tuple]:
    """{case: seconds per round} after one untimed round, and the load averages before and
    after; with `fit`, `cszoo fit <fit>` to its model built as a fourth case."""
    measures = {name: (lambda name=name: measure(name)) for name in CASES}
    if fit is not None:
        measures[fit_case(fit)] = lambda: measure_fit(fit)
    names = list(measures)
    for name in names:
        measures[name]()
    load_before = os.getloadavg()
    times: dict[str, list[float]] = {name: [] for name in names}
    for i in range(rounds):
        for name in (names if i % 2 == 0 else names[::-1]):
            times[name].append(measures[name]())
    return times, load_before, os.getloadavg()


def _versions() -> str:
    code = "import torch, jax; print(torch.__version__, jax.__version__)"
    torch_v, jax_v = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                    check=True).stdout.split()
    return f"Python {platform.python_version()}, torch {torch_v}, jax {jax_v}"


def report(times: dict[str, list[float]], load_before: tuple, load_after: tuple, rounds: int) -> str:
    medians = {name: statistics.median(xs) for name, xs in times.items()}
    ratio = medians["import cerebras.pytorch"] / medians["import torch, jax"]
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load = lambda la: "/".join(f"{x:.2f}" for x in la)  # noqa: E731
    lines = [
        "## Start-up: `import cerebras.pytorch` and `cstorch --help`", "",
        f"Written by `python -m benchmarks.import_time` on {when} ({os.cpu_count()} CPU cores, "
        f"{platform.platform()}; {_versions()}): {rounds} alternating rounds of fresh processes after one "
        f"untimed round; load average (1/5/15 min) {load(load_before)} before, {load(load_after)} after.", "",
        "| what | median s | min s | max s |", "|---|---:|---:|---:|",
    ]
    lines += [f"| `{name}` | {medians[name]:.3f} | {min(xs):.3f} | {max(xs):.3f} |" for name, xs in times.items()]
    lines += ["", f"`import cerebras.pytorch` takes {ratio:.2f}x the time of `import torch, jax` (medians; the goal "
                  f"is at most 1.3x); `cstorch --help` {medians['cstorch --help']:.2f} s (the goal: under 1 s)."]
    fits = [name for name in times if name not in CASES]
    lines += [f"`{name}`: {medians[name]:.2f} s, from the process's start to its `{FIT_LINE}` line (the goal: "
              f"at most 5 s)." for name in fits]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=9, help="timed rounds (default 9)")
    p.add_argument("--out", type=Path, default=None, help="record the table as the 'start-up' section of this file")
    p.add_argument("--fit", type=Path, default=None, metavar="YAML",
                   help="also time `cszoo fit YAML --target_device CSX` to its model built (run from where the "
                        "YAML's relative paths hold, with the Model Zoo's PYTHONPATH exported)")
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error("--rounds must be >= 1")
    if args.fit is not None and not args.fit.is_file():
        p.error(f"--fit {args.fit}: no such file")
    text = report(*run(args.rounds, args.fit and args.fit.resolve()), args.rounds)
    print(text)
    if args.out is not None:
        from .sections import replace_section

        replace_section(args.out, "start-up", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
