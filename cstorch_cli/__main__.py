"""`python -m cstorch_cli fit params.yaml ...`: the `cstorch` command."""
import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
