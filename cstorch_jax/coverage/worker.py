"""One OpInfo op per call, in this process or in a worker of the coverage command's pool
(spawned workers import this module, not the command's __main__)."""
from __future__ import annotations

import signal
import time
import warnings

import torch

from .opinfo import FAIL, Outcome, check_op, load_op_db, op_id

OPS: dict = {}


def init_worker() -> None:
    warnings.filterwarnings("ignore")
    OPS.update({op_id(op): op for op in load_op_db()})


class _Timeout(Exception):
    pass


def _on_alarm(*_):
    raise _Timeout


def check_one(args) -> tuple[str, str, Outcome, Outcome, float]:
    """(name, dtype name, forward outcome, grad outcome, seconds) of op `name` at the
    dtype named `dtype` ("float32", "bfloat16", "float16"); a timeout is a failure."""
    name, dtype, limit, timeout = args
    start = time.perf_counter()
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(timeout)
    try:
        fwd, grad = check_op(OPS[name], getattr(torch, dtype), limit=limit)
    except _Timeout:
        fwd = grad = Outcome(FAIL, reasons=[f"timeout after {timeout} s"])
    finally:
        signal.alarm(0)
    return name, dtype, fwd, grad, time.perf_counter() - start
