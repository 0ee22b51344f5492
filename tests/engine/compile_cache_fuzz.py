"""Fuzz of compile-cache entries (`cstorch_jax/compile_cache.py`), run as its own process by
tests/engine/test_compile_cache_fuzz.py:

    python tests/engine/compile_cache_fuzz.py CACHE_DIR MARKER [--cases N] [--seed S]

Stores the entry of one small step (mutated, read-only and batch inputs, dropout: the RNG
key), then, case after case, writes a mutated copy over it and looks the step up as a
training run does (`Executable.for_step`): bytes flipped, zeroed, truncated or appended;
header fields removed or given a value of another type (the checksum recomputed, so the
validation behind it is reached); the entry moved under another key or signature; foreign
pickles whose payload would create MARKER if it ran, as the whole file, as the executable's
bytes behind a valid checksum, and under the name the cache used to read (`<sig>.pkl`).
Every case must either load the exact program (same graph description, outputs equal bit
for bit to the original's) or be refused with exactly one `CompileCacheWarning` that names
the entry and `CSTORCH_CACHE=0`, the damaged entry gone (most cases stop at the lookup,
`Executable.lookup`; every `--compile-every`-th goes on to the compile, which must equal
the original and replace the entry);
no other exception, no crash, and MARKER never exists. Prints one JSON line: cases,
outcomes per family, failures (empty when all passed)."""
from __future__ import annotations

import argparse
import base64
import copy
import json
import os
import pickle
import random
import sys
import warnings
from pathlib import Path


class Payload:
    """Unpickling this creates `path` (a stand-in for any code)."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def _paths(node, prefix=()):
    """Every (path) to a dict key or list item of a JSON value."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield (*prefix, k)
            yield from _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield (*prefix, i)
            yield from _paths(v, (*prefix, i))


def _parent(root, path):
    for p in path[:-1]:
        root = root[p]
    return root


def _other_type(value, rng):
    choices = [None, True, 0, -1, 2 ** 70, 1.5, "x", "", [], {}, [1, "a"], {"list": []}, {"executable": None},
               {"call": ["os.system", ["touch x"], None]}, {"new": ["builtins.object", [], None]}]
    choices = [c for c in choices if type(c) is not type(value)]
    return copy.deepcopy(rng.choice(choices))


def mutate(family: str, data: bytes, rng: random.Random, marker: Path, cc) -> bytes:
    if family == "flip":
        b = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            b[rng.randrange(len(b))] ^= rng.randint(1, 255)
        return bytes(b)
    if family == "zero":
        i = rng.randrange(len(data))
        n = rng.randint(1, 64)
        return data[:i] + bytes(min(n, len(data) - i)) + data[i + n:]
    if family == "truncate":
        return data[: rng.randrange(len(data))]
    if family == "append":
        return data + os.urandom(rng.randint(1, 64))
    header, blob = cc.unpack(data)
    if family in ("remove field", "retype field"):
        paths = list(_paths(header))
        path = rng.choice(paths)
        parent = _parent(header, path)
        if family == "remove field":
            del parent[path[-1]]
        else:
            parent[path[-1]] = _other_type(parent[path[-1]], rng)
        return cc.pack(header, blob)
    if family == "other key":
        header[rng.choice(["key", "signature"])] = "0" * 64
        return cc.pack(header, blob)
    payload = Payload(marker)
    if family == "pickle file":
        return pickle.dumps(rng.choice([payload, {"format": 1, "graph": payload, "program": payload}]),
                            protocol=rng.randint(0, pickle.HIGHEST_PROTOCOL))
    if family == "pickle executable":
        return cc.pack(header, pickle.dumps(payload))
    if family == "pickle in header":
        header["program"] = {"bytes": base64.b64encode(pickle.dumps(payload)).decode()}
        return cc.pack(header, blob)
    raise ValueError(family)


FAMILIES = ["flip", "zero", "truncate", "append", "remove field", "retype field", "other key", "pickle file",
            "pickle executable", "pickle in header"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("cache_dir")
    p.add_argument("marker")
    p.add_argument("--cases", type=int, default=60)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--compile-every", type=int, default=25, help="every N-th case goes through a whole compile")
    args = p.parse_args(argv)
    os.environ["CSTORCH_CACHE"] = "1"
    os.environ["CSTORCH_CACHE_DIR"] = args.cache_dir
    marker = Path(args.marker)

    import jax
    import numpy as np
    import torch

    from cstorch_jax import Executable, compile_cache
    from cstorch_jax.capture import trace_step

    torch.manual_seed(0)
    w, b, x = torch.randn(4, 8, requires_grad=True), torch.randn(4), torch.randn(16, 8)

    def fn(state, batch):
        w, b = state
        loss = torch.nn.functional.dropout(batch[0] @ w.t() + b, 0.25).relu().sum()
        loss.backward()
        with torch.no_grad():
            w.sub_(0.1 * w.grad)
        return [loss]

    trace = trace_step(fn, [w, b], [x])
    first = Executable.for_step(trace, ["x"], cache_key="fuzz")
    (entry,) = Path(args.cache_dir).glob("steps/fuzz/*.entry")
    original = entry.read_bytes()

    def run(ex):
        out = ex([w.detach().numpy()], [b.numpy()], [x.numpy()], jax.random.PRNGKey(3))
        return [np.asarray(a) for a in jax.tree_util.tree_leaves(out)]

    def described(ex):
        c = ex.captured
        return (c.state_specs, c.batch_specs, c.output_specs, c.mutated, c.unused, c.graph_hash, ex.uses_rng,
                ex.batch_names)

    reference, reference_desc = run(first), described(first)
    rng = random.Random(args.seed)
    outcomes: dict = {}
    failures: list = []
    for case in range(args.cases):
        family = FAMILIES[case % len(FAMILIES)]
        what = f"case {case} ({family})"
        try:
            data = mutate(family, original, rng, marker, compile_cache)
        except (IndexError, ValueError):  # nothing to mutate that way
            continue
        entry.write_bytes(data)
        if family == "pickle file":
            entry.with_suffix(".pkl").write_bytes(data)
        end_to_end = case % args.compile_every == 0  # else the lookup alone (a miss is what makes a run compile)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                if end_to_end:
                    ex = Executable.for_step(trace, ["x"], cache_key="fuzz")
                    ex = ex if ex.from_cache else None
                else:
                    ex, _ = Executable.lookup(trace, "fuzz", ["x"])
                got, got_desc = (run(ex), described(ex)) if ex is not None else (None, None)
            except Exception as e:  # noqa: BLE001
                failures.append(f"{what}: {type(e).__name__}: {e}")
                continue
        ours = [w for w in caught if issubclass(w.category, compile_cache.CompileCacheWarning)]
        others = [str(w.message) for w in caught if w not in ours]
        if ex is not None:
            outcome = "loaded"
            if ours or got_desc != reference_desc or not all(np.array_equal(a, r) for a, r in zip(got, reference)):
                failures.append(f"{what}: loaded a program other than the original")
        else:
            outcome = "refused"
            if len(ours) != 1 or str(entry) not in str(ours[0].message) or "CSTORCH_CACHE=0" not in str(
                    ours[0].message):
                failures.append(f"{what}: refused with warnings {[str(w.message) for w in ours]}")
            if end_to_end:  # compiled again, equal to the original, stored over the damaged entry
                ex = Executable.for_step(trace, ["x"])
                if not all(np.array_equal(a, r) for a, r in zip(run(ex), reference)):
                    failures.append(f"{what}: the recompiled program differs")
                if not entry.exists() or entry.read_bytes() == data:
                    failures.append(f"{what}: the damaged entry was not replaced")
            elif entry.exists():
                failures.append(f"{what}: the damaged entry was not removed")
        if others:
            failures.append(f"{what}: other warnings {others}")
        if marker.exists():
            failures.append(f"{what}: a pickle in the cache ran")
            marker.unlink()
        outcomes.setdefault(family, {}).setdefault(outcome, 0)
        outcomes[family][outcome] += 1
        entry.with_suffix(".pkl").unlink(missing_ok=True)
        entry.write_bytes(original)
    print(json.dumps({"cases": args.cases, "outcomes": outcomes, "failures": failures[:20],
                      "n_failures": len(failures)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
