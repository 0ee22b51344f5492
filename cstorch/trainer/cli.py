"""The `cstorch` and `cszoo` console scripts (also `python -m cstorch.trainer`): one
program that runs a trainer YAML (Model Zoo 2.x's `cszoo fit|validate|validate_all`; the
two names differ only in the name they print).

    cstorch fit params.yaml [flags]            train_and_eval (train when no val dataloader)
    cstorch validate params.yaml [flags]       eval
    cstorch validate_all params.yaml [flags]   eval_all

The subcommands are the Trainer's run methods. The YAML, with the command line's overrides
merged in (`effective_params`), is parsed once into trainer specs; the run mode
(`config.mode_of`, from `config.RUN_MODES`), the device count and the run read the specs.

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
    --mgmt_address A, --mgmt_namespace N, --credentials_path P, --job_labels K=V ..,
    --job_priority p1|p2|p3, --mount_dirs D .., --python_paths D .., --disable_version_check
                            cszoo's cluster flags: init.backend (backend_type CSX)
                            .cluster_config.<the flag's name>, like --num_csx (the
                            ClusterConfig fields; mgmt_address is the multi-host
                            coordinator, the others are accepted and have no effect here)
    --logging LEVEL         init.logging.log_level (and this process's log level)
    --max_steps N           init.loop.max_steps = N; the YAML's num_steps, num_epochs and
                            steps_per_epoch are removed so the run ends at global step N
                            (`set_max_steps`, shared with the legacy runner's flags)
    --eval_steps N          init.loop.eval_steps = N

With more than one CSX (`num_csx > 1`, from the flag or the YAML) the data-parallel mesh
needs that many devices: XLA_FLAGS gets `--xla_force_host_platform_device_count=N`
(unless XLA_FLAGS already sets a count) so that a CPU-only machine offers N host
devices; the flag only concerns the host platform, so it is harmless where a GPU is
the default. XLA reads it when the first JAX backend starts, which is why the
arguments are parsed and the YAML read before the trainer is built (importing jax is
fine; `jax.devices()` is not).

Configuration mistakes (`ConfigError`) print `cstorch: error: <message>` (`cszoo: error:`
when run as cszoo) and exit with status 2, without a traceback.

Differences from the real system:
    Models, data processors, callbacks and loggers are named by registered name, by
    dotted import path (not into the standard library), by `file.py:Class` next to the
    YAML (not a file of the Python installation) or, for models and data processors, by
    a name that a Python file next to the YAML declares (see `cstorch.trainer.registry`).
    Optimizers and schedulers are named by class name only (`cstorch.optim.catalog`).
    An optimizer key the class does not take is dropped with a warning, as the real
    trainer does (`Adam: {correct_bias: true}`). A `backend:` key naming a flag of
    `cstorch.backends` (`csx.debug.*`) is ignored with a warning and any other unknown
    key is an error (the real trainer ignores every key that is not an argument of the
    backend). cszoo's cluster flags (`--mgmt_address`, `--job_labels`, `--mount_dirs`,
    `--python_paths`, `--job_priority`, `--credentials_path`, `--disable_version_check`)
    set the `ClusterConfig` field of their name, and only `mgmt_address` has an effect.
    `cszoo`'s subcommands other than fit, validate and validate_all (model,
    data_processor, config, checkpoint, lm_eval, ...), `--load_checkpoint_states`,
    `--debug_args` and `--ini` are not implemented.
"""
from __future__ import annotations

import argparse
import copy
import logging
import os
import sys
import warnings
from typing import Optional, Sequence

from cstorch_cli.parser import (  # the parser is argparse only: `cstorch --help` loads no torch (cstorch_cli)
    CLUSTER_FLAGS,
    CSX_FLAGS,
    LOG_LEVELS,
    OVERRIDE_FLAGS,
    PROGRAMS,
    build_parser,
    positive_int,
    program_name,
)

from .build import run_specs
from .checks import device_name
from .config import ConfigError, convert_legacy, is_legacy, load_params, mode_of, trainer_dicts, validate_params

_HOST_DEVICE_FLAG = "--xla_force_host_platform_device_count"


def _section(d: dict, key: str, where: str) -> dict:
    if d.get(key) is None:
        d[key] = {}
    if not isinstance(d[key], dict):
        raise ConfigError(f"{where}.{key} must be a mapping, got {type(d[key]).__name__}.")
    return d[key]


# -- overrides shared with the legacy runner (`runner._apply_flags`) ----------------------
def csx_flags(args: argparse.Namespace) -> dict:
    """{flag name: value} of the CSX-only flags (`CSX_FLAGS`) given on the command line."""
    return {k: getattr(args, k) for k in CSX_FLAGS if getattr(args, k, None) is not None}


def check_csx_target(flags: dict, device) -> None:
    """ConfigError when CSX-only `flags` were given but the target `device` is CPU or GPU."""
    device = device_name(device)
    if flags and device in ("CPU", "GPU"):
        raise ConfigError(f"{', '.join(f'--{k}' for k in flags)}: CSX settings, but the target device is {device}; "
                          f"target CSX or leave the flag(s) out.")


def set_max_steps(loop: dict, max_steps: int) -> None:
    """`loop` (`init.loop`, or the legacy `runconfig`: the same keys) ends at global step
    `max_steps`: its other training lengths (num_steps, num_epochs, steps_per_epoch) go."""
    for key in ("num_steps", "num_epochs", "steps_per_epoch"):
        loop.pop(key, None)
    loop["max_steps"] = max_steps


def set_compile_mode(d: dict, flags: dict) -> None:
    """--compile_only / --validate_only into `d` (`init.backend`, or the legacy
    `runconfig`): the one given is True, the other False."""
    if flags.get("compile_only"):
        d["compile_only"], d["validate_only"] = True, False
    if flags.get("validate_only"):
        d["validate_only"], d["compile_only"] = True, False


def _apply_device(init: dict, args, path: str) -> None:
    target = args.target_device
    flags = csx_flags(args)
    if target == "CSX":
        if init.get("backend") is not None:
            _section(init, "backend", path)["backend_type"] = "CSX"
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
    if not flags:
        return
    backend = init.get("backend")
    if init.get("device") is not None:
        check_csx_target(flags, init["device"])
    if isinstance(backend, dict):
        check_csx_target(flags, backend.get("backend_type", "CSX"))
    if init.get("device") is not None and backend is not None:
        return  # device and backend together: the validation reports it
    init.pop("device", None)
    backend = _section(init, "backend", path)
    backend.setdefault("backend_type", "CSX")
    for key in CLUSTER_FLAGS:
        if key in flags:
            _section(backend, "cluster_config", f"{path}.backend")[key] = flags[key]
    set_compile_mode(backend, flags)


def effective_params(args: argparse.Namespace, params: dict) -> dict:
    """`params` (converted to the `trainer:` format when legacy) with the command-line
    overrides of `args` applied to every trainer (table in the module doc). The input
    is not modified; nothing is built."""
    params = convert_legacy(params) if is_legacy(params) else copy.deepcopy(params)
    if all(getattr(args, k, None) is None for k in OVERRIDE_FLAGS):
        return params
    for path, spec in trainer_dicts(params):  # the trainer dicts of `params`, changed in place
        init = _section(spec, "init", path)
        if args.model_dir is not None:
            init["model_dir"] = args.model_dir
        if args.checkpoint_path is not None:
            _section(spec, "fit", path)["ckpt_path"] = args.checkpoint_path
            _section(spec, "validate", path)["ckpt_path"] = args.checkpoint_path
            _section(spec, "validate_all", path)["ckpt_paths"] = args.checkpoint_path
        _apply_device(init, args, f"{path}.init")
        if args.logging is not None:
            _section(init, "logging", f"{path}.init")["log_level"] = args.logging
        if args.max_steps is not None:
            set_max_steps(_section(init, "loop", f"{path}.init"), args.max_steps)
        if args.eval_steps is not None:
            _section(init, "loop", f"{path}.init")["eval_steps"] = args.eval_steps
    return params


def run_mode(command: str, specs: list) -> str:
    """The run mode of a subcommand (a Trainer method, `config.mode_of`) for the parsed
    trainers: `fit` is train_and_eval when some trainer has a `fit.val_dataloader`, else
    train."""
    return mode_of(command, specs)


def num_csx(specs: list) -> int:
    """The largest `backend.cluster_config.num_csx` of the parsed trainers' CSX backends
    (1 when none)."""
    counts = [1]
    for spec in specs:
        backend = spec.init.backend
        if backend is not None and backend.backend_type == "CSX":
            counts.append((backend.cluster_config or {}).get("num_csx", 1))
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


def main(argv: Optional[Sequence[str]] = None, prog: Optional[str] = None) -> int:
    """Run `cstorch` / `cszoo` with `argv` (default: the command line; also `python -m
    cstorch.trainer`); returns the exit status. `prog`: the name to print (default: the
    one the process runs as). The console scripts start in `cstorch_cli.main`, which
    parses the command line before this module (and torch) is imported, then calls `run`."""
    prog = prog or program_name()
    return run(build_parser(prog).parse_args(argv), prog)


def run(args: argparse.Namespace, prog: str = "cstorch") -> int:
    """Run a parsed command line (`build_parser(prog).parse_args(...)`); returns the exit
    status: 0, or 2 after printing `<prog>: error: <message>` for a configuration mistake."""
    if not logging.getLogger().handlers:  # other libraries (jax, ...) log warnings and up
        logging.basicConfig(level="WARNING", format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("cstorch").setLevel(args.logging or "INFO")
    try:
        params = effective_params(args, load_params(args.params))
        specs = validate_params(params, None, os.path.dirname(os.path.abspath(args.params)))  # the one parse
        mode = run_mode(args.command, specs)
        ensure_host_device_count(num_csx(specs))
        run_specs(mode, specs)  # builds the backend: only after XLA_FLAGS is final
    except ConfigError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    return 0


__all__ = ["main", "run", "program_name", "PROGRAMS", "CLUSTER_FLAGS", "build_parser", "effective_params", "run_mode",
           "num_csx", "ensure_host_device_count", "CSX_FLAGS", "csx_flags", "check_csx_target", "set_max_steps",
           "set_compile_mode"]
