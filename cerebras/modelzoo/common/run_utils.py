"""The entry point of a Model Zoo 2.x model's `run.py`::

    from cerebras.modelzoo.common.run_utils import run
    if __name__ == "__main__":
        run()

`python run.py {CSX,CPU,GPU} --params params.yaml --mode {train,eval,train_and_eval,eval_all}
[-o MODEL_DIR] [--checkpoint_path P] [--num_csx N] [--compile_only | --validate_only]
[--max_steps N] [--eval_steps N] [--logging LEVEL]` runs the YAML (`trainer:` format, or
the legacy flat format) like `cszoo` would: the command line is gathered into
`params["runconfig"]` (its keys are the flags' names, `params` the YAML's path), and
`main(params)` runs `runconfig.mode`, the `runconfig` values overriding the YAML as the
`cszoo` flags do (`cstorch.trainer.cli.effective_params`)."""
from __future__ import annotations

import argparse
import logging
import os
from typing import Any, Callable, Dict, List, Optional

from cstorch.trainer import cli
from cstorch.trainer.build import run_specs
from cstorch.trainer.config import MODES, ConfigError, load_params, validate_params

#: the runconfig keys that override the YAML (the `cszoo` flags of the same names)
_OVERRIDES = ("model_dir", "checkpoint_path", "target_device", *cli.CSX_FLAGS, "logging", "max_steps", "eval_steps")


def get_parser(extra_args_parser_fn: Optional[Callable[[], List[argparse.ArgumentParser]]] = None):
    """The `run.py` command line (module doc); `extra_args_parser_fn()` returns parsers
    whose arguments are added."""
    parents = list(extra_args_parser_fn()) if extra_args_parser_fn else []
    parser = argparse.ArgumentParser(description="Run a Model Zoo model.", parents=parents)
    parser.add_argument("target_device", type=str.upper, choices=("CSX", "CPU", "GPU"), help="where the run executes")
    parser.add_argument("-p", "--params", required=True, help="the params YAML")
    parser.add_argument("-m", "--mode", required=True, choices=MODES, help="what to run")
    parser.add_argument("-o", "--model_dir", help="checkpoints and logs (overrides the YAML)")
    parser.add_argument("--checkpoint_path", help="checkpoint to start from (default: the latest in model_dir)")
    parser.add_argument("--num_csx", type=cli.positive_int, help="CSX: number of systems")
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--compile_only", action="store_true", default=None, help="CSX: compile, do not run")
    only.add_argument("--validate_only", action="store_true", default=None, help="CSX: check that the step compiles")
    parser.add_argument("--max_steps", type=cli.positive_int, help="train up to this global step")
    parser.add_argument("--eval_steps", type=cli.positive_int, help="batches per validation")
    parser.add_argument("--logging", type=str.upper, help="log level")
    return parser


def get_params_from_args(extra_args_parser_fn=None, argv=None) -> Dict[str, Any]:
    """The YAML of `--params` with the command line's values under `runconfig`."""
    args = get_parser(extra_args_parser_fn).parse_args(argv)
    params = load_params(args.params)
    if params.get("runconfig") is None:  # the trainer format: a runconfig of the command line only
        params["runconfig"] = {}
    runconfig = params["runconfig"]
    given = {k: v for k, v in vars(args).items() if v is not None}
    if "max_steps" in given:  # the run ends at that step: the YAML's other lengths go
        cli.set_max_steps(runconfig, given.pop("max_steps"))
    runconfig.update(given)
    return params


def main(params: Dict[str, Any], script: Optional[str] = None,
         extra_args_parser_fn: Optional[Callable[[], List[argparse.ArgumentParser]]] = None):
    """Run `params["runconfig"]["mode"]` on `params` (module doc); returns the trainers.
    `script` and `extra_args_parser_fn` are accepted for the Model Zoo's signature (a
    distributed GPU run is not launched from here)."""
    params = dict(params)
    runconfig = dict(params.get("runconfig") or {})
    mode = runconfig.pop("mode", None)
    if mode not in MODES:
        raise ConfigError(f"runconfig.mode must be one of {', '.join(MODES)}, got {mode!r}.")
    yaml_path = runconfig.pop("params", None)
    base_dir = os.path.dirname(os.path.abspath(yaml_path)) if yaml_path else None
    if "trainer" in params:  # runconfig holds only the command line's values
        params.pop("runconfig", None)
        args = argparse.Namespace(**{k: runconfig.get(k) for k in _OVERRIDES})
    else:  # legacy: runconfig is part of the YAML; the device flag is the runconfig's
        params["runconfig"] = runconfig
        args = argparse.Namespace(**{k: None for k in _OVERRIDES})
    if runconfig.get("logging"):
        logging.getLogger("cstorch").setLevel(runconfig["logging"])
    specs = validate_params(cli.effective_params(args, params), None, base_dir)  # the one parse
    cli.ensure_host_device_count(cli.num_csx(specs))
    return run_specs(mode, specs)


def run(extra_args_parser_fn: Optional[Callable[[], List[argparse.ArgumentParser]]] = None, argv=None):
    """Parse the command line (module doc) and run it (`main`)."""
    return main(get_params_from_args(extra_args_parser_fn, argv), extra_args_parser_fn=extra_args_parser_fn)


__all__ = ["run", "main", "get_parser", "get_params_from_args"]
