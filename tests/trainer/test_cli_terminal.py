"""What `cstorch fit` shows in a real terminal: the command runs in a pseudo-terminal (so
its progress bar is on, as for a user) and its output is replayed on an emulated screen.

On the screen: the progress bar and the log lines never share a line (a log line starts
at column 0 and holds no bar; a bar line holds no log text), the run names its model_dir
and where its checkpoints, metrics (CSV) and TensorBoard events go before it starts, and
it ends with a summary (steps, time, final loss, the last checkpoint). Afterwards no
empty folder is left (no `cerebras_logs/` in the working directory).
"""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DIGITS = ROOT / "examples" / "configs" / "digits.yaml"
COLUMNS, ROWS = 150, 50

pexpect = pytest.importorskip("pexpect", reason="pexpect drives the command in a pseudo-terminal")

_CSI = re.compile(r"\x1b\[(\d*)([A-Za-z])")


def screen(output: str, width: int) -> list[str]:
    """The rows a terminal `width` columns wide shows after `output`: carriage return,
    line feed, backspace, cursor up (ESC [ n A) and erase line (ESC [ K) are obeyed, a
    character written past the last column wraps to the next row, other escapes are
    dropped."""
    rows, r, c, i = [[]], 0, 0, 0
    while i < len(output):
        ch = output[i]
        if ch == "\x1b":
            m = _CSI.match(output, i)
            if m:
                if m[2] == "A":
                    r = max(0, r - int(m[1] or 1))
                elif m[2] == "K":
                    del rows[r][c:]
                i = m.end()
                continue
        elif ch == "\r":
            c = 0
        elif ch == "\n":
            r += 1
        elif ch == "\b":
            c = max(0, c - 1)
        elif ch.isprintable():
            if c >= width:
                r, c = r + 1, 0
            while len(rows) <= r:
                rows.append([])
            row = rows[r]
            row.extend(" " * (c + 1 - len(row)))
            row[c] = ch
            c += 1
        while len(rows) <= r:
            rows.append([])
        i += 1
    return ["".join(row).rstrip() for row in rows]


_LOG = re.compile(r"(DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.]+:")
_BAR = re.compile(r"\d+/\d+ \[\d")  # tqdm's "n/total [elapsed"


def collisions(rows: list[str], bar_desc: str) -> list[str]:
    """The rows where a log line and a progress bar share a line: a log record that does
    not start at column 0 or shares its row with a bar, a warning on a bar's row, a bar
    whose row does not start with the bar (`bar_desc`) or holds anything after the bar's
    closing "]" (text written after a full-width bar wraps to the next row: the first
    characters stay behind on the bar's row)."""
    bad = []
    for row in rows:
        log, bar = _LOG.search(row), _BAR.search(row)
        if (log and (log.start() > 0 or bar)) or (bar and "Warning: " in row) \
                or (bar and not (row.startswith(bar_desc) and row.endswith("]"))):
            bad.append(row)
    return bad


def test_the_screen_and_the_collision_finder_see_what_a_terminal_shows():
    bar = "train:  17%|##        | 10/60 [00:03<00:07,  6.66step/s]"
    collided = "\r" + bar + "INFO cstorch.trainer: | step 10 | loss=0.78\r\n"
    assert screen(collided, 120) == [bar + "INFO cstorch.trainer: | step 10 | loss=0.78", ""]
    assert collisions(screen(collided, 120), "train:") == [bar + "INFO cstorch.trainer: | step 10 | loss=0.78"]
    full = "train:  17%|" + "#" * 73 + "| 10/60 [00:03<00:07,  6.66step/s]"  # 119 columns of 120
    wrapped = screen("\r" + full + "INFO cstorch.trainer: | step 10\r\n", 120)
    assert wrapped == [full + "I", "NFO cstorch.trainer: | step 10", ""]
    assert collisions(wrapped, "train:") == [full + "I"]
    clean = "\r" + bar + "\r" + " " * 119 + "\rINFO cstorch.trainer: | step 10\r\n\r" + bar
    assert screen(clean, 120) == ["INFO cstorch.trainer: | step 10", bar]
    assert collisions(screen(clean, 120), "train:") == []
    warned = "\r" + bar + "\r\nfile.py:3: UserWarning: careful\r\n"
    assert collisions(screen(warned, 120), "train:") == []
    assert collisions(screen("\r" + bar + " file.py:3: UserWarning: careful\r\n", 120), "train:") != []
    # a long line wraps; a cursor-up rewrites the row above
    assert screen("x" * 130 + "\r\n", 120) == ["x" * 120, "x" * 10, ""]
    assert screen("one\r\ntwo\x1b[A\rONE\x1b[K", 120) == ["ONE", "two"]


def _run_in_terminal(args: list[str], cwd: Path, timeout: int = 240) -> tuple[str, int]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": str(COLUMNS), "LINES": str(ROWS), "TERM": "xterm"}
    env.pop("PYTEST_CURRENT_TEST", None)
    child = pexpect.spawn(sys.executable, args, cwd=str(cwd), env=env, dimensions=(ROWS, COLUMNS),
                          encoding="utf-8", codec_errors="replace", timeout=timeout)
    child.expect(pexpect.EOF)
    child.close()
    return child.before, child.exitstatus


def _empty_folders(top: Path) -> list[str]:
    return sorted(str(Path(d).relative_to(top)) for d, subdirs, files in os.walk(top) if not subdirs and not files)


def test_cstorch_fit_in_a_terminal_keeps_bar_and_logs_apart_and_says_where_everything_goes(tmp_path):
    model_dir = tmp_path / "runs" / "digits"
    # 12 steps: the log step 10 comes while the bar is shown, the last step logs, saves and validates
    output, status = _run_in_terminal(["-m", "cstorch.trainer", "fit", str(DIGITS), "--target_device", "CPU",
                                       "--max_steps", "12", "--eval_steps", "1", "-o", str(model_dir)], tmp_path)
    rows = screen(output, COLUMNS)
    shown = "\n".join(rows)
    assert status == 0, shown
    assert collisions(rows, "train:") == [], shown
    bars = [row for row in rows if _BAR.search(row)]
    assert bars and bars[-1].startswith("train: 100%") and "12/12" in bars[-1], shown

    text = output.replace("\r\n", "\n")  # the logical lines, before the terminal wraps them
    lines = [line.split("\r")[-1] for line in text.split("\n")]
    start = next(i for i, line in enumerate(lines) if "fit: global steps 0 -> 12 on CPU" in line)
    assert f"model_dir {model_dir}" in lines[start], lines[start]
    banner = "\n".join(lines[start:start + 4])
    summary_dir = next(p for p in model_dir.iterdir() if p.is_dir())  # model_dir/<timestamp>
    assert f"checkpoints: {model_dir / 'checkpoint_{step}.mdl'}" in banner, banner
    assert f"metrics (CSV): {summary_dir / 'metrics.csv'}" in banner, banner
    assert f"TensorBoard events: {summary_dir}" in banner, banner
    assert (summary_dir / "metrics.csv").is_file() and list(summary_dir.glob("events.out.tfevents.*"))
    first_bar = next(i for i, line in enumerate(lines) if _BAR.search(line))
    assert first_bar > start, "the banner comes before the bar"

    done = next(i for i, line in enumerate(lines) if "fit done: 12 steps (global step 0 -> 12) in " in line)
    assert re.search(r"in \d+\.\d s, final loss \d\.\d+", lines[done]), lines[done]
    checkpoint = model_dir / "checkpoint_12.mdl"
    assert any(f"last checkpoint: {checkpoint}" in line for line in lines[done:]), "\n".join(lines[done:])
    assert checkpoint.is_file()
    assert done > max(i for i, line in enumerate(lines) if _BAR.search(line)), "the summary comes below the bar"
    assert re.search(r"throughput=\d+\.\d samples/s", text), "a rate is printed with its unit"

    assert not (tmp_path / "cerebras_logs").exists()
    assert _empty_folders(tmp_path) == []


def test_log_records_and_warnings_written_while_a_bar_is_shown_land_above_it(tmp_path):
    """`above_bar` alone (loaded from its file: no cstorch import), with a root handler,
    a logger with its own stderr handler, and a warning, in a terminal."""
    script = tmp_path / "bar.py"
    script.write_text(f"""
import importlib.util, logging, sys, time, warnings
from tqdm import tqdm
spec = importlib.util.spec_from_file_location("console", {str(ROOT / "cstorch" / "utils" / "_console.py")!r})
console = importlib.util.module_from_spec(spec); spec.loader.exec_module(console)
logging.basicConfig(level="INFO", format="%(levelname)s %(name)s: %(message)s")
own = logging.getLogger("own"); own.propagate = False
handler = logging.StreamHandler(sys.stderr); handler.setFormatter(logging.Formatter("WARNING own: %(message)s"))
own.addHandler(handler)
bar = tqdm(total=6, desc="work", dynamic_ncols=True)
with console.above_bar(bar):
    for i in range(6):
        bar.update(1)
        time.sleep(0.05)
        if i == 2:
            logging.getLogger("app").info("half way")
            own.warning("own handler")
            warnings.warn("careful")
    bar.close()
logging.getLogger("app").info("after the bar")
""")
    output, status = _run_in_terminal([str(script)], tmp_path, timeout=60)
    rows = screen(output, COLUMNS)
    shown = "\n".join(rows)
    assert status == 0, shown
    assert collisions(rows, "work:") == [], shown
    for line in ("INFO app: half way", "WARNING own: own handler", "INFO app: after the bar"):
        assert line in rows, shown
    assert any(row.endswith("UserWarning: careful") for row in rows), shown
