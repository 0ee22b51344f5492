"""`python -m benchmarks`: the benchmark suite (see `benchmarks.suite`)."""
import sys

from .suite import main

sys.exit(main())
