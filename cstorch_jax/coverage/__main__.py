"""`python -m cstorch_jax.coverage`: run PyTorch's OpInfo database through the engine
and print, per op, the forward and gradient status, then the totals.

    python -m cstorch_jax.coverage                 # a fixed, seeded subset of samples per op
    python -m cstorch_jax.coverage --full          # every sample of every op
    python -m cstorch_jax.coverage --ops sort,topk -v
    python -m cstorch_jax.coverage --dtypes float32,bfloat16,float16   # totals per dtype
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import sys
import time

from .opinfo import DEFAULT_LIMIT, FAIL, OUT_OF_SCOPE, PASS, Outcome
from .worker import OPS, check_one, init_worker

DTYPES = ("float32", "bfloat16", "float16")


def _cell(o: Outcome) -> str:
    if o.status in (PASS, FAIL):
        return f"{o.status} {o.passed}/{o.passed + o.failed}"
    return o.status


def summarize(results: dict[str, tuple[Outcome, Outcome]]) -> dict[str, tuple[int, int]]:
    """One dtype's totals: {"forward": (passed ops, in-scope ops), "grad": (passed,
    in-scope differentiable ops)}."""
    totals = {}
    for i, mode in enumerate(("forward", "grad")):
        statuses = [r[i].status for r in results.values()]
        totals[mode] = (statuses.count(PASS), statuses.count(PASS) + statuses.count(FAIL))
    return totals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cstorch_jax.coverage", description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="run every sample (default: a seeded subset)")
    parser.add_argument("--limit", type=int, default=DEFAULT_LIMIT, help="samples per op and mode without --full")
    parser.add_argument("--ops", help="comma-separated op names (as in op_db, e.g. sort,nn.functional.gelu)")
    parser.add_argument("--dtypes", default="float32", help=f"comma-separated, among {','.join(DTYPES)}")
    parser.add_argument("--jobs", type=int, default=max(1, min(4, multiprocessing.cpu_count())))
    parser.add_argument("--timeout", type=int, default=300, help="seconds per op")
    parser.add_argument("-v", "--verbose", action="store_true", help="print the reasons of failures and scope")
    parser.add_argument("--json", metavar="PATH", help="also write every op's outcomes (status, reasons, ATen ops run)")
    args = parser.parse_args(argv)

    init_worker()
    names = list(OPS)
    if args.ops:
        wanted = args.ops.split(",")
        unknown = [w for w in wanted if w not in OPS]
        if unknown:
            parser.error(f"not in op_db: {', '.join(unknown)}")
        names = wanted
    dtypes = args.dtypes.split(",")
    if any(d not in DTYPES for d in dtypes):
        parser.error(f"--dtypes takes {', '.join(DTYPES)}; got {args.dtypes}")
    limit = None if args.full else args.limit
    work = [(n, d, limit, args.timeout) for d in dtypes for n in names]
    results: dict[str, dict[str, tuple[Outcome, Outcome]]] = {d: {} for d in dtypes}
    start = time.perf_counter()
    if args.jobs > 1 and len(work) > 1:
        pool = multiprocessing.get_context("spawn").Pool(args.jobs, initializer=init_worker)
        stream = pool.imap_unordered(check_one, work)
    else:
        pool, stream = None, map(check_one, work)
    width = max(len(n) for n in names)
    for k, (name, dtype, fwd, grad, seconds) in enumerate(stream, 1):
        results[dtype][name] = (fwd, grad)
        print(f"[{k:>4}/{len(work)}] {name:<{width}} {dtype:<8}  forward: {_cell(fwd):<14} grad: {_cell(grad):<14} "
              f"{seconds:5.1f}s", flush=True)
        if args.verbose:
            for reason in dict.fromkeys(fwd.reasons + grad.reasons):
                print(f"{'':>12}{reason}")
    if pool is not None:
        pool.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({dtype: {name: {mode: {**dataclasses.asdict(o), "ops": sorted(o.ops)}
                                      for mode, o in zip(("forward", "grad"), r)}
                               for name, r in sorted(by_op.items())}
                       for dtype, by_op in results.items()}, f, indent=1)
    print(f"\nOpInfo ops: {len(names)}, {'every sample' if limit is None else f'up to {limit} samples per op and mode'}, "
          f"{time.perf_counter() - start:.0f} s")
    for dtype, by_op in results.items():
        out_of_scope = sum(r[0].status == OUT_OF_SCOPE for r in by_op.values())
        print(f"{dtype} ({out_of_scope} ops out of scope):")
        for mode, (passed, total) in summarize(by_op).items():
            pct = 100.0 * passed / total if total else 0.0
            print(f"  {mode:<8} {passed:>4} / {total:<4} in-scope ops pass ({pct:.1f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
