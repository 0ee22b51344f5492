"""`python -m cstorch_jax.coverage`: run PyTorch's OpInfo database through the engine
and print, per op, the forward and gradient status, then the totals.

    python -m cstorch_jax.coverage                 # a fixed, seeded subset of samples per op
    python -m cstorch_jax.coverage --full          # every sample of every op
    python -m cstorch_jax.coverage --ops sort,topk -v
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


def _cell(o: Outcome) -> str:
    if o.status in (PASS, FAIL):
        return f"{o.status} {o.passed}/{o.passed + o.failed}"
    return o.status


def summarize(results: dict[str, tuple[Outcome, Outcome]]) -> dict[str, tuple[int, int]]:
    """{"forward": (passed ops, in-scope ops), "grad": (passed, in-scope differentiable)}."""
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
    limit = None if args.full else args.limit
    work = [(n, limit, args.timeout) for n in names]
    results: dict[str, tuple[Outcome, Outcome]] = {}
    start = time.perf_counter()
    if args.jobs > 1 and len(work) > 1:
        pool = multiprocessing.get_context("spawn").Pool(args.jobs, initializer=init_worker)
        stream = pool.imap_unordered(check_one, work)
    else:
        pool, stream = None, map(check_one, work)
    width = max(len(n) for n in names)
    for k, (name, fwd, grad, seconds) in enumerate(stream, 1):
        results[name] = (fwd, grad)
        print(f"[{k:>4}/{len(work)}] {name:<{width}}  forward: {_cell(fwd):<14} grad: {_cell(grad):<14} {seconds:5.1f}s",
              flush=True)
        if args.verbose:
            for reason in dict.fromkeys(fwd.reasons + grad.reasons):
                print(f"{'':>12}{reason}")
    if pool is not None:
        pool.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({name: {mode: {**dataclasses.asdict(o), "ops": sorted(o.ops)} for mode, o in zip(("forward", "grad"), r)}
                       for name, r in sorted(results.items())}, f, indent=1)
    totals = summarize(results)
    out_of_scope = sum(r[0].status == OUT_OF_SCOPE for r in results.values())
    print(f"\nOpInfo ops: {len(results)} ({out_of_scope} out of scope), float32, "
          f"{'every sample' if limit is None else f'up to {limit} samples per op and mode'}, "
          f"{time.perf_counter() - start:.0f} s")
    for mode, (passed, total) in totals.items():
        pct = 100.0 * passed / total if total else 0.0
        print(f"  {mode:<8} {passed:>4} / {total:<4} in-scope ops pass ({pct:.1f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
