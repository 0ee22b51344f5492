"""YAML -> validated trainer specs (the `trainer:` format of the Model Zoo,
research/cerebras_api.md §3.5): loading, and parsing every trainer of a file once into a
typed `specs.TrainerSpec` (the specs, their checks and the structure they read are in
`specs/`; building objects from them is `build.py`). The legacy flat format is converted
by `legacy/flat_format.py` (`is_legacy` / `convert_legacy`, re-exported here); the run modes are the
table of `modes.py` (`RUN_MODES`, re-exported); `ConfigError` lives in `checks.py`.

Pipeline, and the contract of each step:

* `load_params(path)`: the YAML file as a dict (`ConfigError` naming the path when the
  file is missing or is not valid YAML). Two YAML pitfalls are closed: `1e-3` is read
  as a float (YAML 1.1 would read it as a string) and a key given twice in one mapping
  is an error (YAML would silently keep the last one). Mappings and lists nested more
  than `MAX_NESTING` levels deep, written out or through aliases, are refused with the
  line where the limit is passed (the reader, and every check after it, would
  otherwise exhaust Python's recursion limit).
* `is_legacy(params)` / `convert_legacy(params)`: the flat `runconfig:` format -> the
  `trainer:` format (the mapping table is in `legacy/flat_format.py`).
* `trainer_dicts(params)`: the trainer dicts of a params dict (a list under `trainer:`
  gives several, with key paths `trainer[i]`); nothing is checked but the nesting.
* `validate_trainer(trainer, mode)` -> `TrainerSpec`: one trainer dict parsed (every
  check that needs no backend and no model: unknown keys at every level named by their
  full key path, e.g. `trainer.init.loop.max_step`, with the closest valid keys; every
  name resolved to a class of the kind its place expects and its arguments checked
  against its signature, nothing called; ...), then what `mode` needs.
* `validate_params(params, mode)` -> `[TrainerSpec]`: every trainer of the file, and that
  they all resolve to the same device type and backend settings (a process has one
  backend). Every mistake raises `ConfigError` (a ValueError) with its own message.
* `mode_of(method, specs)`: the run mode of a Trainer method for the parsed trainers.

The YAML is parsed once: a command line's overrides are merged into the document first
(`cli.effective_params`), and everything after the parse (the run mode, the device count,
building and running) reads the specs.

The `trainer:` structure (a list under `trainer:` = several trainers run in sequence;
each item is `{trainer: {...}}` or the trainer dict itself)::

    trainer:
      init:         device | backend, model_dir (default "./model_dir"), seed, model,
                    optimizer, schedulers, precision, loop, checkpoint, logging,
                    callbacks, loggers (sparsity and autorestart: not supported)
      fit:          train_dataloader, val_dataloader (one or a list), ckpt_path
      validate:     val_dataloader, ckpt_path
      validate_all: val_dataloaders (one or a list), ckpt_paths (str, glob or list)
"""
from __future__ import annotations

import os
import re
from typing import Optional

import yaml

from .checks import ConfigError, check_dict, check_keys
from .legacy.flat_format import convert_legacy, is_legacy
from .modes import MODES, RUN_MODES, RunMode, check_mode
from .specs import DEFAULT_MODEL_DIR, TrainerSpec, check_one_backend


# ======================================================================================
# loading
# ======================================================================================
#: the deepest nesting of mappings and lists a params file may have (aliases followed)
MAX_NESTING = 100


class _TooDeep(yaml.YAMLError):
    """A value nested more than MAX_NESTING levels deep (at `mark`)."""

    def __init__(self, mark):
        super().__init__(mark)
        self.mark = mark


class _Loader(yaml.SafeLoader):
    """safe_load, plus floats without a dot (`1e-3`), an error on duplicate keys and on
    nesting deeper than MAX_NESTING. The depth of a composed node is counted through
    aliases: a node's height is one more than its highest child's, an alias having the
    height of the node it names."""

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0
        self._heights: dict[int, int] = {}  # id(node) -> height (0 for a scalar), for the composed nodes

    def compose_node(self, parent, index):
        self._depth += 1
        try:
            if self._depth > MAX_NESTING:
                raise _TooDeep(self.peek_event().start_mark)
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if id(node) not in self._heights:
            children = ([n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode)
                        else node.value if isinstance(node, yaml.SequenceNode) else [])
            # a child still being composed (an alias to an enclosing node) adds nothing here
            height = 1 + max((self._heights.get(id(c), 0) for c in children), default=-1)
            if height > MAX_NESTING:
                raise _TooDeep(node.start_mark)
            self._heights[id(node)] = height
        return node

    def construct_mapping(self, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                hash(key)
            except TypeError:
                continue  # let the base class report the unhashable key
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    f"found duplicate key {key!r} (first at line {seen[key] + 1})", key_node.start_mark)
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def load_params(path: str) -> dict:
    """The YAML file at `path` as a dict (ConfigError naming the path on any problem)."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ConfigError(f"params file {path!r} does not exist"
                          f"{'' if os.path.isabs(path) else f' (relative to {os.getcwd()!r})'}.")
    try:
        with open(path, encoding="utf-8") as f:
            params = yaml.load(f, Loader=_Loader)  # noqa: S506 (a SafeLoader subclass)
    except _TooDeep as e:
        raise ConfigError(f"params file {path!r} nests mappings and lists more than {MAX_NESTING} levels deep (counting "
                          f"through aliases), passing the limit at line {e.mark.line + 1}, column "
                          f"{e.mark.column + 1}. A trainer config needs a few levels; remove the excess "
                          f"nesting.") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"params file {path!r} is not valid YAML: {e}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read params file {path!r}: {e}") from None
    if params is None:
        raise ConfigError(f"params file {path!r} is empty; it needs a `trainer:` section.")
    if not isinstance(params, dict):
        raise ConfigError(f"params file {path!r} must hold a mapping with a `trainer:` key at the top, "
                          f"got a {type(params).__name__}.")
    return params


# ======================================================================================
# parsing (no backend, no model)
# ======================================================================================
def unwrap_trainer(item, path: str = "trainer") -> dict:
    """One trainer dict: `item` itself, or X of `{trainer: X}` (ConfigError naming `path`
    when it is not a mapping)."""
    if isinstance(item, dict) and set(item) == {"trainer"}:
        item = item["trainer"]
    return check_dict(item, path, allow_none=False)


def trainer_dicts(params: dict) -> list[tuple[str, dict]]:
    """[(key path, trainer dict)] of a params dict (legacy converted; a list under
    `trainer:` gives several, with paths `trainer[i]`). The trainer dicts are those of
    `params` itself (not copies) unless it was converted from the legacy format."""
    if not isinstance(params, dict):
        raise ConfigError(f"params must be a mapping with a `trainer:` key, got {type(params).__name__}.")
    if is_legacy(params):
        params = convert_legacy(params)
    if "trainer" not in params:
        raise ConfigError(f"params need a top-level `trainer:` section (or the legacy runconfig format); found "
                          f"{sorted(map(str, params)) or 'nothing'}.")
    check_keys(params, ("trainer",), "<top level>")
    value = params["trainer"]
    if isinstance(value, list):
        if not value:
            raise ConfigError("trainer is an empty list; give at least one trainer.")
        return [(f"trainer[{i}]", unwrap_trainer(item, f"trainer[{i}]")) for i, item in enumerate(value)]
    return [("trainer", unwrap_trainer(value, "trainer"))]


def validate_trainer(trainer: dict, mode: Optional[str] = None, base_dir: Optional[str] = None,
                     path: str = "trainer") -> TrainerSpec:
    """The spec of one trainer dict (the value of `trainer:`) read at key path `path`,
    checked for `mode` (None: the mode-independent checks only); relative file names
    resolve from `base_dir` (the YAML's folder; None: the working directory)."""
    if mode is not None:
        check_mode(mode)
    spec = TrainerSpec.parse(trainer, path, base_dir)
    if mode is not None:
        spec.check_mode(mode)
    return spec


def validate_params(params: dict, mode: Optional[str] = None, base_dir: Optional[str] = None) -> list[TrainerSpec]:
    """The specs of every trainer of `params`, in run order, each checked for `mode`
    (`validate_trainer`), and checked to resolve to one device type and backend."""
    specs = [validate_trainer(trainer, mode, base_dir, path) for path, trainer in trainer_dicts(params)]
    check_one_backend(specs)
    return specs


def mode_of(method: str, specs: list[TrainerSpec]) -> str:
    """The run mode of the Trainer method `method` (fit, validate, validate_all) for the
    parsed trainers `specs`: fit is train_and_eval when some trainer has a
    fit.val_dataloader, else train; validate is eval; validate_all is eval_all."""
    modes = [mode for mode, m in RUN_MODES.items() if m.method == method]
    if not modes:
        methods = sorted({m.method for m in RUN_MODES.values()})
        raise ConfigError(f"Unknown Trainer method {method!r}; expected one of {', '.join(methods)}.")
    if len(modes) == 1:
        return modes[0]
    validating = next(mode for mode in modes if RUN_MODES[mode].validates)
    if any(spec.val_dataloaders(validating) is not None for spec in specs):
        return validating
    return next(mode for mode in modes if not RUN_MODES[mode].validates)


__all__ = ["ConfigError", "RunMode", "RUN_MODES", "MODES", "DEFAULT_MODEL_DIR", "MAX_NESTING", "load_params", "is_legacy",
           "convert_legacy", "unwrap_trainer", "trainer_dicts", "mode_of", "validate_params", "validate_trainer"]
