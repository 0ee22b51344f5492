"""The `cstorch` console script (also `python -m cstorch.trainer`): run a trainer YAML.

    cstorch fit params.yaml [flags]            train_and_eval (train when no val dataloader)
    cstorch validate params.yaml [flags]       eval
    cstorch validate_all params.yaml [flags]   eval_all

Precedence: a flag given on the command line overrides the YAML, which overrides the
defaults of `cstorch.trainer.config` (model_dir "./model_dir", device CSX). Overrides
apply to every trainer of a `trainer:` list (`effective_params`):

    -o/--model_dir D        init.model_dir = D
    --checkpoint_path P     fit.ckpt_path, validate.ckpt_path, validate_all.ckpt_paths = P
    --target_device CSX     init.device = CSX, or init.backend.backend_type = CSX when the YAML
                            has a backend block
    --target_device CPU|GPU init.device; a YAML backend block is dropped (a warning lists
                            the CSX-only settings that are ignored)
    --num_csx N, --num_workers_per_csx W, --compile_only, --validate_only
                            init.backend (backend_type CSX) .cluster_config.num_csx /
                            .num_workers_per_csx / .compile_only / .validate_only; a
                            `device: CSX` becomes that backend block. An error when the
                            target device is CPU or GPU.
    --logging LEVEL         init.logging.log_level (and this process's log level)
    --max_steps N           init.loop.max_steps = N; the YAML's num_steps, num_epochs and
                            steps_per_epoch are removed so the run ends at global step N
    --eval_steps N          init.loop.eval_steps = N

With more than one CSX (`num_csx > 1`, from the flag or the YAML) the data-parallel mesh
needs that many devices: XLA_FLAGS gets `--xla_force_host_platform_device_count=N`
(unless XLA_FLAGS already sets a count) so that a CPU-only machine offers N host
devices; the flag only concerns the host platform, so it is harmless where a GPU is
the default. XLA reads it when the first JAX backend starts, which is why the
arguments are parsed and the YAML read before the trainer is built (importing jax is
fine; `jax.devices()` is not).

Configuration mistakes (`ConfigError`) print `cstorch: error: <message>` and exit with
status 2, without a traceback.
"""
from __future__ import annotations

import argparse
import copy
import logging
import os
import sys
import warnings
from typing import Optional, Sequence

from .config import ConfigError, is_legacy, convert_legacy, load_params

#: subcommand -> run mode (`fit` becomes `train` when no trainer has a val dataloader)
COMMAND_MODES = {"fit": "train_and_eval", "validate": "eval", "validate_all": "eval_all"}
_HOST_DEVICE_FLAG = "--xla_force_host_platform_device_count"
_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("params", help="the trainer YAML (the `trainer:` format or the legacy runconfig format)")
    common.add_argument("--target_device", type=str.upper, choices=("CSX", "CPU", "GPU"),
                        help="where the run executes (default: the YAML's device/backend, else CSX)")
    common.add_argument("-o", "--model_dir", help="folder for checkpoints and logs (default: the YAML's, else "
                                                  "./model_dir)")
    common.add_argument("--checkpoint_path", help="checkpoint to load (default: the latest one in model_dir)")
    common.add_argument("--num_csx", type=_positive_int, help="number of CSX systems (data-parallel devices)")
    common.add_argument("--num_workers_per_csx", type=_positive_int, help="data workers per CSX")
    only = common.add_mutually_exclusive_group()
    only.add_argument("--compile_only", action="store_true", default=None, help="compile, do not run")
    only.add_argument("--validate_only", action="store_true", default=None,
                      help="check that the step can be compiled, do not run")
    common.add_argument("--logging", type=str.upper, choices=_LOG_LEVELS, help="log level (default INFO)")
    common.add_argument("--max_steps", type=_positive_int, help="train up to this global step (quick runs)")
    common.add_argument("--eval_steps", type=_positive_int, help="batches per validation (quick runs)")

    parser = argparse.ArgumentParser(
        prog="cstorch", description="Run a cstorch trainer YAML (the Model Zoo `trainer:` format).",
        epilog="Command-line values override the YAML; see `python -m pydoc cstorch.trainer.cli`.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{fit,validate,validate_all}")
    sub.add_parser("fit", parents=[common], help="train, validating when the YAML has a val dataloader")
    sub.add_parser("validate", parents=[common], help="validate a checkpoint")
    sub.add_parser("validate_all", parents=[common], help="validate every checkpoint (or those given)")
    return parser


def _trainer_list(params: dict) -> list[dict]:
    """The trainer dicts of a `trainer:` params dict (creating empty `init` sections)."""
    value = params.get("trainer")
    items = value if isinstance(value, list) else [value]
    out = []
    for i, item in enumerate(items):
        if isinstance(item, dict) and set(item) == {"trainer"}:
            item = item["trainer"]
        if not isinstance(item, dict):
            raise ConfigError(f"trainer{f'[{i}]' if isinstance(value, list) else ''} must be a mapping, "
                              f"got {type(item).__name__}.")
        if item.get("init") is None:
            item["init"] = {}
        if not isinstance(item["init"], dict):
            raise ConfigError(f"trainer.init must be a mapping, got {type(item['init']).__name__}.")
        out.append(item)
    return out


def _section(d: dict, key: str, where: str) -> dict:
    if d.get(key) is None:
        d[key] = {}
    if not isinstance(d[key], dict):
        raise ConfigError(f"{where}.{key} must be a mapping, got {type(d[key]).__name__}.")
    return d[key]


def _apply_device(init: dict, args) -> None:
    target = args.target_device
    csx_flags = {k: getattr(args, k) for k in ("num_csx", "num_workers_per_csx", "compile_only", "validate_only")
                 if getattr(args, k) is not None}
    if target == "CSX":
        if init.get("backend") is not None:
            _section(init, "backend", "trainer.init")["backend_type"] = "CSX"
        else:
            init["device"] = "CSX"
    elif target in ("CPU", "GPU"):
        backend = init.pop("backend", None)
        if isinstance(backend, dict):
            ignored = sorted(k for k, v in backend.items() if k not in ("backend_type", "artifact_dir"))
            if ignored:
                warnings.warn(f"--target_device {target}: the YAML's CSX backend settings "
                              f"({', '.join('backend.' + k for k in ignored)}) are ignored.", stacklevel=3)
        init["device"] = target
    if not csx_flags:
        return
    flags = ", ".join(f"--{k}" for k in csx_flags)
    device = str(init.get("device") or "").upper()
    backend = init.get("backend")
    btype = str(backend.get("backend_type", "CSX")).upper() if isinstance(backend, dict) else "CSX"
    if device in ("CPU", "GPU") or btype in ("CPU", "GPU"):
        raise ConfigError(f"{flags}: CSX settings, but the target device is {device or btype}; use "
                          f"--target_device CSX or leave the flag(s) out.")
    if init.get("device") is not None and backend is not None:
        return  # device and backend together: the validation reports it
    init.pop("device", None)
    backend = _section(init, "backend", "trainer.init")
    backend.setdefault("backend_type", "CSX")
    for key in ("num_csx", "num_workers_per_csx"):
        if key in csx_flags:
            _section(backend, "cluster_config", "trainer.init.backend")[key] = csx_flags[key]
    if csx_flags.get("compile_only"):
        backend["compile_only"], backend["validate_only"] = True, False
    if csx_flags.get("validate_only"):
        backend["validate_only"], backend["compile_only"] = True, False


def effective_params(args: argparse.Namespace, params: dict) -> dict:
    """`params` (converted to the `trainer:` format when legacy) with the command-line
    overrides of `args` applied to every trainer (table in the module doc). The input
    is not modified; nothing is built."""
    params = convert_legacy(params) if is_legacy(params) else copy.deepcopy(params)
    if not isinstance(params, dict) or "trainer" not in params:
        return params  # the validation explains what is missing
    for spec in _trainer_list(params):
        init = spec["init"]
        if args.model_dir is not None:
            init["model_dir"] = args.model_dir
        if args.checkpoint_path is not None:
            _section(spec, "fit", "trainer")["ckpt_path"] = args.checkpoint_path
            _section(spec, "validate", "trainer")["ckpt_path"] = args.checkpoint_path
            _section(spec, "validate_all", "trainer")["ckpt_paths"] = args.checkpoint_path
        _apply_device(init, args)
        if args.logging is not None:
            _section(init, "logging", "trainer.init")["log_level"] = args.logging
        if args.max_steps is not None:
            loop = _section(init, "loop", "trainer.init")
            for key in ("num_steps", "num_epochs", "steps_per_epoch"):
                loop.pop(key, None)
            loop["max_steps"] = args.max_steps
        if args.eval_steps is not None:
            _section(init, "loop", "trainer.init")["eval_steps"] = args.eval_steps
    return params


def run_mode(command: str, params: dict) -> str:
    """The run mode of a subcommand: `fit` is train_and_eval when some trainer has a
    `fit.val_dataloader`, else train."""
    mode = COMMAND_MODES[command]
    if mode == "train_and_eval" and not any((spec.get("fit") or {}).get("val_dataloader") is not None
                                            for spec in _trainer_list(copy.deepcopy(params))):
        return "train"
    return mode


def num_csx(params: dict) -> int:
    """The largest `backend.cluster_config.num_csx` of the trainers (1 when none)."""
    counts = [1]
    for spec in _trainer_list(copy.deepcopy(params)):
        backend = spec["init"].get("backend")
        if isinstance(backend, dict) and str(backend.get("backend_type", "CSX")).upper() in ("CSX", "XLA"):
            cc = backend.get("cluster_config") or {}
            if isinstance(cc, dict) and isinstance(cc.get("num_csx"), int):
                counts.append(cc["num_csx"])
    return max(counts)


def ensure_host_device_count(n: int, environ=None) -> Optional[str]:
    """Make XLA's host platform offer `n` devices (`XLA_FLAGS`), unless n <= 1 or the
    flags already set a count. Returns the resulting XLA_FLAGS (None when unset). Has an
    effect only before the process's first JAX backend starts."""
    environ = os.environ if environ is None else environ
    flags = environ.get("XLA_FLAGS")
    if n > 1 and _HOST_DEVICE_FLAG not in (flags or ""):
        flags = f"{flags} {_HOST_DEVICE_FLAG}={n}".strip() if flags else f"{_HOST_DEVICE_FLAG}={n}"
        environ["XLA_FLAGS"] = flags
    return flags


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of `cstorch` / `python -m cstorch.trainer`; returns the exit status."""
    args = build_parser().parse_args(argv)
    if not logging.getLogger().handlers:  # other libraries (jax, ...) log warnings and up
        logging.basicConfig(level="WARNING", format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("cstorch").setLevel(args.logging or "INFO")
    try:
        params = effective_params(args, load_params(args.params))
        mode = run_mode(args.command, params) if isinstance(params, dict) and "trainer" in params \
            else COMMAND_MODES[args.command]
        if isinstance(params, dict) and "trainer" in params:
            ensure_host_device_count(num_csx(params))
        from .config import run_trainer  # builds the backend: only after XLA_FLAGS is final

        run_trainer(mode, params, base_dir=os.path.dirname(os.path.abspath(args.params)))
    except ConfigError as e:
        print(f"cstorch: error: {e}", file=sys.stderr)
        return 2
    return 0


__all__ = ["main", "build_parser", "effective_params", "run_mode", "num_csx", "ensure_host_device_count",
           "COMMAND_MODES"]
