"""Inspect cstorch checkpoints from the command line (a test helper, run as a script by
tests/storage/test_checkpoint_scripts.py; it only reads the files it is given).

    python ckpt_inspect.py list CKPT
    python ckpt_inspect.py compare OLD NEW [--rows N] [--bins N] [--jobs N]

It prints one JSON object per line.

`list`: one line per tensor, `{"name", "dtype", "shape", "itemsize"}`, in the
checkpoint's order; nested dicts and lists give `/`-joined names. `cstorch.load(path,
map_location=None)` is lazy, so no tensor value is read.

`compare`: for each tensor name the two files share, in a pool of `--jobs` threads, the
values are read `--rows` leading-dimension rows at a time as float64 and compared:
`elements`, `differing` (two NaNs count as equal), `max_abs` and `mean_abs` (over all
elements) of the differences of pairs that are both finite, `nonfinite_mismatch` (differing
pairs where one side is not finite), and `tvd`, the total variation distance of the two
tensors' histograms (`--bins` bins over the finite range of both). A shape mismatch gives
`{"name", "error"}`. Then `{"summary": {"old_only", "new_only", "compared"}}`.

A file `cstorch.load` refuses gives a single `{"error": ...}` line.
"""
from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

import cerebras.pytorch as cstorch


def emit(obj) -> None:
    sys.stdout.write(json.dumps(obj, sort_keys=True) + "\n")


def tensors_of(state, prefix: str = "") -> dict:
    """The tensors of a (nested) state, by `/`-joined name, in order."""
    out = {}
    if isinstance(state, torch.Tensor):
        out[prefix] = state
    elif isinstance(state, dict):
        for key, value in state.items():
            out.update(tensors_of(value, f"{prefix}/{key}" if prefix else str(key)))
    elif isinstance(state, (list, tuple)):
        for i, value in enumerate(state):
            out.update(tensors_of(value, f"{prefix}/{i}" if prefix else str(i)))
    return out


def open_checkpoint(path: str):
    try:
        return tensors_of(cstorch.load(path, map_location=None))
    except Exception as e:  # reported, not raised: the caller reads stdout
        emit({"error": f"cannot load {path}: {type(e).__name__}: {e}"})
        return None


def row_blocks(t: torch.Tensor, rows: int):
    """`t` as float64 numpy vectors, `rows` leading rows at a time (a scalar: once)."""
    if t.dim() == 0:
        yield np.array([t.to(torch.float64).item()])
        return
    for start in range(0, t.shape[0], rows):
        yield t[start:start + rows].to(torch.float64).numpy().reshape(-1)


def finite_bounds(t: torch.Tensor):
    """(min, max) of the finite values of `t`, found in its own dtype; None if none."""
    if t.numel() == 0:
        return None
    if not t.is_floating_point():
        return float(t.min()), float(t.max())
    keep = torch.isfinite(t)
    if not bool(keep.any()):
        return None
    values = torch.masked_select(t, keep)
    return float(values.min()), float(values.max())


def compare_pair(name: str, old: torch.Tensor, new: torch.Tensor, rows: int, bins: int) -> dict:
    if tuple(old.shape) != tuple(new.shape):
        return {"name": name, "error": f"shapes differ: {list(old.shape)} vs {list(new.shape)}"}
    bounds = [b for b in (finite_bounds(old), finite_bounds(new)) if b is not None]
    lo = min((b[0] for b in bounds), default=0.0)
    hi = max((b[1] for b in bounds), default=0.0)
    hist_old, hist_new = np.zeros(bins, np.int64), np.zeros(bins, np.int64)
    elements = differing = nonfinite = 0
    max_abs = sum_abs = 0.0
    for a, b in zip(row_blocks(old, rows), row_blocks(new.to("cpu"), rows)):
        elements += a.size
        differ = ~((a == b) | (np.isnan(a) & np.isnan(b)))
        differing += int(differ.sum())
        finite = np.isfinite(a) & np.isfinite(b)
        gap = np.abs(a[differ & finite] - b[differ & finite])
        if gap.size:
            max_abs = max(max_abs, float(gap.max()))
            sum_abs += float(gap.sum())
        nonfinite += int((differ & ~finite).sum())
        for values, hist in ((a, hist_old), (b, hist_new)):
            values = values[np.isfinite(values)]
            if hi > lo:
                hist += np.histogram(values, bins=bins, range=(lo, hi))[0]
            else:
                hist[0] += values.size
    p_total, q_total = hist_old.sum(), hist_new.sum()
    if p_total == 0 or q_total == 0:
        tvd = 0.0 if p_total == q_total else 1.0
    else:
        tvd = 0.5 * float(np.abs(hist_old / p_total - hist_new / q_total).sum())
    return {"name": name, "elements": int(elements), "differing": differing, "max_abs": max_abs,
            "mean_abs": sum_abs / elements if elements else 0.0, "nonfinite_mismatch": nonfinite, "tvd": tvd}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="ckpt_inspect")
    sub = parser.add_subparsers(dest="command", required=True)
    listing = sub.add_parser("list")
    listing.add_argument("path")
    compare = sub.add_parser("compare")
    compare.add_argument("old")
    compare.add_argument("new")
    compare.add_argument("--rows", type=int, default=1024)
    compare.add_argument("--bins", type=int, default=32)
    compare.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args(argv)

    if args.command == "list":
        state = open_checkpoint(args.path)
        for name, t in (state or {}).items():
            emit({"name": name, "dtype": str(t.dtype), "shape": list(t.shape), "itemsize": t.element_size()})
        return 0

    old, new = open_checkpoint(args.old), open_checkpoint(args.new)
    if old is None or new is None:
        return 0
    names = [n for n in new if n in old]
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for result in pool.map(lambda n: compare_pair(n, old[n], new[n], args.rows, args.bins), names):
            emit(result)
    emit({"summary": {"old_only": [n for n in old if n not in new], "new_only": [n for n in new if n not in old],
                      "compared": len(names)}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
