"""Ctrl-C (SIGINT) and SIGTERM during `cstorch.save`: the signal is sent at many moments
into a loop of saves (interrupt_script.py, one process, one round per signal). Each time
the save in progress is abandoned or completes, the loop stops at once (at most that one
save ends after the signal), no temporary file is left, every checkpoint in the folder is
complete and holds the state, nothing is printed as "Exception ignored", SIGINT raises
KeyboardInterrupt and SIGTERM exits with 128 + 15. (A SIGTERM that falls between two saves
of this plain loop, outside cstorch, meets its default disposition and ends the process
on the spot: then the folder is checked the same and the next round gets a new process.
Inside a run, test_run_interrupts.py covers that moment too.) Also the unit behaviour of
`signals_at_safe_points`."""
from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest
import torch

import cstorch

pytestmark = pytest.mark.usefixtures("python_signal_handling")  # tests/conftest.py

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from interrupt_script import state  # noqa: E402

ROUNDS = 16


class Child:
    def __init__(self, tmp_path, generation: int = 0):
        """One child process; `generation` counts the restarts, so that each child has its
        own folder for the calibration save (a checkpoint is never overwritten)."""
        env = dict(os.environ)
        env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
        self.stderr = open(tmp_path / f"stderr{generation}.txt", "w+")
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "interrupt_script.py"),
                                      str(tmp_path / f"calibration{generation}")], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.stderr, text=True, env=env)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.split())
        self.lines.put(None)

    def next(self, timeout: float, may_end: bool = False):
        """The child's next line, split; None when it ended (only with `may_end`)."""
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"the child said nothing for {timeout} s: the signal did not stop it") from None
        assert line is not None or may_end, f"the child died:\n{self.errors()}"
        return line

    def send(self, command: str, directory) -> None:
        self.proc.stdin.write(f"{command} {directory}\n")
        self.proc.stdin.flush()
        assert self.next(120) == ["go"]

    def errors(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read()

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.stderr.close()


def _assert_folder(directory, saved: int, sd) -> None:
    names = sorted(os.listdir(directory))
    assert not [n for n in names if n.endswith(".tmp")], names
    assert len(names) in (saved, saved + 1), (saved, names)  # +1: the save the signal landed in completed
    for name in names:
        back = cstorch.load(os.path.join(directory, name))
        assert back["step"] == 7
        for group in ("small", "large"):
            for key, t in sd[group].items():
                assert torch.equal(back[group][key] + 0, t), (name, key)


def _round(child, directory, signum, delay, sd) -> bool:
    """One round; False when SIGTERM landed between two saves and, its disposition being
    the default there, ended the process (what the saves must survive too)."""
    os.makedirs(directory)
    child.send("round", directory)
    time.sleep(delay)
    sent = time.monotonic()
    child.proc.send_signal(signum)
    saved, after = 0, 0
    while True:
        line = child.next(30, may_end=signum == signal.SIGTERM)
        if line is None or line[0] != "saved":
            break
        saved += 1
        after += float(line[2]) > sent
    assert after <= 1, f"{after} saves ended after the signal"
    if line is None:
        assert child.proc.wait(30) == -signal.SIGTERM, child.proc.returncode
        assert child.errors() == "", child.errors()
    else:
        want = ["interrupted"] if signum == signal.SIGINT else ["exit", str(128 + signal.SIGTERM)]
        assert line == want, line
    _assert_folder(directory, saved, sd)
    return line is not None


@pytest.mark.slow
def test_signals_at_many_moments_of_a_save_stop_the_loop_cleanly(tmp_path):
    sd = state()
    child = Child(tmp_path)
    try:
        line = child.next(300)
        assert line[0] == "calibrated", line
        one_save = float(line[1])
        converted = 0  # SIGTERM rounds in which a save turned the signal into SystemExit
        restarts = 0
        for r in range(ROUNDS):
            signum = signal.SIGINT if r % 2 == 0 else signal.SIGTERM
            if _round(child, tmp_path / f"round{r}", signum, one_save * (0.02 + 2.0 * r / ROUNDS), sd):
                converted += signum == signal.SIGTERM
            else:  # the signal fell between two saves (a few microseconds out of a save's milliseconds)
                child.close()
                restarts += 1
                child = Child(tmp_path, restarts)
                assert child.next(300)[0] == "calibrated"
        assert converted >= ROUNDS // 4, converted  # most SIGTERM rounds land inside a save
        last = tmp_path / "last"
        os.makedirs(last)
        child.send("last", last)
        time.sleep(one_save * 0.5)
        child.proc.send_signal(signal.SIGINT)
        child.proc.wait(timeout=60)
        assert child.proc.returncode == -signal.SIGINT, child.proc.returncode  # an uncaught KeyboardInterrupt
        assert "KeyboardInterrupt" in child.errors()
        assert "Exception ignored" not in child.errors(), child.errors()
        saved = sum(n.startswith("ckpt_") for n in os.listdir(last))
        _assert_folder(last, saved, sd)
    finally:
        child.close()


# -- signals_at_safe_points ----------------------------------------------------------------------
from cstorch.storage.safe_signals import signals_at_safe_points  # noqa: E402


def test_a_signal_waits_for_the_safe_point():
    events = []
    with pytest.raises(KeyboardInterrupt):
        with signals_at_safe_points() as check:
            os.kill(os.getpid(), signal.SIGINT)
            events.append("after the signal")  # not interrupted here
            check()
            events.append("after the check")  # never reached
    assert events == ["after the signal"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_signal_after_the_last_safe_point_is_raised_at_the_end():
    with pytest.raises(KeyboardInterrupt):
        with signals_at_safe_points():
            os.kill(os.getpid(), signal.SIGINT)
            done = True
    assert done


def test_sigterm_with_its_default_disposition_exits_cleanly():
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    with pytest.raises(SystemExit) as e:
        with signals_at_safe_points() as check:
            os.kill(os.getpid(), signal.SIGTERM)
            check()
    assert e.value.code == 128 + signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_a_handler_of_the_user_runs_at_the_safe_point_and_may_let_the_save_go_on():
    seen = []
    old = signal.signal(signal.SIGTERM, lambda s, f: seen.append(s))
    try:
        with signals_at_safe_points() as check:
            os.kill(os.getpid(), signal.SIGTERM)
            assert seen == []
            check()
            assert seen == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, old)


@pytest.mark.parametrize("where", ["in_place", "in_memory"])
def test_an_interrupted_save_leaves_nothing(tmp_path, monkeypatch, where):
    if where == "in_memory":  # a disk without room for the most the file can take (issue 49)
        monkeypatch.setattr(cstorch.storage.h5, "room", lambda folder: 0)
    calls = []
    real = cstorch.storage.h5._write_entry

    def write_entry(f, e, value, check):
        calls.append(e.key)
        if len(calls) == 3:
            os.kill(os.getpid(), signal.SIGINT)
        return real(f, e, value, check)

    monkeypatch.setattr(cstorch.storage.h5, "_write_entry", write_entry)
    cstorch.save({"before": torch.ones(2)}, tmp_path / "before.mdl")
    calls.clear()
    with pytest.raises(KeyboardInterrupt):
        cstorch.save({f"t{i}": torch.ones(2) for i in range(10)}, tmp_path / "ckpt.mdl")
    assert calls == ["t0", "t1", "t2"]  # stopped at the next safe point
    assert os.listdir(tmp_path) == ["before.mdl"]


def test_a_save_built_in_memory_stops_between_two_slabs_of_its_bytes(tmp_path, monkeypatch):
    """The bytes of a file built in memory are written in slabs with a safe point after each."""
    h5 = cstorch.storage.h5
    monkeypatch.setattr(h5, "room", lambda folder: 0)
    monkeypatch.setattr(h5, "SLAB_BYTES", 1 << 12)
    writes = []
    real = h5._write_all

    def write_all(fd, data):
        writes.append(len(data))
        if len(writes) == 3:  # the user block, a slab, then the signal during the second slab
            os.kill(os.getpid(), signal.SIGINT)
        real(fd, data)

    monkeypatch.setattr(h5, "_write_all", write_all)
    with pytest.raises(KeyboardInterrupt):
        cstorch.save({"w": torch.randn(64, 256)}, tmp_path / "ckpt.mdl")
    assert len(writes) == 3  # stopped at the safe point after the slab
    assert os.listdir(tmp_path) == []

