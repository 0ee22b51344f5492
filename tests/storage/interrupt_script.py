"""The child process of test_interrupts.py: saves checkpoints back to back, one round per
command read from stdin, and reports on stdout what happened:

    calibrated <seconds of one save>
    round <dir>  ->  go, then "saved <i> <monotonic time>" per save, then one of
                     "interrupted" (KeyboardInterrupt), "exit <code>" (SystemExit),
                     "finished" (no signal stopped the round)
    last <dir>   ->  the same, without catching anything: the process ends
"""
from __future__ import annotations

import os
import sys
import time

import torch

import cstorch
import cstorch.storage.h5

SAVES_PER_ROUND = 200
cstorch.storage.h5.SLAB_BYTES = 1 << 16  # so that the larger arrays are written in several slabs


def state() -> dict:
    g = torch.Generator().manual_seed(0)
    small = {f"p{i}": torch.randn(16, generator=g) for i in range(300)}
    large = {f"w{i}": torch.randn(256, 256, generator=g) for i in range(4)}
    return {"small": small, "large": large, "step": 7}


def saves(directory: str, sd: dict) -> None:
    for i in range(SAVES_PER_ROUND):
        cstorch.save(sd, os.path.join(directory, f"ckpt_{i}.mdl"))
        print("saved", i, time.monotonic(), flush=True)
    print("finished", flush=True)


def main() -> None:
    sd = state()
    os.makedirs(sys.argv[1], exist_ok=True)
    start = time.monotonic()
    cstorch.save(sd, os.path.join(sys.argv[1], "calibration.mdl"))
    print("calibrated", time.monotonic() - start, flush=True)
    for line in sys.stdin:
        command, directory = line.split()
        print("go", flush=True)
        if command == "last":
            saves(directory, sd)
            return
        try:
            saves(directory, sd)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
        except SystemExit as e:
            print("exit", e.code, flush=True)


if __name__ == "__main__":
    main()
