"""The documentation: the site under docs/ builds with `mkdocs build --strict` (a broken link,
a missing reference target or a name that no longer exists fails it) and reads well, the
guides are task pages, every Python code block of README.md and docs/ runs, and the README
stays short. The API reference's checks are in test_reference.py.

Code blocks: the blocks of one page run in order, in one namespace, in a fresh Python
process whose working directory is a temporary folder (one backend per process, as the real
API allows). A block that cannot run here is marked on the line before it with
`<!-- norun: REASON -->`; the reason must be given.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("shared_compile_cache")  # its scripts compile once per run (conftest)

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README_LIMIT = 12 * 1024

NORUN = re.compile(r"^<!--\s*norun:(?P<reason>.*?)-->\s*$")
FENCE_OPEN = re.compile(r"^```(?P<lang>[\w+-]*)\s*$")


@dataclass
class Block:
    """A fenced Python block of a Markdown page: its first code line (1-based), its code and,
    when it is marked not runnable, the stated reason ("" when the marker gives none)."""
    line: int
    code: str
    norun: str | None


def python_blocks(path: Path) -> list[Block]:
    """The top-level ```python blocks of a Markdown file, in order."""
    lines = path.read_text().splitlines()
    blocks, i = [], 0
    while i < len(lines):
        match = FENCE_OPEN.match(lines[i])
        if not match:
            i += 1
            continue
        start, i = i, i + 1
        body = []
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i])
            i += 1
        i += 1  # the closing fence
        if match["lang"] not in ("python", "py"):
            continue
        before = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        marker = NORUN.match(before.strip())
        blocks.append(Block(start + 2, "\n".join(body) + "\n", marker["reason"].strip() if marker else None))
    return blocks


def markdown_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


PAGES_WITH_CODE = [p for p in markdown_pages() if any(b.norun is None for b in python_blocks(p))]

#: runs a page's blocks (JSON on stdin) in one namespace; a failing block is named by its line
RUNNER = r"""
import json, sys, traceback
page, blocks = json.load(sys.stdin)
namespace = {"__name__": "__main__"}
for line, code in blocks:
    try:
        exec(compile(code, f"{page}:{line}", "exec"), namespace)
    except BaseException:
        traceback.print_exc()
        sys.exit(f"the code block of {page} at line {line} failed")
"""


def test_the_block_parser_reads_fences_markers_and_reasons(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("text\n\n```python\na = 1\n```\n\n<!-- norun: needs a GPU -->\n```python\nb = 2\n```\n"
                    "<!-- norun: -->\n\n```python\nc = 3\n```\n```bash\nls\n```\n")
    assert python_blocks(page) == [Block(4, "a = 1\n", None), Block(9, "b = 2\n", "needs a GPU"),
                                   Block(14, "c = 3\n", "")]


def test_the_runner_names_the_failing_block(tmp_path):
    blocks = [(3, "x = 1\n"), (8, "assert x == 2, 'x is 1'\n")]
    proc = subprocess.run([sys.executable, "-c", RUNNER], input=json.dumps(["page.md", blocks]),
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode != 0
    assert "the code block of page.md at line 8 failed" in proc.stderr and "x is 1" in proc.stderr


def test_every_norun_marker_states_its_reason():
    unexplained = [f"{p.relative_to(ROOT)}:{b.line}" for p in markdown_pages() for b in python_blocks(p)
                   if b.norun == ""]
    assert unexplained == [], "a block marked `<!-- norun: -->` must say why it cannot run"


@pytest.mark.parametrize("page", PAGES_WITH_CODE, ids=lambda p: str(p.relative_to(ROOT)))
def test_code_blocks_run(page, tmp_path):
    blocks = [(b.line, b.code) for b in python_blocks(page) if b.norun is None]
    proc = subprocess.run(
        [sys.executable, "-c", RUNNER], input=json.dumps([str(page.relative_to(ROOT)), blocks]),
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"},
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-8000:]}"


def test_the_readme_is_short():
    size = len((ROOT / "README.md").read_bytes())
    assert size <= README_LIMIT, f"README.md is {size} bytes; keep it under {README_LIMIT} and move the rest into docs/"


def _cpu_install_command(page: Path) -> str:
    lines = [line for line in page.read_text().splitlines()
             if line.startswith("pip install") and "download.pytorch.org/whl/cpu" in line]
    assert len(lines) == 1, f"{page.name} shows one CPU install command, found {lines}"
    return lines[0].split("#")[0].strip()


def test_the_readme_and_get_started_give_the_same_cpu_install_command():
    assert _cpu_install_command(ROOT / "README.md") == _cpu_install_command(DOCS / "get-started.md")


def test_the_documented_cpu_install_resolves_torch_to_a_cpu_wheel(tmp_path):
    """The README's command, asked for the pinned torch alone with pip's own settings only
    (no local wheel folder), picks pytorch.org's CPU wheel (a `+cpu` version) on Linux."""
    import platform
    import shlex
    import socket

    if platform.system() != "Linux" or platform.machine() != "x86_64":
        pytest.skip("the +cpu local version is what the CPU index publishes for Linux x86_64")
    try:
        socket.create_connection(("download.pytorch.org", 443), timeout=3).close()
    except OSError as e:
        pytest.skip(f"download.pytorch.org is unreachable from here ({e})")
    words = shlex.split(_cpu_install_command(ROOT / "README.md"))
    index = words[words.index("--extra-index-url") + 1]
    pin = next(line.strip() for line in (ROOT / "constraints.txt").read_text().splitlines()
               if line.startswith("torch=="))
    report = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--isolated", "--dry-run", "--no-deps",
                           "--ignore-installed", "--quiet", "--report", str(report), "--extra-index-url", index, pin],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    versions = [item["metadata"]["version"] for item in json.loads(report.read_text())["install"]]
    assert versions and versions[0].endswith("+cpu"), versions


def test_what_the_readme_commands_create_is_ignored_by_git():
    """The virtual environment of the README's install, the example's checkpoints and the
    example configs' model_dir never show up in `git status`."""
    import shutil

    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a git checkout of the project")
    created = [".venv/bin/python", "venv/bin/python", "mnist_out/run_000/checkpoint_300.mdl",
               "model_dir/digits/checkpoint_60.mdl", "model_dir/digits/20260101_000000/metrics.csv",
               "cerebras_logs/executors/000001/performance.json"]
    proc = subprocess.run(["git", "check-ignore", "--no-index", *created], cwd=ROOT, capture_output=True, text=True)
    assert sorted(proc.stdout.split()) == sorted(created), proc.stdout + proc.stderr
    # the check can fail: a tracked kind of file is not ignored
    kept = subprocess.run(["git", "check-ignore", "--no-index", "README.md", "examples/mnist.py"], cwd=ROOT,
                          capture_output=True, text=True)
    assert kept.stdout.split() == []


def test_the_site_builds_in_strict_mode(site):
    out, returncode, stderr = site
    assert returncode == 0, f"mkdocs build --strict failed:\n{stderr[-8000:]}"
    for page in ["index.html", "get-started/index.html", "reference/cstorch/index.html",
                 "reference/flags/index.html", "reference/cli/index.html", "assets/results.png"]:
        assert (out / page).is_file(), page


_HIDDEN = re.compile(r"<(script|style|pre|code)\b.*?</\1>", re.S)


def _visible_text(html: str) -> str:
    """A page's text as a reader sees it outside code: scripts, styles, code blocks and
    inline code removed, then every tag."""
    return re.sub(r"<[^>]+>", " ", _HIDDEN.sub(" ", html))


def site_problems(out: Path) -> list[str]:
    """What keeps a built site from reading well, page by page: a page without the
    navigation or missing from the search index, an image that is not in the site, a
    `:::` directive or a Markdown table that was not rendered."""
    index = json.loads((out / "search" / "search_index.json").read_text())
    searchable = {doc["location"].split("#")[0] for doc in index["docs"]}
    problems = []
    for page in sorted(out.rglob("*.html")):
        rel = page.relative_to(out).as_posix()
        html = page.read_text()
        if 'class="md-nav md-nav--primary"' not in html:
            problems.append(f"{rel}: no navigation")
        location = rel[: -len("index.html")]
        if rel != "404.html" and location not in searchable:
            problems.append(f"{rel}: not in the search index")
        for src in re.findall(r"<img\b[^>]*\bsrc=\"([^\"]+)\"", html):
            if not re.match(r"(https?:|data:)", src) and not (page.parent / src.split("#")[0]).is_file():
                problems.append(f"{rel}: image {src} is not in the site")
        text = _visible_text(html)
        if ":::" in text:
            problems.append(f"{rel}: an unrendered ':::' directive")
        if re.search(r"\|\s*:?-{3,}:?\s*\|", text):
            problems.append(f"{rel}: an unrendered Markdown table")
    return problems


def test_the_site_problem_finder_reports_each_kind(tmp_path):
    (tmp_path / "search").mkdir()
    (tmp_path / "search" / "search_index.json").write_text(json.dumps({"docs": [{"location": ""}]}))
    nav = '<nav class="md-nav md-nav--primary"></nav>'
    (tmp_path / "index.html").write_text(nav + '<img src="a.png"><p>::: x.y</p><code>::: ok</code>')
    (tmp_path / "page").mkdir()
    (tmp_path / "page" / "index.html").write_text("<p>| a | b |\n|---|---|</p><pre>|---|---|</pre>")
    assert site_problems(tmp_path) == [
        "index.html: image a.png is not in the site", "index.html: an unrendered ':::' directive",
        "page/index.html: no navigation", "page/index.html: not in the search index",
        "page/index.html: an unrendered Markdown table"]


def test_the_built_site_reads_well(site):
    """Every page has the navigation and is in the search index, every image it shows is in
    the site, and no `:::` directive or Markdown table reached the HTML unrendered."""
    out, returncode, _ = site
    assert returncode == 0, "the site did not build"
    assert len(list(out.rglob("*.html"))) > 20
    assert site_problems(out) == []



#: the pages a user reads to get a task done: history and dated figures go to the changelog,
#: the files of the implementation to the architecture and contributing pages
USER_PAGES = [DOCS / "index.md", DOCS / "get-started.md", *sorted((DOCS / "guides").glob("*.md"))]
_INTERNAL_PATH = re.compile(r"(?<![\w/<>.-])(?:cstorch|cstorch_jax|cerebras_pytorch|cerebras|modelzoo|tests|docs)/[\w./-]*")
_DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")
REPEAT_WORDS = 12


def prose(markdown: str) -> str:
    """A Markdown page's text outside fenced blocks (commands may name any file), line for line."""
    lines, fenced = [], False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        lines.append("" if fenced or line.lstrip().startswith("```") else line)
    return "\n".join(lines)


def guide_problems(pages: dict[str, str]) -> list[str]:
    """What keeps user pages (name -> Markdown) from reading as task pages: a file path of the
    implementation or a date in their prose, or a passage of REPEAT_WORDS words or more that
    stands in two paragraphs (of one page or two)."""
    problems, seen = [], {}
    for name, markdown in pages.items():
        text = prose(markdown)
        for number, line in enumerate(text.splitlines(), 1):
            problems += [f"{name}:{number}: internal path {m.group()}" for m in _INTERNAL_PATH.finditer(line)]
            problems += [f"{name}:{number}: date {m.group()}" for m in _DATE.finditer(line)]
        for index, paragraph in enumerate(re.split(r"\n\s*\n", text)):
            words = re.findall(r"[\w'.-]+", paragraph.lower())
            for i in range(len(words) - REPEAT_WORDS + 1):
                passage = " ".join(words[i:i + REPEAT_WORDS])
                first = seen.setdefault(passage, (name, index))
                if first != (name, index):
                    problems.append(f"{name}: repeats {first[0]}: '{passage}'")
                    break
    return problems


def test_the_guide_problem_finder_reports_each_kind():
    sentence = "a run killed with SIGKILL and resumed matches an uninterrupted run bit for bit"
    pages = {"a.md": f"See `cstorch/run/run.py` (measured 2026-11-26).\n\n{sentence}.\n\n"
                     "```bash\npython tests/storage/checkpoint_fuzz.py\n```\n",
             "b.md": f"As said, {sentence}, always. `examples/configs/README.md`, <modelzoo>/src/x.yaml"}
    assert guide_problems(pages) == [
        "a.md:1: internal path cstorch/run/run.py", "a.md:1: date 2026-11-26",
        f"b.md: repeats a.md: '{' '.join(sentence.lower().split()[:REPEAT_WORDS])}'"]


def test_the_guides_are_task_pages():
    """The user pages (home, get started, guides) name no file of the implementation and no
    date in their prose, and say nothing twice: dated figures and history are on the
    changelog page, which the site's navigation holds."""
    pages = {str(p.relative_to(ROOT)): p.read_text() for p in USER_PAGES}
    assert guide_problems(pages) == []
    assert "changelog.md" in (ROOT / "mkdocs.yml").read_text()


def test_the_architecture_walks_the_step_path_the_code_takes():
    """The architecture page's numbered walk through `Run.dispatch` names, in order, the
    calls `Run.dispatch` makes (so the page cannot drift from the code): the first
    backticked `Class.method` of each sub-step after the first (`Run.enter_step`, called
    by the traced step before dispatching) must appear in that order in the method's
    source, and every named class has that method."""
    import inspect

    from cstorch.run import host_edits, interrupts, program, run, window
    from cstorch.run.pending_closures import ClosureRecorder
    from cstorch_jax.runtime import DeviceState

    classes = {"Run": run.Run, "StepProgram": program.StepProgram, "StateWatch": host_edits.StateWatch,
               "SyncOnTouch": host_edits.SyncOnTouch, "RunInterrupts": interrupts.RunInterrupts,
               "DeviceState": DeviceState, "ClosureRecorder": ClosureRecorder, "StepWindow": window.StepWindow}
    text = (ROOT / "docs" / "architecture.md").read_text()
    walk = text[text.index("4. **Every call: the run dispatches.**"):text.index("5. **Back to the host.**")]
    steps = re.findall(r"^\s+\d+\. (.*?)$", walk, re.M)
    named = [re.search(r"`(\w+)\.(\w+)`", step).groups() for step in steps]
    assert named[0] == ("Run", "enter_step") and len(named) == 8, named
    for cls, method in named:
        assert hasattr(classes[cls], method), f"architecture.md names {cls}.{method}, which does not exist"
    source = inspect.getsource(run.Run.dispatch)
    positions = [source.find(f".{method}(") for _, method in named[1:]]
    assert -1 not in positions, dict(zip(named[1:], positions))
    assert positions == sorted(positions), f"the page's order {named[1:]} is not the code's: {positions}"
