"""Fixtures of the project tests: the documentation site, built once per test run."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def site(tmp_path_factory, request):
    """The site built once per test run with `mkdocs build --strict` into a temporary folder
    (shared by the xdist workers through a lock), and the build's return code and log."""
    from filelock import FileLock

    in_xdist_worker = hasattr(request.config, "workerinput")
    shared = tmp_path_factory.getbasetemp().parent if in_xdist_worker else tmp_path_factory.getbasetemp()
    out, log = shared / "docs-site", shared / "docs-site.json"
    with FileLock(str(shared / "docs-site.lock")):
        if not log.is_file():
            proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                                  capture_output=True, text=True, timeout=600, cwd=ROOT,
                                  env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
            log.write_text(json.dumps([proc.returncode, proc.stderr]))
    returncode, stderr = json.loads(log.read_text())
    return out, returncode, stderr
