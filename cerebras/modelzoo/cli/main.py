"""`cszoo fit|validate|validate_all params.yaml [flags]`: the `cstorch` program under
the Model Zoo's name (`cstorch.trainer.cli`); `python -m cerebras.modelzoo.cli.main`."""
import sys

from cstorch.trainer.cli import main as _main


def main(argv=None) -> int:
    """Run `cszoo` with `argv` (default: the command line); returns the exit status."""
    return _main(argv, prog="cszoo")


if __name__ == "__main__":
    sys.exit(main())
