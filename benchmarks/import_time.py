"""Start-up: how long `import cerebras.pytorch` takes against `import torch, jax`, and
how long `cstorch --help` takes, each in fresh processes.

    python -m benchmarks.import_time                               # 9 alternating rounds
    python -m benchmarks.import_time --rounds 15 --out benchmarks/RESULTS.md   # also record it there

Each round starts one process per case, in alternating order (one round forwards, the
next backwards, so that neither case always runs after the other): the two imports are
timed inside their process (from before the import statement to after it; the
interpreter's own start is not counted), `cstorch --help` as the whole process, started
as its console script starts (`cstorch_cli.main`). One untimed round first warms the
file cache. It prints the median, min and max of each, the ratio of the import medians
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


def run(rounds: int) -> tuple[dict[str, list[float]], tuple, tuple]:
    """{case: seconds per round} after one untimed round, and the load averages before and after."""
    names = list(CASES)
    for name in names:
        measure(name)
    load_before = os.getloadavg()
    times: dict[str, list[float]] = {name: [] for name in names}
    for i in range(rounds):
        for name in (names if i % 2 == 0 else names[::-1]):
            times[name].append(measure(name))
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
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=9, help="timed rounds (default 9)")
    p.add_argument("--out", type=Path, default=None, help="record the table as the 'start-up' section of this file")
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error("--rounds must be >= 1")
    text = report(*run(args.rounds), args.rounds)
    print(text)
    if args.out is not None:
        from .sections import replace_section

        replace_section(args.out, "start-up", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
