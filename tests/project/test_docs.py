"""The documentation: the site under docs/ builds with `mkdocs build --strict` (a broken link,
a missing reference target or a name that no longer exists fails it), its API reference
has an entry for every public name of the real `cerebras.pytorch` 2.10 (the API inventory,
`tests/api/inventory_2_10.json`), every Python code block of README.md and docs/ runs, and
the README stays short.

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
INVENTORY = json.loads((ROOT / "tests" / "api" / "inventory_2_10.json").read_text())
REAL_PREFIX = "cerebras.pytorch"
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


def test_the_site_builds_in_strict_mode(site):
    out, returncode, stderr = site
    assert returncode == 0, f"mkdocs build --strict failed:\n{stderr[-8000:]}"
    for page in ["index.html", "get-started/index.html", "reference/cstorch/index.html",
                 "reference/flags/index.html", "reference/cli/index.html", "assets/results.png"]:
        assert (out / page).is_file(), page


def _reference_anchors(out: Path) -> set[str]:
    anchors = set()
    for html in (out / "reference").rglob("*.html"):
        anchors |= set(re.findall(r'\bid="([^"]+)"', html.read_text()))
    return anchors


def test_the_reference_has_an_entry_for_every_public_name_of_the_inventory(site):
    from tests.api.test_inventory import NOT_IN_REAL

    out, returncode, _ = site
    assert returncode == 0, "the site did not build"
    anchors = _reference_anchors(out)
    missing = [f"cstorch{module[len(REAL_PREFIX):]}.{name}"
               for module, names in INVENTORY["modules"].items() for name in names
               if f"{module}.{name}" not in NOT_IN_REAL
               and f"cstorch{module[len(REAL_PREFIX):]}.{name}" not in anchors]
    assert missing == [], f"public names without a reference entry: {missing}"
    # the check can fail: a name the reference does not hold is reported
    assert "cstorch.no_such_name" not in anchors


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


# -- the API reference: signatures and parameter tables ------------------------------------

_ENTRY = re.compile(r'<h3 id="(?P<path>[\w.]+)">')
_SECTION_TITLE = re.compile(r'<span class="doc-section-title">(?P<title>[^<]+):</span>')


def _text(html: str) -> str:
    import html as html_lib

    return html_lib.unescape(re.sub(r"<[^>]+>", "", html))


@dataclass
class ReferenceEntry:
    """One entry of an API reference page as a reader sees it: the public path of its
    heading, what mkdocstrings rendered for the object itself (its kind, the text of its
    signature or None, the parameter names of its Parameters table) and the attributes it
    lists: name -> (labels, the text of its signature line, whether it has a description)."""
    path: str
    kind: str
    signature: str | None
    documented: list[str]
    attributes: dict[str, tuple[set, str, bool]]


def reference_entries(html: str) -> list[ReferenceEntry]:
    """The class, function and attribute entries of a built reference page (an entry that
    only links to another one, a module or a value the hooks describe is not one)."""
    entries = []
    starts = [(m.start(), m["path"]) for m in _ENTRY.finditer(html)] + [(len(html), None)]
    for (start, path), (end, _) in zip(starts, starts[1:]):
        part = html[start:end]
        kind = re.search(r'<div class="doc doc-object doc-(class|function|attribute)">', part)
        if kind is None:
            continue
        own, _, children = part.partition('<div class="doc doc-children">')
        signature = re.search(r'<div class="doc-signature highlight">(.*?)</div>', own, re.S)
        documented = []
        for title in _SECTION_TITLE.finditer(own):
            if title["title"] != "Parameters":
                continue
            table = own[title.end():own.index("</table>", title.end())]
            documented += [_text(name).lstrip("*") for name in
                           re.findall(r'<tr class="doc-section-item">\s*<td>\s*(<code>.*?</code>)', table, re.S)]
        home = re.search(r'<h\d id="([\w.]+)" class="doc doc-heading">', own)[1]
        attributes = {}  # the object's own attributes (not those of a class nested in it)
        for attr in re.finditer(r'<div class="doc doc-object doc-attribute">\s*<h\d id="([\w.]+)\.(\w+)"(.*?)</h\d>'
                                r'\s*<div class="doc-signature highlight">(.*?)</div>'
                                r'\s*<div class="doc doc-contents ?">(.*?)</div>', children, re.S):
            if attr[1] == home:
                labels = set(re.findall(r'doc-label-([\w-]+)"', attr[3]))
                attributes[attr[2]] = (labels, _text(attr[4]).strip(), bool(_text(attr[5]).strip()))
        entries.append(ReferenceEntry(path, kind[1], _text(signature[1]) if signature else None, documented,
                                      attributes))
    return entries


def _public_object(path: str):
    import importlib

    module, _, name = path.rpartition(".")
    while module:
        try:
            return getattr(importlib.import_module(module), name)
        except ModuleNotFoundError:
            module, _, rest = module.rpartition(".")
            name = f"{rest}.{name}"
    raise LookupError(path)


def _constructor_parameters(obj) -> list[str] | None:
    """The parameter names a reader passes to `obj` (a class's constructor's, without
    `self`); None for an enum, a typing.Protocol and a torch.autograd.Function (none is
    constructed with arguments: the last is called through `apply`) and for an exception
    class that keeps BaseException's `*args` constructor."""
    import enum
    import inspect

    import torch

    if inspect.isclass(obj) and (issubclass(obj, (enum.Enum, torch.autograd.Function))
                                 or getattr(obj, "_is_protocol", False)):
        return None
    if inspect.isclass(obj) and issubclass(obj, BaseException) and not any(
            "__init__" in vars(c) for c in obj.__mro__ if c.__module__.startswith(("cstorch", "cerebras"))):
        return None
    return [p.name for p in inspect.signature(obj).parameters.values() if p.name not in ("self", "cls")]


def _shows_code(attribute_line: str) -> bool:
    """Whether an attribute's signature line (`name: type = value`) shows a value that is not
    a literal: a line of the implementation."""
    import ast

    _, eq, value = attribute_line.partition(" = ")
    if not eq:
        return False
    try:
        ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return True
    return False


def _declared_fields(obj) -> set[str]:
    """The names a class body declares with an annotation (dataclass and NamedTuple fields),
    in the class and its bases."""
    import inspect

    if not inspect.isclass(obj):
        return set()
    return {name for c in obj.__mro__ for name in vars(c).get("__annotations__", {})}


def reference_problems(entries: list[ReferenceEntry], lookup, need_rows=lambda path: True) -> list[str]:
    """What an entry lacks or shows wrongly: its signature, a parameter of the object in the
    signature, a default that is code, a row of its Parameters table for a parameter
    (where `need_rows(path)`), a row for a parameter it does not take, an instance
    attribute without a description that its class body does not declare (one the
    implementation assigns), an attribute whose value is code, or a class or function
    shown as an attribute. `lookup(path)` gives the live object of an entry."""
    import inspect

    problems = []
    for entry in entries:
        obj = lookup(entry.path)
        if entry.kind == "attribute":
            if inspect.isclass(obj) or inspect.isfunction(obj):
                problems.append(f"{entry.path}: a class or function shown as an attribute")
            continue
        fields = _declared_fields(obj)
        for name, (labels, line, described) in sorted(entry.attributes.items()):
            if "instance-attribute" in labels and "class-attribute" not in labels and not described \
                    and name not in fields:
                problems.append(f"{entry.path}: the undocumented instance attribute {name}")
            if _shows_code(line):
                problems.append(f"{entry.path}: the attribute {name} shows code: {line}")
        names = _constructor_parameters(obj)
        if names is None:
            continue
        if entry.signature is None:
            problems.append(f"{entry.path}: no signature")
            continue
        code = re.findall(r"=\s*(_\w+\(.*?\))", entry.signature)
        if code:
            problems.append(f"{entry.path}: the signature shows code as defaults: {code}")
        missing = [n for n in names if not re.search(rf"\b{re.escape(n)}\b", entry.signature)]
        if missing:
            problems.append(f"{entry.path}: the signature lacks {missing}")
        undocumented = [n for n in names if n not in entry.documented]
        if undocumented and need_rows(entry.path):
            problems.append(f"{entry.path}: no Parameters row for {undocumented}")
        unknown = [n for n in entry.documented if n not in names]
        if unknown:
            problems.append(f"{entry.path}: Parameters rows for what it does not take: {unknown}")
    return problems


def _entry_html(path: str, home: str, kind: str, signature: str | None, rows: list[str], attributes=()) -> str:
    """An entry as mkdocstrings renders it (the parts `reference_entries` reads)."""
    sig = f'<div class="doc-signature highlight"><pre><code>{signature}</code></pre></div>' if signature else ""
    table = ('<p><span class="doc-section-title">Parameters:</span></p><table><tbody>'
             + "".join(f'<tr class="doc-section-item"><td><code>{r}</code></td><td>x</td></tr>' for r in rows)
             + "</tbody></table>") if rows else ""
    attrs = "".join(f'<div class="doc doc-object doc-attribute"><h5 id="{home}.{name}" class="doc doc-heading">'
                    f'<small class="doc doc-label doc-label-{label}"><code>{label}</code></small></h5>'
                    f'<div class="doc-signature highlight"><pre><code>{line}</code></pre></div>'
                    f'<div class="doc doc-contents ">{text}</div></div>' for name, label, line, text in attributes)
    return (f'<h3 id="{path}"><code>{path}</code></h3><div class="doc doc-object doc-{kind}">'
            f'<h4 id="{home}" class="doc doc-heading">{home}</h4>{sig}<div class="doc doc-contents first">{table}'
            f'<div class="doc doc-children">{attrs}</div></div></div>')


def test_the_reference_problem_finder_reports_each_kind():
    def scale(tensor, factor=2.0):
        return tensor * factor

    class Point:
        x: int

        def __init__(self, x, y):
            self.x, self.y = x, y

    objects = {"m.scale": scale, "m.Point": Point, "m.scale_again": scale, "m.Bare": Point,
               "m.scale_code": scale, "m.AsValue": Point}
    html = "".join([
        _entry_html("m.scale", "m.f.scale", "function", "scale(tensor, factor=2.0)", ["tensor", "factor"]),
        _entry_html("m.Point", "m.p.Point", "class", "Point(x)", ["x"],
                    [("x", "instance-attribute", "x: int", ""), ("y", "instance-attribute", "y = y", ""),
                     ("origin", "class-attribute", "origin = _make_origin()", "The origin.")]),
        _entry_html("m.scale_again", "m.f.scale", "function", "scale(tensor, factor=2.0)", ["*tensor", "scale"]),
        _entry_html("m.Bare", "m.p.Point", "class", None, []),
        _entry_html("m.scale_code", "m.f.scale", "function", "scale(tensor, factor=_two(1))", ["tensor", "factor"]),
        _entry_html("m.AsValue", "m.p.Point", "attribute", "Point = _make_point()", []),
    ])
    entries = reference_entries(html)
    assert [e.path for e in entries] == ["m.scale", "m.Point", "m.scale_again", "m.Bare", "m.scale_code",
                                         "m.AsValue"]
    assert entries[0].documented == ["tensor", "factor"] and entries[2].documented == ["tensor", "scale"]
    assert reference_problems(entries, objects.get) == [
        "m.Point: the attribute origin shows code: origin = _make_origin()",
        "m.Point: the undocumented instance attribute y",
        "m.Point: the attribute y shows code: y = y",
        "m.Point: the signature lacks ['y']",
        "m.Point: no Parameters row for ['y']",
        "m.scale_again: no Parameters row for ['factor']",
        "m.scale_again: Parameters rows for what it does not take: ['scale']",
        "m.Bare: no signature",
        "m.scale_code: the signature shows code as defaults: ['_two(1)']",
        "m.AsValue: a class or function shown as an attribute"]
    assert reference_problems(entries[:1], objects.get) == []
    # where rows are not required, a missing row is not reported
    assert reference_problems(entries[2:3], objects.get, need_rows=lambda path: False) == [
        "m.scale_again: Parameters rows for what it does not take: ['scale']"]


#: packages whose objects' entries may still lack Parameters rows, with the reason
PARAMETER_ROWS_PENDING = {
    "cstorch_jax": "the engine's docstrings (cstorch_jax/) have no Args sections yet: issue 48 left the engine's "
                   "code to other changes",
}


def _needs_rows(path: str) -> bool:
    return str(getattr(_public_object(path), "__module__", "")).split(".")[0] not in PARAMETER_ROWS_PENDING


def test_every_reference_entry_shows_its_signature_and_documents_its_parameters(site):
    """Every class and function of the API reference shows its signature with the object's
    parameters (a class: its constructor's) and a Parameters table with a row for each, and
    no attribute that is a line of the implementation."""
    out, returncode, _ = site
    assert returncode == 0, "the site did not build"
    problems, count = [], 0
    for page in sorted((out / "reference").glob("*/index.html")):
        entries = reference_entries(page.read_text())
        count += len(entries)
        name = page.parent.name
        problems += [f"{name}: {p}" for p in reference_problems(entries, _public_object, _needs_rows)]
    assert count > 300, f"only {count} class and function entries found: has the HTML the test reads changed?"
    assert problems == [], "\n".join(problems)
