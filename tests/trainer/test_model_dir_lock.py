"""Two runs on one model_dir (issue 29): an advisory lock (`model_dir/.cstorch.lock`).

A second process stops at once with an error naming the holder's pid and host; once the
holder died (SIGKILL: the kernel drops its flock) the next run takes the stale lock over
with a note. The lock is held from the Trainer's construction to the end of each
fit / validate / validate_all (also when it raises); within one process several
Trainers may share a model_dir. Issue 49: a child made by fork does not hold the lock
after its parent died; a lock file deleted or replaced during a run stops the run before
its next checkpoint; a model_dir the user cannot write is a configuration error."""
from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import stat
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

import cstorch
from cstorch.trainer import Callback, Checkpoint, Trainer, TrainingLoop, ValidationLoop
from toy import Net, loader, sgd

HOLDER = textwrap.dedent('''
    import sys, time
    import torch
    from cstorch.trainer import Trainer

    trainer = Trainer(device="CPU", model_dir=sys.argv[1], model=torch.nn.Linear(2, 2), seed=0, loggers=[])
    print("ready", flush=True)  # `trainer` holds the lock (one no name holds goes with the next collection)
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


# -- issue 49 ---------------------------------------------------------------------------------------
FORKING_HOLDER = textwrap.dedent('''
    import multiprocessing, sys, time
    import torch
    from cstorch.trainer import Trainer

    def work(started):
        started.set()  # the child runs: the at-fork hooks, which run first, are done
        time.sleep(300)

    # held in a name: a Trainer no name holds is released whenever the garbage collector runs
    trainer = Trainer(device="CPU", model_dir=sys.argv[1], model=torch.nn.Linear(2, 2), seed=0, loggers=[])
    fork = multiprocessing.get_context("fork")
    started = fork.Event()
    child = fork.Process(target=work, args=(started,))  # a fork-based worker
    child.start()
    print("ready" if started.wait(timeout=120) else "child-never-ran", child.pid, flush=True)
    time.sleep(300)
''')


def test_a_forked_child_does_not_keep_the_lock_after_its_parent_died(tmp_path):
    """A child made by fork (multiprocessing, fork-based DataLoader workers) inherits the
    lock file's descriptor: it used to keep the lock after the run was killed, and the next
    run was refused ("in use by pid <dead pid>") for as long as the child lived. The parent
    is killed only once the child has run (a busy host can leave a new child unscheduled, its
    descriptor not yet closed)."""
    model_dir = tmp_path / "model"
    script = tmp_path / "holder.py"
    script.write_text(FORKING_HOLDER)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    proc = subprocess.Popen([sys.executable, str(script), str(model_dir)], stdout=subprocess.PIPE, text=True,
                            cwd=str(tmp_path), env=env)
    child = None
    try:
        word, child = proc.stdout.readline().split()
        child = int(child)
        assert word == "ready"
        assert is_locked(model_dir)  # the parent still holds it: the child did not unlock it for both
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        os.kill(child, 0)  # the child lives on
        assert not is_locked(model_dir)
        trainer(model_dir).finalize()  # the next run starts (taking over the dead run's lock)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=60)
        proc.stdout.close()
        if child is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)


class BreakTheLock(Callback):
    """Before the second batch, does to model_dir what `how` says."""

    def __init__(self, how: str):
        self.how = how

    def on_train_batch_start(self, trainer, model, batch, batch_idx):
        if batch_idx != 1:
            return
        lock = trainer.model_dir / ".cstorch.lock"
        if self.how == "deleted":
            lock.unlink()
        elif self.how == "replaced":
            lock.unlink()
            lock.write_text("another run's lock")
        else:  # the folder removed and made anew
            shutil.rmtree(trainer.model_dir)
            trainer.model_dir.mkdir()


@pytest.mark.parametrize("how", ["deleted", "replaced", "folder_recreated"])
def test_a_lock_file_deleted_or_replaced_during_a_run_stops_it_before_it_writes(tmp_path, how):
    """A second run would lock the new file and both would write checkpoints into one folder:
    the run checks, before each checkpoint, that the file at the lock's path is the one it
    locked, and stops with an error saying what happened."""
    model_dir = tmp_path / "model"
    t = trainer(model_dir, loop=TrainingLoop(num_steps=3), checkpoint=Checkpoint(steps=1),
                callbacks=[BreakTheLock(how)])
    with pytest.raises(cstorch.trainer.ModelDirLockLostError) as info:
        t.fit(loader())
    message = str(info.value)
    assert str(model_dir / ".cstorch.lock") in message and "deleted or replaced" in message, message
    assert "checkpoint_2.mdl" in message and "another run" in message, message
    assert not (model_dir / "checkpoint_2.mdl").exists()
    assert (model_dir / "checkpoint_1.mdl").exists() == (how != "folder_recreated")
    if how == "replaced":
        assert (model_dir / ".cstorch.lock").read_text() == "another run's lock"  # not touched by the release
    assert not is_locked(model_dir)


UNWRITABLE = textwrap.dedent('''
    import os, sys
    import torch
    from cstorch.trainer import Trainer, cli
    from cstorch.trainer.model_dir_lock import ModelDirLock

    if os.geteuid() == 0:  # root writes anywhere: act as an unprivileged user
        os.setegid(65534)
        os.seteuid(65534)
    how, model_dir = sys.argv[1], sys.argv[2]
    if how == "cli":
        sys.exit(cli.main(["fit", sys.argv[3]]))
    if how == "trainer":
        Trainer(device="CPU", model_dir=model_dir, model=torch.nn.Linear(2, 2), seed=0, loggers=[])
    else:
        ModelDirLock(model_dir).acquire()
''')


@pytest.fixture
def readable_dir():
    """A folder every user can read (pytest's own temporary folders are private to their
    user), removed after the test."""
    path = Path(tempfile.mkdtemp(prefix="cstorch-lock-"))
    path.chmod(0o755)
    yield path
    for p in path.rglob("*"):
        if p.is_dir():
            p.chmod(0o755)
    shutil.rmtree(path)


@pytest.mark.parametrize("how", ["cli", "trainer", "lock"])
def test_a_model_dir_the_user_cannot_write_is_a_config_error(readable_dir, how):
    """It used to end with a PermissionError traceback (exit 1); the CLI exits 2 with a
    message naming model_dir, the Trainer raises a ValueError naming it, the lock a
    ConfigError (the case the checks before it cannot see: the folder made read-only after
    them, or a file system that refuses what the permissions allow)."""
    shutil.copyfile(Path(__file__).with_name("yaml_toy.py"), readable_dir / "toy.py")
    (readable_dir / "toy.py").chmod(0o644)
    locked = readable_dir / "locked"
    locked.mkdir()
    model_dir = locked if how == "lock" else locked / "model"
    params = readable_dir / "params.yaml"
    params.write_text(textwrap.dedent(f"""\
        trainer:
          init:
            device: CPU
            model_dir: {model_dir}
            seed: 1
            model: {{name: toy.py:Toy}}
            optimizer: {{SGD: {{lr: 0.1}}}}
            loop: {{max_steps: 2}}
            loggers: []
          fit:
            train_dataloader: {{data_processor: toy.py:ToyData, batch_size: 4}}
        """))
    params.chmod(0o644)
    locked.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    proc = subprocess.run([sys.executable, "-c", UNWRITABLE, how, str(model_dir), str(params)], capture_output=True,
                          text=True, timeout=120, cwd=str(readable_dir), env=env)
    err = proc.stderr
    if how == "cli":
        assert proc.returncode == 2, err[-3000:]
        assert err.startswith("cstorch: error: trainer.init.model_dir") and "Traceback" not in err, err[-3000:]
    else:
        assert proc.returncode == 1, err[-3000:]
        expected = "ValueError: model_dir" if how == "trainer" else "ConfigError: model_dir"
        assert expected in err and "PermissionError" not in err, err[-3000:]
    assert str(model_dir) in err and "cannot be written" in err and "model_dir" in err, err[-3000:]
    assert os.listdir(locked) == []
