"""Benchmarks: cstorch vs eager torch and hand-written JAX, measured side by side."""
