"""mkdocs hooks: the reference pages that are generated from the code at build time
(never kept by hand) and the benchmark picture taken from `benchmarks/results.png`.

Generated pages: `reference/unsupported.md` (from `cstorch.unsupported.UNSUPPORTED`),
`reference/flags.md` (the `cstorch.backends` flag tree with each flag's type, default and
what it does in cstorch, from the flag definitions), `reference/cli.md` (the `--help` of
every command line),
`reference/lowerings.md` (the lowering table), `reference/known-failures.md` (the OpInfo
checks allowed to fail) and the API reference pages of `API_PAGES` (one entry per public
name, rendered by mkdocstrings). Generated sections of hand-written pages:
`GENERATED_SECTIONS` (the OpInfo check counts per dtype of `reference/op-coverage.md`, the
benchmark tables of the performance page, where CI's time goes on `contributing.md`).
"""
from __future__ import annotations

import contextlib
import io
import json
import logging
import re
import sys
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parent.parent


def unsupported_page() -> str:
    from cstorch.unsupported import MODULE_NAMES, UNSUPPORTED

    lines = ["# Names cstorch does not provide", "",
             "Generated from `cstorch.unsupported.UNSUPPORTED`, the one list of names of the real "
             "`cerebras.pytorch` 2.10 that cstorch deliberately leaves out. Using one raises "
             "`UnsupportedAPIError` with the text below (never an `AttributeError`).", ""]
    for key, text in UNSUPPORTED.items():
        name = key[len("cerebras.pytorch."):] if key.startswith("cerebras.pytorch.") else key
        ours = "cstorch." + name
        anchor = ours[:-2] if ours.endswith(".*") else ours
        lines += [f"## `{ours}` {{#{anchor}}}", ""]
        if key.endswith(".*"):
            names = MODULE_NAMES.get(key, MODULE_NAMES.get(key[:-2], ()))
            if names:
                lines += ["The module's real names, each raising the error: "
                          + ", ".join(f'<code id="{anchor}.{n}">{n}</code>' for n in sorted(names)) + ".", ""]
        lines += [text, ""]
    return "\n".join(lines)


def _note(text: str, title: str = "Differences from the real system") -> list[str]:
    """An admonition, as mkdocstrings renders a docstring's "Differences" section."""
    return [f'!!! note "{title}"', *("    " + line for line in text.splitlines()), ""]


_EFFECT_WORDS = {"takes effect": "**takes effect**", "no effect": "**no effect**",
                 "cstorch only": "**cstorch only** (the real API has no such flag)"}


def _flag_group_lines(group, lines: list) -> None:
    """A group's section: its text and note, an entry (heading, type, default, what it does
    here, how it differs) per flag that has its own text, and a table of its other flags."""
    from cstorch.backends import EFFECTS, describe

    if group._flags:
        lines += [f"## `{group._path}` {{#{group._path}}}", ""]
        if group._doc:
            lines += [group._doc, ""]
        if group._differs:
            lines += _note(group._differs)
        rest = []
        for name, flag in group._flags.items():
            path = f"{group._path}.{name}"
            if flag.effect not in EFFECTS:
                raise ValueError(f"{path} does not say what it does in cstorch (`effect` of its _Flag or group)")
            about = (f"type: {describe(flag.hint)} · default: `{flag.default!r}` · "
                     f"in cstorch: {_EFFECT_WORDS[flag.effect]}")
            if not (flag.doc or flag.differs):
                if not (group._doc or group._differs):
                    raise ValueError(f"{path} has no text of its own and its group has none either")
                rest.append(f'| <code id="{path}">{name}</code> | {describe(flag.hint)} | `{flag.default!r}` | '
                            f"{flag.effect} |")
                continue
            lines += [f"### `{path}` {{#{path}}}", "", about, ""]
            if flag.doc:
                lines += [flag.doc, ""]
            if flag.differs:
                lines += _note(flag.differs)
        if rest:
            lines += ["The group's other flags (the group's text above says what they do here):", "",
                      "| flag | type | default | in cstorch |", "|---|---|---|---|", *rest, ""]
    for sub in group._groups.values():
        _flag_group_lines(sub, lines)


def _flags_in(group):
    yield from group._flags.values()
    for sub in group._groups.values():
        yield from _flags_in(sub)


def flags_page() -> str:
    """The flag tree: every flag's type, default, whether it takes effect in cstorch, what
    it does and how it differs from the real flag, all read from the flag definitions
    (`cstorch/backends.py`: `_Flag` and `FlagGroup`'s `effect`, `doc`, `differs`)."""
    import collections
    import importlib
    import textwrap

    from cstorch.backends import EFFECTS

    backends = importlib.import_module("cstorch.backends")
    module = sys.modules["cstorch.backends"]  # `cstorch.backends` the attribute is the tree's root group
    example, rules = module.__doc__.split("\n\n", 2)[1:]
    rules = rules.split("\n\nWhat each flag does here")[0]
    counts = collections.Counter(flag.effect for flag in _flags_in(backends.csx))
    lines = ["# The flag tree", "",
             "Generated from the flag definitions of `cstorch.backends` (the real API's flag tree, "
             "`cstorch/backends.py`): every flag with its type, its default, whether it takes effect in cstorch, "
             "what it does here and how it differs from the real flag. Set one with "
             "`cstorch.backends.csx.performance.micro_batch_size = 4`.", "",
             "```python", textwrap.dedent(example).strip("\n"), "```", "",
             rules.replace("`cstorch.backends`", "the tree"), "",
             "| in cstorch | flags |", "|---|---|",
             *(f"| {_EFFECT_WORDS[e]} | {counts[e]} |" for e in EFFECTS), ""]
    _flag_group_lines(backends.csx, lines)
    return "\n".join(lines)


def _help(main, argv) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main(argv)
    return out.getvalue().rstrip()


def cli_page() -> str:
    from cstorch.checkpoint.__main__ import main as checkpoint_main
    from cstorch.distributed.launch import main as launch_main
    from cstorch.trainer.cli import main as trainer_main

    parts = ["# Command lines", "",
             "Generated from each program's `--help`. `cszoo` is the same program as `cstorch`.", ""]
    for title, main, argv in [
        ("cstorch / cszoo", lambda a: trainer_main(a, prog="cstorch"), ["--help"]),
        ("cstorch fit", lambda a: trainer_main(a, prog="cstorch"), ["fit", "--help"]),
        ("python -m cstorch.checkpoint", checkpoint_main, ["--help"]),
        ("python -m cstorch.distributed.launch", launch_main, ["--help"]),
    ]:
        parts += [f"## `{title}`", "", "```text", _help(main, argv), "```", ""]
    parts += ["## `python -m cstorch_jax.coverage`", "",
              "Runs PyTorch's OpInfo samples through the engine; its options are listed in "
              "[Op coverage](op-coverage.md).", ""]
    return "\n".join(parts)


#: the API reference: page -> (title, introduction, the modules whose public names it lists)
API_PAGES = {
    "reference/cstorch.md": ("cerebras.pytorch (cstorch)",
                             "`import cerebras.pytorch as cstorch` and `import cstorch` give the same module objects.",
                             ["cstorch"]),
    "reference/optim.md": ("Optimizers and schedulers",
                           "How each optimizer's math compares with torch.optim and the real system: "
                           "[What works and how it differs](api-status.md#optimizers-and-schedulers).",
                           ["cstorch.optim", "cstorch.optim.lr_scheduler", "cstorch.optim.scheduler",
                            "cstorch.optim.weight_decay_scheduler"]),
    "reference/data.md": ("Data, distributed and metrics", "",
                          ["cstorch.utils.data", "cstorch.distributed", "cstorch.metrics", "cstorch.metrics.utils"]),
    "reference/storage.md": ("Checkpoints and storage", "The guide: [Checkpoints](../guides/checkpoints.md).",
                             ["cstorch.storage", "cstorch.checkpoint"]),
    "reference/utils.md": ("Utilities, nn and amp", "",
                           ["cstorch.amp", "cstorch.nn", "cstorch.nn.functional", "cstorch.utils", "cstorch.utils.nest",
                            "cstorch.utils.tensorboard", "cstorch.utils.tracker", "cstorch.experimental",
                            "cstorch.sparse"]),
    "reference/trainer.md": ("The Trainer and callbacks",
                             "`cstorch.trainer` (also `cerebras.modelzoo.Trainer`). The guide: "
                             "[The Trainer, YAML and the command lines](../guides/trainer.md).",
                             ["cstorch.trainer"]),
    "reference/cstorch_jax.md": ("cstorch_jax",
                                 "The engine's public API: `cstorch_jax.jit`, the errors, the report of a compiled "
                                 "step and the compile cache.",
                                 ["cstorch_jax", "cstorch_jax.explore", "cstorch_jax.compile_cache"]),
    "reference/legacy18.md": ("The 1.8 porting API",
                              "`import cerebras_pytorch.experimental as cstorch` (release 1.8) gives the module "
                              "`cstorch.legacy18`, and `cerebras_pytorch.experimental.<sub>` its submodule "
                              "`cstorch.legacy18.<sub>`: the same objects. Names it re-exports from the 2.x API "
                              "link to their entries. The guide: "
                              "[The 1.8 API and the runner classes](../guides/legacy18.md); the Model Zoo 1.8 "
                              "runner classes are in "
                              "[The Trainer and callbacks](trainer.md#cstorch.trainer.PyTorchBaseRunner).",
                              ["cstorch.legacy18", "cstorch.legacy18.utils.data", "cstorch.legacy18.optim",
                               "cstorch.legacy18.optim.lr_scheduler", "cstorch.legacy18.amp",
                               "cstorch.legacy18.metrics"]),
}


#: objects documented so far in this build: id -> (page, public path of their entry)
_SEEN: dict[int, tuple] = {}


def public_names(module) -> list[str]:
    """A module's public names: its `__all__`, or else the names it binds without a leading
    underscore to objects of cstorch's own packages."""
    import types

    names = getattr(module, "__all__", None)
    found = [n for n in names if not n.startswith("_")] if names is not None else []
    for name, value in vars(module).items():
        if name.startswith("_") or name in found:
            continue
        if isinstance(value, types.ModuleType):
            if value.__name__.startswith(module.__name__ + "."):  # a submodule
                found.append(name)
        elif names is None:
            home = getattr(value, "__module__", None)
            if str(home).startswith(("cstorch", "cerebras")) or isinstance(value, (int, float, str)):
                found.append(name)
    return found


def _ours(obj) -> bool:
    return str(getattr(obj, "__module__", "")).startswith(("cstorch", "cerebras"))


_STATIC: dict = {}


def _griffe_path_exists(path: str) -> bool:
    """Whether griffe, as mkdocstrings runs it (static analysis with the reference's extension,
    `docs/griffe_reference.py`, which adds the classes made at run time), finds `path`."""
    import griffe

    package = path.split(".")[0]
    if package not in _STATIC:
        extensions = griffe.load_extensions("dataclasses",
                                            f"{ROOT / 'docs' / 'griffe_reference.py'}:ReferenceExtension")
        _STATIC[package] = griffe.load(package, search_paths=[str(ROOT)], resolve_aliases=False,
                                       extensions=extensions, docstring_parser="google",
                                       docstring_options={"warn_unknown_params": False, "warn_missing_types": False})
    try:
        _STATIC[package][path[len(package) + 1:]]
        return True
    except Exception:
        return False


def _page_of_module(name: str):
    for page, (_, _, modules) in API_PAGES.items():
        if name in modules:
            return page
    return None


def api_page(page: str) -> str:
    """One reference page: for every public name of its modules, a heading whose id is the
    public path and the object's docstring rendered by mkdocstrings (from its defining path;
    an object listed again under another name links to its first entry)."""
    import importlib
    import inspect
    import types

    from cstorch.backends import FlagGroup
    from cstorch.unsupported import UnsupportedAPIError

    title, intro, modules = API_PAGES[page]
    lines = [f"# {title}", "", "Generated from the docstrings at build time.", ""]
    if intro:
        lines += [intro, ""]
    seen = _SEEN
    for module_name in modules:
        module = importlib.import_module(module_name)
        lines += [f"## `{module_name}` {{#{module_name}}}", "",
                  f"::: {module_name}", "    options:", "      members: false", "      show_root_heading: false", ""]
        for name in public_names(module):
            path = f"{module_name}.{name}"
            lines += [f"### `{path}` {{#{path}}}", ""]
            try:
                obj = getattr(module, name)
            except UnsupportedAPIError:
                lines += ["Not provided by cstorch: see [Names cstorch does not provide](unsupported.md).", ""]
                continue
            if isinstance(obj, FlagGroup):
                lines += [f"The flag tree `{obj._path}`: every flag with its type, its default and what it does "
                          f"in cstorch is on [The flag tree](flags.md).", ""]
                continue
            if isinstance(obj, types.ModuleType):
                target = _page_of_module(obj.__name__)
                if target == page:
                    lines += [f"The module [`{obj.__name__}`](#{obj.__name__}), below.", ""]
                elif target:
                    rel = target[len("reference/"):]
                    lines += [f"The module [`{obj.__name__}`]({rel}#{obj.__name__}).", ""]
                elif obj.__name__.startswith(("cstorch", "cerebras")):
                    lines += [f"::: {obj.__name__}", "    options:", "      members: false",
                              "      show_root_heading: false", ""]
                else:
                    lines += [f"The module `{obj.__name__}`.", ""]
                continue
            if id(obj) in seen and (inspect.isclass(obj) or inspect.isfunction(obj)):
                first_page, first = seen[id(obj)]
                where = "" if first_page == page else first_page[len("reference/"):]
                lines += [f"The same object as [`{first}`]({where}#{first}).", ""]
                continue
            if (inspect.isclass(obj) or inspect.isfunction(obj)) and not _ours(obj):
                seen[id(obj)] = (page, path)
                lines += [f"`{obj.__module__}.{obj.__qualname__}` (from {obj.__module__.split('.')[0]}), "
                          f"re-exported here unchanged.", ""]
            elif inspect.isclass(obj) or inspect.isfunction(obj):
                seen[id(obj)] = (page, path)
                home = f"{obj.__module__}.{obj.__qualname__}"
                if not _griffe_path_exists(home):
                    raise ValueError(f"{path}: griffe does not find {home}; a class made at run time is added "
                                     "by docs/griffe_reference.py")
                lines += [f"::: {home}", "    options:", "      show_root_heading: true",
                          "      show_root_toc_entry: false", "      heading_level: 4", ""]
            else:
                text = repr(obj)
                if len(text) > 300:
                    text = text[:300] + " ..."
                lines += [f"A value of type `{type(obj).__name__}`:", "", "```text", text, "```", ""]
    return "\n".join(lines)


def lowerings_page() -> str:
    import collections

    import cstorch_jax.lowering  # noqa: F401  (registers every lowering)
    from cstorch_jax.lowering.registry import LOWERINGS, RANDOM_OPS

    families = collections.defaultdict(list)
    for op, fn in LOWERINGS.items():
        module = getattr(fn, "__module__", "") or ""
        family = module.rsplit(".", 1)[-1] if module.startswith("cstorch_jax") else f"{module} (a function used as is)"
        families[family].append(f"`{op}`" + (" (random)" if op in RANDOM_OPS else ""))
    lines = ["# The lowering table", "",
             f"Generated from `cstorch_jax.lowering.registry.LOWERINGS`: the {len(LOWERINGS)} ATen op overloads "
             "and torch higher-order ops (`cond`) "
             "the engine translates to `jax.numpy`, by the module that holds each lowering "
             "(`cstorch_jax/lowering/<family>.py`; the optimizer updates are in `cstorch_jax/optim/`). "
             "How they are tested, per dtype: [Op coverage](op-coverage.md).", ""]
    for family in sorted(families):
        ops = sorted(families[family])
        lines += [f"## {family} ({len(ops)})", "", ", ".join(ops), ""]
    return "\n".join(lines)


def _tests_module(name: str):
    """A module of `tests/lowering/` (the lists the OpInfo tests use), loaded from its file."""
    import importlib.util

    path = ROOT / "tests" / "lowering" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _failure_table(entries: dict) -> list[str]:
    rows = ["| OpInfo entry | check | reason |", "|---|---|---|"]
    for key in sorted(entries):
        name, mode, *dtype = key
        check = mode + (f", {dtype[0]}" if dtype else "")
        reason = entries[key].replace("|", "\\|")
        rows.append(f"| `{name}` | {check} | {reason} |")
    return rows + [""]


def known_failures_page() -> str:
    """Every OpInfo check the suite expects to fail, with its reason, from the lists the tests
    use (`tests/lowering/opinfo_expected_failures.py`)."""
    m = _tests_module("opinfo_expected_failures")
    base = {k: v for k, v in m.EXPECTED_FAILURES.items() if not any(k in e for e in m.EXPECTED_BEFORE.values())}
    every = {k: v for k, v in base.items() if k not in m.FLOAT32_ONLY}
    half = {k: v for k, v in m.HALF_EXPECTED_FAILURES.items()
            if not any(k in e for e in m.HALF_EXPECTED_BEFORE.values())}
    lines = ["# The OpInfo checks cstorch does not pass", "",
             "Generated from `tests/lowering/opinfo_expected_failures.py`, the lists the OpInfo tests "
             "use: a check listed here may fail (the test is an expected failure with this reason); "
             "any other failing check fails the suite. How the checks judge a result: "
             "[Op coverage](op-coverage.md).", "",
             f"## In every dtype ({len(every)})", "", *_failure_table(every),
             f"## In float32 only ({len(m.FLOAT32_ONLY)})", "",
             *_failure_table({k: base[k] for k in m.FLOAT32_ONLY}),
             f"## In bfloat16 or float16 only ({len(half)})", "", *_failure_table(half)]
    for release in sorted(set(m.EXPECTED_BEFORE) | set(m.HALF_EXPECTED_BEFORE)):
        older = {**m.EXPECTED_BEFORE.get(release, {}), **m.HALF_EXPECTED_BEFORE.get(release, {})}
        lines += [f"## Under torch older than {release} ({len(older)})", "",
                  "Failures of an older supported torch's behaviour or its op_db's sample values, not "
                  "of cstorch's (a check without a dtype fails in every dtype).", "", *_failure_table(older)]
    return "\n".join(lines)


def opinfo_counts() -> str:
    """Per dtype, the OpInfo checks the suite runs and the ones it lets fail, derived without
    running it: from torch's op_db (which entries torch runs and differentiates on CPU in
    each dtype: the same predicates `check_mode` uses) and the expected-failure lists."""
    import torch

    import cstorch_jax.lowering  # noqa: F401  (registers every lowering)
    from cstorch_jax.coverage.opinfo import has_gradient, has_kernel, load_op_db, op_id
    from cstorch_jax.lowering.registry import LOWERINGS, RANDOM_OPS

    random = [op for op in LOWERINGS if op in RANDOM_OPS]
    aten = [op for op in LOWERINGS if op not in RANDOM_OPS and op.namespace == "aten"]
    others = sorted({op.namespace for op in LOWERINGS if op not in RANDOM_OPS and op.namespace != "aten"})
    failures = _tests_module("opinfo_expected_failures")
    reached = _tests_module("opinfo_reached").REACHED
    ops = load_op_db()
    dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    rows = {key: [] for key in ("fwd", "fwd_xfail", "grad", "grad_xfail")}
    for name, dtype in dtypes.items():
        forward = [op for op in ops if has_kernel(op, dtype)]
        grad = [op for op in forward if has_gradient(op, dtype)]
        for key, checked, mode in (("fwd", forward, "forward"), ("grad", grad, "grad")):
            listed = sum(1 for op in checked if failures.expected_failure(op_id(op), mode, name))
            rows[key].append(len(checked))
            rows[key + "_xfail"].append(listed)

    def row(title: str, values) -> str:
        return f"| {title} | " + " | ".join(str(v) for v in values) + " |"

    def must(key):
        return [c - x for c, x in zip(rows[key], rows[key + "_xfail"])]

    return "\n".join([
        f"Generated when the site is built, under torch {torch.__version__.split('+')[0]}, from data the build "
        f"reads without running the suite: torch's OpInfo database ({len(ops)} entries) and the lists of "
        "expected failures (`tests/lowering/opinfo_expected_failures.py`). A *check* is one OpInfo entry in one "
        "mode and dtype; it runs when torch has a CPU kernel for the entry in that dtype (a gradient check also "
        "needs torch to differentiate it there), as `cstorch_jax.coverage.opinfo.check_mode` decides. A check "
        "listed as an expected failure may fail; every other check must not fail: each of its samples must be "
        "judged a match (above) or be out of scope (complex or 64-bit values, random ops, data-dependent "
        "shapes: decided per sample when the suite runs, so not counted here). How many checks pass, and how "
        "many are out of scope, only a run of the suite measures "
        "(`python -m cstorch_jax.coverage --dtypes float32,bfloat16,float16`); no such run's figures are kept "
        "on this page.", "",
        "| OpInfo checks | " + " | ".join(dtypes) + " |",
        "|---" * (len(dtypes) + 1) + "|",
        row("forward checks run", rows["fwd"]),
        row("forward: may fail (listed, with reasons)", rows["fwd_xfail"]),
        row("forward: must not fail", must("fwd")),
        row("gradient checks run", rows["grad"]),
        row("gradient: may fail (listed, with reasons)", rows["grad_xfail"]),
        row("gradient: must not fail", must("grad")),
        "",
        f"[The lowering table](lowerings.md) holds {len(LOWERINGS)} op overloads: "
        f"{len(aten)} ATen ops, {len(random)} random ops (the sweep checks their shapes and dtypes, "
        f"`tests/run/test_dropout.py` their statistics) and {len(LOWERINGS) - len(aten) - len(random)} of other "
        f"namespaces ({', '.join(f'`{n}`' for n in others)}). {len(reached)} of the {len(aten)} ATen ops are "
        "tested through the OpInfo check named for each in `tests/lowering/opinfo_reached.py`, the others by "
        "hand-written samples (`tests/lowering/samples.py`, `test_direct_lowerings.py`); "
        "`test_every_lowering_is_tested` keeps the lists complete.", ""])


def benchmark_summary() -> str:
    """The latest suite run's summary, as `benchmarks/RESULTS.md` holds it: when and where
    it ran (the date, the machine, the matmul peak) and the median ms per step of every
    workload and implementation with its ratio to eager."""
    text = (ROOT / "benchmarks" / "RESULTS.md").read_text()
    written = re.search(r"^Written by .*$", text, re.M)
    lines = [m.group(0) for m in re.finditer(r"^- \*\*(?:Machine|Versions|float32 matmul peak)[^\n]*$", text, re.M)]
    summary = re.search(r"^## Summary.*?\n\n(\|.*?)\n\n", text, re.M | re.S)
    if written is None or len(lines) != 3 or summary is None:
        raise ValueError("benchmarks/RESULTS.md lacks its 'Written by' line, machine facts or summary table")
    return "\n".join([f"From `benchmarks/RESULTS.md`: {written.group(0)[0].lower()}{written.group(0)[1:]}", "",
                      *lines, "", summary.group(1), ""])


def recorded_section(name: str, benchmark: str) -> str:
    """Section `name` of benchmarks/RESULTS.md, without its heading, as `python -m
    benchmarks.<benchmark> --out benchmarks/RESULTS.md` recorded it there."""
    text = (ROOT / "benchmarks" / "RESULTS.md").read_text()
    found = re.search(rf"<!-- section: {name} -->\n## [^\n]*\n(.*?)<!-- end section: {name} -->", text, re.S)
    if found is None:
        raise ValueError(f"benchmarks/RESULTS.md has no {name} section: run "
                         f"`python -m benchmarks.{benchmark} --out benchmarks/RESULTS.md`")
    return found.group(1).strip() + "\n"


def step_overhead_table() -> str:
    """The step-overhead table `python -m benchmarks.step_overhead` recorded."""
    return recorded_section("step-overhead", "step_overhead")


def start_up_table() -> str:
    """The start-up times `python -m benchmarks.import_time` recorded."""
    return recorded_section("start-up", "import_time")


def run_length_table() -> str:
    """Cost per step and per run, cstorch against the scan, as `python -m benchmarks.run_length` recorded."""
    return recorded_section("run-length", "run_length")


def ci_timings() -> str:
    """Where a recorded `.ci/run` spent its time (`tests/timings.json`, written by
    `python .ci/timings.py update .ci-stacks`): its phases, the pinned suite's test time
    per test folder and its slowest files."""
    record = json.loads((ROOT / "tests" / "timings.json").read_text())
    total = record["test_seconds"]
    lines = [f"Recorded {record['recorded']} on {record['machine']}: the pinned suite ran {record['tests_count']} "
             f"tests, {total / 60:.0f} minutes of test time over its two workers.", "",
             "| phase of `.ci/run` | minutes |", "|---|---:|"]
    lines += [f"| {name} | {seconds / 60:.1f} |" for name, seconds in record["phases"].items()]
    lines += ["", "| test folder | test time (min) | share |", "|---|---:|---:|"]
    lines += [f"| `{folder}` | {seconds / 60:.1f} | {100 * seconds / total:.0f} % |"
              for folder, seconds in record["directories"].items()]
    lines += ["", f"The {len(record['slowest_files'])} slowest files:", "", "| file | test time (s) |", "|---|---:|"]
    lines += [f"| `{path}` | {seconds:.0f} |" for path, seconds in record["slowest_files"].items()]
    return "\n".join(lines) + "\n"


#: sections of hand-written pages generated at build time: `<!-- generated: NAME -->` on a
#: line of its own is replaced by GENERATED_SECTIONS[NAME]()
GENERATED_SECTIONS = {"opinfo-counts": opinfo_counts, "benchmark-summary": benchmark_summary,
                      "step-overhead": step_overhead_table, "start-up": start_up_table, "run-length": run_length_table,
                      "ci-timings": ci_timings}
_SECTION = re.compile(r"^<!-- generated: (?P<name>[\w-]+) -->$", re.M)


def on_page_markdown(markdown, page, config, files):
    def fill(match):
        name = match["name"]
        if name not in GENERATED_SECTIONS:
            raise KeyError(f"{page.file.src_uri}: no generated section {name!r} (known: {sorted(GENERATED_SECTIONS)})")
        return GENERATED_SECTIONS[name]()

    return _SECTION.sub(fill, markdown)


GENERATED = {
    "reference/lowerings.md": lowerings_page,
    "reference/known-failures.md": known_failures_page,
    **{page: (lambda page=page: api_page(page)) for page in API_PAGES},
    "reference/unsupported.md": unsupported_page,
    "reference/flags.md": flags_page,
    "reference/cli.md": cli_page,
}


class _DynamicAllFilter(logging.Filter):
    """Drops griffe's one warning that `cstorch.optim.__all__` is built from a list
    (`*BUILTIN_OPTIMIZERS`), which static analysis cannot read: the optimizer classes it
    names are made at import time and documented by inspection (`force_inspection`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Unsupported item in cstorch.optim.__all__" not in record.getMessage()


def on_config(config):
    for name in ("griffe", "mkdocs.plugins.griffe", "mkdocs.plugins.mkdocstrings_handlers.python"):
        logging.getLogger(name).addFilter(_DynamicAllFilter())
    return config


def on_files(files, config):
    _SEEN.clear()
    for uri, make in GENERATED.items():
        files.append(File.generated(config, uri, content=make()))
    picture = ROOT / "benchmarks" / "results.png"
    files.append(File.generated(config, "assets/results.png", abs_src_path=str(picture)))
    return files
