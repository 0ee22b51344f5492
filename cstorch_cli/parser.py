"""The `cstorch` / `cszoo` command line's parser: argparse only, so that `cstorch --help`
and usage errors answer before torch and jax are imported (`cstorch_cli.main`). What the
flags do is in `cstorch.trainer.cli`, which runs the parsed command."""
from __future__ import annotations

import argparse
import os
import sys
from typing import Optional

#: cszoo's flags that set a `ClusterConfig` field of the same name (and, from the legacy runner's
#: flags, num_csx): with CSX_FLAGS' num_workers_per_csx they go to init.backend.cluster_config
CLUSTER_FLAGS = ("num_csx", "num_workers_per_csx", "mgmt_address", "mgmt_namespace", "credentials_path",
                 "job_labels", "job_priority", "mount_dirs", "python_paths", "disable_version_check")
#: the flags that set CSX-only settings (also those of the legacy runner, `runner.build_parser`)
CSX_FLAGS = (*CLUSTER_FLAGS, "compile_only", "validate_only")
#: the names the program answers to (`[project.scripts]`); errors print the one it runs as
PROGRAMS = ("cstorch", "cszoo")
#: the flags that override the YAML (the table of `cstorch.trainer.cli`'s doc)
OVERRIDE_FLAGS = ("model_dir", "checkpoint_path", "target_device", *CSX_FLAGS, "logging", "max_steps", "eval_steps")
#: the values of --logging
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def build_parser(prog: str = "cstorch") -> argparse.ArgumentParser:
    """The parser of the program named `prog` (`PROGRAMS`; the name only changes what it prints)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("params", help="the trainer YAML (the `trainer:` format or the legacy runconfig format)")
    common.add_argument("--target_device", type=str.upper, choices=("CSX", "CPU", "GPU"),
                        help="where the run executes (default: the YAML's device/backend, else CSX)")
    common.add_argument("-o", "--model_dir", help="folder for checkpoints and logs (default: the YAML's, else "
                                                  "./model_dir)")
    common.add_argument("--checkpoint_path", help="checkpoint to load (default: the latest one in model_dir)")
    common.add_argument("--num_csx", type=positive_int, help="number of CSX systems (data-parallel devices)")
    common.add_argument("--num_workers_per_csx", type=positive_int, help="data workers per CSX")
    cluster = common.add_argument_group("cluster settings (cszoo; ClusterConfig fields, no effect here except "
                                        "mgmt_address, the multi-host coordinator)")
    cluster.add_argument("--mgmt_address", help="<host>:<port> of the coordinator of a multi-host run")
    cluster.add_argument("--mgmt_namespace", help=argparse.SUPPRESS)
    cluster.add_argument("--credentials_path", help="cluster credentials (no effect here)")
    cluster.add_argument("--job_labels", nargs="+", metavar="KEY=VALUE", help="job labels (no effect here)")
    cluster.add_argument("--job_priority", choices=("p1", "p2", "p3"), help="job priority (no effect here)")
    cluster.add_argument("--mount_dirs", nargs="+", metavar="DIR", help="folders to mount (no effect here)")
    cluster.add_argument("--python_paths", nargs="+", metavar="DIR", help="worker PYTHONPATH (no effect here)")
    cluster.add_argument("--disable_version_check", action="store_true", default=None,
                         help="skip the cluster's version check (no effect here)")
    only = common.add_mutually_exclusive_group()
    only.add_argument("--compile_only", action="store_true", default=None, help="compile, do not run")
    only.add_argument("--validate_only", action="store_true", default=None,
                      help="check that the step can be compiled, do not run")
    common.add_argument("--logging", type=str.upper, choices=LOG_LEVELS, help="log level (default INFO)")
    common.add_argument("--max_steps", type=positive_int, help="train up to this global step (quick runs)")
    common.add_argument("--eval_steps", type=positive_int, help="batches per validation (quick runs)")

    parser = argparse.ArgumentParser(
        prog=prog, description="Run a cstorch trainer YAML (the Model Zoo `trainer:` format).",
        epilog="Command-line values override the YAML; see `python -m pydoc cstorch.trainer.cli`.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{fit,validate,validate_all}")
    sub.add_parser("fit", parents=[common], help="train, validating when the YAML has a val dataloader")
    sub.add_parser("validate", parents=[common], help="validate a checkpoint")
    sub.add_parser("validate_all", parents=[common], help="validate every checkpoint (or those given)")
    return parser


def program_name(argv0: Optional[str] = None) -> str:
    """The name the program runs as: `cszoo` when started as cszoo, else `cstorch`."""
    name = os.path.basename(sys.argv[0] if argv0 is None else argv0)
    return name if name in PROGRAMS else "cstorch"
