"""Start a multi-process run on this machine (loopback):

    python -m cstorch.distributed.launch --num-processes 2 --devices-per-process 2 \\
        examples/gpt.py --num-csx 4

runs the script once per process with `CSTORCH_NUM_PROCESSES`, `CSTORCH_PROCESS_ID`
and `CSTORCH_COORDINATOR_ADDRESS` (127.0.0.1 and a free port) set, see
`cstorch.distributed.processes`. `--devices-per-process N` gives every process N
host (CPU) devices through XLA_FLAGS. Each output line is prefixed with `[pK]`. If a
process fails, the others are stopped (they would wait for it forever) and the
launcher exits with the failed process's status.
"""
from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import threading
import time

from .processes import ENV_COORDINATOR, ENV_NUM_PROCESSES, ENV_PROCESS_ID


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def process_env(num_processes: int, process_id: int, coordinator: str, devices_per_process=None) -> dict:
    env = dict(os.environ, **{ENV_NUM_PROCESSES: str(num_processes), ENV_PROCESS_ID: str(process_id),
                              ENV_COORDINATOR: coordinator})
    if devices_per_process:
        flags = [f for f in env.get("XLA_FLAGS", "").split() if "host_platform_device_count" not in f]
        env["XLA_FLAGS"] = " ".join(flags + [f"--xla_force_host_platform_device_count={devices_per_process}"])
    return env


def _relay(stream, prefix: str, out) -> None:
    for line in iter(stream.readline, ""):
        out.write(f"{prefix}{line}")
        out.flush()


def launch(argv: list[str], num_processes: int, devices_per_process=None, port=None) -> int:
    """Run `python argv...` in `num_processes` processes; the first non-zero exit status
    (0 when all succeed)."""
    coordinator = f"127.0.0.1:{port or free_port()}"
    procs, relays = [], []
    for pid in range(num_processes):
        p = subprocess.Popen([sys.executable, *argv], env=process_env(num_processes, pid, coordinator,
                                                                       devices_per_process),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
        t = threading.Thread(target=_relay, args=(p.stdout, f"[p{pid}] ", sys.stdout), daemon=True)
        t.start()
        procs.append(p)
        relays.append(t)
    status = 0
    try:
        while True:
            codes = [p.poll() for p in procs]  # poll every process, not only up to the first running one
            failed = [c for c in codes if c not in (None, 0)]
            if failed or None not in codes:
                status = failed[0] if failed else 0
                break
            time.sleep(0.1)
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for t in relays:
            t.join(timeout=5)
    return status


def main(args=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cstorch.distributed.launch", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-processes", type=int, required=True)
    parser.add_argument("--devices-per-process", type=int, default=None,
                        help="host (CPU) devices per process, set through XLA_FLAGS")
    parser.add_argument("--port", type=int, default=None, help="coordinator port (default: a free one)")
    parser.add_argument("script", help="the Python script to run in every process")
    parser.add_argument("script_args", nargs=argparse.REMAINDER)
    ns = parser.parse_args(args)
    if ns.num_processes < 1:
        parser.error("--num-processes must be >= 1")
    return launch([ns.script, *ns.script_args], ns.num_processes, ns.devices_per_process, ns.port)


if __name__ == "__main__":
    sys.exit(main())
