"""Two runs on one model_dir (issue 29): an advisory lock (`model_dir/.cstorch.lock`).

A second process stops at once with an error naming the holder's pid and host; once the
holder died (SIGKILL: the kernel drops its flock) the next run takes the stale lock over
with a note. The lock is held from the Trainer's construction to the end of each
fit / validate / validate_all (also when it raises); within one process several
Trainers may share a model_dir."""
from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

import cstorch
from cstorch.trainer import Callback, Trainer, TrainingLoop, ValidationLoop
from toy import Net, loader, sgd

HOLDER = textwrap.dedent('''
    import sys, time
    import torch
    from cstorch.trainer import Trainer

    Trainer(device="CPU", model_dir=sys.argv[1], model=torch.nn.Linear(2, 2), seed=0, loggers=[])
    print("ready", flush=True)
    time.sleep(300)
''')

#: exit status 0 when the lock file can be flocked now (nobody holds it), 1 when it is held
PROBE = textwrap.dedent('''
    import fcntl, sys
    with open(sys.argv[1], "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            sys.exit(1)
''')


def is_locked(model_dir) -> bool:
    """Whether another process holds the lock of `model_dir` (asked from a fresh process:
    flock locks do not conflict within the process that holds them)."""
    rc = subprocess.run([sys.executable, "-c", PROBE, str(model_dir / ".cstorch.lock")], timeout=60).returncode
    assert rc in (0, 1)
    return rc == 1


def trainer(model_dir, **kw):
    kw.setdefault("loop", TrainingLoop(num_steps=2))
    kw.setdefault("optimizer", sgd())
    return Trainer(device="CPU", model_dir=str(model_dir), model=Net, seed=1, loggers=[], **kw)


@pytest.fixture
def holder(tmp_path):
    """A process whose Trainer holds the lock of tmp_path/model (it sleeps), killed at the end."""
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path / "model")], stdout=subprocess.PIPE,
                            text=True, cwd=str(tmp_path))
    try:
        assert proc.stdout.readline().strip() == "ready", "the holder process did not start"
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=60)
        proc.stdout.close()


def test_a_second_run_stops_at_once_and_a_stale_lock_is_taken_over(tmp_path, holder, caplog):
    model_dir = tmp_path / "model"
    before = sorted(os.listdir(model_dir))
    start = time.perf_counter()
    with pytest.raises(cstorch.trainer.ModelDirInUseError) as info:
        trainer(model_dir)
    assert time.perf_counter() - start < 10  # no waiting for the holder
    message = str(info.value)
    assert f"pid {holder.pid} on host {socket.gethostname()}" in message, message
    assert str(model_dir) in message and "Wait" in message and "another model_dir" in message, message
    assert "delete" not in message.lower()
    assert cstorch.backend() is None  # nothing was built
    assert sorted(os.listdir(model_dir)) == before  # and nothing written into the other run's folder

    holder.send_signal(signal.SIGKILL)  # dies without releasing: the lock file still names it
    holder.wait(timeout=60)
    with caplog.at_level(logging.WARNING, logger="cstorch.trainer"):
        t = trainer(model_dir)
    notes = [r.getMessage() for r in caplog.records if "stale" in r.getMessage()]
    assert len(notes) == 1 and f"pid {holder.pid}" in notes[0], caplog.text
    assert is_locked(model_dir)
    t.fit(loader())
    assert t.global_step == 2
    assert not is_locked(model_dir)  # released at the end of fit

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="cstorch.trainer"):
        trainer(model_dir).finalize()  # a clean release leaves no stale lock behind
    assert "stale" not in caplog.text


class Boom(Callback):
    def on_train_batch_start(self, trainer, model, batch, batch_idx):
        raise RuntimeError("boom")


def test_the_lock_is_held_from_construction_to_the_end_of_each_run(tmp_path):
    model_dir = tmp_path / "model"
    t = trainer(model_dir, loop=TrainingLoop(num_steps=2, eval_steps=1))
    assert is_locked(model_dir)
    t.fit(loader())
    assert not is_locked(model_dir)
    t.validate(loader(seed=1))  # taken again for the run, released at its end
    assert not is_locked(model_dir)
    t.validate_all(loader(seed=1))
    assert not is_locked(model_dir)

    failing = trainer(model_dir, callbacks=[Boom()])
    assert is_locked(model_dir)
    with pytest.raises(RuntimeError, match="boom"):
        failing.fit(loader())
    assert not is_locked(model_dir)  # released on the exception too


def test_trainers_of_one_process_share_a_model_dir(tmp_path):
    model_dir = tmp_path / "model"
    first = trainer(model_dir)
    second = trainer(model_dir, loop=ValidationLoop(eval_steps=1), optimizer=None)
    first.fit(loader())
    assert is_locked(model_dir)  # the second still holds it
    second.validate(loader(seed=1))
    assert not is_locked(model_dir)


def test_a_failed_construction_releases_the_lock(tmp_path):
    model_dir = tmp_path / "model"

    def broken():
        raise RuntimeError("no model today")

    with pytest.raises(RuntimeError, match="no model today"):
        Trainer(device="CPU", model_dir=str(model_dir), model=broken, seed=1, loggers=[])
    assert not is_locked(model_dir)


def test_a_model_dir_deleted_and_made_anew_is_locked_anew(tmp_path):
    model_dir = tmp_path / "model"
    first = trainer(model_dir)
    shutil.rmtree(model_dir)  # the first Trainer's lock file is gone with it
    second = trainer(model_dir)
    assert is_locked(model_dir)
    first.finalize()
    assert is_locked(model_dir)  # releasing the old file's lock leaves the new one held
    second.finalize()
    assert not is_locked(model_dir)
