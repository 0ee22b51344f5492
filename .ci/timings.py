"""Where CI's time goes: a report of one `.ci/run`, and the record the suite is scheduled by.

    python .ci/timings.py report DIR            # the phases and the 15 slowest test files
    python .ci/timings.py update DIR            # also write tests/timings.json from that run

DIR is the folder `.ci/run` writes its record to (`.ci-stacks/`): `phases.txt` (one line
per phase: name, seconds) and one JUnit XML file per stack (`junit-<stack>.xml`, pytest's
`--junitxml`). `tests/timings.json` keeps, from the pinned stack's file, the seconds of every
test of 0.5 s or more (tests/scheduling.py starts the longest first), the seconds per test
directory, the 15 slowest files and the phases; docs/contributing.md shows them.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "tests" / "timings.json"
KEEP_SECONDS = 0.5  # tests at least this long are kept by name in the record
SLOWEST = 15


def test_times(junit: Path) -> dict[str, float]:
    """{test id: seconds} from a JUnit XML file of pytest (ids as pytest prints them,
    without xdist's `@group` suffix)."""
    times: dict[str, float] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        module, name = case.get("classname", ""), case.get("name", "")
        parts = module.split(".")
        # pytest writes "tests.lowering.test_opinfo" (+ ".Class" for methods): the file is the lower-case prefix
        n = next((i for i, p in enumerate(parts) if p[:1].isupper()), len(parts))
        at = name.rfind("@")  # xdist's loadgroup appends "@group" after the last "]"
        name = name[:at] if at > name.rfind("]") else name
        nodeid = "/".join(parts[:n]) + ".py::" + "::".join(parts[n:] + [name])
        times[nodeid] = times.get(nodeid, 0.0) + float(case.get("time") or 0)
    return times


def directory_of(nodeid: str) -> str:
    path = nodeid.split("::")[0].split("/")
    return "/".join(path[:2]) + "/" if len(path) > 2 else f"{path[0]}/ (top level)"


def summarize(times: dict[str, float]) -> dict:
    files, dirs = Counter(), Counter()
    for nodeid, t in times.items():
        files[nodeid.split("::")[0]] += t
        dirs[directory_of(nodeid)] += t
    return {
        "tests_count": len(times),
        "test_seconds": round(sum(times.values()), 1),
        "directories": {d: round(t, 1) for d, t in dirs.most_common()},
        "slowest_files": {f: round(t, 1) for f, t in files.most_common(SLOWEST)},
    }


def read_phases(folder: Path) -> dict[str, float]:
    path = folder / "phases.txt"
    if not path.is_file():
        return {}
    return {name: float(s) for name, s in (line.rsplit(maxsplit=1) for line in path.read_text().splitlines() if line)}


def report(folder: Path) -> dict:
    phases = read_phases(folder)
    print("CI phases (seconds):")
    for name, s in phases.items():
        print(f"  {name:<28} {s:7.0f}  ({s / 60:.1f} min)")
    pinned = folder / "junit-pinned.xml"
    summary = {}
    if pinned.is_file():
        summary = summarize(test_times(pinned))
        print(f"\nThe pinned suite: {summary['tests_count']} tests, {summary['test_seconds']:.0f} s of test time "
              f"(over its workers). The {SLOWEST} slowest files:")
        for f, s in summary["slowest_files"].items():
            print(f"  {s:7.1f} s  {f}")
    return {"phases": phases, **summary, "pinned": pinned}


def machine() -> str:
    """The machine a run was recorded on: its CPU model and core count (the same tests take
    1.7x as long on one 2-core host as on another: the record says which it was)."""
    model = next((line.split(":", 1)[1].strip() for line in _cpuinfo().splitlines()
                  if line.lower().startswith("model name")), platform.processor() or platform.machine())
    return f"{model}, {os.cpu_count()} cores"


def _cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return ""


def update(folder: Path) -> None:
    info = report(folder)
    times = test_times(info.pop("pinned"))
    record = {
        "recorded": time.strftime("%Y-%m-%d"),
        "machine": machine(),
        **info,
        "tests": {k: round(v, 2) for k, v in sorted(times.items()) if v >= KEEP_SECONDS},
    }
    RECORD.write_text(json.dumps(record, indent=1) + "\n")
    print(f"\nwritten: {RECORD.relative_to(ROOT)}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("action", choices=("report", "update"))
    p.add_argument("folder", type=Path, help="the folder .ci/run writes its record to (.ci-stacks)")
    args = p.parse_args(argv)
    report(args.folder) if args.action == "report" else update(args.folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
