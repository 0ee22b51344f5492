"""mkdocs hooks: the reference pages that are generated from the code at build time
(never kept by hand) and the benchmark picture taken from `benchmarks/results.png`.

Generated pages: `reference/unsupported.md` (from `cstorch.unsupported.UNSUPPORTED`),
`reference/flags.md` (the `cstorch.backends` flag tree with each flag's type and
default), `reference/cli.md` (the `--help` of every command line),
`reference/lowerings.md` (the lowering table) and the API reference pages of
`API_PAGES` (one entry per public name, rendered by mkdocstrings).
"""
from __future__ import annotations

import contextlib
import io
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


def _flag_rows(group, rows: list) -> None:
    from cstorch.backends import describe

    for name, flag in group._flags.items():
        default = flag.default
        rows.append(f"| `{group._path}.{name}` | {describe(flag.hint)} | `{default!r}` |")
    for sub in group._groups.values():
        _flag_rows(sub, rows)


def flags_page() -> str:
    import importlib
    import textwrap

    backends = importlib.import_module("cstorch.backends")
    module = sys.modules["cstorch.backends"]  # `cstorch.backends` the attribute is the tree's root group
    rows = ["| flag | type | default |", "|---|---|---|"]
    _flag_rows(backends.csx, rows)
    doc = module.__doc__.split("\n\n", 2)
    return "\n".join(["# The flag tree", "",
                      "Generated from `cstorch.backends` (the real API's flag tree): every flag, "
                      "its type and its default. Set one with "
                      "`cstorch.backends.csx.performance.micro_batch_size = 4`.", "",
                      "```python", textwrap.dedent(doc[1]).strip("\n"), "```", "", doc[2].replace("`cstorch.backends`", "the tree"), "",
                      *rows, ""])


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


def _static_path_exists(path: str) -> bool:
    """Whether griffe's static analysis (what mkdocstrings reads by default) finds `path`."""
    import griffe

    package = path.split(".")[0]
    if package not in _STATIC:
        _STATIC[package] = griffe.load(package, search_paths=[str(ROOT)], resolve_aliases=False)
    try:
        _STATIC[package][path[len(package) + 1:]]
        return True
    except Exception:
        return False


def _inspected(obj, name: str) -> list:
    import inspect

    try:
        signature = str(inspect.signature(obj))
    except (TypeError, ValueError):
        signature = "(...)"
    kind = "class" if inspect.isclass(obj) else "def"
    doc = re.sub(r"^(Differences from the real system):$", r'!!! note "\1"', inspect.getdoc(obj) or "",
                 flags=re.M)  # the Google-style section mkdocstrings renders as an admonition
    return ["```python", f"{kind} {name}{signature}", "```", "", doc, ""]


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
                if _static_path_exists(home):
                    lines += [f"::: {home}", "    options:", "      show_root_heading: true",
                              "      show_root_toc_entry: false", "      heading_level: 4", ""]
                else:  # made at import time (the optimizer classes): its signature and docstring, inspected
                    lines += _inspected(obj, name)
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
             "the engine translates to `jax.numpy`, by the module that holds each lowering "
             "(`cstorch_jax/lowering/<family>.py`; the optimizer updates are in `cstorch_jax/optim/`). "
             "How they are tested, per dtype: [Op coverage](op-coverage.md).", ""]
    for family in sorted(families):
        ops = sorted(families[family])
        lines += [f"## {family} ({len(ops)})", "", ", ".join(ops), ""]
    return "\n".join(lines)


def _expected_failures_module():
    import importlib.util

    path = ROOT / "tests" / "lowering" / "opinfo_expected_failures.py"
    spec = importlib.util.spec_from_file_location("opinfo_expected_failures", path)
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
    m = _expected_failures_module()
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
