"""cstorch.save / cstorch.load: round trips, laziness, atomic writes and the errors of
broken files. (Structure against the spec: test_real_layout.py.)"""
import os
import signal
import subprocess
import sys
import textwrap
import time

import h5py
import numpy as np
import pytest
import torch

import cstorch
from cstorch.storage import H5Tensor, PickledObject

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _state():
    w = torch.randn(3, 4)
    return {
        "model": {"fc.weight": w, "fc.bias": torch.randn(4), "tied": w},
        "optimizer": {"state": {0: {"step": torch.tensor(3, dtype=torch.int64),
                                    "exp_avg": torch.randn(3, 4, dtype=torch.bfloat16)}},
                      "param_groups": [{"lr": 0.1, "betas": (0.9, 0.999), "name": "g0", "tags": None,
                                        "amsgrad": False, "params": [0, 1]}]},
        "mask": torch.tensor([True, False]),
        "half": torch.randn(2, dtype=torch.float16),
        "int8": torch.tensor([-128, 127], dtype=torch.int8),
        "c64": torch.tensor([1 + 2j], dtype=torch.complex64),
        "empty": torch.zeros(0, 3),
        "array": np.arange(4, dtype=np.int32),
        "global_step": 7,
    }


def test_round_trip_exact(tmp_path):
    path = tmp_path / "ckpt.mdl"
    sd = _state()
    cstorch.save(sd, path)
    back = cstorch.load(path)
    assert back.keys() == sd.keys()
    for key in ("fc.weight", "fc.bias", "tied"):
        assert torch.equal(back["model"][key], sd["model"][key])
    assert back["model"]["tied"] is back["model"]["fc.weight"]  # stored once, linked
    st = back["optimizer"]["state"][0]
    assert st["step"].dtype == torch.int64 and st["step"].item() == 3
    assert st["exp_avg"].dtype == torch.bfloat16 and torch.equal(st["exp_avg"], sd["optimizer"]["state"][0]["exp_avg"])
    assert back["optimizer"]["param_groups"] == sd["optimizer"]["param_groups"]
    assert isinstance(back["optimizer"]["param_groups"][0]["betas"], tuple)
    for key in ("mask", "half", "int8", "c64", "empty"):
        assert back[key].dtype == sd[key].dtype and torch.equal(back[key], sd[key]), key
    assert back["array"].dtype == np.int32 and np.array_equal(back["array"], sd["array"])
    assert back["global_step"] == 7
    with h5py.File(path) as f:
        assert f.attrs["__version__"] == 0.5 and f.attrs["__SUCCESS__"]
        assert "model.fc.weight" in f and "model.tied" not in f
        assert f["optimizer.state.0.exp_avg"].dtype == "int16"  # bf16 as bit patterns


def test_tensors_load_lazily_and_are_read_on_use(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.mdl"
    w = torch.randn(5, 5)
    cstorch.save({"w": w, "b": torch.ones(5)}, path)
    reads = []
    orig = cstorch.storage.h5.H5Reader.read_array
    monkeypatch.setattr(cstorch.storage.h5.H5Reader, "read_array",
                        lambda self, key, meta: reads.append(key) or orig(self, key, meta))
    sd = cstorch.load(path)
    assert isinstance(sd["w"], H5Tensor) and sd["w"].shape == (5, 5) and reads == []
    model = torch.nn.Linear(5, 5)
    model.load_state_dict({"weight": sd["w"], "bias": sd["b"]})
    assert torch.equal(model.weight, w) and sorted(reads) == ["b", "w"]
    sd["w"].sum()
    assert reads.count("w") == 2  # not kept: read again on the next use
    cached = cstorch.load(path, map_location="cache")
    cached["w"].sum(), cached["w"].sum()
    assert reads.count("w") == 3


def test_in_place_update_of_a_lazy_tensor_sticks(tmp_path):
    path = tmp_path / "ckpt.mdl"
    cstorch.save({"w": torch.zeros(3)}, path)
    w = cstorch.load(path)["w"]
    w.add_(2.0)
    view = w[1:]
    view.mul_(3.0)
    assert torch.equal(w + 0, torch.tensor([2.0, 6.0, 6.0]))


def test_a_changed_file_under_a_lazy_tensor_is_detected(tmp_path):
    path = tmp_path / "ckpt.mdl"
    cstorch.save({"w": torch.ones(3)}, path)
    w = cstorch.load(path)["w"]
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    with pytest.raises(RuntimeError, match="has been modified since it was loaded"):
        w.sum()
    with cstorch.storage.serializers.check_deferred_backing_storage(False):
        assert w.sum().item() == 3.0


def test_lazy_tensors_survive_deletion_of_the_file(tmp_path):
    path = tmp_path / "ckpt.mdl"
    cstorch.save({"w": torch.arange(4.0)}, path)
    w = cstorch.load(path)["w"]
    os.remove(path)
    assert torch.equal(w + 0, torch.arange(4.0))


def test_torch_save_of_a_loaded_checkpoint_is_a_plain_pickle(tmp_path):
    path = tmp_path / "ckpt.mdl"
    cstorch.save(_state(), path)
    torch.save(cstorch.load(path, map_location="cache"), tmp_path / "x.pt")
    back = torch.load(tmp_path / "x.pt", weights_only=False)
    assert type(back["model"]["fc.weight"]) is torch.Tensor


def test_map_location_moves_or_keeps_lazy(tmp_path):
    path = tmp_path / "ckpt.mdl"
    cstorch.save({"w": torch.ones(2)}, path)
    assert isinstance(cstorch.load(path, map_location="cpu")["w"], H5Tensor)
    with pytest.raises(TypeError, match="map_location"):
        cstorch.load(path, map_location={"cuda:0": "cpu"})


def test_refuses_to_overwrite_and_leaves_no_temp_files(tmp_path):
    path = tmp_path / "ckpt.mdl"
    cstorch.save({"a": torch.ones(2)}, path)
    with pytest.raises(FileExistsError, match="already exists"):
        cstorch.save({"a": torch.zeros(2)}, path)
    assert torch.equal(cstorch.load(path)["a"], torch.ones(2))
    assert os.listdir(tmp_path) == ["ckpt.mdl"]


def test_a_failing_save_leaves_nothing_behind(tmp_path):
    class Exploding(cstorch.storage.h5.LazyTensor):
        def _fetch(self):
            raise OSError("disk on fire")

    path = tmp_path / "x.mdl"
    with pytest.raises(OSError, match="disk on fire"):
        cstorch.save({"a": torch.ones(2), "b": Exploding((2,), torch.float32)}, path)
    assert os.listdir(tmp_path) == []


def test_pickled_objects_need_consent_both_ways(tmp_path):
    path = tmp_path / "x.mdl"
    with pytest.raises(TypeError, match="cannot store the object at .a. without pickling"):
        cstorch.save({"a": object()}, path)
    assert os.listdir(tmp_path) == []
    cstorch.save({"a": {1, 2}, "t": torch.ones(1)}, path, allow_pickle=True)
    held = cstorch.load(path)["a"]
    assert isinstance(held, PickledObject) and "allow_pickle=True" in repr(held)
    assert held.unpickle() == {1, 2}
    assert cstorch.load(path, allow_pickle=True)["a"] == {1, 2}
    cstorch.save(cstorch.load(path), tmp_path / "copy.mdl")  # bytes written back unchanged, never unpickled
    assert cstorch.load(tmp_path / "copy.mdl", allow_pickle=True)["a"] == {1, 2}


def test_unstorable_states_are_refused_with_the_reason(tmp_path):
    with pytest.raises(ValueError, match="name more than one value"):
        cstorch.save({"a.b": torch.ones(1), "a": {"b": torch.ones(1)}}, tmp_path / "x.mdl")
    with pytest.raises(TypeError, match="expects a dict, list or tuple"):
        cstorch.save(torch.ones(1), tmp_path / "x.mdl")
    with pytest.raises(TypeError, match="float8"):
        cstorch.save({"a": torch.ones(1).to(torch.float8_e4m3fn)}, tmp_path / "x.mdl")
    assert os.listdir(tmp_path) == []


def test_torch_pickle_falls_back_to_torch_load(tmp_path):
    path = tmp_path / "x.pt"
    torch.save({"a": torch.arange(3)}, path)
    assert torch.equal(cstorch.load(path)["a"], torch.arange(3))
    (tmp_path / "junk").write_bytes(b"not a checkpoint")
    with pytest.raises(RuntimeError, match="Failed to load checkpoint file"):
        cstorch.load(tmp_path / "junk")
    with pytest.raises(FileNotFoundError, match="No checkpoint"):
        cstorch.load(tmp_path / "missing.mdl")


# -- broken files: each has its own error ------------------------------------------------
def _saved(tmp_path, name="ckpt.mdl"):
    path = tmp_path / name
    cstorch.save({"w": torch.randn(64, 64), "step": 3}, path)
    return path


def test_truncated_file(tmp_path):
    path = _saved(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(RuntimeError, match="truncated or corrupt"):
        cstorch.load(path)


def test_missing_success_marker(tmp_path):
    path = _saved(tmp_path)
    with h5py.File(path, "a") as f:
        del f.attrs["__SUCCESS__"]
    with pytest.raises(RuntimeError, match="Cannot load partially written checkpoint"):
        cstorch.load(path)


@pytest.mark.parametrize("version,hint", [(0.4, "older"), (0.6, "newer")])
def test_wrong_version(tmp_path, version, hint):
    path = _saved(tmp_path)
    with h5py.File(path, "a") as f:
        f.attrs["__version__"] = version
    with pytest.raises(RuntimeError, match=f"format version {version}.*{hint}"):
        cstorch.load(path)


def test_hdf5_file_that_is_not_a_checkpoint(tmp_path):
    path = tmp_path / "data.h5"
    with h5py.File(path, "w") as f:
        f["x"] = np.ones(3)
    with pytest.raises(RuntimeError, match="not a cstorch checkpoint"):
        cstorch.load(path)


def test_dataset_shape_differs_from_its_metadata(tmp_path):
    path = _saved(tmp_path)
    with h5py.File(path, "a") as f:
        del f["w"]
        f["w"] = np.ones((2, 2), np.float32)
    w = cstorch.load(path)["w"]
    with pytest.raises(RuntimeError, match=r"dataset 'w' has shape \[2, 2\] but its metadata says \[64, 64\]"):
        w.sum()


def test_shape_mismatch_on_load_state_dict(tmp_path):
    path = tmp_path / "ckpt.mdl"
    model = torch.nn.Linear(4, 3)
    opt = cstorch.optim.Adam(model.parameters(), lr=0.1)
    model(torch.ones(1, 4)).sum().backward()
    opt.step()
    cstorch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, path)
    sd = cstorch.load(path)
    other = torch.nn.Linear(5, 3)
    with pytest.raises(RuntimeError, match=r"size mismatch for weight.*torch.Size\(\[3, 4\]\).*torch.Size\(\[3, 5\]\)"):
        other.load_state_dict(sd["model"])
    other_opt = cstorch.optim.Adam(other.parameters(), lr=0.1)
    other(torch.ones(1, 5)).sum().backward()
    other_opt.step()
    with pytest.raises(ValueError, match=r"optimizer state 'exp_avg' of parameter 0: the checkpoint holds shape "
                                         r"\[3, 4\] but the current tensor has shape \[3, 5\]"):
        other_opt.load_state_dict(sd["optimizer"])


# -- a process killed while saving ------------------------------------------------------------
_SLOW_SAVE = textwrap.dedent("""
    import sys, time, torch, cstorch
    from cstorch.storage import h5
    from cstorch_jax import LazyTensor

    class Slow(LazyTensor):
        def _fetch(self):
            open(sys.argv[2], "w").close()  # tell the parent the write is under way
            time.sleep(60)
            return torch.zeros(4)

    if sys.argv[3] == "in_memory":
        h5.room = lambda folder: 0  # as on a disk without room for the most the file can take
    cstorch.save({"w": torch.randn(256, 256), "slow": Slow((4,), torch.float32)}, sys.argv[1])
""")


@pytest.mark.parametrize("where", ["in_place", "in_memory"])
def test_a_process_killed_during_a_save_leaves_the_previous_checkpoint_intact(tmp_path, where):
    """Killed while HDF5 writes in place (a disk with room), the save leaves its temporary
    file (which the next save into the folder removes); killed while the file is built in
    memory (a disk without room for the most it can take), nothing."""
    previous = tmp_path / "ckpt_1.mdl"
    cstorch.save({"w": torch.arange(6.0)}, previous)
    target, started = tmp_path / "ckpt_2.mdl", tmp_path / "started"
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_SAVE, str(target), str(started), where],
                            env=dict(os.environ, PYTHONPATH=ROOT))
    try:
        deadline = time.time() + 60
        while not started.exists():
            assert proc.poll() is None and time.time() < deadline, "the saving process did not start writing"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    assert not target.exists()
    assert torch.equal(cstorch.load(previous)["w"] + 0, torch.arange(6.0))
    leftovers = [p for p in tmp_path.iterdir() if p.name.startswith("ckpt_2.mdl.") and p.suffix == ".tmp"]
    if where == "in_memory":
        assert leftovers == []
        return
    assert len(leftovers) == 1
    with pytest.raises(RuntimeError, match="truncated or corrupt|partially written"):
        cstorch.load(leftovers[0])
    cstorch.save({"w": torch.ones(2)}, tmp_path / "ckpt_3.mdl")  # the next save into the folder removes it
    assert not leftovers[0].exists() and not target.exists()


# -- a full disk -----------------------------------------------------------------------------
_FULL_DISK = textwrap.dedent("""
    import os, resource, signal, sys, torch, cstorch

    folder, limit = sys.argv[1], int(sys.argv[2])
    torch.manual_seed(0)
    cstorch.save({"w": torch.randn(200, 500), "b": torch.arange(7.0)}, os.path.join(folder, "ckpt_1.mdl"))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    error = None
    for i, size in enumerate((10, 100_000, 250_000)):  # fits, fails midway, fails early
        try:
            cstorch.save({"w": torch.randn(size), "v": torch.randn(100, 10)}, os.path.join(folder, f"ckpt_{i + 2}.mdl"))
        except OSError as e:
            print("refused:", e, flush=True)
            error = e
    raise error
""")


def test_a_save_that_runs_out_of_space_fails_cleanly_and_keeps_the_previous_checkpoint(tmp_path):
    """Saves past a file-size limit (EFBIG, as a full disk gives ENOSPC) raise an OSError that
    names the file and the cause; the process then ends with its exception (status 1), never a
    signal (HDF5 used to keep the failed file's datasets open and flush them again at exit:
    SIGSEGV); no temporary file is left and the earlier checkpoint loads its values."""
    limit = 256 << 10
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, "-c", _FULL_DISK, str(tmp_path), str(limit)], capture_output=True,
                          text=True, timeout=120, env=env)
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-3000:])
    refusals = [line for line in proc.stdout.splitlines() if line.startswith("refused:")]
    assert len(refusals) == 2, proc.stdout + proc.stderr[-3000:]  # the small save fits under the limit
    for line, name in zip(refusals, ("ckpt_3.mdl", "ckpt_4.mdl")):
        assert name in line and "File too large" in line and "earlier checkpoints" in line, line
    assert "Exception ignored" not in proc.stderr, proc.stderr[-3000:]
    assert sorted(os.listdir(tmp_path)) == ["ckpt_1.mdl", "ckpt_2.mdl"]
    torch.manual_seed(0)
    w = torch.randn(200, 500)
    state = cstorch.load(tmp_path / "ckpt_1.mdl")
    assert torch.equal(state["w"] + 0, w) and torch.equal(state["b"] + 0, torch.arange(7.0))
    assert cstorch.load(tmp_path / "ckpt_2.mdl")["v"].shape == (100, 10)


def _odd_state():
    """Incompressible arrays of shapes whose edge chunks are padded, every kind of entry."""
    g = torch.Generator().manual_seed(1)
    return {**_state(), "pickled": PickledObject("pickled", b"x" * 1000), "blob": np.frombuffer(
        torch.randint(0, 256, (3000,), dtype=torch.uint8, generator=g).numpy().tobytes(), np.uint8),
            "odd": torch.randn(3, 5, 7, 11, generator=g), "tall": torch.randn(1025, 3, generator=g),
            "bf": torch.randn(257, 129, generator=g).to(torch.bfloat16), "zero_d": torch.tensor(2.5)}


def _without_end_of_file(data: bytes, length: int) -> bytes:
    """The first `length` bytes of an H5 file but the end-of-file address of its superblock
    (version 3: 8 bytes at offset 28) and the superblock's checksum (4 bytes at 44)."""
    sb = data.index(b"\x89HDF\r\n\x1a\n")
    return data[:sb + 28] + data[sb + 36:sb + 44] + data[sb + 48:length]


def test_in_memory_and_in_place_writes_give_the_same_file(tmp_path):
    """The file built in memory holds HDF5's objects at the offsets, and with the bytes, of
    the file HDF5 writes in place; it only keeps the free space HDF5 trims from the end of a
    file on disk when closing it (zeros), its superblock giving that length."""
    from cstorch.storage import h5
    from cstorch.storage.layout import layout_of

    files, small = {}, {"w": torch.randn(3, 4)}
    for state in (_odd_state(), _state(), small):
        layout = layout_of(state)
        for in_place in (True, False):
            path = tmp_path / f"in_place_{in_place}.mdl"
            path.unlink(missing_ok=True)
            h5._write_file(layout, str(path), lambda: None, in_place=in_place)
            files[in_place] = path.read_bytes()
        on_disk, in_memory = files[True], files[False]
        sb = on_disk.index(b"\x89HDF\r\n\x1a\n")
        for data in (on_disk, in_memory):
            assert int.from_bytes(data[sb + 28:sb + 36], "little") == len(data)
        assert len(in_memory) - len(on_disk) in range(0, 4097)
        assert _without_end_of_file(in_memory, len(on_disk)) == _without_end_of_file(on_disk, len(on_disk))
        assert not any(in_memory[len(on_disk):])
    assert torch.equal(cstorch.load(tmp_path / "in_place_False.mdl")["w"] + 0, small["w"])


def test_the_size_bound_holds_and_decides_where_the_file_is_built(tmp_path, monkeypatch):
    from cstorch.storage import h5
    from cstorch.storage.layout import Entry, layout_of

    layout = layout_of(_odd_state())
    path = tmp_path / "c.mdl"
    cstorch.save(_odd_state(), path)
    bound = h5.size_bound(layout, 0)
    assert os.path.getsize(path) <= bound
    assert h5.writes_in_place(layout, str(tmp_path), 4096)  # the disk has room for it
    monkeypatch.setattr(h5, "room", lambda folder: bound + 4096 - 1)
    assert not h5.writes_in_place(layout, str(tmp_path), 4096)  # no room for the most it can take
    monkeypatch.undo()
    layout.entries.append(Entry("unknown", {"__TYPE__": "NumpyArraySerializer", "__NUMPY__": True,
                                            "is_bfloat16": False}, lambda: np.zeros(3)))
    assert h5.size_bound(layout, 4096) is None and not h5.writes_in_place(layout, str(tmp_path), 4096)


def test_torch_pickle_with_objects_needs_allow_pickle(tmp_path):
    path = tmp_path / "x.pt"
    torch.save({"a": torch.ones(1), "obj": _Thing()}, path)
    with pytest.raises(RuntimeError, match="pass allow_pickle=True if you trust the file"):
        cstorch.load(path)
    assert isinstance(cstorch.load(path, allow_pickle=True)["obj"], _Thing)


class _Thing:
    pass


def test_empty_key_is_refused(tmp_path):
    with pytest.raises(ValueError, match="empty key path"):
        cstorch.save({"": torch.ones(2)}, tmp_path / "e.mdl")


_BEFORE_CHECKSUMS = os.path.join(os.path.dirname(__file__), "data", "cstorch_before_checksums.h5")


def test_a_checkpoint_written_before_the_checksums_loads_exactly():
    """data/cstorch_before_checksums.h5 was written by `cstorch.save` of main at 357d67d
    (HDF5's earliest format, LZ4 without Fletcher-32, no user block) from the first state
    of checkpoint_fuzz.base_states(); it loads with HDF5's own checks only, exactly."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import checkpoint_fuzz

    with open(_BEFORE_CHECKSUMS, "rb") as f:
        assert f.read(8) == b"\x89HDF\r\n\x1a\n"  # no user block: the file starts with HDF5's signature
    with h5py.File(_BEFORE_CHECKSUMS) as f:
        assert not f["model.w"].fletcher32 and "32004" in str(f["model.w"]._filters)  # LZ4 only
    expected = checkpoint_fuzz.base_states()[0]
    loaded = checkpoint_fuzz.materialise_tied(cstorch.load(_BEFORE_CHECKSUMS))
    assert checkpoint_fuzz.difference(expected, loaded) is None
    assert checkpoint_fuzz.tie_pattern(loaded) == checkpoint_fuzz.tie_pattern(expected)
    assert loaded["model"]["tied"] is loaded["model"]["w"]
