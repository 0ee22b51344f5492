"""The notebooks in `notebooks/` run headless, top to bottom, and are committed stripped.

Each notebook is executed with nbclient in a fresh kernel whose working directory is
`notebooks/` (as when it is opened in Jupyter). The kernel is this interpreter
(`sys.executable`): the test writes a `python3` kernelspec pointing to it into a temporary
folder and asks only that folder, so a `python3` kernel installed elsewhere on the machine
(another Python, another environment) is never picked up. The notebooks assert what they
show; a failing cell fails its test with the cell's source and the error.
"""
from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError
from traitlets import default

pytestmark = pytest.mark.usefixtures("shared_compile_cache")  # its scripts compile once per run (conftest)

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
NOTEBOOK_NAMES = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
KERNEL_NAME = "python3"  # the name the notebooks' metadata asks for
CELL_TIMEOUT_S = 300
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@pytest.fixture(scope="module")
def kernel_specs(tmp_path_factory) -> KernelSpecManager:
    """A kernelspec manager that knows one kernel, `python3` = this interpreter."""
    kernels = tmp_path_factory.mktemp("kernels")
    spec_dir = kernels / KERNEL_NAME
    spec_dir.mkdir()
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (tests)",
        "language": "python",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    return KernelSpecManager(kernel_dirs=[str(kernels)])


@pytest.fixture(scope="module")
def kernel_manager_class(kernel_specs):
    """nbclient builds (and afterwards shuts down) its kernel manager from this class: one
    that looks kernels up in `kernel_specs` only."""

    class ThisInterpreterKernelManager(AsyncKernelManager):
        @default("kernel_spec_manager")
        def _only_the_test_kernelspec(self):
            return kernel_specs

    return ThisInterpreterKernelManager


def _failure_report(name: str, nb, index: int | None, exc: BaseException) -> str:
    if index is None:
        return f"{name}: {type(exc).__name__} before any cell ran: {exc}"
    cell = nb.cells[index]
    lines = [f"{name}, cell {index} (counting from 0) failed ({type(exc).__name__}):", "----- cell source -----", cell.source,
             "----- error -----"]
    errors = [out for out in cell.get("outputs", []) if out.get("output_type") == "error"]
    if errors:
        err = errors[-1]
        lines.append(_ANSI.sub("", "\n".join(err.get("traceback", []))) or f"{err['ename']}: {err['evalue']}")
    else:  # a timeout or a dead kernel: no error output
        lines.append(_ANSI.sub("", str(exc)))
    streams = "".join(out.get("text", "") for out in cell.get("outputs", []) if out.get("output_type") == "stream")
    if streams:
        lines += ["----- cell output -----", streams[-4000:]]
    return "\n".join(lines)


def test_kernelspec_is_this_interpreter(kernel_specs):
    spec = kernel_specs.get_kernel_spec(KERNEL_NAME)
    assert spec.argv[0] == sys.executable
    assert list(kernel_specs.find_kernel_specs()) == [KERNEL_NAME]


@pytest.mark.parametrize("name", NOTEBOOK_NAMES)
def test_notebook_runs(name, kernel_manager_class):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    # The kernel must run this interpreter, in notebooks/: checked by an extra cell at the end.
    check = nbformat.v4.new_code_cell(
        "import os, sys\n"
        f"assert sys.executable == {sys.executable!r}, sys.executable\n"
        f"assert os.getcwd() == {str(NOTEBOOKS)!r}, os.getcwd()"
    )
    nb.cells.append(check)
    current: dict = {"index": None}
    client = NotebookClient(
        nb,
        kernel_name=KERNEL_NAME,
        kernel_manager_class=kernel_manager_class,
        timeout=CELL_TIMEOUT_S,
        allow_errors=False,
        resources={"metadata": {"path": str(NOTEBOOKS)}},
        on_cell_execute=lambda cell, cell_index: current.update(index=cell_index),
    )
    start = time.perf_counter()
    failure = None
    try:
        client.execute()
    except (CellExecutionError, CellTimeoutError, RuntimeError) as exc:
        failure = _failure_report(name, nb, current["index"], exc)
    if failure:  # outside the except block: no chained, colour-coded copy of the same error
        pytest.fail(failure, pytrace=False)
    print(f"{name}: {time.perf_counter() - start:.1f} s")
    assert current["index"] == len(nb.cells) - 1  # every cell ran, the check cell last


def test_notebooks_are_committed_stripped():
    """No outputs, no execution counts, no execution timing metadata: the committed files
    hold only what a reader should review."""
    assert NOTEBOOK_NAMES, f"no notebooks in {NOTEBOOKS}"
    dirty = []
    for name in NOTEBOOK_NAMES:
        nb = nbformat.read(NOTEBOOKS / name, as_version=4)
        nbformat.validate(nb)
        assert nb.metadata.get("kernelspec", {}).get("name") == KERNEL_NAME, name
        for i, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            if cell.get("outputs"):
                dirty.append(f"{name} cell {i}: has outputs")
            if cell.get("execution_count") is not None:
                dirty.append(f"{name} cell {i}: execution_count {cell.execution_count}")
            if "execution" in cell.get("metadata", {}):
                dirty.append(f"{name} cell {i}: execution timing metadata")
    assert not dirty, "notebooks are not stripped (python notebooks/strip.py):\n" + "\n".join(dirty)


def test_the_strip_script_removes_outputs_counts_and_timing(tmp_path):
    """`python notebooks/strip.py a.ipynb` turns a run notebook back into the committed one."""
    import subprocess

    name = NOTEBOOK_NAMES[0]
    committed = nbformat.read(NOTEBOOKS / name, as_version=4)
    run = nbformat.read(NOTEBOOKS / name, as_version=4)
    code = [c for c in run.cells if c.cell_type == "code"]
    for i, cell in enumerate(code):
        cell.execution_count = i + 1
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"cell {i}\n")]
        cell.metadata["execution"] = {"iopub.status.busy": "2026-01-01T00:00:00Z"}
    path = tmp_path / name
    nbformat.write(run, path)
    proc = subprocess.run([sys.executable, str(NOTEBOOKS / "strip.py"), str(path)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and "stripped" in proc.stdout, proc.stderr
    assert nbformat.read(path, as_version=4).cells == committed.cells
