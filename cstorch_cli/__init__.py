"""The `cstorch` and `cszoo` commands (`[project.scripts]`; also `python -m cstorch_cli`).

`main` parses the command line with the argparse-only parser of `cstorch_cli.parser`, so
`cstorch --help`, `cstorch fit --help` and usage errors answer without importing torch or
jax; only a command that runs imports cstorch (`cstorch.trainer.cli.run`)."""
from __future__ import annotations

from typing import Optional, Sequence

from .parser import build_parser, program_name


def main(argv: Optional[Sequence[str]] = None, prog: Optional[str] = None) -> int:
    """Run `cstorch` / `cszoo` with `argv` (default: the command line); returns the exit
    status. `prog`: the name to print (default: the one the process runs as)."""
    prog = prog or program_name()
    args = build_parser(prog).parse_args(argv)
    from cstorch.trainer.cli import run  # torch, jax and cstorch load only for a command that runs

    return run(args, prog)


__all__ = ["main"]
