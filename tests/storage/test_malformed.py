"""Malformed checkpoints: every one raises `cstorch.InvalidCheckpointError` naming the file
and the entry, promptly (link cycles), never a silent cast (dtype metadata that disagrees
with the stored data), never a bare KeyError/JSONDecodeError or a pickle hint for a file
that is no checkpoint. Also: torch pickles load with `weights_only=True` explicitly,
orphan temporary files of killed saves are cleaned up by the next save, and keep-N
ignores them."""
from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import types

import h5py
import numpy as np
import pytest
import torch

import cstorch
from cstorch.storage.atomic import temp_path
from cstorch.trainer import Checkpoint, Trainer, TrainingLoop

_CHECKSUMS = b"cstorch-checksums"


@contextlib.contextmanager
def _within(seconds: float):
    """Fail instead of hanging: a Python loop that does not end gets a TimeoutError."""
    def expire(signum, frame):
        raise TimeoutError(f"still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _without_checksums(path) -> None:
    """Make a cstorch file like one of the Cerebras release, which has no checksum block,
    so that the check under test, not the checksum, finds the damage."""
    with open(path, "r+b") as f:
        if f.read(len(_CHECKSUMS)) == _CHECKSUMS:
            f.seek(0)
            f.write(b"\0" * len(_CHECKSUMS))


def _edit(path, key, change, keep_checksums=False) -> None:
    """Rewrite the metadata of `key` after `change(metadata)` changed it in place."""
    name = f"{key}.__metadata__"
    with h5py.File(path, "a") as f:
        doc = json.loads(f.attrs[name])
        change(doc[name])
        f.attrs[name] = json.dumps(doc, indent=4)
    if not keep_checksums:
        _without_checksums(path)


def _link(target):
    def change(m):
        m.clear()
        m.update({"key": target, "__LINKED__": True, "__TYPE__": "LinkedObject", "__NONE__": True})

    return change


def _load_all(path, **kwargs):
    """Load and materialise every tensor."""
    sd = cstorch.load(path, **kwargs)
    return {k: (v + 0 if isinstance(v, torch.Tensor) else v) for k, v in sd.items()}


def _raises(path, entry, match):
    with _within(20):
        with pytest.raises(cstorch.InvalidCheckpointError, match=match) as e:
            _load_all(path)
    assert e.value.path == str(path) and str(path) in str(e.value)
    assert e.value.entry == entry
    if entry is not None:
        assert repr(entry) in str(e.value)
    assert isinstance(e.value, RuntimeError)
    return e.value


@pytest.fixture
def tied(tmp_path):
    path = tmp_path / "tied.mdl"
    w = torch.arange(6.0)
    cstorch.save({"a": w, "b": w, "c": w, "n": 3}, path)
    return path


# -- 3: links ---------------------------------------------------------------------------
def test_a_link_to_itself_is_refused_not_followed_forever(tied):
    _edit(tied, "b", _link("b"))
    _raises(tied, "b", r"cycle \(b -> b\)")


def test_links_that_form_a_cycle_are_refused(tied):
    _edit(tied, "a", _link("b"))
    _edit(tied, "b", _link("a"))
    _raises(tied, "a", r"cycle \(a -> b -> a\)")


def test_a_link_to_a_missing_entry_is_refused(tied):
    _edit(tied, "c", _link("gone"))
    _raises(tied, "c", "links to 'gone', which the checkpoint does not hold")


def test_a_chain_of_links_is_followed_and_tied(tied):
    _edit(tied, "c", _link("b"))  # c -> b -> a
    sd = cstorch.load(tied)
    assert sd["c"] is sd["b"] is sd["a"] and torch.equal(sd["c"] + 0, torch.arange(6.0))


# -- 4: stored dtype against metadata ---------------------------------------------------
@pytest.mark.parametrize("stored,said", [
    (torch.tensor([1.5, -2.75]), "torch.int32"),  # float read as int: would truncate
    (torch.tensor([2 ** 40, -1]), "torch.int32"),  # int64 read as int32: would wrap
    (torch.tensor([1.0, 2.0]), "torch.bfloat16"),  # float32 read as bf16: would fail in a reshape
    (torch.tensor([1, 2], dtype=torch.int16), "torch.float16"),  # same width, another meaning
    (torch.tensor(3.0), "torch.int32"),  # 0-d
    (torch.tensor([True, False]), "torch.uint8"),
])
def test_metadata_dtype_that_disagrees_with_the_stored_data_is_refused(tmp_path, stored, said):
    path = tmp_path / "d.mdl"
    cstorch.save({"t": stored}, path)
    _edit(path, "t", lambda m: m.update(dtypes=[said]))
    sd = cstorch.load(path)
    assert sd["t"].dtype == getattr(torch, said[6:])  # the metadata is all a lazy load reads
    with pytest.raises(cstorch.InvalidCheckpointError, match=rf"holds \w+ data but its metadata says {said}") as e:
        sd["t"] + 0
    assert e.value.entry == "t" and str(path) in str(e.value)


def test_a_numpy_entry_marked_bfloat16_must_hold_int16(tmp_path):
    path = tmp_path / "n.mdl"
    cstorch.save({"a": np.ones(3, np.float32)}, path)
    _edit(path, "a", lambda m: m.update(is_bfloat16=True))
    _raises(path, "a", r"holds float32 data but its metadata says bfloat16")


def test_the_checksum_catches_an_edit_that_is_well_formed(tmp_path):
    path = tmp_path / "c.mdl"
    cstorch.save({"t": torch.tensor([1.5, 2.5]), "n": 7}, path)
    _edit(path, "n", lambda m: m.update(scalar_value=8), keep_checksums=True)
    _raises(path, "n", "checksum of its metadata does not match")
    cstorch.save({"t": torch.tensor([1.5, 2.5])}, tmp_path / "d.mdl")
    with h5py.File(tmp_path / "d.mdl", "a") as f:
        f["t"][0] = 9.0
    _raises(tmp_path / "d.mdl", "t", "checksum of its data does not match")


# -- 5: one error type, naming the file and the entry ------------------------------------
@pytest.mark.parametrize("change,entry,match", [
    (lambda path: _edit(path, "w", lambda m: m.pop("__TYPE__")), "w", "kind None"),
    (lambda path: _edit(path, "n", lambda m: m.pop("scalar_value")), "n", "scalar None"),
    (lambda path: _edit(path, "w", lambda m: m.update(shapes=[[-1]])), "w", "shapes"),
    (lambda path: _edit(path, "w", lambda m: m.update(dtypes=["torch.float99"])), "w", "float99"),
])
def test_garbled_metadata(tmp_path, change, entry, match):
    path = tmp_path / "g.mdl"
    cstorch.save({"w": torch.ones(2), "n": 1}, path)
    change(path)
    _raises(path, entry, match)


@pytest.mark.parametrize("name,text,entry,match", [
    ("w.__metadata__", '{"__objects__": ["w"], "w.__meta', "w", "not valid JSON"),
    ("__spec__", "[{", None, "__spec__ attribute is not a"),
])
def test_an_attribute_that_is_not_json(tmp_path, name, text, entry, match):
    path = tmp_path / "j.mdl"
    cstorch.save({"w": torch.ones(2)}, path)
    with h5py.File(path, "a") as f:
        f.attrs[name] = text
    _without_checksums(path)
    _raises(path, entry, match)


@pytest.mark.parametrize("content", [random.Random(0).randbytes(4096), b"", b"PK\x03\x04 not really a zip",
                                     b"\x89HDF\r\n\x1a\n"], ids=["random", "empty", "zip-magic", "hdf5-magic"])
def test_a_file_that_is_no_checkpoint_gets_a_plain_message(tmp_path, content):
    path = tmp_path / "random.mdl"
    path.write_bytes(content)
    e = _raises(path, None, "Failed to load checkpoint file|corrupt")
    assert "allow_pickle" not in str(e)


def test_a_damaged_torch_pickle(tmp_path):
    path = tmp_path / "t.pt"
    torch.save({"a": torch.arange(100)}, path)
    data = bytearray(path.read_bytes())
    path.write_bytes(bytes(data[: len(data) // 2]))
    e = _raises(path, None, "torch pickle is corrupt")
    assert "allow_pickle" not in str(e)


def test_truncated_checkpoint_is_the_project_error(tmp_path):
    path = tmp_path / "t.mdl"
    cstorch.save({"w": torch.randn(64, 64)}, path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    _raises(path, None, "truncated or corrupt|checksum")


# -- weights_only --------------------------------------------------------------------------
class _Thing:
    pass


def test_torch_load_is_weights_only_whatever_the_environment_says(tmp_path, monkeypatch):
    path = tmp_path / "obj.pt"
    torch.save({"a": torch.ones(1), "obj": _Thing()}, path)
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")  # would unpickle anything
    with pytest.raises(RuntimeError, match="pass allow_pickle=True if you trust the file") as e:
        cstorch.load(path)
    assert not isinstance(e.value, cstorch.InvalidCheckpointError)  # the file is fine; it needs consent
    assert isinstance(cstorch.load(path, allow_pickle=True)["obj"], _Thing)


# -- orphan temporary files ------------------------------------------------------------------
def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_only_orphan_temp_files_of_dead_processes_of_this_host_are_removed(tmp_path):
    """(A real orphan, left by a process killed during a save: test_h5_checkpoint.py.)"""
    ours_live = os.path.basename(temp_path(str(tmp_path / "live.mdl")))  # this process runs: not an orphan
    dead = ours_live.replace(f"-{os.getpid()}-", f"-{_dead_pid()}-").replace("live.mdl", "dead.mdl")
    host, rest = ours_live.split(".mdl.", 1)[1].split("-", 1)
    other_host = ours_live.replace(host, "0" * 8 if host != "0" * 8 else "1" * 8).replace("live", "far")
    other_host = other_host.replace(f"-{os.getpid()}-", f"-{_dead_pid()}-")
    names = [ours_live, dead, other_host, "old.mdl.1a2b3c4d.tmp", "notes.tmp"]
    for name in names:
        (tmp_path / name).write_bytes(b"x")
    cstorch.save({"w": torch.ones(2)}, tmp_path / "ckpt.mdl")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["ckpt.mdl"] + [n for n in names if n != dead])


def test_keep_n_and_the_latest_checkpoint_ignore_temp_files(tmp_path):
    ckpt = Checkpoint(steps=1)
    ckpt.setup(types.SimpleNamespace(model_dir=str(tmp_path)))
    for step in (1, 2):
        cstorch.save({"step": step}, tmp_path / f"checkpoint_{step}.mdl")
    with open(temp_path(str(tmp_path / "checkpoint_3.mdl")), "wb") as f:
        f.write(b"partial")
    assert [step for step, _ in ckpt.checkpoints()] == [1, 2]
    assert ckpt.latest() == str(tmp_path / "checkpoint_2.mdl")


# -- the Trainer's autoload ------------------------------------------------------------------------
class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, batch):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.fc(x), y)


def _loader():
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(16, 4, generator=g), torch.randint(0, 2, (16,), generator=g)
    return cstorch.utils.data.DataLoader(
        lambda: torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=4, drop_last=True))


def _fit(model_dir, max_steps):
    trainer = Trainer(device="CPU", model_dir=str(model_dir), model=_Net, loggers=[], seed=0,
                      optimizer=lambda m: cstorch.optim.SGD(m.parameters(), lr=0.1),
                      loop=TrainingLoop(max_steps=max_steps, eval_frequency=None), checkpoint=Checkpoint(steps=2))
    trainer.fit(_loader())


def test_fit_refuses_to_autoload_a_checkpoint_whose_links_form_a_cycle(tmp_path):
    _fit(tmp_path, 2)
    path = tmp_path / "checkpoint_2.mdl"
    assert path.exists()
    _edit(path, "model.fc.weight", _link("model.fc.weight"))
    cstorch._backend._reset_backend()
    with _within(60):
        with pytest.raises(cstorch.InvalidCheckpointError, match=r"cycle \(model.fc.weight -> model.fc.weight\)"):
            _fit(tmp_path, 4)
