"""cstorch.save / cstorch.load (first version of the H5 format)."""
import os

import h5py
import pytest
import torch

import cstorch


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
    assert torch.equal(back["mask"], sd["mask"]) and torch.equal(back["half"], sd["half"])
    assert back["global_step"] == 7
    with h5py.File(path) as f:
        assert f.attrs["__version__"] == 0.5 and f.attrs["__SUCCESS__"]
        assert "model.fc.weight" in f and "model.tied" not in f
        assert f["optimizer.state.0.exp_avg"].dtype == "int16"  # bf16 as bit patterns


def test_refuses_to_overwrite_and_leaves_no_temp_files(tmp_path):
    path = tmp_path / "ckpt.mdl"
    cstorch.save({"a": torch.ones(2)}, path)
    with pytest.raises(FileExistsError, match="already exists"):
        cstorch.save({"a": torch.zeros(2)}, path)
    assert torch.equal(cstorch.load(path)["a"], torch.ones(2))
    assert os.listdir(tmp_path) == ["ckpt.mdl"]


def test_partial_file_is_refused(tmp_path):
    path = tmp_path / "partial.mdl"
    cstorch.save({"a": torch.ones(2)}, path)
    with h5py.File(path, "a") as f:
        del f.attrs["__SUCCESS__"]
    with pytest.raises(RuntimeError, match="partially written"):
        cstorch.load(path)


def test_unsupported_object_is_refused_before_writing(tmp_path):
    path = tmp_path / "x.mdl"
    with pytest.raises(TypeError, match="cannot store a object"):
        cstorch.save({"a": object()}, path)
    assert not path.exists() and os.listdir(tmp_path) == []


def test_torch_pickle_falls_back_to_torch_load(tmp_path):
    path = tmp_path / "x.pt"
    torch.save({"a": torch.arange(3)}, path)
    assert torch.equal(cstorch.load(path)["a"], torch.arange(3))
