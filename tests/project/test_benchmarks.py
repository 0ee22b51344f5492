"""The step-overhead, sharding, start-up and cold-start benchmarks run (tiny sizes) and report what they
measure; no timing asserts."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_step_overhead_quick(tmp_path):
    """Every model's rows and ratio line, and with --out its table as a section of the file
    (next to what the file held)."""
    md = tmp_path / "RESULTS.md"
    md.write_text("# suite results\n")
    proc = subprocess.run([sys.executable, "-m", "benchmarks.step_overhead", "--quick", "--out", str(md)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    out = proc.stdout
    assert proc.returncode == 0, f"stdout:\n{out}\nstderr:\n{proc.stderr}"
    for model in ("MNIST", "MLP", "GPT"):
        for impl in ("cstorch", "jax.jit"):
            assert re.search(rf"^{model}\s+{impl}\s+\d", out, re.M), out
        assert re.search(rf"^{model}\s+ratio cstorch/jax \(median\): \d+\.\d+x, cstorch - jax.jit per step "
                         rf"\(median difference\): [+-]\d+ us .*\(OK,", out, re.M), out
    text = md.read_text()
    assert text.startswith("# suite results\n") and "<!-- section: step-overhead -->" in text
    assert [m.group(1) for m in re.finditer(r"^\| (\w+) .*\| [+-]\d+ \|", text, re.M)] == ["MNIST", "MLP", "GPT"], text


def test_import_time_records_its_section(tmp_path):
    """`benchmarks.import_time --rounds 1 --fit <yaml>`: a row for each case (`cszoo fit` of
    the digits example to its model built the fourth), the ratio and the load average,
    printed and, with --out, as the start-up section of the file."""
    md = tmp_path / "RESULTS.md"
    md.write_text("# suite results\n")
    proc = subprocess.run([sys.executable, "-m", "benchmarks.import_time", "--rounds", "1", "--out", str(md),
                           "--fit", "examples/configs/digits.yaml"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    for text in (proc.stdout, md.read_text()):
        rows = re.findall(r"^\| `([^`]+)` \| \d+\.\d{3} \| \d+\.\d{3} \| \d+\.\d{3} \|$", text, re.M)
        assert rows == ["import torch, jax", "import cerebras.pytorch", "cstorch --help",
                        "cszoo fit digits.yaml to the model built"], text
        assert re.search(r"takes \d+\.\d\dx the time of `import torch, jax`", text), text
        assert re.search(r"`cszoo fit digits.yaml to the model built`: \d+\.\d\d s, from the process's start", text)
        assert re.search(r"load average \(1/5/15 min\) [\d.]+/[\d.]+/[\d.]+ before", text), text
    assert md.read_text().startswith("# suite results\n") and "<!-- section: start-up -->" in md.read_text()


def test_run_length_quick_records_its_section(tmp_path):
    """`benchmarks.run_length --quick` on MNIST: cstorch's and the scan's cost per step and
    per run, each run length's medians, the losses checked; its section lands in the
    markdown file next to what was there."""
    md = tmp_path / "RESULTS.md"
    md.write_text("# suite results\n")
    proc = subprocess.run([sys.executable, "-m", "benchmarks.run_length", "--quick", "--workloads", "mnist",
                           "--out", str(md)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    text = md.read_text()
    assert text.startswith("# suite results\n") and "<!-- section: run-length -->" in text
    num = r"-?\d+\.\d+"
    assert re.search(rf"^\| MNIST \| {num} \| {num} \| {num} \| {num} \| {num} \| ", text, re.M), text
    rows = re.findall(r"^\| MNIST \| ([a-z. ]+) \| [\d.]+ \| [\d.]+ \|$", text, re.M)
    assert rows == ["cstorch pipelined", "jax.scan pipelined"], text
    assert re.search(r"MNIST \d\.\de[-+]\d+ over \d+ steps \(tolerance", text), text


def test_sharding_quick_records_its_section(tmp_path):
    """`benchmarks.sharding --quick` on 2 host devices: both modes, the sharded one with
    half the state per device, the same loss; its section lands in the markdown file
    next to what was there."""
    out = tmp_path / "RESULTS.md"
    out.write_text("# suite results\n")
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    proc = subprocess.run([sys.executable, "-m", "benchmarks.sharding", "--quick", "--devices", "2", "--out", str(out)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    rows = {m.group(1): float(m.group(2)) for m in re.finditer(r"^N=2 (\w+)\s+state\s+([\d.]+) MiB", proc.stdout, re.M)}
    assert rows.keys() == {"replicated", "sharded"}, proc.stdout
    assert rows["sharded"] < 0.6 * rows["replicated"], rows
    text = out.read_text()
    assert text.startswith("# suite results\n") and "<!-- section: sharding -->" in text
    assert re.search(r"^\| 2 \| sharded \|", text, re.M), text


def test_owned_sections_are_replaced_and_kept(tmp_path):
    from benchmarks.sections import kept_sections, replace_section

    path = tmp_path / "RESULTS.md"
    path.write_text("# suite\n")
    replace_section(path, "sharding", "first")
    replace_section(path, "other", "x")
    replace_section(path, "sharding", "second")
    text = path.read_text()
    assert text.count("<!-- section: sharding -->") == 1 and "second" in text and "first" not in text
    assert kept_sections(path) == ["<!-- section: sharding -->\nsecond\n<!-- end section: sharding -->",
                                   "<!-- section: other -->\nx\n<!-- end section: other -->"]
    assert kept_sections(tmp_path / "missing.md") == []


def test_device_check_dry_run_writes_its_section(tmp_path):
    """`benchmarks.device_check --platform cpu`: every part of the GPU check at tiny sizes on
    CPU (one workload here), its section naming the machine, no part failed."""
    out = tmp_path / "RESULTS.md"
    proc = subprocess.run([sys.executable, "-m", "benchmarks.device_check", "--platform", "cpu", "--workloads", "mlp",
                           "--out", str(out)], capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    text = out.read_text()
    assert "<!-- section: device-check -->" in text and "## Device check: " in text
    for dtype in ("float32", "bfloat16"):
        row = re.search(rf"^\| MLP \| {dtype} \|(.*)$", text, re.M)
        assert row and row.group(1).count(" ms (") == 3, text  # eager, torch.compile, cstorch
    assert re.search(r"^\| cstorch \| [\d.]+ ms \|", text, re.M) and re.search(r"^\| eager \| [\d.]+ ms \|", text, re.M)
    assert re.search(r"with CSX on the device: \d+ passed", text), text


def test_cold_start_cases_compute_the_same_first_loss_and_the_table_gives_the_ratios():
    """benchmarks.cold_start: cstorch's first step and the hand-written jax ones (unrolled and
    lax.scan over stacked blocks) reach the same loss, from the same weights and batch; the
    table says each phase and the ratios. No time is asserted."""
    from benchmarks import cold_start

    results = {(impl, 2): cold_start._in_fresh_process(impl, 2, "") for impl in ("cstorch", "jax.jit", "jax.scan")}
    for r in results.values():
        assert "error" not in r, r
    want = results[("jax.jit", 2)]["loss"]
    assert results[("cstorch", 2)]["loss"] == pytest.approx(want, rel=1e-5)
    assert results[("jax.scan", 2)]["loss"] == pytest.approx(want, rel=1e-5)
    assert set(results[("cstorch", 2)]["phases"]) == {"capture", "lowering", "compile", "run"}
    lines = cold_start.table(results, [2], ["cstorch", "jax.jit", "jax.scan"])
    ratio = results[("cstorch", 2)]["first_step"] / results[("jax.jit", 2)]["first_step"]
    assert lines[2].startswith("| 2 | ") and lines[2].endswith(f"| {ratio:.2f}x |")


def test_cold_start_with_the_layers_state_stacked_reaches_the_same_first_loss():
    """benchmarks.cold_start's `cstorch.stacked` case (4 layers: one run of repeated layers,
    its state stacked) reaches the plain cstorch case's first loss, within rounding (the
    run is a loop body there); the table's last line relates its deepest first step to
    cstorch's shallowest."""
    from benchmarks import cold_start

    results = {(impl, n): cold_start._in_fresh_process(impl, n, "")
               for impl, n in (("cstorch", 2), ("cstorch", 4), ("cstorch.stacked", 4))}
    for r in results.values():
        assert "error" not in r, r
    assert results[("cstorch.stacked", 4)]["loss"] == pytest.approx(results[("cstorch", 4)]["loss"], rel=1e-6)
    lines = cold_start.table(results, [2, 4], ["cstorch", "cstorch.stacked"])
    ratio = results[("cstorch.stacked", 4)]["first_step"] / results[("cstorch", 2)]["first_step"]
    assert lines[-1] == (f"With the repeated layers' state stacked, the first step at 4 layers is {ratio:.1f}x "
                         "cstorch's first step at 2 layers.")


ZOO_EAGER_LOSS = """
import sys
from pathlib import Path
from benchmarks import cold_start
model, data = cold_start._zoo_model_and_data(Path(sys.argv[1]))
print(float(model(data)))
"""


@pytest.mark.slow
def test_the_model_zoo_case_steps_the_real_model_zoo_model_of_its_yaml():
    """benchmarks.cold_start's Model Zoo row: the real Model Zoo's GPT-3 of its published YAML,
    all its layers, widths shrunk; cstorch's first loss equals eager torch's on the same
    model and batch, and the row names the YAML and its depth. No time is asserted."""
    import yaml

    from benchmarks import cold_start

    why = cold_start.zoo_missing(cold_start.ZOO_SRC)
    if why:
        pytest.skip(why)
    src = cold_start.ZOO_SRC
    published = yaml.safe_load((src / cold_start.ZOO_YAML).read_text())["trainer"]["init"]["model"]
    params = cold_start.zoo_params(src)
    assert params["num_hidden_layers"] == published["num_hidden_layers"] > 2
    assert params["hidden_size"] < published["hidden_size"]
    got = cold_start._in_fresh_process("cstorch", src, "")
    assert "error" not in got, got
    env = dict(os.environ, PYTHONPATH=cold_start.zoo_pythonpath(src))
    eager = subprocess.run([sys.executable, "-c", ZOO_EAGER_LOSS, str(src)], capture_output=True, text=True,
                           timeout=300, cwd=ROOT, env=env)
    assert eager.returncode == 0, eager.stderr[-3000:]
    assert got["loss"] == pytest.approx(float(eager.stdout.split()[-1]), rel=1e-5)
    (row,) = cold_start.table({("cstorch", "zoo"): got}, [], ["cstorch"], params["num_hidden_layers"])[2:]
    assert row.startswith(f"| {published['num_hidden_layers']}, Model Zoo gpt3 `Cerebras_GPT/1p3b.yaml` | ")
