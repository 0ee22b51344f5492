"""`.ci/timings.py`: the report of one `.ci/run` and the record the suite is scheduled by."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _timings():
    spec = importlib.util.spec_from_file_location("ci_timings", ROOT / ".ci" / "timings.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
 <testcase classname="tests.lowering.test_opinfo" name="test_opinfo_forward[sin]@opinfo:sin" time="2.5"/>
 <testcase classname="tests.lowering.test_opinfo" name="test_opinfo_grad[sin]@opinfo:sin" time="0.3"/>
 <testcase classname="tests.run.test_windows.TestWindows" name="test_one[a@b]" time="4.0"/>
 <testcase classname="tests.test_startup" name="test_import" time="1.0"/>
</testsuite></testsuites>
"""


def test_report_and_record_of_a_run(tmp_path, monkeypatch, capsys):
    timings = _timings()
    (tmp_path / "junit-pinned.xml").write_text(JUNIT)
    (tmp_path / "phases.txt").write_text("install 60\npinned-suite 600\ntotal 700\n")
    times = timings.test_times(tmp_path / "junit-pinned.xml")
    # xdist's "@group" suffix goes; an "@" inside the parameters stays; a class becomes a "::" part
    assert times == {"tests/lowering/test_opinfo.py::test_opinfo_forward[sin]": 2.5,
                     "tests/lowering/test_opinfo.py::test_opinfo_grad[sin]": 0.3,
                     "tests/run/test_windows.py::TestWindows::test_one[a@b]": 4.0,
                     "tests/test_startup.py::test_import": 1.0}
    record_path = tmp_path / "timings.json"
    monkeypatch.setattr(timings, "RECORD", record_path)
    monkeypatch.setattr(timings, "ROOT", tmp_path)
    timings.update(tmp_path)
    out = capsys.readouterr().out
    assert "pinned-suite                     600  (10.0 min)" in out
    assert "4 tests, 8 s of test time" in out
    record = json.loads(record_path.read_text())
    assert record["phases"] == {"install": 60.0, "pinned-suite": 600.0, "total": 700.0}
    assert record["directories"] == {"tests/run/": 4.0, "tests/lowering/": 2.8, "tests/ (top level)": 1.0}
    assert list(record["slowest_files"]) == ["tests/run/test_windows.py", "tests/lowering/test_opinfo.py",
                                             "tests/test_startup.py"]
    assert set(record["tests"]) == {"tests/lowering/test_opinfo.py::test_opinfo_forward[sin]",
                                    "tests/run/test_windows.py::TestWindows::test_one[a@b]",
                                    "tests/test_startup.py::test_import"}  # 0.3 s is under KEEP_SECONDS
    assert record["machine"].endswith(" cores") and record["machine"] != " cores"
